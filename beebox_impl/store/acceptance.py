"""The acceptance record: a send is on disk before it is answered.

Spec sources: `docs/sources.md#history-two-records` ("Two records of a message")
and `docs/sources.md#facts-2-1` (§2.1 steps 6–7: `claimMessageId`,
`recordUserMessage`, `MESSAGE_ID_TTL_MS`), §2.2 (the bus read);
`docs/design.md#design-5-sqlite-claims` (§5: claims are SQLite rows in the same
transaction as the bus row, not a JSON file rewritten per send).

The rules
---------

1. **One transaction.** `AcceptanceStore.record_user_message` writes the
   ``chat-user-message`` bus row, the photos the send carried, and the durable
   message-id claim in one SQLite transaction (WAL, ``synchronous=FULL``), which
   is committed when the call returns. So after a crash either all of them are on
   disk or none is: a send that was answered 200 is in the bus exactly once, and
   an id never names two rows (the claim's primary key is the id).
2. **Claims expire.** Claims older than `MESSAGE_ID_TTL` (7 days) are purged in
   that same transaction, before the id is looked up: an id reused after a week
   is a new message.
3. **A claimed id is a duplicate.** When the id is already claimed the
   transaction writes nothing and the call answers `AlreadyClaimed`; the send
   route answers ``{deduplicated: true}``. (Two requests *in flight* with one id
   are the send service's concern: the second waits for the first's answer.)
4. **The bus is read newest-last.** `recent_events` returns the last *n* rows of
   one event, oldest first, as the original's ``eventBus.readRecent`` does.
5. **Undelivered until seen delivered** (ours). The same transaction marks the
   send undelivered (``chat_undelivered``). The box learns a send was delivered
   when the turn that carried it ends with its result — by then the engine has
   written it to its transcript — and `DeliveryLedger` keeps that news until
   the next send's transaction takes the mark off (one write less per turn), or
   the box's close does (`record_delivery_news`); a crash in between only leaves
   the mark for the next open to check against the transcript. A deliberate stop
   or reset (`record_settled`) takes every earlier mark off: what it dropped, it
   dropped on purpose. So when a box opens, the marked sends are exactly the
   ones it may still owe (`beebox_impl.services.redelivery`), however many sends
   came after them.
6. **Queued in the same transaction** (ours). A send that will be queued (the
   chat is busy) may write its row of the chat's persisted queue (``chat_queue``,
   `beebox_impl.store.database.insert_queue_rows`) in this same transaction: it
   is then queued with one commit, where queueing it afterwards cost a second
   one before the answer. A duplicate writes no queue row either.

Photos are kept (``chat_attachments``) because the turn that carries them to the
engine may start later than the answer — after a queue drain, or after a
restart — and the session's queue holds only text. They are dropped with the
claims, after `MESSAGE_ID_TTL`.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from beebox_impl.store.database import BoxDatabase, insert_queue_rows
from beebox_spec.entries import JsonObject, JsonValue
from beebox_spec.errors import InvariantError

__all__ = [
    "CHAT_SETTLED",
    "CHAT_USER_MESSAGE",
    "MESSAGE_ID_TTL",
    "AcceptanceStore",
    "AlreadyClaimed",
    "Attachment",
    "BusRow",
    "DeliveryLedger",
    "Recorded",
    "epoch_ms",
]

# §2.1 `MESSAGE_ID_TTL_MS`: how long a message id stays claimed.
MESSAGE_ID_TTL: Final = timedelta(days=7)

# §2.1 step 7: the bus event a send records.
CHAT_USER_MESSAGE: Final = "chat-user-message"
# (ours) The bus event a deliberate stop or reset records: every send before it was
# delivered or dropped on purpose, and none of them is owed after a restart
# (`beebox_impl.services.redelivery`).
CHAT_SETTLED: Final = "chat-settled"


# Ids bound into one `IN (...)` (SQLite's default limit on a statement's parameters
# is 32,766 since 3.32, 999 before).
_IDS_A_QUERY: Final = 500


def epoch_ms(moment: datetime) -> int:
    """Milliseconds since the epoch of a zone-aware moment."""
    # A naive time names no instant: a caller bug.
    if moment.tzinfo is None:
        raise InvariantError(f"a moment must be timezone-aware: {moment!r}")
    return int(moment.timestamp() * 1000)


@dataclass(frozen=True, slots=True)
class Attachment:
    """One photo a send carried: its media type and its decoded bytes."""

    media_type: str
    data: bytes


@dataclass(frozen=True, slots=True)
class Recorded:
    """The send is recorded: its bus row id, and its queue row's id when the same
    transaction queued it (rule 6)."""

    row_id: int
    queue_row_id: int | None = None


@dataclass(frozen=True, slots=True)
class AlreadyClaimed:
    """The message id was claimed already (by the send recorded as ``row_id``)."""

    row_id: int


@dataclass(frozen=True, slots=True)
class BusRow:
    """One bus row: its id, event name and JSON payload."""

    row_id: int
    event: str
    payload: JsonValue


def _payload_text(payload: JsonObject) -> str:
    # Compact and exact: the row is read back by `accepted_row_from_bus`.
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _insert_bus_row(connection: sqlite3.Connection, event: str, text: str, now_ms: int) -> int:
    cursor = connection.execute(
        "INSERT INTO bus_events (event, payload, created_at_ms) VALUES (?, ?, ?)",
        (event, text, now_ms),
    )
    assert cursor.lastrowid is not None
    return cursor.lastrowid


class DeliveryLedger:
    """Rule 5's news: which recorded sends were delivered, until the record says so.

    The send service says what it handed the session (`expect`: the bus row and
    the turn text); the chat session says which texts a turn carried when it
    ended (`turn_ended`); the next send's transaction takes the delivered rows
    (`take_delivered`). A text is matched to the oldest row expecting that very
    text: two sends of one text are delivered in the order they were handed
    over. Used from the loop and from the host's threads: every call holds a
    lock, and none waits on anything else.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._expected: dict[str, deque[int]] = {}
        self._delivered: list[int] = []

    def expect(self, row_id: int, turn_text: str) -> None:
        """The send recorded as ``row_id`` was handed to the session as ``turn_text``."""
        with self._lock:
            self._expected.setdefault(turn_text, deque()).append(row_id)

    def turn_ended(self, texts: Sequence[str], delivered: bool) -> None:
        """A turn of ``texts`` ended: with its result (``delivered``) or with its run.

        A turn whose run ended first is not known delivered: its sends stay
        marked, and the next open checks them against the transcript.
        """
        with self._lock:
            for text in texts:
                rows = self._expected.get(text)
                # A text nobody expects: a caller's own `ChatSession.send`.
                if rows is None:
                    continue
                row_id = rows.popleft()
                if not rows:
                    del self._expected[text]
                if delivered:
                    self._delivered.append(row_id)

    @property
    def delivered_waiting(self) -> int:
        """How many delivered rows wait for the next send to unmark them."""
        with self._lock:
            return len(self._delivered)

    def take_delivered(self) -> list[int]:
        """The rows seen delivered since the last take; the caller unmarks them."""
        with self._lock:
            taken, self._delivered = self._delivered, []
            return taken

    def give_back(self, row_ids: Iterable[int]) -> None:
        """Rows taken by a write that failed: the next write unmarks them."""
        with self._lock:
            self._delivered.extend(row_ids)

    def forget_before(self, row_id: int) -> None:
        """A stop or reset settled every send recorded before ``row_id``."""
        with self._lock:
            self._delivered = [row for row in self._delivered if row > row_id]
            for text in list(self._expected):
                rows = deque(row for row in self._expected[text] if row > row_id)
                if rows:
                    self._expected[text] = rows
                else:
                    del self._expected[text]


