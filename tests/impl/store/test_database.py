"""The box's SQLite database: pragmas, schema versions, the queue and thread-record tables."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import pytest

from beebox_impl.store import (
    MIGRATIONS,
    BoxDatabase,
    InMemoryQueueStore,
    InMemoryThreadRecordStore,
    QueueStore,
    SchemaTooNewError,
    ThreadRecordStore,
    database_path,
)
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
    with sqlite3.connect(path) as connection:
        connection.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    with pytest.raises(SchemaTooNewError):
        await BoxDatabase.open(tmp_path)


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
    with pytest.raises(sqlite3.ProgrammingError):
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
