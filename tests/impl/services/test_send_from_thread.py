"""`Box.send_from_thread`: the send of a host's own thread (the HTTP handlers').

The record is committed in the calling thread and the loop is crossed once, for
the hand-over; a send the session will queue is answered once recorded, its
hand-over a callback on the loop that the thread does not wait for (in order,
within a bound). The rules are `send`'s: one bus row per message id, a concurrent
duplicate (on the loop or in another thread) gets the first request's answer,
and a send recorded but not handed over answers `SendFailed` and stays recorded.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import pytest
from anyio.from_thread import BlockingPortal

from beebox_impl.box import Box
from beebox_impl.engine.messages import result_message
from beebox_impl.engine.scripted import ScriptedEngine
from beebox_impl.services import send as send_module
from beebox_impl.services.send import (
    Deduplicated,
    Queued,
    SendFailed,
    SendOutcome,
    SendRequest,
    TurnStarted,
)
from beebox_impl.session import ChatSession, Closed, StartFailed
from beebox_impl.store.acceptance import CHAT_USER_MESSAGE, Attachment
from beebox_impl.store.database import SqliteQueueStore
from tests.impl.http.support import wait_until

pytestmark = pytest.mark.anyio

T = TypeVar("T")


@asynccontextmanager
async def _box_with_portal(
    tmp_path: Path, engine: ScriptedEngine
) -> AsyncIterator[tuple[Box, BlockingPortal]]:
    """A box on ``engine``, and a portal for threads to reach its loop."""
    async with (
        Box.open(tmp_path / "box", engine=engine, projects_root=tmp_path) as box,
        BlockingPortal() as portal,
    ):
        yield box, portal


def loop_gone(function: Callable[..., Coroutine[Any, Any, T]], /, *args: Any) -> T:
    """A `run_on_loop` whose loop is gone (the box is closing)."""
    raise RuntimeError("This portal is not running")


async def _bus_messages(box: Box) -> list[object]:
    rows = await box._acceptance.recent_events(CHAT_USER_MESSAGE, 100)
    return [row.payload["message"] for row in rows if isinstance(row.payload, dict)]


async def test_a_send_is_recorded_in_the_calling_thread_and_handed_over(
    tmp_path: Path,
) -> None:
    engine = ScriptedEngine(start_mode="accept")
    async with _box_with_portal(tmp_path, engine) as (box, portal):
        recorded_in: list[int] = []
        record = box._acceptance.record_user_message_blocking

        def record_here(*args: Any, **kwargs: Any) -> Any:
            recorded_in.append(threading.get_ident())
            return record(*args, **kwargs)

        box._acceptance.record_user_message_blocking = record_here  # type: ignore[method-assign]

        def send() -> tuple[int, SendOutcome]:
            outcome = box.send_from_thread(SendRequest("hello", "m-1"), portal.call)
            return threading.get_ident(), outcome

        caller, outcome = await anyio.to_thread.run_sync(send)
        assert isinstance(outcome, TurnStarted)
        assert recorded_in == [caller]
        assert await _bus_messages(box) == ["hello"]
        await wait_until(lambda: bool(engine.runs) and bool(engine.runs[0].sent))
        assert engine.runs[0].sent == ["hello"]


async def test_duplicates_in_threads_and_on_the_loop_share_one_answer(tmp_path: Path) -> None:
    engine = ScriptedEngine(start_mode="accept")
    async with _box_with_portal(tmp_path, engine) as (box, portal):
        service = box._send_service
        recording, release = threading.Event(), threading.Event()
        record = box._acceptance.record_user_message_blocking

        def held_record(*args: Any, **kwargs: Any) -> Any:
            recording.set()
            release.wait(10)
            return record(*args, **kwargs)

        box._acceptance.record_user_message_blocking = held_record  # type: ignore[method-assign]
        duplicates: list[object] = []
        claim = service._claim_in_flight

        def counted_claim(message_id: str | None) -> object:
            answer = claim(message_id)
            duplicates.append(answer)
            return answer

        service._claim_in_flight = counted_claim  # type: ignore[method-assign, assignment]
        answers: list[SendOutcome] = []
        request = SendRequest("once", "id-1")

        async def from_a_thread() -> None:
            answers.append(
                await anyio.to_thread.run_sync(box.send_from_thread, request, portal.call)
            )

        async def on_the_loop() -> None:
            answers.append(await box.send(request))

        async with anyio.create_task_group() as group:
            # The first request, from a thread, owns the id until it has its answer.
            group.start_soon(from_a_thread)
            await anyio.to_thread.run_sync(recording.wait, 10)
            for index in range(9):
                group.start_soon(from_a_thread if index % 2 else on_the_loop)
            await wait_until(lambda: len(duplicates) == 10)
            release.set()
        (first, *_others) = answers
        assert isinstance(first, TurnStarted)
        # Every one of them heard the owner's own answer, not a deduplication.
        assert answers == [first] * 10
        assert await _bus_messages(box) == ["once"]
        await wait_until(lambda: bool(engine.runs) and bool(engine.runs[0].sent))
        assert engine.runs[0].sent == ["once"]


async def test_many_duplicates_on_the_loop_hold_no_worker_threads(tmp_path: Path) -> None:
    # More waiters than the loop has worker threads (40): the owner's disk work
    # (its record, the queue row of a busy chat) must still get one.
    engine = ScriptedEngine(start_mode="accept")
    async with Box.open(tmp_path / "box", engine=engine, projects_root=tmp_path) as box:
        assert isinstance(await box.send(SendRequest("first")), TurnStarted)
        await wait_until(lambda: bool(engine.runs) and bool(engine.runs[0].sent))
        answers: list[SendOutcome] = []

        async def send() -> None:
            answers.append(await box.send(SendRequest("busy", "id-2")))

        with anyio.fail_after(20):
            async with anyio.create_task_group() as group:
                for _ in range(50):
                    group.start_soon(send)
        # The turn in flight never ends: the first was queued, and so heard the rest.
        assert set(answers) <= {Queued(), Deduplicated()}
        assert Queued() in answers
        assert box._session.queue == ("busy",)


async def test_a_photo_send_from_a_thread_reaches_the_engine(tmp_path: Path) -> None:
    engine = ScriptedEngine(start_mode="accept")
    async with _box_with_portal(tmp_path, engine) as (box, portal):
        request = SendRequest("look", images=(Attachment("image/png", b"\x01\x02"),))
        outcome = await anyio.to_thread.run_sync(box.send_from_thread, request, portal.call)
        assert isinstance(outcome, TurnStarted)
        await wait_until(lambda: bool(engine.runs) and bool(engine.runs[0].sent))
        (turn,) = engine.runs[0].sent
        assert isinstance(turn, list)
        assert [block["type"] for block in turn] == ["image", "text"]


async def test_a_send_recorded_but_not_handed_over_fails_and_stays_recorded(
    tmp_path: Path,
) -> None:
    engine = ScriptedEngine(start_mode="accept")
    async with Box.open(tmp_path / "box", engine=engine, projects_root=tmp_path) as box:
        outcome = await anyio.to_thread.run_sync(
            box.send_from_thread, SendRequest("kept", "m-2"), loop_gone
        )
        assert outcome == SendFailed("This portal is not running")
        assert await _bus_messages(box) == ["kept"]
        # The client's retry finds it recorded.
        assert await box.send(SendRequest("kept", "m-2")) == Deduplicated()
        assert engine.runs == []


async def test_on_the_loop_it_refuses_to_block(tmp_path: Path) -> None:
    async with (
        Box.open(tmp_path / "box", engine=ScriptedEngine(), projects_root=tmp_path) as box,
        BlockingPortal() as portal,
    ):
        with pytest.raises(RuntimeError, match=r"await Box\.send"):
            box.send_from_thread(SendRequest("x"), portal.call)
        assert await _bus_messages(box) == []


async def _from_a_thread(box: Box, portal: BlockingPortal, request: SendRequest) -> SendOutcome:
    return await anyio.to_thread.run_sync(box.send_from_thread, request, portal.call)


async def _queue_texts(box: Box) -> list[str]:
    return [row.text for row in await box._database.chat_queue.load()]


async def _wait_for_an_empty_queue(box: Box) -> None:
    with anyio.fail_after(5):
        while await _queue_texts(box):
            await anyio.sleep(0.001)


async def test_a_send_the_session_will_queue_is_queued_by_its_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Rule 4: one commit (the record's, with the queue row) before the answer; the
    # session's writer writes nothing for it, and deletes the row once it is sent.
    queue_writes: list[tuple[list[int], list[str]]] = []
    update = SqliteQueueStore.update

    async def counted(
        store: SqliteQueueStore, deleted: Sequence[int], appended: Sequence[str]
    ) -> list[int]:
        queue_writes.append((list(deleted), list(appended)))
        return await update(store, deleted, appended)

    monkeypatch.setattr(SqliteQueueStore, "update", counted)
    engine = ScriptedEngine(start_mode="accept")
    async with _box_with_portal(tmp_path, engine) as (box, portal):
        first = await _from_a_thread(box, portal, SendRequest("first"))
        assert isinstance(first, TurnStarted)
        await wait_until(lambda: bool(engine.runs) and bool(engine.runs[0].sent))
        assert box._session.queues_sends
        second = await _from_a_thread(box, portal, SendRequest("second"))
        assert second == Queued()
        # Answered once recorded; the hand-over follows on the loop.
        await wait_until(lambda: box._session.queue == ("second",))
        (row,) = await box._database.chat_queue.load()
        assert row.text == "second"
        assert queue_writes == []
        await engine.runs[0].emit(result_message(session_id="s-1", uuid="r-1"))
        await wait_until(lambda: engine.runs[0].sent == ["first", "second"])
        await _wait_for_an_empty_queue(box)
        assert queue_writes == [([row.row_id], [])]


@asynccontextmanager
async def _box_reading_busy(
    tmp_path: Path, engine: ScriptedEngine, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Box, BlockingPortal]]:
    """A box whose threads always read the session busy (a stale reading when it is not)."""
    monkeypatch.setattr(ChatSession, "queues_sends", property(lambda self: True))
    async with _box_with_portal(tmp_path, engine) as (box, portal):
        yield box, portal


async def test_a_stale_reading_costs_a_row_the_turn_then_deletes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Answered as queued, and the session could take a send after all (it was idle):
    # the queue drains at once, and the text's row goes once the turn is sent.
    engine = ScriptedEngine(start_mode="accept")
    async with _box_reading_busy(tmp_path, engine, monkeypatch) as (box, portal):
        outcome = await _from_a_thread(box, portal, SendRequest("idle"))
        assert outcome == Queued()
        await wait_until(lambda: bool(engine.runs) and engine.runs[0].sent == ["idle"])
        await _wait_for_an_empty_queue(box)


async def _queued_and_its_start_failed(box: Box, portal: BlockingPortal, text: str) -> StartFailed:
    """Send ``text`` from a thread (answered queued) to a chat whose start fails."""
    with box._session.subscribe() as events:
        assert await _from_a_thread(box, portal, SendRequest(text)) == Queued()
        failed = await events.receive()
    assert isinstance(failed, StartFailed)
    return failed


async def test_a_send_answered_queued_whose_start_fails_stays_queued(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # It rode a drained turn: a failed start puts it back at the head of the queue,
    # row and all, where a caller's own text would be dropped as failed.
    engine = ScriptedEngine(start_mode="fail")
    async with _box_reading_busy(tmp_path, engine, monkeypatch) as (box, portal):
        failed = await _queued_and_its_start_failed(box, portal, "kept")
        assert failed.failed_text is None
        assert box._session.queue == ("kept",)
        assert await _queue_texts(box) == ["kept"]


async def test_a_send_answered_queued_rides_behind_what_waited_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The session is idle with texts queued (its last start failed); a send answered
    # queued joins them and the queue drains in order, not the new text first.
    engine = ScriptedEngine(start_mode="fail")
    async with _box_reading_busy(tmp_path, engine, monkeypatch) as (box, portal):
        await _queued_and_its_start_failed(box, portal, "older")
        engine.start_mode = "accept"
        assert await _from_a_thread(box, portal, SendRequest("newer")) == Queued()
        await wait_until(lambda: bool(engine.runs) and bool(engine.runs[0].sent))
        assert engine.runs[0].sent == ["older\n\nnewer"]


async def test_a_send_to_an_idle_chat_with_texts_waiting_goes_behind_them(
    tmp_path: Path,
) -> None:
    # A drained start failed: the chat is idle, its texts queued. The next send from a
    # thread is queued behind them (the session's reading says so), and they drain
    # in order; taken as a turn, it would have started a run ahead of them.
    engine = ScriptedEngine(start_mode="accept")
    async with _box_with_portal(tmp_path, engine) as (box, portal):
        await _busy(box, engine)
        assert await _from_a_thread(box, portal, SendRequest("waiting")) == Queued()
        await wait_until(lambda: box._session.queue == ("waiting",))
        events = box._session.subscribe()
        engine.start_mode = "fail"
        await engine.last_run.end()
        assert isinstance(await events.receive(), Closed)
        assert isinstance(await events.receive(), StartFailed)
        assert box._session.queue == ("waiting",)
        engine.start_mode = "accept"
        assert await _from_a_thread(box, portal, SendRequest("newer")) == Queued()
        await wait_until(lambda: len(engine.runs) == 2 and bool(engine.runs[1].sent))
        assert engine.runs[1].sent == ["waiting\n\nnewer"]


class _CountedCrossings:
    """A ``run_on_loop`` (a portal's ``call``) that counts the thread's waits for the loop."""

    def __init__(self, portal: BlockingPortal) -> None:
        self.waits_for_the_loop = 0
        self._portal = portal

    def __call__(self, function: Callable[..., Coroutine[Any, Any, T]], /, *args: Any) -> T:
        self.waits_for_the_loop += 1
        result: T = self._portal.call(function, *args)
        return result


def _hold_the_loop(until: Callable[[], bool]) -> None:
    """Block the loop's own thread (a test's stand-in for a loop busy elsewhere) until
    ``until()``, which threads make true."""
    deadline = time.monotonic() + 10
    while not until():
        assert time.monotonic() < deadline, "the threads needed the loop"
        time.sleep(0.001)


def _send_in_a_thread(
    box: Box, text: str, run_on_loop: _CountedCrossings, answers: list[SendOutcome]
) -> threading.Thread:
    thread = threading.Thread(
        target=lambda: answers.append(box.send_from_thread(SendRequest(text), run_on_loop))
    )
    thread.start()
    return thread


async def _busy(box: Box, engine: ScriptedEngine) -> None:
    """A turn in flight that does not end: the session queues what comes next."""
    assert isinstance(await box.send(SendRequest("first")), TurnStarted)
    await wait_until(lambda: bool(engine.runs) and bool(engine.runs[0].sent))


@asynccontextmanager
async def _busy_box(tmp_path: Path) -> AsyncIterator[tuple[Box, _CountedCrossings]]:
    """A box with a turn in flight, and a counted way for threads to reach its loop."""
    engine = ScriptedEngine(start_mode="accept")
    async with _box_with_portal(tmp_path, engine) as (box, portal):
        await _busy(box, engine)
        yield box, _CountedCrossings(portal)


def _answered_while_the_loop_is_held(
    box: Box, text: str, crossings: _CountedCrossings, answers: list[SendOutcome]
) -> None:
    answered = len(answers) + 1
    thread = _send_in_a_thread(box, text, crossings, answers)
    _hold_the_loop(until=lambda: len(answers) == answered)
    thread.join()


async def test_a_queued_send_is_answered_without_waiting_for_the_loop(tmp_path: Path) -> None:
    async with _busy_box(tmp_path) as (box, crossings):
        answers: list[SendOutcome] = []
        _answered_while_the_loop_is_held(box, "second", crossings, answers)
        assert answers == [Queued()]
        assert crossings.waits_for_the_loop == 0
        # On disk before the answer; handed over once the loop is free again.
        assert await _queue_texts(box) == ["second"]
        await wait_until(lambda: box._session.queue == ("second",))


async def test_past_the_bound_a_queued_send_waits_for_its_hand_over_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(send_module, "MAX_UNAWAITED_HAND_OVERS", 1)
    async with _busy_box(tmp_path) as (box, crossings):
        answers: list[SendOutcome] = []
        _answered_while_the_loop_is_held(box, "second", crossings, answers)
        # The one unawaited hand-over is not run yet: the next send waits for its own.
        third = _send_in_a_thread(box, "third", crossings, answers)
        _hold_the_loop(until=lambda: crossings.waits_for_the_loop == 1)
        await anyio.to_thread.run_sync(third.join)
        assert answers == [Queued(), Queued()]
        # In the order they were answered.
        assert box._session.queue == ("second", "third")


class _LoopGone:
    """A `BoxLoop` whose loop never runs what it is given (the box went first), or,
    ``refusing``, says so."""

    def __init__(self, *, refusing: bool) -> None:
        self._refusing = refusing

    def call_soon(self, function: Callable[..., object], /, *args: Any) -> None:
        if self._refusing:
            raise RuntimeError("the loop is closed")


async def _sent_as_the_loop_goes(
    box: Box, monkeypatch: pytest.MonkeyPatch, *, refusing: bool
) -> SendOutcome:
    """A queued send from a thread, the box's loop gone (`_LoopGone`)."""
    monkeypatch.setattr(box._send_service, "_loop", _LoopGone(refusing=refusing))
    return await anyio.to_thread.run_sync(
        box.send_from_thread, SendRequest("second", "m-2"), loop_gone
    )


