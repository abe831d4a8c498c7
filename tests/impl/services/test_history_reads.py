"""`ChatHistoryService` bounds how many transcript reads run at once."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

import beebox_impl.services.history as history_module
from beebox_impl.services.history import ChatHistoryService
from beebox_impl.transcript import TailSlice, TranscriptIndexCache
from beebox_spec.entries import SessionHistory


def test_reads_past_the_bound_wait_their_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inside = peak = 0
    counting = threading.Lock()
    release = threading.Event()

    def slow_read(
        path: Path, session_id: str, window: object, *, cache: TranscriptIndexCache
    ) -> SessionHistory:
        nonlocal inside, peak
        with counting:
            inside += 1
            peak = max(peak, inside)
        release.wait(10)
        with counting:
            inside -= 1
        return {"sessionId": session_id, "entries": [], "total": 0}

    monkeypatch.setattr(history_module, "read_history", slow_read)
    service = ChatHistoryService(tmp_path / "box", tmp_path / "projects", max_concurrent_reads=2)
    session_id = str(uuid.uuid4())
    readers = [
        threading.Thread(target=service.read_history, args=(session_id, TailSlice(1)))
        for _ in range(6)
    ]
    for reader in readers:
        reader.start()
    deadline = time.monotonic() + 10
    while inside < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # time for a third to get in, were it allowed to
    assert inside == 2
    release.set()
    for reader in readers:
        reader.join(10)
    assert peak == 2
    assert inside == 0


def test_the_bound_is_at_least_one(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ChatHistoryService(tmp_path / "box", tmp_path / "projects", max_concurrent_reads=0)


def test_async_reads_wait_on_the_loop_not_in_its_worker_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two handler threads hold both reading slots; 45 async reads (more than the
    # loop's 40 worker threads) wait. Other blocking work must still get a thread.
    release = threading.Event()
    started = threading.Semaphore(0)

    def slow_read(
        path: Path, session_id: str, window: object, *, cache: TranscriptIndexCache
    ) -> SessionHistory:
        started.release()
        release.wait(20)
        return {"sessionId": session_id, "entries": [], "total": 0}

    monkeypatch.setattr(history_module, "read_history", slow_read)
    service = ChatHistoryService(tmp_path / "box", tmp_path / "projects", max_concurrent_reads=2)
    session_id = str(uuid.uuid4())
    holders = [
        threading.Thread(target=service.read_history, args=(session_id, TailSlice(1)))
        for _ in range(2)
    ]
    for holder in holders:
        holder.start()
    for _ in holders:
        assert started.acquire(timeout=10)
    answers: list[SessionHistory] = []

    async def main() -> None:
        async def read() -> None:
            answers.append(await service.history(session_id, TailSlice(1)))

        async with anyio.create_task_group() as readers:
            for _ in range(45):
                readers.start_soon(read)
            await anyio.sleep(0.2)
            try:
                with anyio.fail_after(5):
                    assert await anyio.to_thread.run_sync(lambda: 42) == 42
            finally:
                # Waiting reads in threads cannot be cancelled: let them all finish.
                release.set()

    anyio.run(main)
    for holder in holders:
        holder.join(10)
    assert len(answers) == 45
