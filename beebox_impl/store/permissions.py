"""The permission record: how every permission request of the box ended.

One row per request (``permission_decisions``, schema version 4), written once
the request ended (`beebox_spec.permissions`): what it asked (the tool, its
input, the prompt the person saw), when it was asked and when it ended, how it
ended, the decision the run was given, and who gave it — ``page`` (a person on
the box's page, through ``POST /api/chat/permissions/<id>``), ``host`` (an
embedding host, through `Box.answer_permission`), ``timeout`` (nobody answered
in time), ``stop`` (a stop, reset or restart denied it) or ``nobody`` (the run
took its ask back, or ended). Hosts and auditors list it with
`PermissionDecisionStore.recent` (``GET /api/chat/permissions``, ``bbx chat
permissions``).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, Literal, TypeAlias, TypedDict, cast

from beebox_impl.store.database import BoxDatabase
from beebox_spec.entries import JsonObject
from beebox_spec.errors import InvalidArgument
from beebox_spec.js_values import to_iso_timestamp
from beebox_spec.permissions import Decision, EndedHow, PermissionRequest

__all__ = [
    "MAX_LISTED",
    "AnsweredBy",
    "Answerer",
    "PermissionDecision",
    "PermissionDecisionJson",
    "PermissionDecisionStore",
]

# Who may answer a request: a person on the page, or the embedding host.
Answerer: TypeAlias = Literal["page", "host"]
# Who gave the decision a request ended with.
AnsweredBy: TypeAlias = Literal["page", "host", "timeout", "stop", "nobody"]
# The most rows one listing returns.
MAX_LISTED: Final = 1000


class PermissionDecisionJson(TypedDict):
    """A record row as JSON (the HTTP API and ``bbx chat permissions --json``)."""

    id: str
    toolName: str
    input: JsonObject
    request: PermissionRequest
    askedAt: str
    endedAt: str
    how: EndedHow
    decision: Decision | None
    always: bool
    message: str
    answeredBy: AnsweredBy


@dataclass(frozen=True, slots=True)
class PermissionDecision:
    """How one request ended (one row of the record)."""

    request: PermissionRequest
    asked_at: datetime
    ended_at: datetime
    how: EndedHow
    decision: Decision | None
    always: bool
    message: str
    answered_by: AnsweredBy

    def as_json(self) -> PermissionDecisionJson:
        return {
            "id": self.request["id"],
            "toolName": self.request["toolName"],
            "input": self.request["input"],
            "request": self.request,
            "askedAt": to_iso_timestamp(self.asked_at),
            "endedAt": to_iso_timestamp(self.ended_at),
            "how": self.how,
            "decision": self.decision,
            "always": self.always,
            "message": self.message,
            "answeredBy": self.answered_by,
        }


def _ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)


def _moment(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def _insert(connection: sqlite3.Connection, decision: PermissionDecision) -> None:
    # A request ends once; a second row for it would be a bug elsewhere, kept out here.
    connection.execute(
        "INSERT OR IGNORE INTO permission_decisions (request_id, tool_name, request,"
        " asked_at_ms, ended_at_ms, how, decision, always, message, answered_by)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            decision.request["id"],
            decision.request["toolName"],
            json.dumps(decision.request, ensure_ascii=False, separators=(",", ":")),
            _ms(decision.asked_at),
            _ms(decision.ended_at),
            decision.how,
            decision.decision,
            int(decision.always),
            decision.message,
            decision.answered_by,
        ),
    )


def _row_decision(row: tuple[object, ...]) -> PermissionDecision:
    request, asked, ended, how, decision, always, message, answered_by = row
    # Every row was written by `_insert`, from values of these types.
    return PermissionDecision(
        request=cast(PermissionRequest, json.loads(str(request))),
        asked_at=_moment(int(cast(int, asked))),
        ended_at=_moment(int(cast(int, ended))),
        how=cast(EndedHow, how),
        decision=cast(Decision | None, decision),
        always=bool(always),
        message=str(message),
        answered_by=cast(AnsweredBy, answered_by),
    )


class PermissionDecisionStore:
    """The box's permission record in its database."""

    def __init__(self, database: BoxDatabase) -> None:
        self._database = database

    async def record(self, decision: PermissionDecision) -> None:
        """Keep how a request ended (once per request: a second row is ignored)."""
        await self._database.write(lambda connection: _insert(connection, decision))

    async def knows(self, request_id: str) -> bool:
        """Whether the record holds the request ``request_id``."""
        row = await self._database.read(
            lambda connection: connection.execute(
                "SELECT 1 FROM permission_decisions WHERE request_id = ?", (request_id,)
            ).fetchone()
        )
        return row is not None

    async def recent(self, limit: int = 100) -> list[PermissionDecision]:
        """The last ``limit`` requests that ended (at most `MAX_LISTED`), newest first."""
        if not 1 <= limit <= MAX_LISTED:
            raise InvalidArgument(f"limit must be between 1 and {MAX_LISTED}, not {limit}")
        rows = await self._database.read(
            lambda connection: connection.execute(
                "SELECT request, asked_at_ms, ended_at_ms, how, decision, always, message,"
                " answered_by FROM permission_decisions ORDER BY id DESC LIMIT ?",
                (limit,),
            ).fetchall()
        )
        return [_row_decision(tuple(row)) for row in rows]
