"""The box's SQLite database: pragmas, schema versions, the queue and thread-record tables."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, closing
from pathlib import Path
from typing import cast

import anyio
import anyio.to_thread
import pytest

from beebox_impl.errors import BoxClosed, SchemaTooNew
from beebox_impl.store import (
    MIGRATIONS,
    BoxDatabase,
    InMemoryQueueStore,
    InMemoryThreadRecordStore,
    QueueStore,
    ThreadRecordStore,
    database_path,
)
from beebox_impl.store.database import _migrate, create_database
from beebox_spec.thread_pool import ThreadRecord

pytestmark = pytest.mark.anyio

RECORD = ThreadRecord(
    sessionId="s-1",
    createdAt="2026-12-02T12:00:00.000Z",
    lastUsedAt="2026-12-02T12:30:00.000Z",
    messageCount=3,
)


async def test_opening_creates_the_file_in_wal_mode_with_full_sync(tmp_path: Path) -> None:
    async with await BoxDatabase.open(tmp_path) as database:
        assert database.path == tmp_path / ".beebox" / "box.sqlite3"
        assert await database.schema_version() == len(MIGRATIONS)
        mode = await database.read(lambda c: c.execute("PRAGMA journal_mode").fetchone()[0])
        sync = await database.read(lambda c: c.execute("PRAGMA synchronous").fetchone()[0])
    assert mode == "wal"
    assert sync == 2, "synchronous=FULL"


async def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = database_path(tmp_path)
    path.parent.mkdir(parents=True)
    # `closing`: a connection's own `with` commits but leaves it open (3.13 warns).
    with closing(sqlite3.connect(path)) as connection:
        connection.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    with pytest.raises(SchemaTooNew):
        await BoxDatabase.open(tmp_path)


def test_a_new_database_migrated_by_another_opener_meanwhile_is_not_migrated_twice(
    tmp_path: Path,
) -> None:
    # Two first opens of one new box (`bbx init` beside `bbx serve`): the other one
    # migrates between this one's first look at the version and its write lock.
    path = database_path(tmp_path)
    path.parent.mkdir(parents=True)
    mine = sqlite3.connect(path, isolation_level=None)

    class AnotherOpenerFirst:
        def execute(self, statement: str) -> sqlite3.Cursor:
            if statement == "BEGIN IMMEDIATE":
                create_database(tmp_path)
            return mine.execute(statement)

    try:
        assert _migrate(cast(sqlite3.Connection, AnotherOpenerFirst())) == len(MIGRATIONS)
        assert mine.execute("PRAGMA user_version").fetchone() == (len(MIGRATIONS),)
    finally:
        mine.close()


async def test_a_later_migration_step_is_applied_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with await BoxDatabase.open(tmp_path) as database:
        await database.chat_queue.append("kept")
    extra = (*MIGRATIONS, ("CREATE TABLE later (id INTEGER PRIMARY KEY)",))
    monkeypatch.setattr("beebox_impl.store.database.MIGRATIONS", extra)
    async with await BoxDatabase.open(tmp_path) as database:
        assert await database.schema_version() == len(extra)
        tables = await database.read(
            lambda c: {row[0] for row in c.execute("SELECT name FROM sqlite_master")}
        )
        assert "later" in tables
        assert [row.text for row in await database.chat_queue.load()] == ["kept"]
    # Opening again finds nothing to do.
    async with await BoxDatabase.open(tmp_path) as database:
        assert await database.schema_version() == len(extra)


async def test_a_closed_database_refuses_work(tmp_path: Path) -> None:
    database = await BoxDatabase.open(tmp_path)
    await database.aclose()
    await database.aclose()
    with pytest.raises(BoxClosed):
        await database.chat_queue.load()


async def test_a_malformed_thread_record_is_dropped(tmp_path: Path) -> None:
    async with await BoxDatabase.open(tmp_path) as database:
        await database.thread_records.save("good", RECORD)
        await database.write(
            lambda c: c.execute(
                "INSERT INTO thread_sessions VALUES ('bad', 's-2', 'x', 'y', 'many')"
            )
        )
        assert await database.thread_records.load_all() == {"good": RECORD}


# --- The store contracts, for the SQLite stores and the in-memory ones alike --------

StoreFactory = Callable[[Path], AbstractAsyncContextManager[tuple[QueueStore, ThreadRecordStore]]]


@asynccontextmanager
async def sqlite_stores(root: Path) -> AsyncIterator[tuple[QueueStore, ThreadRecordStore]]:
    async with await BoxDatabase.open(root) as database:
        yield database.chat_queue, database.thread_records


@asynccontextmanager
async def memory_stores(root: Path) -> AsyncIterator[tuple[QueueStore, ThreadRecordStore]]:
    yield InMemoryQueueStore(), InMemoryThreadRecordStore()


@pytest.fixture(params=[sqlite_stores, memory_stores], ids=["sqlite", "memory"])
def stores(request: pytest.FixtureRequest) -> StoreFactory:
    factory: StoreFactory = request.param
    return factory


async def test_the_queue_keeps_order_and_deletes_by_row(
    tmp_path: Path, stores: StoreFactory
) -> None:
    async with stores(tmp_path) as (queue, _records):
        first = await queue.append("a")
        second = await queue.append("b\n\nc")
        third = await queue.append("a")
        assert first < second < third
        assert [(row.row_id, row.text) for row in await queue.load()] == [
            (first, "a"),
            (second, "b\n\nc"),
            (third, "a"),
        ]
        await queue.delete([first, 999])
        assert [row.text for row in await queue.load()] == ["b\n\nc", "a"]
        await queue.delete([])
        await queue.clear()
        assert await queue.load() == []


async def test_append_many_appends_in_order_in_one_write(
    tmp_path: Path, stores: StoreFactory
) -> None:
    async with stores(tmp_path) as (queue, _records):
        first = await queue.append("a")
        assert await queue.append_many([]) == []
        row_ids = await queue.append_many(["b", "c"])
        assert [first, *row_ids] == sorted({first, *row_ids})
        assert [(row.row_id, row.text) for row in await queue.load()] == [
            (first, "a"),
            (row_ids[0], "b"),
            (row_ids[1], "c"),
        ]


async def test_update_deletes_and_appends_in_one_write(
    tmp_path: Path, stores: StoreFactory
) -> None:
    async with stores(tmp_path) as (queue, _records):
        assert await queue.update([], []) == []
        first, second = await queue.append_many(["a", "b"])
        appended = await queue.update([first, 999], ["c", "d"])
        # New rows go after every row there has been, the deleted one's too.
        assert second < appended[0] < appended[1]
        assert [(row.row_id, row.text) for row in await queue.load()] == [
            (second, "b"),
            (appended[0], "c"),
            (appended[1], "d"),
        ]
        assert await queue.update([second], []) == []
        assert [row.text for row in await queue.load()] == ["c", "d"]


async def test_put_first_goes_ahead_of_every_row_and_later_appends_go_last(
    tmp_path: Path, stores: StoreFactory
) -> None:
    async with stores(tmp_path) as (queue, _records):
        assert await queue.put_first([]) == []
        # Into an empty queue, then ahead of what is there (ids below every row's).
        owed = await queue.put_first(["x", "y"])
        later = await queue.append("z")
        ahead = await queue.put_first(["v", "w"])
        assert [row.text for row in await queue.load()] == ["v", "w", "x", "y", "z"]
        assert [row.row_id for row in await queue.load()] == [*ahead, *owed, later]
        await queue.delete([ahead[0], owed[1]])
        assert [row.text for row in await queue.load()] == ["w", "x", "z"]
        assert await queue.append("last") > later


async def test_thread_records_are_saved_replaced_and_deleted(
    tmp_path: Path, stores: StoreFactory
) -> None:
    async with stores(tmp_path) as (_queue, records):
        await records.save("t1", RECORD)
        await records.save("t1", {**RECORD, "messageCount": 4})
        await records.save("t2", RECORD)
        assert await records.load_all() == {"t1": {**RECORD, "messageCount": 4}, "t2": RECORD}
        await records.delete("t1")
        await records.delete("missing")
        assert await records.load_all() == {"t2": RECORD}


async def test_sqlite_rows_survive_a_reopen(tmp_path: Path) -> None:
    async with await BoxDatabase.open(tmp_path) as database:
        await database.chat_queue.append("survives")
        await database.thread_records.save("t1", RECORD)
    async with await BoxDatabase.open(tmp_path) as database:
        assert [row.text for row in await database.chat_queue.load()] == ["survives"]
        assert await database.thread_records.load_all() == {"t1": RECORD}


def _insert(text: str) -> Callable[[sqlite3.Connection], int]:
    def change(connection: sqlite3.Connection) -> int:
        cursor = connection.execute("INSERT INTO chat_queue (text) VALUES (?)", (text,))
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    return change


def _insert_then_fail(connection: sqlite3.Connection) -> int:
    connection.execute("INSERT INTO chat_queue (text) VALUES ('undone')")
    raise ValueError("this write fails")


def _texts(connection: sqlite3.Connection) -> list[str]:
    return [str(text) for (text,) in connection.execute("SELECT text FROM chat_queue ORDER BY id")]


async def _group_after_first(
    database: BoxDatabase, later: list[tuple[str, Callable[[sqlite3.Connection], int]]]
) -> dict[str, object]:
    """Write "first" from a thread, holding the connection until every write of
    ``later`` (each from a thread of its own) waits behind it; each one's answer."""
    holding, release = threading.Event(), threading.Event()

    def slow(connection: sqlite3.Connection) -> int:
        holding.set()
        release.wait(10)
        return _insert("first")(connection)

    results: dict[str, object] = {}

    def write(name: str, change: Callable[[sqlite3.Connection], int]) -> None:
        try:
            results[name] = database.write_blocking(change)
        except Exception as error:
            results[name] = error

    threads = [threading.Thread(target=write, args=("first", slow))]
    threads[0].start()
    assert holding.wait(10)
    for name, change in later:
        thread = threading.Thread(target=write, args=(name, change))
        thread.start()
        threads.append(thread)
        while len(database._waiting) < len(threads) - 1:
            await anyio.sleep(0.001)
    release.set()
    for thread in threads:
        await anyio.to_thread.run_sync(thread.join)
    return results


