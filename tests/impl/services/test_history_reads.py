"""`ChatHistoryService` bounds how many transcript reads run at once."""

from __future__ import annotations

import threading
import time
import uuid
from functools import partial
from pathlib import Path

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread
import pytest

import beebox_impl.services.history as history_module
from beebox_impl.services.history import ChatHistoryService, keep_indexes_current
from beebox_impl.session.chat_events import ChatEvent, Done, EventFanout, EventSubscription
from beebox_impl.transcript import TailSlice, TranscriptIndexCache
from beebox_spec.entries import SessionHistory
from tests.impl.http.support import wait_until

SESSION_ID = str(uuid.uuid4())


class SlowReads:
    """Stands in for the transcript read: each read waits for `release`, counted."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.inside = self.peak = 0
        self.release = threading.Event()
        self._counting = threading.Lock()
        monkeypatch.setattr(history_module, "read_history", self.read)

    def read(
        self, path: Path, session_id: str, window: object, *, cache: TranscriptIndexCache
    ) -> SessionHistory:
        with self._counting:
            self.inside += 1
            self.peak = max(self.peak, self.inside)
        self.release.wait(20)
        with self._counting:
            self.inside -= 1
        return {"sessionId": session_id, "entries": [], "total": 0}

    def wait_until_inside(self, count: int) -> None:
        deadline = time.monotonic() + 10
        while self.inside < count and time.monotonic() < deadline:
            time.sleep(0.01)
        assert self.inside == count


def service_of_two_slots(tmp_path: Path) -> ChatHistoryService:
    return ChatHistoryService(tmp_path / "box", (tmp_path / "projects",), max_concurrent_reads=2)


def start_readers(service: ChatHistoryService, count: int) -> list[threading.Thread]:
    # Threads of their own, as the HTTP adapter's handlers are.
    readers = [
        threading.Thread(target=service.read_history, args=(SESSION_ID, TailSlice(1)))
        for _ in range(count)
    ]
    for reader in readers:
        reader.start()
    return readers


def test_reads_past_the_bound_wait_their_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = SlowReads(monkeypatch)
    readers = start_readers(service_of_two_slots(tmp_path), 6)
    reads.wait_until_inside(2)
    time.sleep(0.2)  # time for a third to get in, were it allowed to
    assert reads.inside == 2
    reads.release.set()
    for reader in readers:
        reader.join(10)
    assert reads.peak == 2
    assert reads.inside == 0


def test_the_bound_is_at_least_one(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ChatHistoryService(tmp_path / "box", (tmp_path / "projects",), max_concurrent_reads=0)


def test_async_reads_wait_on_the_loop_not_in_its_worker_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two handler threads hold both reading slots; 45 async reads (more than the
    # loop's 40 worker threads) wait. Other blocking work must still get a thread.
    reads, service = SlowReads(monkeypatch), service_of_two_slots(tmp_path)
    holders = start_readers(service, 2)
    reads.wait_until_inside(2)
    answers: list[SessionHistory] = []

    async def main() -> None:
        async def read() -> None:
            answers.append(await service.history(SESSION_ID, TailSlice(1)))

        async with anyio.create_task_group() as readers:
            for _ in range(45):
                readers.start_soon(read)
            await anyio.sleep(0.2)
            try:
                with anyio.fail_after(5):
                    assert await anyio.to_thread.run_sync(lambda: 42) == 42
            finally:
                # Waiting reads in threads cannot be cancelled: let them all finish.
                reads.release.set()

    anyio.run(main)
    for holder in holders:
        holder.join(10)
    assert len(answers) == 45


class CountingIndexer:
    """Stands in for the session and the history service of `keep_indexes_current`."""

    def __init__(self) -> None:
        self.session_id: str | None = SESSION_ID
        self.events = EventFanout[ChatEvent]()
        self.passes = 0

    def subscribe(self) -> EventSubscription[ChatEvent]:
        return self.events.subscribe()

    async def index_transcript(self, session_id: str) -> None:
        assert session_id == SESSION_ID
        self.passes += 1

    def start(self, group: anyio.abc.TaskGroup, *, pass_interval: float) -> None:
        """Run `keep_indexes_current` on this fake in ``group``."""
        group.start_soon(
            partial(
                keep_indexes_current,
                self,  # type: ignore[arg-type]
                self,  # type: ignore[arg-type]
                self.subscribe(),
                pass_interval=pass_interval,
            )
        )


@pytest.mark.anyio
async def test_turns_ending_within_a_pass_interval_share_the_next_pass() -> None:
    fake = CountingIndexer()
    async with anyio.create_task_group() as group:
        fake.start(group, pass_interval=0.3)
        # The pass at start.
        await wait_until(lambda: fake.passes == 1)
        # A turn's end is indexed at once.
        fake.events.publish(Done())
        await wait_until(lambda: fake.passes == 2)
        # A burst within the interval: one more pass for all of them, once it is over.
        for _ in range(20):
            fake.events.publish(Done())
            await anyio.lowlevel.checkpoint()
        assert fake.passes == 2
        await wait_until(lambda: fake.passes == 3)
        await anyio.sleep(0.4)
        assert fake.passes == 3
        group.cancel_scope.cancel()


@pytest.mark.anyio
async def test_a_chat_slower_than_the_interval_is_indexed_after_every_turn() -> None:
    fake = CountingIndexer()
    async with anyio.create_task_group() as group:
        fake.start(group, pass_interval=0.001)
        for turn in range(1, 6):
            await wait_until(lambda turn=turn: fake.passes == turn)  # type: ignore[misc]
            await anyio.sleep(0.01)
            fake.events.publish(Done())
        await wait_until(lambda: fake.passes == 6)
        group.cancel_scope.cancel()
