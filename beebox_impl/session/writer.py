"""`StoreWriter`: a session's store writes, performed one at a time in submission order.

Why: a session changes its state at once and persists it afterwards. If two
writes could overtake each other (two enqueues, each waiting on a worker thread),
the rows on disk could end up in another order than the queue in memory, or a
delete could run before the insert it deletes. One writer task per session
performs the writes in the order the state changed, so the store always follows
memory. A write can be waited on (`StoreOperation.wait`, which raises what the
write raised) or left to run; a failed write nobody waits on is logged.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio

__all__ = ["StoreOperation", "StoreWriter"]

_log = logging.getLogger(__name__)


@dataclass(eq=False)
class StoreOperation:
    """One submitted write."""

    work: Callable[[], Awaitable[object]]
    done: anyio.Event = field(default_factory=anyio.Event)
    error: Exception | None = None

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
        operation = StoreOperation(work)
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
            operation = self._pending[0]
            try:
                await operation.work()
            except Exception as error:
                operation.error = error
                _log.error("%s: a store write failed: %r", self._label, error)
            finally:
                self._pending.popleft()
                operation.done.set()
