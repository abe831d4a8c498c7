"""Rule 5 of the acceptance record: sends stay marked undelivered until seen delivered."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from beebox_impl.store import MIGRATIONS, BoxDatabase
from beebox_impl.store.acceptance import (
    CHAT_SETTLED,
    CHAT_USER_MESSAGE,
    AcceptanceStore,
    AlreadyClaimed,
    Attachment,
    DeliveryLedger,
    Recorded,
)
from beebox_spec.entries import JsonObject

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def payload(text: str) -> JsonObject:
    return {"sessionId": None, "message": text, "user": None, "timestamp": "2026-12-03T12:00:00Z"}


async def record(store: AcceptanceStore, text: str) -> int:
    recorded = await store.record_user_message(payload(text), message_id=None, now=NOW)
    assert isinstance(recorded, Recorded)
    return recorded.row_id


async def record_delivered(store: AcceptanceStore, text: str) -> int:
    """A send recorded, handed over and delivered: the ledger has the news."""
    row_id = await record(store, text)
    store.deliveries.expect(row_id, text)
    store.deliveries.turn_ended((text,), True)
    return row_id


async def record_on_a_full_disk(
    database: BoxDatabase, store: AcceptanceStore, queue_text: str | None = None
) -> None:
    """A send too big for the room left (four pages): its transaction fails whole."""
    pages = await database.read(lambda c: c.execute("PRAGMA page_count").fetchone()[0])
    await database.read(lambda c: c.execute(f"PRAGMA max_page_count = {pages + 4}"))
    with pytest.raises(sqlite3.OperationalError, match="full"):
        await store.record_user_message(
            payload("big"),
            message_id=None,
            now=NOW,
            attachments=[Attachment("image/png", b"x" * 100_000)],
            queue_text=queue_text,
        )


async def marked(store: AcceptanceStore) -> list[int]:
    return [row.row_id for row in await store.undelivered_messages()]


def test_the_ledger_matches_texts_to_the_oldest_row_expecting_them() -> None:
    ledger = DeliveryLedger()
    ledger.expect(1, "ok")
    ledger.expect(2, "other")
    ledger.expect(3, "ok")
    # A turn of two texts, one of them the first "ok"; a text nobody expects is ignored.
    ledger.turn_ended(("ok", "other", "a caller's own"), True)
    assert ledger.delivered_waiting == 2
    assert ledger.take_delivered() == [1, 2]
    assert ledger.delivered_waiting == 0
    assert ledger.take_delivered() == []
    # A turn whose run ended first: the row is no longer expected, and not delivered.
    ledger.turn_ended(("ok",), False)
    ledger.turn_ended(("ok",), True)
    assert ledger.take_delivered() == []
    ledger.give_back([7])
    assert ledger.take_delivered() == [7]


def test_a_settle_forgets_what_came_before_it() -> None:
    ledger = DeliveryLedger()
    for row_id, text in [(1, "a"), (2, "b"), (5, "a")]:
        ledger.expect(row_id, text)
    ledger.turn_ended(("b",), True)
    ledger.forget_before(3)
    assert ledger.take_delivered() == []
    # Row 1 no longer expects "a": the next "a" delivered is row 5.
    ledger.turn_ended(("a",), True)
    assert ledger.take_delivered() == [5]


async def test_a_send_is_marked_until_a_later_send_records_its_delivery(tmp_path: Path) -> None:
    async with await BoxDatabase.open(tmp_path) as database:
        store = AcceptanceStore(database)
        first = await record(store, "first")
        assert await marked(store) == [first]
        store.deliveries.expect(first, "first")
        store.deliveries.turn_ended(("first",), True)
        # No write of its own: the news waits for the next send's transaction.
        assert await marked(store) == [first]
        second = await store.record_user_message(payload("second"), message_id="m", now=NOW)
        assert isinstance(second, Recorded)
        assert await marked(store) == [second.row_id]
        # A duplicate id writes no row, but still records what was delivered.
        store.deliveries.expect(second.row_id, "second")
        store.deliveries.turn_ended(("second",), True)
        again = await store.record_user_message(payload("second"), message_id="m", now=NOW)
        assert again == AlreadyClaimed(second.row_id)
        assert await marked(store) == []


async def test_a_failed_send_gives_the_news_back(tmp_path: Path) -> None:
    async with await BoxDatabase.open(tmp_path) as database:
        store = AcceptanceStore(database)
        first = await record_delivered(store, "first")
        await record_on_a_full_disk(database, store)
        assert await marked(store) == [first]
        assert store.deliveries.take_delivered() == [first]


async def test_blocking_records_mark_and_unmark_alike(tmp_path: Path) -> None:
    async with await BoxDatabase.open(tmp_path) as database:
        store = AcceptanceStore(database)
        await record_delivered(store, "first")
        recorded = store.record_user_message_blocking(payload("second"), message_id=None, now=NOW)
        assert await marked(store) == [recorded.row_id]


async def test_a_send_to_be_queued_is_queued_by_its_own_transaction(tmp_path: Path) -> None:
    # Rule 6: the queue row rides the send's transaction; a duplicate writes none, and
    # a transaction that fails leaves neither the send nor its row.
    async with await BoxDatabase.open(tmp_path) as database:
        store = AcceptanceStore(database)
        await database.chat_queue.append("earlier")
        first = store.record_user_message_blocking(
            payload("queued"), message_id="m-1", now=NOW, queue_text="queued"
        )
        assert isinstance(first, Recorded)
        assert first.queue_row_id is not None
        rows = await database.chat_queue.load()
        assert [(row.row_id, row.text) for row in rows][1:] == [(first.queue_row_id, "queued")]
        assert rows[0].text == "earlier"
        again = await store.record_user_message(
            payload("queued"), message_id="m-1", now=NOW, queue_text="queued"
        )
        assert again == AlreadyClaimed(first.row_id)
        plain = await store.record_user_message(payload("a turn"), message_id=None, now=NOW)
        assert plain == Recorded(plain.row_id, None)
        await record_on_a_full_disk(database, store, queue_text="big")
        assert [row.text for row in await database.chat_queue.load()] == ["earlier", "queued"]
        assert await marked(store) == [first.row_id, plain.row_id]


async def test_a_settle_unmarks_every_send_before_it(tmp_path: Path) -> None:
    async with await BoxDatabase.open(tmp_path) as database:
        store = AcceptanceStore(database)
        for text in ("a", "b"):
            store.deliveries.expect(await record(store, text), text)
        settled = await store.record_settled({"reason": "stop"}, now=NOW)
        after = await record(store, "after")
        assert await marked(store) == [after]
        assert after > settled
        (row,) = await store.recent_events(CHAT_SETTLED, 5)
        assert row.row_id == settled
        # What the ledger expected before the settle is forgotten too.
        store.deliveries.turn_ended(("a", "b"), True)
        assert store.deliveries.take_delivered() == []
        await store.unmark_undelivered([after])
        assert await marked(store) == []


async def test_an_older_box_marks_its_last_fifty_sends_since_a_settle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before version 3 a box looked at its last fifty sends after the last stop or
    # reset for what it still owed: the migration marks those.
    monkeypatch.setattr("beebox_impl.store.database.MIGRATIONS", MIGRATIONS[:2])
    async with await BoxDatabase.open(tmp_path) as database:
        store = AcceptanceStore(database)
        for index in range(5):
            await store.record_event(CHAT_USER_MESSAGE, payload(f"before {index}"), now=NOW)
        await store.record_event(CHAT_SETTLED, {"reason": "stop"}, now=NOW)
        rows = [
            await store.record_event(CHAT_USER_MESSAGE, payload(f"after {index}"), now=NOW)
            for index in range(60)
        ]
    monkeypatch.setattr("beebox_impl.store.database.MIGRATIONS", MIGRATIONS)
    async with await BoxDatabase.open(tmp_path) as database:
        assert await database.schema_version() == len(MIGRATIONS)
        assert await marked(AcceptanceStore(database)) == rows[-50:]
