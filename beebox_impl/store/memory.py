"""Stores that keep everything in memory and stay on the event loop.

They satisfy the same protocols as the box's database and session-id file
(`beebox_impl.store.protocols`) and checkpoint like any async call, but never
hand work to a worker thread: a test that settles by waiting until every task is
blocked can trust that a task waiting on one of these is really waiting on the
session, not on a thread (`docs/design.md#design-2-stateful-tests`, "The stateful
tests"). A test can share one instance between two sessions to play a box that
restarts.
"""

from __future__ import annotations

from collections.abc import Sequence

from anyio.lowlevel import checkpoint

from beebox_impl.store.protocols import QueuedRow
from beebox_spec.thread_pool import ThreadRecord

__all__ = ["InMemoryQueueStore", "InMemorySessionIdStore", "InMemoryThreadRecordStore"]


class InMemoryQueueStore:
    """A `QueueStore` in a list."""

    def __init__(self, texts: Sequence[str] = ()) -> None:
        self.rows: list[QueuedRow] = []
        self._last_id = 0
        for text in texts:
            self._add(text)

    def _add(self, text: str) -> int:
        self._last_id += 1
        self.rows.append(QueuedRow(self._last_id, text))
        return self._last_id

    @property
    def texts(self) -> tuple[str, ...]:
        """The queued texts, oldest first."""
        return tuple(row.text for row in self.rows)

    async def load(self) -> list[QueuedRow]:
        await checkpoint()
        return list(self.rows)

    async def append(self, text: str) -> int:
        await checkpoint()
        return self._add(text)

    async def append_many(self, texts: Sequence[str]) -> list[int]:
        return await self.update((), texts)

    async def put_first(self, texts: Sequence[str]) -> list[int]:
        await checkpoint()
        first = min((row.row_id for row in self.rows), default=self._last_id + 1)
        head = [QueuedRow(first - len(texts) + offset, text) for offset, text in enumerate(texts)]
        self.rows[:0] = head
        return [row.row_id for row in head]

    async def delete(self, row_ids: Sequence[int]) -> None:
        await self.update(row_ids, ())

    async def update(self, deleted: Sequence[int], appended: Sequence[str]) -> list[int]:
        await checkpoint()
        doomed = set(deleted)
        self.rows = [row for row in self.rows if row.row_id not in doomed]
        return [self._add(text) for text in appended]

    async def clear(self) -> None:
        await checkpoint()
        self.rows = []


class InMemorySessionIdStore:
    """A `SessionIdStore` in an attribute."""

    def __init__(self, session_id: str | None = None) -> None:
        self.session_id = session_id

    async def load(self) -> str | None:
        await checkpoint()
        return self.session_id

    async def save(self, session_id: str) -> None:
        await checkpoint()
        self.session_id = session_id

    async def forget(self) -> None:
        await checkpoint()
        self.session_id = None


class InMemoryThreadRecordStore:
    """A `ThreadRecordStore` in a dict."""

    def __init__(self, records: dict[str, ThreadRecord] | None = None) -> None:
        self.records: dict[str, ThreadRecord] = dict(records or {})

    async def load_all(self) -> dict[str, ThreadRecord]:
        await checkpoint()
        return dict(self.records)

    async def save(self, thread_ref: str, record: ThreadRecord) -> None:
        await checkpoint()
        self.records[thread_ref] = record

    async def delete(self, thread_ref: str) -> None:
        await checkpoint()
        self.records.pop(thread_ref, None)
