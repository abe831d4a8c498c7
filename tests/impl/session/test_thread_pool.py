"""`ChatThreadSession` and `ChatSessionPool` outside the machine: the injected clock's
timeout, replies, deliberate skips, and records in the box's SQLite."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

from beebox_impl.engine import ScriptedEngine
from beebox_impl.engine.messages import assistant_message, init_message, result_message
from beebox_impl.session import (
    ChatResponse,
    ChatSessionPool,
    ChatThreadSession,
    ManualClock,
    PoolSendResult,
    TurnSettlement,
)
from beebox_impl.store import BoxDatabase, InMemoryThreadRecordStore
from beebox_impl.testing import settle
from beebox_spec.entries import JsonObject
from beebox_spec.phases import Phase
from beebox_spec.thread_pool import BUSY_TIMEOUT, REMINDER, SessionBusyError

pytestmark = pytest.mark.anyio


def held_session_id(session: ChatThreadSession) -> str | None:
    # Read through a call: mypy would keep an earlier assert's narrowing of the property.
    return session.session_id


NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


async def test_park_waits_for_idle_until_the_clock_says_sixty_seconds(tmp_path: Path) -> None:
    engine = ScriptedEngine(start_mode="accept")
    clock = ManualClock(NOW)
    async with (
        await BoxDatabase.open(tmp_path) as database,
        ChatSessionPool.open(
            engine=engine, box_root=tmp_path, records=database.thread_records, clock=clock
        ) as pool,
        anyio.create_task_group() as sends,
    ):
        results: dict[str, PoolSendResult] = {}

        async def send(thread_ref: str, text: str) -> None:
            results[thread_ref] = await pool.send(thread_ref, text)

        sends.start_soon(send, "t1", "first")
        await settle()
        first_run = engine.last_run
        await first_run.emit(init_message("s-1"))
        sends.start_soon(send, "t2", "second")
        await settle()
        # t1 is mid-turn: t2 waits, on the injected clock only.
        assert pool.active_thread == "t1"
        clock.advance(BUSY_TIMEOUT - timedelta(seconds=1))
        await settle()
        assert pool.active_thread == "t1"
        clock.advance(timedelta(seconds=1))
        # The park writes t1's record to SQLite from a worker thread, which settling
        # cannot see: wait for the send to report instead.
        with anyio.fail_after(5):
            while "t1" not in results:
                await anyio.sleep(0.001)
        assert pool.active_thread == "t2"
        assert results["t1"] == PoolSendResult((), False, TurnSettlement("closed"))
        assert first_run.close_calls == 1
        # Parked mid-turn: the id is kept in t1's record for a resume.
        records = await database.thread_records.load_all()
        assert records["t1"]["sessionId"] == "s-1"
        assert records["t1"]["messageCount"] == 0
        await engine.last_run.emit(result_message(session_id="s-2", uuid="u"))
        with anyio.fail_after(5):
            while "t2" not in results:
                await anyio.sleep(0.001)
        assert results["t2"].success
        sends.cancel_scope.cancel()


async def test_a_resumed_thread_gets_the_reminder_and_rotation_starts_afresh() -> None:
    engine = ScriptedEngine(start_mode="accept")
    clock = ManualClock(NOW)
    store = InMemoryThreadRecordStore()
    async with (
        ChatSessionPool.open(
            engine=engine,
            box_root=Path("."),
            records=store,
            clock=clock,
            thread_prompt="be a bot",
        ) as pool,
        anyio.create_task_group() as sends,
    ):
        for text in ("one", "two"):
            sends.start_soon(pool.send, "t1", text)
            await settle()
            await engine.last_run.emit(init_message("s-1"))
            await engine.last_run.emit(result_message(session_id="s-1", uuid=text))
            await settle()
        assert engine.last_run.sent == ["one", "two" + REMINDER]
        assert engine.starts[0].system_prompt == "be a bot"
        assert store.records["t1"]["messageCount"] == 2
        await pool.evict("t1")
        assert "t1" not in store.records
        sends.start_soon(pool.send, "t1", "three")
        await settle()
        # Evicted: a fresh session, with the thread prompt again.
        assert engine.starts[-1].resume_session_id is None
        assert engine.starts[-1].system_prompt == "be a bot"
        sends.cancel_scope.cancel()


async def test_replies_are_delivered_as_they_complete_and_skips_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    engine = ScriptedEngine(start_mode="accept")
    async with anyio.create_task_group() as task_group:
        session = ChatThreadSession(engine=engine, box_root=Path("."), task_group=task_group)
        replies: list[str] = []
        with session.subscribe() as events, caplog.at_level(logging.DEBUG):
            turn = await session.start_turn("hi", on_response=replies.append)
            with pytest.raises(SessionBusyError):
                await session.start_turn("again")
            await settle()
            run = engine.last_run

            def say(text: str) -> JsonObject:
                return assistant_message(
                    text, session_id="s-1", uuid=text, message_id=text, model="m"
                )

            await run.emit(say("<chat-response> one </chat-response><chat-resp"))
            await settle()
            assert replies == ["one"]
            await run.emit({"type": "stream_event", "session_id": "s-1", "uuid": "e", "event": {}})
            await run.emit(say("onse>two</chat-response>"))
            await run.emit(result_message(session_id="s-1", uuid="r"))
            assert await turn.wait() == TurnSettlement("done")
            assert turn.responses == replies == ["one", "two"]
            assert session.phase is Phase.READY
            assert session.session_id == "s-1"
            chat_responses = [e for e in events.drain_nowait() if isinstance(e, ChatResponse)]
            assert chat_responses == [ChatResponse("one"), ChatResponse("two")]
        assert "skips a stream_event message" in caplog.text
        await session.stop()
        await settle()
        assert held_session_id(session) is None
        task_group.cancel_scope.cancel()


async def test_a_run_that_refuses_a_turn_is_closed_and_the_turn_settles_closed() -> None:
    # Rule 6: left open, the run kept the turn in flight for good (and the pool waiting).
    engine = ScriptedEngine()
    async with anyio.create_task_group() as task_group:
        session = ChatThreadSession(engine=engine, box_root=Path("."), task_group=task_group)
        first = await session.start_turn("first")
        await settle()
        engine.accept_start().refuse_next_send()
        await settle()
        with anyio.fail_after(5):
            assert await first.wait() == TurnSettlement("closed")
        assert engine.last_run.closed
        assert session.phase is Phase.IDLE
        # A fresh run for the next turn; this time onto the open run.
        second = await session.start_turn("second")
        await settle()
        engine.accept_start()
        await settle()
        await engine.last_run.emit(result_message(session_id="s-1", uuid="r"))
        assert await second.wait() == TurnSettlement("done")
        engine.last_run.refuse_next_send()
        third = await session.start_turn("third")
        with anyio.fail_after(5):
            assert await third.wait() == TurnSettlement("closed")
        assert engine.last_run.closed
        assert len(engine.runs) == 2
        task_group.cancel_scope.cancel()