async def test_a_queued_send_whose_hand_over_never_came_is_sent_once_after_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its record and its queue row are one transaction: the next open drains the row,
    # and the redelivery rule knows the row carries the send (not sent twice).
    async with _busy_box(tmp_path) as (box, _crossings):
        # The box goes before the loop runs the hand-over its thread started.
        outcome = await _sent_as_the_loop_goes(box, monkeypatch, refusing=False)
        assert outcome == Queued()
        assert box._session.queue == ()
        assert await _queue_texts(box) == ["second"]
    again = ScriptedEngine(start_mode="accept")
    async with Box.open(tmp_path / "box", engine=again, projects_root=tmp_path):
        await wait_until(lambda: bool(again.runs) and bool(again.runs[0].sent))
        # The turn in flight is owed again, ahead of the queue; "second" once.
        assert again.runs[0].sent == ["first\n\nsecond"]


async def test_a_queued_send_the_loop_cannot_take_fails_and_stays_queued(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _busy_box(tmp_path) as (box, _crossings):
        outcome = await _sent_as_the_loop_goes(box, monkeypatch, refusing=True)
        assert outcome == SendFailed("the loop is closed")
        # Recorded and queued on disk: the retry is a duplicate, the next open sends it.
        assert await _queue_texts(box) == ["second"]
        assert await box.send(SendRequest("second", "m-2")) == Deduplicated()