def _unmark(connection: sqlite3.Connection, row_ids: Sequence[int]) -> None:
    connection.executemany(
        "DELETE FROM chat_undelivered WHERE bus_row_id = ?", [(row_id,) for row_id in row_ids]
    )


def _user_message_record(
    payload: JsonObject,
    message_id: str | None,
    now: datetime,
    attachments: Sequence[Attachment],
    delivered: Sequence[int],
    *,
    queue_text: str | None,
) -> Callable[[sqlite3.Connection], Recorded | AlreadyClaimed]:
    """Rules 1–3, 5 and 6 as one transaction's work (the caller runs it in a write
    transaction); ``delivered`` are the rows seen delivered since the last send,
    ``queue_text`` the text to queue the send as (rule 6), if any."""
    now_ms = epoch_ms(now)
    expired_before = now_ms - int(MESSAGE_ID_TTL.total_seconds() * 1000)
    # Encoded before the transaction: a payload JSON cannot hold fails with nothing begun.
    text = _payload_text(payload)
    photos = tuple(attachments)

    def record(connection: sqlite3.Connection) -> Recorded | AlreadyClaimed:
        # Rule 5: what the ledger saw delivered is unmarked, whatever this send is.
        _unmark(connection, delivered)
        # Rule 2: expired claims (and their photos) go first.
        connection.execute("DELETE FROM message_claims WHERE claimed_at_ms < ?", (expired_before,))
        connection.execute(
            "DELETE FROM chat_attachments WHERE created_at_ms < ?", (expired_before,)
        )
        if message_id is not None:
            claimed = connection.execute(
                "SELECT bus_row_id FROM message_claims WHERE message_id = ?", (message_id,)
            ).fetchone()
            # Rule 3: the id is taken; write nothing.
            if claimed is not None:
                return AlreadyClaimed(int(claimed[0]))
        row_id = _insert_bus_row(connection, CHAT_USER_MESSAGE, text, now_ms)
        connection.executemany(
            "INSERT INTO chat_attachments"
            " (bus_row_id, position, media_type, data, created_at_ms)"
            " VALUES (?, ?, ?, ?, ?)",
            [
                (row_id, position, photo.media_type, photo.data, now_ms)
                for position, photo in enumerate(photos)
            ],
        )
        if message_id is not None:
            connection.execute(
                "INSERT INTO message_claims (message_id, claimed_at_ms, bus_row_id)"
                " VALUES (?, ?, ?)",
                (message_id, now_ms, row_id),
            )
        connection.execute("INSERT INTO chat_undelivered (bus_row_id) VALUES (?)", (row_id,))
        if queue_text is None:
            return Recorded(row_id)
        (queue_row_id,) = insert_queue_rows(connection, (queue_text,))
        return Recorded(row_id, queue_row_id)

    return record


