"""The box's SQLite database: ``<box>/.beebox/box.sqlite3``.

One file per box, opened with the standard library's `sqlite3` in WAL mode with
``synchronous=FULL``: a row is on disk when the call that wrote it returns, so a
message the box accepted survives a crash (`docs/design.md#design-5-sqlite-claims`).

Schema versions
---------------

The schema is versioned with ``PRAGMA user_version``. `MIGRATIONS` is the list of
steps; step *n* (counting from 1) takes the schema from version *n − 1* to *n*.
Opening a database applies, in one transaction, every step past its version, so
later parts of the box add tables by appending a step, never by editing one. A
database from a newer beebox (a version past the last step) is refused.

Version 1 holds what the chat sessions persist:

- ``chat_queue`` — the whole-box chat's queued messages, oldest first by ``id``
  (`SqliteQueueStore`);
- ``thread_sessions`` — the pool's per-thread records (`SqliteThreadRecordStore`).

Version 2 adds the acceptance record (`beebox_impl.store.acceptance`):

- ``bus_events`` — the box's event bus rows (``chat-user-message``, …);
- ``message_claims`` — durable message-id claims, one row per id;
- ``chat_attachments`` — the photos a send carried, until its turn takes them.

Version 3 adds ``chat_undelivered``: the sends recorded and not yet seen
delivered, one row per ``chat-user-message`` bus row (rule 5 of
`beebox_impl.store.acceptance`).

Version 4 adds ``permission_decisions``: how every permission request ended —
who answered, when, the tool and its input (`beebox_impl.store.permissions`).

Threads
-------

Every async call runs in a worker thread (`anyio.to_thread.run_sync`), so the
event loop never waits on the disk. `BoxDatabase.write_blocking` is the same
write for a thread of the host's own (an HTTP handler thread commits a send where
it already is, instead of hopping to the loop and on to a worker thread and back:
two thread switches, about half a millisecond of a send's answer). One connection
serves the box, shared by all those threads under a lock: SQLite serialises
writers anyway, and one connection keeps the pragmas in one place.

Writes are **group-committed**: the writes that arrive while one commits wait for
the lock, and the next thread to take it commits all of them in one transaction,
so sixteen concurrent sends cost a few fsyncs, not sixteen. Each write runs in a
savepoint: one that raises is undone alone and hears its own error. When the
transaction as a whole fails (the COMMIT, or a full disk, after which SQLite rolls
everything back), the group's writes run again one at a time, so each hears its
own outcome. Each write is still committed when its call returns.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Generic, TypeVar, cast

import anyio.to_thread

from beebox_impl.errors import BoxClosed, SchemaTooNew
from beebox_impl.layout import state_dir
from beebox_impl.store.protocols import QueuedRow
from beebox_spec.thread_pool import ThreadRecord

__all__ = [
    "DATABASE_NAME",
    "MIGRATIONS",
    "BoxDatabase",
    "SqliteQueueStore",
    "SqliteThreadRecordStore",
    "create_database",
    "database_path",
    "insert_queue_rows",
]

DATABASE_NAME: Final = "box.sqlite3"

# Step n (from 1) moves the schema from version n-1 to n. Append; never edit a step.
MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    (
        """CREATE TABLE chat_queue (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            text TEXT NOT NULL
        )""",
        """CREATE TABLE thread_sessions (
            thread_ref TEXT PRIMARY KEY,
            session_id TEXT NOT NULL,
            created_at TEXT NOT NULL,
            last_used_at TEXT NOT NULL,
            message_count INTEGER NOT NULL
        )""",
    ),
    # Version 2: the acceptance record (`beebox_impl.store.acceptance`).
    (
        """CREATE TABLE bus_events (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            event TEXT NOT NULL,
            payload TEXT NOT NULL,
            created_at_ms INTEGER NOT NULL
        )""",
        "CREATE INDEX bus_events_by_event ON bus_events (event, id)",
        """CREATE TABLE message_claims (
            message_id TEXT PRIMARY KEY,
            claimed_at_ms INTEGER NOT NULL,
            bus_row_id INTEGER NOT NULL
        )""",
        "CREATE INDEX message_claims_by_age ON message_claims (claimed_at_ms)",
        """CREATE TABLE chat_attachments (
            bus_row_id INTEGER NOT NULL,
            position INTEGER NOT NULL,
            media_type TEXT NOT NULL,
            data BLOB NOT NULL,
            created_at_ms INTEGER NOT NULL,
            PRIMARY KEY (bus_row_id, position)
        )""",
        "CREATE INDEX chat_attachments_by_age ON chat_attachments (created_at_ms)",
    ),
    # Version 3: the sends not yet seen delivered (`beebox_impl.store.acceptance`).
    (
        "CREATE TABLE chat_undelivered (bus_row_id INTEGER PRIMARY KEY)",
        # A box from before kept no such record. Its last fifty sends since its last
        # stop or reset are what it looked at before for sends it still owed.
        """INSERT INTO chat_undelivered (bus_row_id)
            SELECT id FROM bus_events
            WHERE event = 'chat-user-message' AND id > (
                SELECT coalesce(max(id), 0) FROM bus_events WHERE event = 'chat-settled'
            )
            ORDER BY id DESC LIMIT 50""",
    ),
    # Version 4: how permission requests ended (`beebox_impl.store.permissions`).
    (
        """CREATE TABLE permission_decisions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            request_id TEXT NOT NULL UNIQUE,
            tool_name TEXT NOT NULL,
            request TEXT NOT NULL,
            asked_at_ms INTEGER NOT NULL,
            ended_at_ms INTEGER NOT NULL,
            how TEXT NOT NULL,
            decision TEXT,
            always INTEGER NOT NULL,
            message TEXT NOT NULL,
            answered_by TEXT NOT NULL
        )""",
    ),
)

_log = logging.getLogger(__name__)

T = TypeVar("T")


def database_path(box_root: Path) -> Path:
    """Where a box keeps its database."""
    return state_dir(box_root) / DATABASE_NAME


def _schema_version(connection: sqlite3.Connection) -> int:
    (version,) = connection.execute("PRAGMA user_version").fetchone()
    if version > len(MIGRATIONS):
        raise SchemaTooNew(
            f"database schema version {version} is newer than this beebox ({len(MIGRATIONS)})"
        )
    return int(version)


def _migrate(connection: sqlite3.Connection) -> int:
    """Bring the schema up to the last step; return the version it is at."""
    if _schema_version(connection) == len(MIGRATIONS):
        return len(MIGRATIONS)
    connection.execute("BEGIN IMMEDIATE")
    try:
        # Read again under the write lock: another process opening the same new box
        # (`bbx init` beside `bbx serve`) may have migrated it since the read above.
        version = _schema_version(connection)
        for statements in MIGRATIONS[version:]:
            for statement in statements:
                connection.execute(statement)
        # PRAGMA takes no parameters; the value is our own integer.
        connection.execute(f"PRAGMA user_version = {len(MIGRATIONS)}")
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    return len(MIGRATIONS)


def _connect(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    # Autocommit mode: every write below opens its own transaction explicitly.
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        # First: the pragmas after it may wait on another process's lock too.
        connection.execute("PRAGMA busy_timeout=5000")
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        _migrate(connection)
    except sqlite3.DatabaseError as error:
        connection.close()
        # Said with its path: "file is not a database" alone names nothing.
        raise type(error)(f"{path}: {error}") from error
    except BaseException:
        connection.close()
        raise
    return connection


def create_database(box_root: Path) -> None:
    """Create the database of the box at ``box_root`` with its schema, blocking (for
    ``bbx init``, which makes a box's whole layout before anything opens it)."""
    _connect(database_path(box_root)).close()


class BoxDatabase:
    """The open database of one box. Use ``async with await BoxDatabase.open(root)``
    or call `aclose`."""

    def __init__(self, connection: sqlite3.Connection, path: Path) -> None:
        self._connection: sqlite3.Connection | None = connection
        # Held by whoever uses the connection; writes waiting for it are in `_waiting`.
        self._lock = threading.Lock()
        self._waiting_lock = threading.Lock()
        self._waiting: list[_PendingWrite[Any]] = []
        self.path = path
        self.chat_queue = SqliteQueueStore(self)
        self.thread_records = SqliteThreadRecordStore(self)

    @classmethod
    async def open(cls, box_root: Path) -> BoxDatabase:
        """Open (creating and migrating as needed) the database of the box at ``box_root``."""
        path = database_path(box_root)
        connection = await anyio.to_thread.run_sync(_connect, path)
        return cls(connection, path)

    async def __aenter__(self) -> BoxDatabase:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection; later calls raise."""
        connection, self._connection = self._connection, None
        if connection is not None:
            await anyio.to_thread.run_sync(self._close_locked, connection)

    def _close_locked(self, connection: sqlite3.Connection) -> None:
        with self._lock:
            connection.close()

    async def schema_version(self) -> int:
        """The schema version the database is at (``PRAGMA user_version``)."""
        row = await self.read(lambda c: c.execute("PRAGMA user_version").fetchone())
        return int(row[0])

    async def read(self, query: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``query`` on the connection in a worker thread."""
        return await anyio.to_thread.run_sync(self._read_locked, query)

    async def write(self, change: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``change`` in a write transaction in a worker thread; committed on return."""
        return await anyio.to_thread.run_sync(self._write_grouped, change)

    def write_blocking(self, change: Callable[[sqlite3.Connection], T]) -> T:
        """`write`, in the calling thread: for threads of the host's own, never the
        event loop's (it blocks on the lock and the disk)."""
        return self._write_grouped(change)

    def _read_locked(self, query: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            return query(self._open_connection())

    def _open_connection(self) -> sqlite3.Connection:
        if self._connection is None:
            raise BoxClosed("the box is closed: its database is closed")
        return self._connection

    def _write_grouped(self, change: Callable[[sqlite3.Connection], T]) -> T:
        # Group commit: writes that arrive while another thread commits wait for the
        # lock, and whoever takes it next commits every write waiting by then in one
        # transaction, one fsync. A write the previous holder committed finds itself
        # done. Alone, a write is its own transaction, as it always was.
        mine = _PendingWrite(change)
        with self._waiting_lock:
            self._waiting.append(mine)
        with self._lock:
            if not mine.done:
                with self._waiting_lock:
                    group, self._waiting = self._waiting, []
                _commit_group(self._connection, group)
        return mine.outcome()


@dataclass(eq=False)
class _PendingWrite(Generic[T]):
    """One write waiting to be committed, and then how it went."""

    change: Callable[[sqlite3.Connection], T]
    done: bool = False
    value: T | None = None
    error: BaseException | None = None

    def outcome(self) -> T:
        if self.error is not None:
            raise self.error
        return cast(T, self.value)


def _commit_group(
    connection: sqlite3.Connection | None, group: Sequence[_PendingWrite[Any]]
) -> None:
    """Commit the writes of ``group`` in one transaction, each in a savepoint, so a
    write that raises is undone alone and gets its own error. When the transaction
    itself fails (the COMMIT, or an error such as a full disk that makes SQLite
    roll back the whole transaction), each write is run again alone, so each gets
    its own outcome. Marks every write done."""
    try:
        if connection is None:
            # An error of its own for each: one raised in several threads at once
            # would gather all their tracebacks.
            for write in group:
                write.error = BoxClosed("the box is closed: its database is closed")
            return
        if len(group) == 1:
            _commit_alone(connection, group[0])
            return
        try:
            _begin(connection)
            for write in group:
                _run_in_savepoint(connection, write)
            connection.execute("COMMIT")
        except Exception:
            _roll_back(connection)
            for write in group:
                write.value, write.error = None, None
                _commit_alone(connection, write)
    except BaseException as error:
        for write in group:
            write.value = None
            if write.error is None:
                write.error = error
    finally:
        for write in group:
            write.done = True


def _begin(connection: sqlite3.Connection) -> None:
    connection.execute("BEGIN IMMEDIATE")


def _roll_back(connection: sqlite3.Connection) -> None:
    # An I/O error or a full disk may already have ended the transaction.
    if connection.in_transaction:
        connection.execute("ROLLBACK")


def _commit_alone(connection: sqlite3.Connection, write: _PendingWrite[Any]) -> None:
    """Run ``write`` in a transaction of its own; its error is its own."""
    try:
        _begin(connection)
        try:
            write.value = write.change(connection)
            connection.execute("COMMIT")
        except BaseException:
            _roll_back(connection)
            raise
    except Exception as error:
        write.value, write.error = None, error


def _run_in_savepoint(connection: sqlite3.Connection, write: _PendingWrite[Any]) -> None:
    connection.execute("SAVEPOINT grouped_write")
    try:
        write.value = write.change(connection)
    except Exception as error:
        if not connection.in_transaction:
            # SQLite rolled the whole transaction back: the group's earlier writes
            # are gone too, so the group is run again, one write at a time.
            raise
        # This write's own failure: undone, reported to it, the others go on.
        connection.execute("ROLLBACK TO grouped_write")
        write.error = error
    connection.execute("RELEASE grouped_write")


class SqliteQueueStore:
    """The chat's persisted queue, in the ``chat_queue`` table (a `QueueStore`)."""

    def __init__(self, database: BoxDatabase) -> None:
        self._database = database

    async def load(self) -> list[QueuedRow]:
        rows = await self._database.read(
            lambda c: c.execute("SELECT id, text FROM chat_queue ORDER BY id").fetchall()
        )
        return [QueuedRow(int(row_id), str(text)) for row_id, text in rows]

    async def append(self, text: str) -> int:
        (row_id,) = await self.update((), [text])
        return row_id

    async def append_many(self, texts: Sequence[str]) -> list[int]:
        return await self.update((), texts)

    async def put_first(self, texts: Sequence[str]) -> list[int]:
        def insert(connection: sqlite3.Connection) -> list[int]:
            (lowest,) = connection.execute("SELECT MIN(id) FROM chat_queue").fetchone()
            # Ids below every row's (zero and negative ones too: any integer is a rowid).
            first = (1 if lowest is None else int(lowest)) - len(texts)
            row_ids = [first + offset for offset in range(len(texts))]
            connection.executemany(
                "INSERT INTO chat_queue (id, text) VALUES (?, ?)", zip(row_ids, texts, strict=True)
            )
            return row_ids

        texts = list(texts)
        if not texts:
            return []
        return await self._database.write(insert)

    async def delete(self, row_ids: Sequence[int]) -> None:
        await self.update(row_ids, ())

    async def update(self, deleted: Sequence[int], appended: Sequence[str]) -> list[int]:
        def change(connection: sqlite3.Connection) -> list[int]:
            connection.executemany("DELETE FROM chat_queue WHERE id = ?", gone)
            return insert_queue_rows(connection, texts)

        gone = [(row_id,) for row_id in deleted]
        texts = list(appended)
        if not gone and not texts:
            return []
        return await self._database.write(change)

    async def clear(self) -> None:
        await self._database.write(lambda c: c.execute("DELETE FROM chat_queue"))


def insert_queue_rows(connection: sqlite3.Connection, texts: Sequence[str]) -> list[int]:
    """Append ``texts`` to ``chat_queue`` in the caller's transaction; their row ids.

    `SqliteQueueStore`'s appends, and a send's acceptance record when it queues the
    send in its own transaction (`beebox_impl.store.acceptance`, rule 6).
    """
    row_ids: list[int] = []
    for text in texts:
        cursor = connection.execute("INSERT INTO chat_queue (text) VALUES (?)", (text,))
        assert cursor.lastrowid is not None
        row_ids.append(cursor.lastrowid)
    return row_ids


def _record_from_row(row: Sequence[object]) -> tuple[str, ThreadRecord] | None:
    """A row as (thread ref, record), or None when a value has the wrong shape."""
    thread_ref, session_id, created_at, last_used_at, message_count = row
    # Columns are typed, but SQLite stores what it is given: check every value.
    if not (
        isinstance(thread_ref, str)
        and isinstance(session_id, str)
        and session_id
        and isinstance(created_at, str)
        and isinstance(last_used_at, str)
        and isinstance(message_count, int)
        and message_count >= 0
    ):
        return None
    return thread_ref, ThreadRecord(
        sessionId=session_id,
        createdAt=created_at,
        lastUsedAt=last_used_at,
        messageCount=message_count,
    )


class SqliteThreadRecordStore:
    """The pool's thread records, in the ``thread_sessions`` table (a `ThreadRecordStore`)."""

    def __init__(self, database: BoxDatabase) -> None:
        self._database = database

    async def load_all(self) -> dict[str, ThreadRecord]:
        rows = await self._database.read(
            lambda c: c.execute(
                "SELECT thread_ref, session_id, created_at, last_used_at, message_count"
                " FROM thread_sessions ORDER BY thread_ref"
            ).fetchall()
        )
        records: dict[str, ThreadRecord] = {}
        for row in rows:
            parsed = _record_from_row(row)
            # §3.4: a malformed record is dropped, not an error.
            if parsed is None:
                _log.warning("dropping a malformed thread-session record: %r", row[0])
                continue
            records[parsed[0]] = parsed[1]
        return records

    async def save(self, thread_ref: str, record: ThreadRecord) -> None:
        values = (
            thread_ref,
            record["sessionId"],
            record["createdAt"],
            record["lastUsedAt"],
            record["messageCount"],
        )
        await self._database.write(
            lambda c: c.execute(
                "INSERT OR REPLACE INTO thread_sessions"
                " (thread_ref, session_id, created_at, last_used_at, message_count)"
                " VALUES (?, ?, ?, ?, ?)",
                values,
            )
        )

    async def delete(self, thread_ref: str) -> None:
        await self._database.write(
            lambda c: c.execute("DELETE FROM thread_sessions WHERE thread_ref = ?", (thread_ref,))
        )
