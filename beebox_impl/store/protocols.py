"""What the sessions need of storage, as three small protocols.

The sessions never touch SQLite or a file themselves: they go through these
protocols, so the same session runs on the box's database in production
(`beebox_impl.store.database`, `beebox_impl.store.session_id`) and on stores that
stay on the event loop in the stateful tests (`beebox_impl.store.memory`). A store
that runs its blocking work in a worker thread makes a waiting task look blocked
while the thread still works, which would let a test settle too early; the
in-memory stores never leave the loop.

- `QueueStore` — the whole-box chat's persisted queue, kept on disk
  (`docs/design.md#design-5-persisted-queue`). Rows come back in the order they were
  appended; a row's id is assigned by the store and only grows.
- `SessionIdStore` — the whole-box chat's saved SDK session id
  (``.beebox/chat-session-id.json``).
- `ThreadRecordStore` — one `ThreadRecord` per chat thread (`beebox_spec.thread_pool`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

from beebox_spec.thread_pool import ThreadRecord

__all__ = ["QueueStore", "QueuedRow", "SessionIdStore", "ThreadRecordStore"]


class QueuedRow(NamedTuple):
    """One persisted queued message: its row id and its text."""

    row_id: int
    text: str


class QueueStore(Protocol):
    """The chat's persisted queue."""

    async def load(self) -> list[QueuedRow]:
        """Every queued row, oldest first."""
        ...

    async def append(self, text: str) -> int:
        """Persist ``text`` at the tail of the queue; return its row id once it is durable."""
        ...

    async def append_many(self, texts: Sequence[str]) -> list[int]:
        """`append` each of ``texts`` in order, in one write (all or none); their row ids."""
        ...

    async def put_first(self, texts: Sequence[str]) -> list[int]:
        """Persist ``texts`` at the head of the queue, in order, in one write (all or
        none), ahead of every row there now; their row ids."""
        ...

    async def delete(self, row_ids: Sequence[int]) -> None:
        """Remove these rows (ids already gone are ignored)."""
        ...

    async def update(self, deleted: Sequence[int], appended: Sequence[str]) -> list[int]:
        """`delete` the rows ``deleted`` and `append` ``appended`` in order, in one write
        (all or none); the appended rows' ids."""
        ...

    async def clear(self) -> None:
        """Remove every row."""
        ...


class SessionIdStore(Protocol):
    """The chat's saved SDK session id."""

    async def load(self) -> str | None:
        """The saved id, or None when there is none (or it cannot be read)."""
        ...

    async def save(self, session_id: str) -> None:
        """Replace the saved id, durably."""
        ...

    async def forget(self) -> None:
        """Delete the saved id (no error when there is none)."""
        ...


class ThreadRecordStore(Protocol):
    """The pool's per-thread session records."""

    async def load_all(self) -> dict[str, ThreadRecord]:
        """Every well-formed record by thread ref (malformed ones are dropped)."""
        ...

    async def save(self, thread_ref: str, record: ThreadRecord) -> None:
        """Insert or replace the record of ``thread_ref``."""
        ...

    async def delete(self, thread_ref: str) -> None:
        """Remove the record of ``thread_ref`` (no error when there is none)."""
        ...