async def test_writes_waiting_while_one_commits_share_the_next_commit(tmp_path: Path) -> None:
    async with await BoxDatabase.open(tmp_path) as database:
        statements: list[str] = []
        database._connection.set_trace_callback(statements.append)  # type: ignore[union-attr]
        # These arrive while "first" holds the connection: one group after it.
        results = await _group_after_first(
            database, [("a", _insert("a")), ("fails", _insert_then_fail), ("b", _insert("b"))]
        )
        assert isinstance(results["fails"], ValueError)
        assert {name: results[name] for name in ("first", "a", "b")} == {
            "first": 1,
            "a": 2,
            "b": 3,
        }
        assert await database.read(_texts) == ["first", "a", "b"]
        # Two transactions: "first" alone, then the three that waited for it.
        assert statements.count("COMMIT") == 2
        assert statements.count("ROLLBACK TO grouped_write") == 1


async def test_a_write_that_ends_the_groups_transaction_fails_alone(tmp_path: Path) -> None:
    # A full disk makes SQLite roll back the whole transaction, the group's other
    # writes with it: they are written again, each alone, and only the one that
    # filled the disk fails, with its own error.
    async with await BoxDatabase.open(tmp_path) as database:
        pages = await database.read(lambda c: c.execute("PRAGMA page_count").fetchone()[0])
        await database.read(lambda c: c.execute(f"PRAGMA max_page_count = {pages + 8}"))
        too_big = _insert("x" * 200_000)
        results = await _group_after_first(
            database, [("a", _insert("a")), ("too big", too_big), ("b", _insert("b"))]
        )
        error = results["too big"]
        assert isinstance(error, sqlite3.OperationalError)
        assert "full" in str(error)
        assert results["first"] == 1
        assert isinstance(results["a"], int)
        assert isinstance(results["b"], int)
        assert await database.read(_texts) == ["first", "a", "b"]


async def test_a_write_alone_that_fails_leaves_nothing(tmp_path: Path) -> None:
    async with await BoxDatabase.open(tmp_path) as database:
        with pytest.raises(ValueError, match="this write fails"):
            await database.write(_insert_then_fail)
        # Undone whole, the id it took too.
        assert await database.write(_insert("kept")) == 1
        assert await database.read(_texts) == ["kept"]
