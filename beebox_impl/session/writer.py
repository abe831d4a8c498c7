"""`StoreWriter`: a session's store writes, performed one at a time in submission order.

Why: a session changes its state at once and persists it afterwards. If two
writes could overtake each other (two enqueues, each waiting on a worker thread),
the rows on disk could end up in another order than the queue in memory, or a
delete could run before the insert it deletes. One writer task per session
performs the writes in the order the state changed, so the store always follows
memory. A write can be waited on (`StoreOperation.wait`, which raises what the
write raised) or left to run; a failed write nobody waits on is logged.

Batching: a write submitted with `StoreWriter.submit_batch` names a batch
function and one item. Consecutive pending writes with the same batch function
are performed by one call of it with their items, in submission order (one store
round trip, one scheduler pass, for a burst of enqueues); each of them is done
when that call returns, and each raises what it raised. A write of another kind
ends a batch, so the order on disk is still the order of submission.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, TypeVar

import anyio

__all__ = ["StoreOperation", "StoreWriter"]

_log = logging.getLogger(__name__)

ItemT = TypeVar("ItemT")


@dataclass(eq=False)
class StoreOperation:
    """One submitted write: ``work``, or ``item`` for the batch function ``batch``."""

    work: Callable[[], Awaitable[object]] | None
    done: anyio.Event = field(default_factory=anyio.Event)
    error: Exception | None = None
    batch: Callable[[Sequence[Any]], Awaitable[object]] | None = None
    item: object = None

    async def wait(self) -> None:
        """Wait until performed; raise what it raised."""
        await self.done.wait()
        if self.error is not None:
            raise self.error


class StoreWriter:
    """Run `run` in a task; `submit` writes from anywhere on the loop."""

    def __init__(self, label: str) -> None:
        self._label = label
        self._pending: deque[StoreOperation] = deque()
        self._wake = anyio.Event()

    def submit(self, work: Callable[[], Awaitable[object]]) -> StoreOperation:
        """Queue ``work`` behind every write submitted before it."""
        return self._queue(StoreOperation(work))

    def submit_batch(
        self, batch: Callable[[Sequence[ItemT]], Awaitable[object]], item: ItemT
    ) -> StoreOperation:
        """Queue ``batch([..., item, ...])`` behind every write submitted before it.

        Consecutive writes with an equal ``batch`` share one call (see the module doc).
        """
        return self._queue(StoreOperation(None, batch=batch, item=item))

    def _queue(self, operation: StoreOperation) -> StoreOperation:
        self._pending.append(operation)
        self._wake.set()
        return operation

    @property
    def idle(self) -> bool:
        """Whether every submitted write is performed."""
        return not self._pending

    async def flush(self) -> None:
        """Wait until everything submitted so far is performed."""
        if self._pending:
            await self._pending[-1].done.wait()

    async def run(self) -> None:
        """Perform writes forever (until cancelled with the session)."""
        while True:
            if not self._pending:
                self._wake = anyio.Event()
                await self._wake.wait()
                continue
            operations = self._take()
            try:
                await self._perform(operations)
            except Exception as error:
                for operation in operations:
                    operation.error = error
                _log.error("%s: a store write failed: %r", self._label, error)
            finally:
                for operation in operations:
                    operation.done.set()

    def _take(self) -> list[StoreOperation]:
        """The next write, with the writes of its batch that follow it (left queued)."""
        first = self._pending[0]
        operations = [first]
        if first.batch is not None:
            for operation in islice(self._pending, 1, None):
                if operation.batch is None or operation.batch != first.batch:
                    break
                operations.append(operation)
        return operations

    async def _perform(self, operations: list[StoreOperation]) -> None:
        try:
            first = operations[0]
            if first.batch is not None:
                await first.batch([operation.item for operation in operations])
            else:
                assert first.work is not None
                await first.work()
        finally:
            # Performed (or failed) writes leave the queue before anyone hears of them.
            for _ in operations:
                self._pending.popleft()
