"""Sends a box still owes when it opens: recorded, never delivered, sent again (ours).

`docs/design.md#design-5-persisted-queue` (§5): an accepted message is never silently
lost. The persisted queue keeps the messages waiting behind a turn; this keeps the
turn itself. A send answered ``{turnId}`` is in the acceptance record and goes to the
engine, but its text reaches the transcript only when the engine writes it there: a
box killed in between (or a run that died before it did) lost it from the chat, and
the page showed it pending for ten minutes, then nothing. The same window holds for
queued texts once their drained turn is sent (their queue rows go then).

`plan_redelivery` is the rule, for the moment a box opens, before its chat
session loads its queue:

1. **Candidates** are the sends still marked undelivered (rule 5 of
   `beebox_impl.store.acceptance`: recorded, and no turn that carried them has
   ended with its result since) that the page itself would show as pending
   (`beebox_spec.reconcile.accepted_message`): accepted within
   `ACCEPTED_WINDOW`, for the chat's saved session or for none (accepted before
   the engine assigned an id), whoever sent them. However many sends came
   after them: the page looks at the last `ACCEPTED_SCAN_LIMIT` rows only, and
   a send still owed when fifty more had come behind it was lost before the
   mark. (A stop or reset unmarks every send before it: what it dropped stays
   dropped.)
2. **Delivered** are those a user turn of the session's transcript (its last
   `TRANSCRIPT_TAIL` entries) holds: the message's very text as a whole part of
   the turn's text (a drained turn joins its texts with ``"\n\n"``), in a turn
   not recorded before the send was accepted (the page's baseline rule,
   `existed_before`), one part for one send, and **that the agent began to
   answer**: an assistant entry follows it before the next user turn. Stricter
   than the page's containment (`reconcile_pending`), on purpose: a miss here
   sends a message twice, where a false match would lose it — "ok" is not
   delivered by a later "ok then", and a turn cut before its first answer is not
   delivered by its user line alone: Claude Code, resumed, closes such a turn
   with an answer of its own ("No response requested.", a synthetic line the
   history does not show), and its model never answers it. (Checked are the
   sends whose turn had not ended, and those whose turn ended after the box's
   last send when a crash followed — a box that closes writes that news first:
   the tail holds them. Of the latter, a turn that failed, which Claude Code
   answers with a synthetic line too, or one whose answer came after an
   automatic compaction's summary, is sent again: at least once.)
3. **Queued** are the undelivered ones a persisted queue row will carry (the
   same turn text — the message, and the marker of its photos,
   `beebox_impl.services.attachments` — matched one row for one message; the
   queue carries the oldest of equal texts).
4. Every other undelivered candidate is **owed**, oldest first. (A send of photos
   alone is never a candidate: the page's read skips an empty message, and no text
   could show it delivered. One lost in flight stays pending on the page only.)
5. A queue row of a **delivered** send is retired: the session deletes a drained
   turn's rows only after the engine has the turn, so a box killed in between
   would otherwise send them again.
6. Marked sends that are delivered, or not candidates (no longer owed), are
   unmarked; queued and owed ones stay marked until their turn ends.

`Box.open` deletes the retired rows, unmarks, puts the owed texts at the head of
the persisted queue (`SqliteQueueStore.put_first`), and tells the box's
`DeliveryLedger` to expect the queued and owed sends; the session's drain at
open sends them, with what was queued behind them, as one turn. Delivery is at
least once: if the box dies again before that turn's result, the next open finds
them owed again. Nothing is owed once its send is older than the window, which
bounds how far back the rule looks, as it bounds what the page shows pending.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from beebox_impl.services.attachments import handed_text
from beebox_impl.store.acceptance import AcceptanceStore
from beebox_impl.store.protocols import QueuedRow
from beebox_spec.chat_session import QUEUE_SEPARATOR
from beebox_spec.entries import PendingMessage, SessionEntry, entry_text
from beebox_spec.js_values import parse_iso_timestamp
from beebox_spec.reconcile import (
    AcceptedRow,
    accepted_message,
    accepted_row_from_bus,
    existed_before,
)

__all__ = ["TRANSCRIPT_TAIL", "Redelivery", "UndeliveredSend", "plan_redelivery"]

# How many of the transcript's last entries the delivered check reads: more than the
# user turns the sends whose turn had not ended could have made.
TRANSCRIPT_TAIL: Final = 1000

ReadTail = Callable[[str], Awaitable[list[SessionEntry]]]


@dataclass(frozen=True, slots=True)
class UndeliveredSend:
    """A recorded send not delivered yet: its bus row and the text its turn takes."""

    row_id: int
    turn_text: str


@dataclass(frozen=True, slots=True)
class Redelivery:
    """What a box does as it opens (see the module doc)."""

    # Rule 4: to put at the head of the queue, oldest first.
    owed: list[UndeliveredSend]
    # Rule 3: carried by a queue row already.
    queued: list[UndeliveredSend]
    # Rule 5: queue rows to delete.
    delivered_rows: list[int]
    # Rule 6: bus rows to unmark.
    unmarked: list[int]


async def plan_redelivery(
    *,
    acceptance: AcceptanceStore,
    session_id: str | None,
    read_tail: ReadTail,
    queued: Sequence[QueuedRow],
    now: datetime,
) -> Redelivery:
    """The owed and queued sends, the delivered queue rows, the rows to unmark.

    `read_tail(session_id)` answers the last `TRANSCRIPT_TAIL` entries of that
    session's transcript (none when it has none); `queued` is the persisted queue.
    """
    rows = {
        row.row_id: accepted_row_from_bus(row.row_id, row.payload)
        for row in await acceptance.undelivered_messages()
    }
    entries = await read_tail(session_id) if session_id is not None else []
    candidates = _candidates(list(rows.values()), session_id, now)
    undelivered = _undelivered(candidates, rows, entries)
    with_photos = await acceptance.undelivered_with_photos()
    turn_texts = {
        _row_id(pending["uuid"]): _turn_text(rows[_row_id(pending["uuid"])], with_photos)
        for pending in candidates
    }
    owed = Counter(turn_texts[row_id] for row_id in undelivered)
    delivered = Counter(text for row_id, text in turn_texts.items() if row_id not in undelivered)
    carried: Counter[str] = Counter()
    delivered_rows: list[int] = []
    for row in queued:
        # An undelivered send's own row: the drain carries it.
        if owed[row.text]:
            owed[row.text] -= 1
            carried[row.text] += 1
        elif delivered[row.text]:
            delivered[row.text] -= 1
            delivered_rows.append(row.row_id)
    plan = Redelivery(owed=[], queued=[], delivered_rows=delivered_rows, unmarked=[])
    for row_id in sorted(rows):
        if row_id not in undelivered:
            plan.unmarked.append(row_id)
            continue
        send = UndeliveredSend(row_id, turn_texts[row_id])
        # The queue took the oldest of equal texts; what it does not carry is owed.
        if carried[send.turn_text]:
            carried[send.turn_text] -= 1
            plan.queued.append(send)
        else:
            plan.owed.append(send)
    return plan


def _turn_text(row: AcceptedRow, with_photos: set[int]) -> str:
    return handed_text(row["message"], row["id"], row["id"] in with_photos)


def _wrapped(text: str) -> str:
    return f"{QUEUE_SEPARATOR}{text}{QUEUE_SEPARATOR}"


def _undelivered(
    candidates: list[PendingMessage], rows: dict[int, AcceptedRow], entries: list[SessionEntry]
) -> set[int]:
    """The candidates no user turn of the transcript holds, by rule 2 (module doc)."""
    # Each user turn's text, wrapped in separators: a message is a whole part of a
    # turn (a drained turn joins its texts with the separator) where its wrapped text
    # occurs; what a message was matched to is taken out, so one part answers once.
    users = _answered_user_turns(entries)
    unmatched = {entry["uuid"]: _wrapped(entry_text(entry)) for entry in users}
    # Each turn's time, read once: thousands of sends may be owed, each checked
    # against every turn (the page's baseline, a list of them a send, cost seconds).
    recorded_at = {entry["uuid"]: parse_iso_timestamp(entry["timestamp"]) for entry in users}
    undelivered: set[int] = set()
    for pending in candidates:
        row_id = _row_id(pending["uuid"])
        wanted = _wrapped(rows[row_id]["message"])
        accepted_at = parse_iso_timestamp(pending["timestamp"])
        assert accepted_at is not None, "a candidate's acceptance is datable"
        for uuid, text in unmatched.items():
            # Turns recorded before the send was accepted cannot be its delivery.
            earlier = existed_before(recorded_at[uuid], accepted_at)
            at = -1 if earlier else text.find(wanted)
            if at != -1:
                unmatched[uuid] = text[:at] + QUEUE_SEPARATOR + text[at + len(wanted) :]
                break
        else:
            undelivered.add(row_id)
    return undelivered


def _answered_user_turns(entries: list[SessionEntry]) -> list[SessionEntry]:
    """The user turns an assistant entry follows before the next user turn (rule 2)."""
    answered: list[SessionEntry] = []
    waiting: SessionEntry | None = None
    for entry in entries:
        if entry["type"] == "user":
            waiting = entry
        elif entry["type"] == "assistant" and waiting is not None:
            answered.append(waiting)
            waiting = None
    return answered


def _candidates(
    rows: list[AcceptedRow], session_id: str | None, now: datetime
) -> list[PendingMessage]:
    # The page's pending rule for the session; a session-less row (accepted before the
    # engine assigned an id) as its own sender reads it, for no session. With no
    # history: the baseline is `_undelivered`'s to apply, with each turn's time read once.
    found: list[PendingMessage] = []
    for row in rows:
        session, sender = session_id, None
        if row["sessionId"] is None:
            session = None
            sender = row["user"]["email"] if row["user"] is not None else None
        pending = accepted_message(row, session, now, sender, ())
        if pending is not None:
            found.append(pending)
    # Oldest first, by the order the rows were accepted in.
    return sorted(found, key=lambda pending: _row_id(pending["uuid"]))


def _row_id(pending_uuid: str) -> int:
    return int(pending_uuid.removeprefix("accepted-"))