class AcceptanceStore:
    """The acceptance record of one box, in its `BoxDatabase` (see the module doc)."""

    def __init__(self, database: BoxDatabase) -> None:
        self._database = database
        self.deliveries = DeliveryLedger()

    async def record_user_message(
        self,
        payload: JsonObject,
        *,
        message_id: str | None,
        now: datetime,
        attachments: Sequence[Attachment] = (),
        queue_text: str | None = None,
    ) -> Recorded | AlreadyClaimed:
        """Rules 1–3 and 5: record the send, claim its id and mark it undelivered in
        one committed transaction; with ``queue_text``, queue it there too (rule 6)."""
        with self._delivery_news() as delivered:
            record = _user_message_record(
                payload, message_id, now, attachments, delivered, queue_text=queue_text
            )
            return await self._database.write(record)

    def record_user_message_blocking(
        self,
        payload: JsonObject,
        *,
        message_id: str | None,
        now: datetime,
        attachments: Sequence[Attachment] = (),
        queue_text: str | None = None,
    ) -> Recorded | AlreadyClaimed:
        """`record_user_message` in the calling thread (`BoxDatabase.write_blocking`)."""
        with self._delivery_news() as delivered:
            record = _user_message_record(
                payload, message_id, now, attachments, delivered, queue_text=queue_text
            )
            return self._database.write_blocking(record)

    @contextmanager
    def _delivery_news(self) -> Iterator[list[int]]:
        """Rule 5: the rows seen delivered, for a send's transaction to unmark; given
        back to the ledger when that transaction fails."""
        delivered = self.deliveries.take_delivered()
        try:
            yield delivered
        except BaseException:
            self.deliveries.give_back(delivered)
            raise

    async def record_settled(self, payload: JsonObject, *, now: datetime) -> int:
        """Rule 5: write a `CHAT_SETTLED` row and unmark every send before it, at once."""
        text, now_ms = _payload_text(payload), epoch_ms(now)

        def settle(connection: sqlite3.Connection) -> int:
            row_id = _insert_bus_row(connection, CHAT_SETTLED, text, now_ms)
            connection.execute("DELETE FROM chat_undelivered WHERE bus_row_id < ?", (row_id,))
            return row_id

        row_id = await self._database.write(settle)
        self.deliveries.forget_before(row_id)
        return row_id

    async def record_delivery_news(self) -> None:
        """Rule 5: unmark the sends seen delivered since the last send took the news,
        at once (a box closing: no next send of this box will)."""
        with self._delivery_news() as delivered:
            await self.unmark_undelivered(delivered)

    async def undelivered_messages(self) -> list[BusRow]:
        """Rule 5: the sends still marked undelivered, oldest first."""
        rows = await self._database.read(
            lambda c: c.execute(
                "SELECT id, event, payload FROM bus_events"
                " JOIN chat_undelivered ON bus_row_id = id ORDER BY id"
            ).fetchall()
        )
        return [BusRow(int(row_id), str(name), _parse(text)) for row_id, name, text in rows]

    async def unmark_undelivered(self, row_ids: Sequence[int]) -> None:
        """Rule 5: take the mark off ``row_ids`` (delivered, or no longer owed)."""
        rows = list(row_ids)
        if rows:
            await self._database.write(lambda connection: _unmark(connection, rows))

    async def record_event(self, event: str, payload: JsonObject, *, now: datetime) -> int:
        """Write a bus row of ``event`` (committed on return); its row id."""
        text, now_ms = _payload_text(payload), epoch_ms(now)
        return await self._database.write(
            lambda connection: _insert_bus_row(connection, event, text, now_ms)
        )

    async def recent_events(self, event: str, limit: int) -> list[BusRow]:
        """Rule 4: the last ``limit`` rows of ``event``, oldest first."""
        rows = await self._database.read(
            lambda c: c.execute(
                "SELECT id, event, payload FROM bus_events WHERE event = ?"
                " ORDER BY id DESC LIMIT ?",
                (event, limit),
            ).fetchall()
        )
        return [
            BusRow(int(row_id), str(name), _parse(text)) for row_id, name, text in reversed(rows)
        ]

    async def attachments(self, row_id: int) -> list[Attachment]:
        """The photos the send recorded as ``row_id`` carried, in order (none once expired)."""
        return (await self.attachments_of((row_id,))).get(row_id, [])

    async def attachments_of(self, row_ids: Sequence[int]) -> dict[int, list[Attachment]]:
        """`attachments` of each of ``row_ids``, in one read (a row without photos, or
        whose photos expired, is absent)."""
        wanted = sorted(set(row_ids))

        def query(connection: sqlite3.Connection) -> list[tuple[int, str, bytes]]:
            found: list[tuple[int, str, bytes]] = []
            # SQLite bounds a statement's parameters: the ids go in slices.
            for start in range(0, len(wanted), _IDS_A_QUERY):
                ids = wanted[start : start + _IDS_A_QUERY]
                found.extend(
                    connection.execute(
                        "SELECT bus_row_id, media_type, data FROM chat_attachments"
                        f" WHERE bus_row_id IN ({','.join('?' * len(ids))})"
                        " ORDER BY bus_row_id, position",
                        ids,
                    ).fetchall()
                )
            return found

        photos: dict[int, list[Attachment]] = {}
        for row_id, media_type, data in await self._database.read(query):
            photos.setdefault(int(row_id), []).append(Attachment(str(media_type), bytes(data)))
        return photos

    async def undelivered_with_photos(self) -> set[int]:
        """Rule 5: the sends still marked undelivered that carried photos (still kept).

        One read for all of them: a box opening after a long outage may owe
        thousands, and a read each made its opening take seconds.
        """
        rows = await self._database.read(
            lambda c: c.execute(
                "SELECT DISTINCT chat_attachments.bus_row_id FROM chat_attachments"
                " JOIN chat_undelivered USING (bus_row_id)"
            ).fetchall()
        )
        return {int(row_id) for (row_id,) in rows}

    async def claimed_row(self, message_id: str) -> int | None:
        """The bus row id that claimed ``message_id``, or None."""
        row = await self._database.read(
            lambda c: c.execute(
                "SELECT bus_row_id FROM message_claims WHERE message_id = ?", (message_id,)
            ).fetchone()
        )
        return None if row is None else int(row[0])


def _parse(text: object) -> JsonValue:
    # The store wrote every payload itself; anything else reads as no payload.
    if not isinstance(text, str):
        return None
    try:
        value: JsonValue = json.loads(text)
    except ValueError:
        return None
    return value
