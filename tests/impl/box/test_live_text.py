"""Live text through the box: ``turn-delta`` events, ``liveText`` in the bootstrap, and
nothing of it in the acceptance record or the transcript (issue 37).

The box runs the echo engine with its pauses injected (`Pieces`): a test holds the
answer after a few pieces, reads the box mid-turn, then lets it finish. No test
waits for a time.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from beebox_impl import Box, BoxEvent, SendRequest, TurnStarted
from beebox_impl.engine import EchoEngine
from beebox_impl.engine.echo import answer_pieces
from beebox_impl.services.bootstrap import Bootstrap
from beebox_impl.session import EventSubscription
from beebox_impl.transcript import TailSlice
from beebox_impl.transcript.location import transcript_path

pytestmark = pytest.mark.anyio

TEXT = "hello there, box"
ANSWER = f'You said: "{TEXT}"'
PIECES = answer_pieces(ANSWER)


class Pieces:
    """The echo's injected pause before each piece of its answer: with ``hold_before``
    set, the pause before that piece (1 for the first) waits until `release`."""

    def __init__(self, hold_before: int | None = None) -> None:
        self.hold_before = hold_before
        self.pauses = 0
        self.held = anyio.Event()
        self._released = anyio.Event()

    async def __call__(self, seconds: float) -> None:
        self.pauses += 1
        if self.pauses == self.hold_before:
            self.held.set()
            await self._released.wait()

    def release(self) -> None:
        self._released.set()


@asynccontextmanager
async def echo_box(tmp_path: Path, pieces: Pieces) -> AsyncIterator[Box]:
    projects = tmp_path / "projects"
    engine = EchoEngine(projects, lambda: datetime.now(UTC), sleep=pieces)
    async with Box.open(tmp_path / "box", engine=engine, projects_root=projects) as box:
        yield box


async def until(events: EventSubscription[BoxEvent], name: str) -> list[BoxEvent]:
    """Every event up to and including the next one named ``name``."""
    seen: list[BoxEvent] = []
    with anyio.fail_after(10):
        async for event in events:
            seen.append(event)
            if event.name == name:
                return seen
    raise AssertionError(f"the events ended before {name}")


async def bootstrap(box: Box) -> Bootstrap:
    return await box.bootstrap(window=TailSlice(50))


def shown(boot: Bootstrap) -> list[tuple[str, str]]:
    """The history's entries as (type, text)."""
    history = boot["history"]
    assert history is not None
    return [
        (
            entry["type"],
            "".join(block.get("text", "") for block in entry["content"] if block["type"] == "text"),
        )
        for entry in history["entries"]
    ]


async def test_a_turn_says_its_text_in_deltas_then_the_whole_message_once(
    tmp_path: Path,
) -> None:
    async with echo_box(tmp_path, Pieces()) as box:
        with box.subscribe() as events:
            assert isinstance(await box.send(SendRequest(TEXT)), TurnStarted)
            seen = await until(events, "turn-text")
    names = [event.name for event in seen]
    deltas = [event.data["text"] for event in seen if event.name == "turn-delta"]
    messages = [event.data["message"] for event in seen if event.name == "message"]
    # The deltas, in order, are the answer; a stream event is never a message.
    assert deltas == PIECES
    assert "".join(deltas) == ANSWER
    assert [message["type"] for message in messages] == ["system", "assistant", "result"]
    # Every delta comes before the whole message, which comes once.
    (whole,) = [index for index, event in enumerate(seen) if is_assistant(event)]
    assert max(index for index, name in enumerate(names) if name == "turn-delta") < whole
    assert names[-2:] == ["done", "turn-text"]


def is_assistant(event: BoxEvent) -> bool:
    return event.name == "message" and event.data["message"]["type"] == "assistant"


async def test_a_bootstrap_mid_turn_carries_the_text_so_far_and_none_after_done(
    tmp_path: Path,
) -> None:
    pieces = Pieces(hold_before=3)
    async with echo_box(tmp_path, pieces) as box:
        with box.subscribe() as events:
            await box.send(SendRequest(TEXT))
            await pieces.held.wait()
            mid_turn = await bootstrap(box)
            pieces.release()
            await until(events, "done")
            after = await bootstrap(box)
    # Two pieces said, the third held: the text so far; the history has the prompt
    # only, the answer's line being written once the whole message is said.
    assert mid_turn["liveText"] == "".join(PIECES[:2])
    assert mid_turn["status"]["busy"] is True
    assert shown(mid_turn) == [("user", TEXT)]
    assert after["liveText"] is None
    assert shown(after) == [("user", TEXT), ("assistant", ANSWER)]


async def test_another_sessions_bootstrap_has_no_live_text(tmp_path: Path) -> None:
    pieces = Pieces(hold_before=2)
    async with echo_box(tmp_path, pieces) as box:
        await box.send(SendRequest(TEXT))
        await pieces.held.wait()
        other = await box.bootstrap(
            session="00000000-0000-4000-8000-000000000000", window=TailSlice(50)
        )
        ours = await bootstrap(box)
        pieces.release()
    assert other["liveText"] is None
    assert ours["liveText"] == PIECES[0]


async def test_a_stop_mid_turn_drops_the_live_text_and_streams_no_more(tmp_path: Path) -> None:
    pieces = Pieces(hold_before=3)
    async with echo_box(tmp_path, pieces) as box:
        with box.subscribe() as events:
            await box.send(SendRequest(TEXT))
            await pieces.held.wait()
            await box.stop()
            stopped = await bootstrap(box)
            pieces.release()
            seen = await until(events, "close")
            closed = await bootstrap(box)
    assert stopped["liveText"] is None
    assert closed["liveText"] is None
    deltas = [event.data["text"] for event in seen if event.name == "turn-delta"]
    assert deltas == PIECES[:2]
    assert not any(is_assistant(event) for event in seen)


async def test_deltas_enter_neither_the_acceptance_record_nor_the_transcript(
    tmp_path: Path,
) -> None:
    async with echo_box(tmp_path, Pieces()) as box:
        with box.subscribe() as events:
            await box.send(SendRequest(TEXT))
            seen = await until(events, "done")
            session_id = box.session_id
            assert session_id is not None
            transcript = transcript_path(box.root, session_id, tmp_path / "projects")
            database = box.paths.database
    assert any(event.name == "turn-delta" for event in seen)
    with contextlib.closing(sqlite3.connect(database)) as connection:
        tables = [
            name
            for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        rows = [
            repr(row) for table in tables for row in connection.execute(f"SELECT * FROM {table}")
        ]
    # The record holds the send; nothing of the answer, whole or in pieces.
    assert any(TEXT in row for row in rows)
    assert not any("You said" in row for row in rows)
    text = transcript.read_text(encoding="utf-8")
    assert "stream_event" not in text
    assert "content_block_delta" not in text
    # The answer once, whole, in its one line.
    assert text.count(json.dumps(ANSWER)) == 1
