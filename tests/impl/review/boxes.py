"""Generated boxes for chat review tests: husks, Claude Code transcripts, a fixed clock.

A `ReviewBox` is a box folder and a projects folder in `tmp_path`. Sessions are
written as Claude Code writes them (one compact JSON object a line) and dated
by setting the transcript's modification time against the box's fixed `now`,
so quiescence is decided by the test, not by the wall clock.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

from beebox_impl.review.cards import ensure_chat_husk, read_card
from beebox_impl.review.discovery import box_transcript_locator
from beebox_impl.review.origin import MachineOrigin
from beebox_impl.review.reviewers import ExtractiveReviewer
from beebox_impl.review.run import ReviewPlan, RunSummary, plan_review, run_chat_review
from beebox_impl.review.store import ReviewStateFile
from beebox_impl.review.walk import first_message_title
from beebox_impl.transcript.location import transcript_path
from beebox_spec.review.journal import ReviewState
from beebox_spec.review.reviewer import ReviewArgs, ReviewOutput

NOW = datetime(2026, 8, 1, 12, 0, tzinfo=UTC)
HERE = MachineOrigin("origin-here", "laptop")
ELSEWHERE = MachineOrigin("origin-elsewhere", "prod")

Role = Literal["user", "assistant"]

# Sentences a conversation about a road trip is made of; each turn is long
# enough that a few exchanges pass the 6,000-character threshold.
TRIP_OPENING = "Can you plan a road trip to Keene for July 8-11 for me and Indigo?"
FILLER = (
    "We talked through the Keene route, the stops along the way, the lodging near the "
    "lake, and what to pack for four days of hiking in the hills around Keene. "
)


# Sentences the extractive reviewer keeps as notes: a decision, an open thread, a follow-up.
NOTABLE = (
    "We decided to stay at the Lakeside Inn in Keene for three nights.",
    "I'm not sure whether we should rent a canoe for the lake.",
    "I'll book the Lakeside Inn tomorrow morning.",
)


def compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def line_for(role: Role, text: str, entry_uuid: str, session_id: str) -> str:
    """One transcript line, as Claude Code writes a user or assistant turn."""
    record: dict[str, object] = {
        "parentUuid": None,
        "isSidechain": False,
        "type": role,
        "uuid": entry_uuid,
        "sessionId": session_id,
        "timestamp": "2026-07-01T10:00:00.000Z",
        "message": {"role": role, "content": [{"type": "text", "text": text}]},
    }
    if role == "assistant":
        message = record["message"]
        assert isinstance(message, dict)
        message["model"] = "claude-sonnet-4-5"
    return compact(record)


def conversation(
    exchanges: int, *, opening: str = TRIP_OPENING, topic: str = ""
) -> list[tuple[Role, str]]:
    """`exchanges` user/assistant pairs, the first user turn being `opening`."""
    turns: list[tuple[Role, str]] = []
    for number in range(exchanges):
        user = (
            opening
            if number == 0
            else f"Next question {number} {topic}: {NOTABLE[number % len(NOTABLE)]} " + FILLER * 3
        )
        turns.append(("user", user))
        turns.append(("assistant", f"Answer {number} {topic}. " + FILLER * 12))
    return turns


@dataclass
class Session:
    """One session of a `ReviewBox`: its id, transcript, husk and the uuids written."""

    session_id: str
    transcript: Path
    husk: Path
    uuids: list[str] = field(default_factory=list)


@dataclass
class ReviewBox:
    """A box with husks and transcripts, reviewed at the fixed time `now`."""

    root: Path
    projects: Path
    now: datetime = NOW
    origin: MachineOrigin = HERE
    sessions: dict[str, Session] = field(default_factory=dict)

    @classmethod
    def create(cls, tmp_path: Path) -> ReviewBox:
        root = tmp_path / "box"
        root.mkdir()
        projects = tmp_path / "projects"
        projects.mkdir()
        return cls(root.resolve(), projects)

    @property
    def locate(self) -> Callable[..., Path]:
        return box_transcript_locator(self.root, self.projects)

    def add_session(
        self,
        turns: list[tuple[Role, str]],
        *,
        age: timedelta = timedelta(hours=2),
        origin: MachineOrigin | None = None,
        session_id: str | None = None,
    ) -> Session:
        """A transcript of `turns`, last written `age` before `now`, and its husk."""
        sid = session_id or str(uuid.uuid4())
        path = transcript_path(self.root, sid, self.projects)
        path.parent.mkdir(parents=True, exist_ok=True)
        session = Session(sid, path, Path())
        self.sessions[sid] = session
        self._write(session, turns, mode="w")
        husk = ensure_chat_husk(
            self.root,
            sid,
            origin=origin or self.origin,
            created=self.now.date(),
            title=first_message_title(path, sid),
            engine="claude",
        )
        session.husk = husk
        self.set_age(session, age)
        return session

    def _write(self, session: Session, turns: list[tuple[Role, str]], *, mode: str) -> None:
        lines = []
        for role, text in turns:
            entry_uuid = str(uuid.uuid4())
            session.uuids.append(entry_uuid)
            lines.append(line_for(role, text, entry_uuid, session.session_id))
        with session.transcript.open(mode, encoding="utf-8") as file:
            file.write("".join(line + "\n" for line in lines))

    def append(
        self,
        session: Session,
        turns: list[tuple[Role, str]],
        *,
        age: timedelta = timedelta(hours=1),
    ) -> None:
        """More turns at the end of the transcript, now last written `age` ago."""
        self._write(session, turns, mode="a")
        self.set_age(session, age)

    def set_age(self, session: Session, age: timedelta) -> None:
        stamp = (self.now - age).timestamp()
        os.utime(session.transcript, (stamp, stamp))

    def plan(self, max_sessions: int = 20) -> ReviewPlan:
        return plan_review(
            self.root,
            origin=self.origin,
            now=self.now,
            locate=self.locate,
            max_sessions=max_sessions,
        )

    def run(
        self,
        reviewer: object | None = None,
        *,
        max_sessions: int = 20,
        warnings: list[str] | None = None,
    ) -> RunSummary:
        chosen = reviewer if reviewer is not None else ExtractiveReviewer()
        return run_chat_review(
            self.root,
            chosen,  # type: ignore[arg-type]
            origin=self.origin,
            clock=lambda: self.now,
            locate=self.locate,
            max_sessions=max_sessions,
            warn=(warnings.append if warnings is not None else lambda _message: None),
        )

    def state(self) -> ReviewState:
        return ReviewStateFile(self.root).load().state

    def field(self, session: Session, name: str) -> str | None:
        return read_card(session.husk).text(name)


class RecordingReviewer:
    """Wraps a reviewer (extractive by default) and keeps every `ReviewArgs` it was given."""

    name = "recording"
    is_local = True

    def __init__(
        self,
        answer: Callable[[ReviewArgs], ReviewOutput] | None = None,
        before: Callable[[ReviewArgs], None] | None = None,
    ) -> None:
        self.calls: list[ReviewArgs] = []
        self._answer = answer if answer is not None else ExtractiveReviewer().review
        self._before = before

    def review(self, args: ReviewArgs) -> ReviewOutput:
        self.calls.append(args)
        if self._before is not None:
            self._before(args)
        return self._answer(args)


def fixed_output(title: str, contains: str, notes: list[tuple[str, str]]) -> ReviewOutput:
    return {
        "title": title,
        "contains": contains,
        "notes": [{"kind": kind, "text": text} for kind, text in notes],  # type: ignore[typeddict-item]
    }
