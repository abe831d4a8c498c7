"""The shared pump, the event fan-out and the manual clock."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from beebox_impl.engine.mailbox import PullIterator
from beebox_impl.engine.messages import assistant_message
from beebox_impl.engine.protocol import StartOptions, TurnContent
from beebox_impl.engine.scripted import ScriptedRun
from beebox_impl.session import EventFanout, ManualClock, PumpCounters, pump_chat_run
from beebox_impl.session.pump import MAX_READY_MESSAGES
from beebox_impl.session.writer import StoreWriter
from beebox_spec.entries import JsonObject
from beebox_spec.sdk_messages import AdaptedMessage

pytestmark = pytest.mark.anyio


class ListRun:
    """A run whose stream is a fixed list, optionally breaking at its end."""

    def __init__(self, messages: list[JsonObject], *, breaks: bool = False) -> None:
        self._messages = messages
        self._breaks = breaks
        self.closed = False

    async def _stream(self) -> AsyncIterator[JsonObject]:
        for message in self._messages:
            yield message
        if self._breaks:
            raise OSError("pipe broke")

    def messages(self) -> AsyncIterator[JsonObject]:
        return self._stream()

    async def send(self, content: TurnContent) -> None:
        return None

    async def interrupt(self) -> None:
        return None

    async def close(self) -> None:
        self.closed = True


async def test_the_pump_adapts_skips_counts_and_closes_once() -> None:
    seen: list[AdaptedMessage] = []
    closes: list[str] = []
    errors: list[Exception] = []
    counters = PumpCounters()

    async def on_message(message: AdaptedMessage) -> None:
        seen.append(message)

    async def on_close() -> None:
        closes.append("closed")

    async def on_error(error: Exception) -> None:
        errors.append(error)

    run = ListRun(
        [
            {"type": "system", "subtype": "init", "session_id": "s-1"},
            {"type": "tool_progress"},
            {"type": "brand-new"},
        ],
        breaks=True,
    )
    await pump_chat_run(
        run, on_message=on_message, on_close=on_close, on_error=on_error, counters=counters
    )
    assert [message["type"] for message in seen] == ["system", "unknown"]
    assert counters == PumpCounters(delivered=2, ignored=1, unknown=1)
    assert closes == ["closed"]
    assert [str(error) for error in errors] == ["pipe broke"]


async def test_a_cancelled_pump_does_not_run_the_close_handler() -> None:
    closes: list[str] = []

    class SilentRun(ListRun):
        async def _stream(self) -> AsyncIterator[JsonObject]:
            await anyio.sleep_forever()
            yield {}

    async def on_message(message: AdaptedMessage) -> None:
        return None

    async def on_close() -> None:
        closes.append("closed")

    with anyio.move_on_after(0.01):
        await pump_chat_run(SilentRun([]), on_message=on_message, on_close=on_close)
    assert closes == []


async def test_a_session_error_in_the_handler_is_not_taken_for_the_runs() -> None:
    async def on_message(message: AdaptedMessage) -> None:
        raise LookupError("a bug in the session")

    async def on_close() -> None:
        raise AssertionError("not reached")

    with pytest.raises(LookupError):
        await pump_chat_run(
            ListRun([{"type": "brand-new"}]), on_message=on_message, on_close=on_close
        )


async def test_a_handler_may_answer_none_or_work_the_pump_finishes_before_the_next() -> None:
    order: list[str] = []

    async def drain(uuid: str) -> None:
        order.append(f"work for {uuid} started")
        await anyio.lowlevel.checkpoint()
        order.append(f"work for {uuid} done")

    def on_message(message: AdaptedMessage) -> Awaitable[None] | None:
        uuid = message["uuid"] if message["type"] == "assistant" else "?"
        order.append(f"handled {uuid}")
        # Only the first message leaves work behind, as a turn's end with a drain does.
        return drain(uuid) if uuid == "a-1" else None

    async def on_close() -> None:
        order.append("closed")

    await pump_chat_run(
        ListRun([_assistant(1), _assistant(2)]), on_message=on_message, on_close=on_close
    )
    assert order == [
        "handled a-1",
        "work for a-1 started",
        "work for a-1 done",
        "handled a-2",
        "closed",
    ]


def _assistant(number: int) -> JsonObject:
    return assistant_message(
        f"part {number}",
        session_id="s-1",
        uuid=f"a-{number}",
        message_id=f"m-{number}",
        model="scripted",
        stop_reason=None,
    )


async def test_waiting_messages_are_handled_in_one_round_up_to_the_cap() -> None:
    # What waits when a message has been handled is taken without a scheduling round,
    # at most MAX_READY_MESSAGES a round: count the waits on the stream itself.
    run = ScriptedRun(StartOptions(cwd=Path()))
    total = MAX_READY_MESSAGES + 8
    for number in range(total):
        assert run.emit_nowait(_assistant(number))
    seen: list[str] = []
    waits = 0
    stream = run.messages()
    assert isinstance(stream, PullIterator)
    take_ready = stream.take_ready

    class CountedRun:
        closed = False

        def messages(self) -> PullIterator[JsonObject]:
            async def pull() -> JsonObject:
                nonlocal waits
                waits += 1
                if waits == 3:
                    await run.end()
                return await anext(stream)

            return PullIterator(pull, take_ready)

    async def on_message(message: AdaptedMessage) -> None:
        seen.append(message["uuid"] if message["type"] == "assistant" else message["type"])

    async def on_close() -> None:
        seen.append("closed")

    await pump_chat_run(CountedRun(), on_message=on_message, on_close=on_close)  # type: ignore[arg-type]
    assert seen == [f"a-{number}" for number in range(total)] + ["closed"]
    # One wait for the first round's first message, one for the second's, one for the end.
    assert waits == 3


@pytest.mark.parametrize("closing_at", [0, 1])
async def test_a_run_closed_while_a_message_is_handled_hands_over_nothing_more(
    closing_at: int,
) -> None:
    # Whether the round's first message or a later one (taken ready) is being handled.
    run = ScriptedRun(StartOptions(cwd=Path()))
    for number in range(4):
        assert run.emit_nowait(_assistant(number))
    seen: list[str] = []

    async def on_message(message: AdaptedMessage) -> None:
        seen.append(message["uuid"] if message["type"] == "assistant" else message["type"])
        if len(seen) == closing_at + 1:
            run.close_nowait()

    async def on_close() -> None:
        seen.append("closed")

    await pump_chat_run(run, on_message=on_message, on_close=on_close)
    assert seen == [f"a-{number}" for number in range(closing_at + 1)] + ["closed"]
    assert run.dropped == 3 - closing_at


async def test_fanout_refuses_an_unbounded_buffer_and_drops_closed_listeners() -> None:
    fanout = EventFanout[int]()
    with pytest.raises(ValueError, match="finite"):
        fanout.subscribe(max_buffer=0)
    with fanout.subscribe() as gone:
        pass
    kept = fanout.subscribe()
    full = fanout.subscribe(max_buffer=1)
    fanout.publish(1)
    # One past its buffer: cut off, while the others still get every event.
    fanout.publish(2)
    fanout.publish(3)
    assert kept.drain_nowait() == [1, 2, 3]
    assert full.overflowed
    assert not full.listening
    assert full.drain_nowait() == [1]
    assert not gone.overflowed
    assert [kept.listening, gone.listening] == [True, False]
    fanout.close()
    assert not kept.listening
    with pytest.raises(anyio.EndOfStream):
        await kept.receive()
    kept.close()


async def test_a_batch_is_every_waiting_event_in_order_after_one_wait() -> None:
    fanout = EventFanout[int]()
    with fanout.subscribe() as listener:
        async with anyio.create_task_group() as task_group:
            batches: list[list[int]] = []

            async def listen() -> None:
                batches.append(await listener.receive_batch())

            task_group.start_soon(listen)
            await anyio.wait_all_tasks_blocked()
            # Waiting: the first event wakes it, and the two behind it ride along.
            for event in (1, 2, 3):
                fanout.publish(event)
        assert batches == [[1, 2, 3]]
        fanout.publish(4)
        fanout.close()
        assert await listener.receive_batch() == [4]
        with pytest.raises(anyio.EndOfStream):
            await listener.receive_batch()


async def test_the_manual_clock_wakes_exactly_the_sleepers_due() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    clock = ManualClock(start)
    woke: list[float] = []

    async def sleeper(seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append(seconds)

    async with anyio.create_task_group() as task_group:
        task_group.start_soon(sleeper, 10)
        task_group.start_soon(sleeper, 60)
        await anyio.wait_all_tasks_blocked()
        assert clock.sleepers == 2
        clock.advance(timedelta(seconds=30))
        await anyio.wait_all_tasks_blocked()
        assert woke == [10]
        clock.advance(timedelta(seconds=30))
    assert woke == [10, 60]
    assert clock.now() == start + timedelta(seconds=60)
    await clock.sleep(0)
    with pytest.raises(ValueError, match="forward"):
        clock.advance(timedelta(seconds=-1))
    with pytest.raises(ValueError, match="zone"):
        ManualClock(datetime(2026, 1, 1))


async def test_the_store_writer_batches_consecutive_writes_of_one_kind() -> None:
    log: list[object] = []

    async def batch(items: Sequence[str]) -> None:
        await anyio.lowlevel.checkpoint()
        log.append(list(items))
        if "bad" in items:
            raise ValueError("bad")

    async def single() -> None:
        await anyio.lowlevel.checkpoint()
        log.append("single")

    writer = StoreWriter("test")
    async with anyio.create_task_group() as group:
        group.start_soon(writer.run)
        a = writer.submit_batch(batch, "a")
        b = writer.submit_batch(batch, "b")
        s = writer.submit(single)
        c = writer.submit_batch(batch, "c")
        bad = writer.submit_batch(batch, "bad")
        await writer.flush()
        assert writer.idle
        group.cancel_scope.cancel()
    # Disk order is submission order; another kind of write ends a batch.
    assert log == [["a", "b"], "single", ["c", "bad"]]
    for done in (a, b, s):
        await done.wait()
    # Every write of a failed batch raises what the batch raised.
    for failed in (c, bad):
        with pytest.raises(ValueError, match="bad"):
            await failed.wait()
