"""The box's storage: its SQLite database and its session-id file.

- `BoxDatabase` — ``<box>/.beebox/box.sqlite3`` (WAL, ``synchronous=FULL``, schema
  versioned with ``PRAGMA user_version``), with the chat's persisted queue
  (`SqliteQueueStore`) and the pool's thread records (`SqliteThreadRecordStore`);
- `SessionIdFile` — ``<box>/.beebox/chat-session-id.json``, written atomically;
- the protocols the sessions use (`QueueStore`, `SessionIdStore`,
  `ThreadRecordStore`) and in-memory stores that stay on the event loop, for tests.
"""

from __future__ import annotations

from beebox_impl.store.database import (
    DATABASE_NAME,
    MIGRATIONS,
    BoxDatabase,
    SqliteQueueStore,
    SqliteThreadRecordStore,
    database_path,
)
from beebox_impl.store.memory import (
    InMemoryQueueStore,
    InMemorySessionIdStore,
    InMemoryThreadRecordStore,
)
from beebox_impl.store.protocols import QueuedRow, QueueStore, SessionIdStore, ThreadRecordStore
from beebox_impl.store.session_id import SESSION_ID_FILE_NAME, SessionIdFile, session_id_path

__all__ = [
    "DATABASE_NAME",
    "MIGRATIONS",
    "SESSION_ID_FILE_NAME",
    "BoxDatabase",
    "InMemoryQueueStore",
    "InMemorySessionIdStore",
    "InMemoryThreadRecordStore",
    "QueueStore",
    "QueuedRow",
    "SessionIdFile",
    "SessionIdStore",
    "SqliteQueueStore",
    "SqliteThreadRecordStore",
    "ThreadRecordStore",
    "database_path",
    "session_id_path",
]
