"""The scripted engine: the test decides every start, message and close (asyncio and trio)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from beebox_impl.engine import EngineStartError, ScriptedEngine, ScriptedRun, StartOptions
from beebox_impl.engine.messages import (
    assistant_message,
    init_message,
    raw_sdk_message,
    result_message,
)
from beebox_spec.entries import JsonObject
from beebox_spec.errors import InvariantError
from beebox_spec.sdk_messages import adapt_sdk_message, message_kind
from conformance.scenario import EngineStep

pytestmark = pytest.mark.anyio

OPTIONS = StartOptions(cwd=Path("/box"), resume_session_id="s-1", model="m")


async def collect(run: ScriptedRun) -> list[JsonObject]:
    # A stream that never ends fails the test instead of hanging it.
    with anyio.fail_after(5):
        return [message async for message in run.messages()]


async def test_a_start_waits_until_the_test_accepts_it() -> None:
    engine = ScriptedEngine()
    started: list[ScriptedRun] = []

    async def starter() -> None:
        started.append(await engine.start(OPTIONS))

    async with anyio.create_task_group() as tg:
        tg.start_soon(starter)
        assert await engine.wait_start_requested() == OPTIONS
        # The session is in `starting`: the start is recorded, no run exists yet.
        assert engine.starts == [OPTIONS]
        assert engine.waiting_starts == 1
        assert started == []
        assert engine.runs == []
        run = engine.accept_start()
    assert started == [run]
    assert engine.runs == [run]
    assert engine.last_run is run
    assert run.options == OPTIONS
    assert engine.waiting_starts == 0


async def test_a_failed_start_raises_the_reason_and_lists_no_run() -> None:
    engine = ScriptedEngine()
    errors: list[str] = []

    async def starter() -> None:
        with pytest.raises(EngineStartError) as caught:
            await engine.start(OPTIONS)
        errors.append(str(caught.value))

    async with anyio.create_task_group() as tg:
        tg.start_soon(starter)
        await engine.wait_start_requested()
        engine.fail_start("no binary")
    assert errors == ["no binary"]
    assert engine.runs == []
    assert engine.starts == [OPTIONS]
    with pytest.raises(InvariantError):
        engine.accept_start()
    with pytest.raises(InvariantError):
        _ = engine.last_run


async def test_starts_are_answered_oldest_first() -> None:
    engine = ScriptedEngine()
    first = StartOptions(cwd=Path("/a"))
    second = StartOptions(cwd=Path("/b"))
    outcome: dict[str, object] = {}

    async def starter(name: str, options: StartOptions) -> None:
        try:
            outcome[name] = await engine.start(options)
        except EngineStartError as error:
            outcome[name] = str(error)

    async with anyio.create_task_group() as tg:
        tg.start_soon(starter, "first", first)
        await engine.wait_start_requested()
        tg.start_soon(starter, "second", second)
        while engine.waiting_starts < 2:
            await anyio.lowlevel.checkpoint()
        engine.fail_start()
        run = engine.accept_start()
    assert outcome == {"first": "scripted start failure", "second": run}
    assert run.options == second


async def test_immediate_modes() -> None:
    accepting = ScriptedEngine("accept")
    run = await accepting.start(OPTIONS)
    assert accepting.runs == [run]
    failing = ScriptedEngine("fail", fail_reason="down")
    with pytest.raises(EngineStartError, match="down"):
        await failing.start(OPTIONS)
    assert failing.runs == []
    assert failing.starts == [OPTIONS]


async def test_a_cancelled_start_is_withdrawn() -> None:
    engine = ScriptedEngine()
    with anyio.CancelScope() as scope:
        scope.cancel()
        await engine.start(OPTIONS)
    assert engine.waiting_starts == 0
    assert engine.starts == [OPTIONS]
    with pytest.raises(InvariantError):
        engine.accept_start()


async def test_the_run_records_turns_interrupts_and_closes() -> None:
    run = await ScriptedEngine("accept").start(OPTIONS)
    await run.send("one")
    await run.send([{"type": "text", "text": "two"}])
    await run.interrupt()
    await run.interrupt()
    await run.close()
    await run.close()
    assert run.sent == ["one", [{"type": "text", "text": "two"}]]
    assert run.interrupts == 2
    assert run.close_calls == 2
    assert run.closed
    with pytest.raises(anyio.ClosedResourceError):
        await run.send("three")
    assert run.sent == ["one", [{"type": "text", "text": "two"}]]


async def test_a_refused_send_raises_once_records_nothing_and_leaves_the_run_open() -> None:
    run = await ScriptedEngine("accept").start(OPTIONS)
    run.refuse_next_send()
    with pytest.raises(RuntimeError, match="refused the turn"):
        await run.send("one")
    run.refuse_next_send(OSError("photos unreadable"))
    with pytest.raises(OSError, match="photos unreadable"):
        await run.send("two")
    await run.send("three")
    assert run.sent == ["three"]
    assert not run.ended


async def test_emitted_messages_reach_the_consumer_then_the_run_ends_on_its_own() -> None:
    run = await ScriptedEngine("accept").start(OPTIONS)
    init = init_message("s-1")
    result = result_message(session_id="s-1", uuid="r-1")
    assert await run.emit(init)
    assert run.emit_nowait(result)
    await run.end()
    assert run.ended
    # Ended, but not yet consumed: the stream still holds what was emitted.
    closed_before_reading = run.closed
    assert not closed_before_reading
    assert await collect(run) == [init, result]
    assert run.closed
    assert not await run.emit(init)
    with pytest.raises(anyio.ClosedResourceError):
        await run.send("late")


async def test_closing_ends_the_stream_at_once_and_drops_what_was_not_consumed() -> None:
    run = await ScriptedEngine("accept").start(OPTIONS)
    received: list[JsonObject] = []

    async def pump() -> None:
        async for message in run.messages():
            received.append(message)

    first = assistant_message("a", session_id="s", uuid="u1", message_id="m1", model="x")
    async with anyio.create_task_group() as tg:
        tg.start_soon(pump)
        await run.emit(first)
        await anyio.wait_all_tasks_blocked()
        assert received == [first]
        # Two more emitted while the consumer is not reading, then the session closes.
        run.emit_nowait(result_message(session_id="s", uuid="r1"))
        run.emit_nowait(result_message(session_id="s", uuid="r2"))
        run.close_nowait()
    assert received == [first]
    assert run.dropped == 2
    assert run.closed
    assert not await run.emit(first)


async def test_a_run_stream_is_consumed_once() -> None:
    run = await ScriptedEngine("accept").start(OPTIONS)
    run.messages()
    with pytest.raises(InvariantError, match="consumed once"):
        run.messages()


def test_scripted_messages_adapt_as_the_session_reads_them() -> None:
    # The conformance runner builds its engine steps with the same builder.
    init = adapt_sdk_message(raw_sdk_message(EngineStep("init", session_id="s-9"), "", 1))
    assistant = adapt_sdk_message(raw_sdk_message(EngineStep("assistant", "hi"), "s-9", 2))
    result = adapt_sdk_message(raw_sdk_message(EngineStep("result"), "s-9", 3))
    assert init == {"type": "system", "subtype": "init", "session_id": "s-9"}
    assert assistant is not None
    assert message_kind(assistant) == "assistant"
    assert assistant["type"] == "assistant"
    assert assistant["session_id"] == "s-9"
    assert assistant["message"]["content"] == [{"type": "text", "text": "hi"}]
    assert result is not None
    assert message_kind(result) == "result:success"
    with pytest.raises(InvariantError, match="not an SDK message"):
        raw_sdk_message(EngineStep("closed"), "s-9", 4)


def test_an_error_result_adapts_with_its_subtype() -> None:
    raw = result_message(
        session_id="s", uuid="r", subtype="error_during_execution", is_error=True, num_turns=0
    )
    adapted = adapt_sdk_message(raw)
    assert adapted is not None
    assert adapted["type"] == "result"
    assert adapted["subtype"] == "error_during_execution"
    assert adapted["is_error"] is True
    assert "result" not in adapted
