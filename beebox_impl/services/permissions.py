"""The whole-box chat's permission requests, for hosts and the HTTP API.

`ChatSession` keeps the pending requests (`beebox_spec.chat_session` rule 10);
this module is what a box adds around them:

- `PermissionRecord` — hears every request and its end inside the session's
  step (the session's ``on_permission_event`` hook, so nothing is missed or
  reordered) and keeps how each ended in the box's database
  (`beebox_impl.store.permissions`): who answered, when, the tool and input.
  Its writes go through one `StoreWriter`, in the order the requests ended.
- `ChatPermissionService` — the calls a host makes (`Box.answer_permission`,
  `Box.pending_permissions`, `Box.permission_decisions`) and the HTTP routes
  make: an answer to a pending request goes to the session; one to a request
  that already ended is refused with `PermissionAlreadyEnded` (HTTP 409), one to
  an id the box never gave out with `PermissionNotFound` (HTTP 404) — the record
  tells the two apart, and ids that ended since the box opened are known at once,
  before their rows are written.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import ClassVar, Final

import anyio

from beebox_impl.session.chat import ChatSession
from beebox_impl.session.chat_events import PermissionEnded, PermissionRequested
from beebox_impl.session.clock import SessionClock
from beebox_impl.session.permissions import PermissionEvent
from beebox_impl.session.writer import StoreWriter
from beebox_impl.store.permissions import (
    AnsweredBy,
    Answerer,
    PermissionDecision,
    PermissionDecisionStore,
)
from beebox_spec.errors import Rejection
from beebox_spec.permissions import (
    EndedHow,
    PermissionNotPending,
    PermissionReply,
    PermissionRequest,
)

__all__ = [
    "ChatPermissionService",
    "PermissionAlreadyEnded",
    "PermissionNotFound",
    "PermissionRecord",
]

_log = logging.getLogger(__name__)

# How many ended request ids the box remembers without asking its database.
_REMEMBERED_ENDS: Final = 1000
# Who ended a request that no person or host answered, by how it ended.
_ENDED_BY: Final[dict[EndedHow, AnsweredBy]] = {
    "timed-out": "timeout",
    "stopped": "stop",
    "withdrawn": "nobody",
    "run-ended": "nobody",
}


class PermissionNotFound(Rejection, LookupError):
    """No permission request of the box has this id."""

    status_hint: ClassVar[int] = 404

    @property
    def public_message(self) -> str:
        return "No such permission request"


class PermissionAlreadyEnded(Rejection):
    """The request was answered, timed out, or stopped already."""

    status_hint: ClassVar[int] = 409

    @property
    def public_message(self) -> str:
        return "This permission request has ended already"


@dataclass(frozen=True, slots=True)
class _Asked:
    request: PermissionRequest
    at: datetime


class PermissionRecord:
    """Keeps how each request ended (see the module doc). Open one with `kept`."""

    def __init__(self, store: PermissionDecisionStore, clock: SessionClock) -> None:
        self._store = store
        self._clock = clock
        self._asked: dict[str, _Asked] = {}
        # The answer about to be given, by request id: who gives it, and what.
        self._answering: dict[str, tuple[Answerer, PermissionReply]] = {}
        self._ended: OrderedDict[str, None] = OrderedDict()
        self._writer = StoreWriter("permission record")

    @classmethod
    @asynccontextmanager
    async def kept(
        cls, store: PermissionDecisionStore, clock: SessionClock
    ) -> AsyncIterator[PermissionRecord]:
        """A record writing to ``store`` until the block ends; then what ended is
        written (a request the box's close denied, too)."""
        record = cls(store, clock)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(record._writer.run, name="permission record")
            try:
                yield record
            finally:
                with anyio.CancelScope(shield=True):
                    await record.flush()
                tasks.cancel_scope.cancel()

    @property
    def store(self) -> PermissionDecisionStore:
        return self._store

    async def flush(self) -> None:
        """Until every request that ended so far is written."""
        await self._writer.flush()

    def answering(self, request_id: str, by: Answerer, reply: PermissionReply) -> None:
        """``by`` is about to answer ``request_id`` with ``reply``."""
        self._answering[request_id] = (by, reply)

    def not_answering(self, request_id: str) -> None:
        """The answer `answering` announced was refused."""
        self._answering.pop(request_id, None)

    def ended_lately(self, request_id: str) -> bool:
        """Whether ``request_id`` was asked or ended since the box opened."""
        return request_id in self._ended or request_id in self._asked

    def on_event(self, event: PermissionEvent) -> None:
        """The session's hook: called inside its step, for every request and end."""
        match event:
            case PermissionRequested(request=request):
                self._asked[request["id"]] = _Asked(request, self._clock.now())
            case PermissionEnded(end=end):
                asked = self._asked.pop(end.id, None)
                by, reply = self._answering.pop(end.id, (None, None))
                self._remember_end(end.id)
                if asked is None:
                    # Never announced (an ask of a closing run): nothing was shown.
                    return
                decision = PermissionDecision(
                    request=asked.request,
                    asked_at=asked.at,
                    ended_at=self._clock.now(),
                    how=end.how,
                    decision=end.decision,
                    always=reply.always if reply is not None else False,
                    message=reply.message if reply is not None else "",
                    answered_by=by if by is not None else _ENDED_BY.get(end.how, "nobody"),
                )
                self._writer.submit(partial(self._store.record, decision))

    def _remember_end(self, request_id: str) -> None:
        self._ended[request_id] = None
        while len(self._ended) > _REMEMBERED_ENDS:
            self._ended.popitem(last=False)


class ChatPermissionService:
    """A host's and the HTTP API's calls on the chat's permission requests."""

    def __init__(self, *, session: ChatSession, record: PermissionRecord) -> None:
        self._session = session
        self._record = record

    def pending(self) -> list[PermissionRequest]:
        """The pending requests, in the order asked."""
        return self._session.pending_permissions

    async def answer(self, request_id: str, reply: PermissionReply, *, by: Answerer) -> None:
        """Answer a pending request: its run goes on at once, and the record keeps who
        answered. Raises `PermissionAlreadyEnded` or `PermissionNotFound`."""
        self._record.answering(request_id, by, reply)
        try:
            await self._session.answer_permission(request_id, reply)
        except PermissionNotPending:
            refused = True
        else:
            refused = False
        finally:
            # Taken by the record as the request ended, unless it was refused (or the
            # call cancelled): a later end must not be put down to this answer.
            self._record.not_answering(request_id)
        if not refused:
            return
        if self._record.ended_lately(request_id) or await self._record.store.knows(request_id):
            raise PermissionAlreadyEnded(f"permission request {request_id!r} has ended already")
        raise PermissionNotFound(f"no permission request {request_id!r}")

    async def decisions(self, limit: int = 100) -> list[PermissionDecision]:
        """How the last ``limit`` requests ended, newest first (written ones: `flush`
        the record first to include those that just ended)."""
        await self._record.flush()
        return await self._record.store.recent(limit)
