"""Two records of a message, and the one place they are joined.

Spec sources, in `docs/sources.md` (a bare §N.M below is its anchor `facts-N-M`):
`docs/sources.md#history-two-records` ("Two records of a message, and which one
each reader sees"), `docs/sources.md#facts-2-2` (§2.2: `readAcceptedMessages`) and
`docs/sources.md#facts-2-5` (§2.5: `normalizeForCompare`, `reconcilePending`,
`mergeAcceptedIntoPending`).

A send is answered 200 once it is **recorded**: the box writes a
`chat-user-message` row to its event bus (the *acceptance record*). The agent
writes the *transcript* later. The two are never compared on the server; the
client joins them. The flow this module follows, top to bottom:

1. **Attribution** (`beebox_spec.attribution`). Before recording, the send
   route names the sender in the message's opening `<typed>`/`<speech>` tag; the
   acceptance record's rows are read back with the same `user_identity` the
   transcript's entries are.
2. **Reading the acceptance record** (`read_accepted_messages`). Of the last
   `ACCEPTED_SCAN_LIMIT` bus rows (oldest first), keep those of the session
   asked about, visible to the asking user, and accepted no longer than
   `ACCEPTED_WINDOW` ago; each becomes a pending entry
   `accepted-<rowId>` whose `reconcileKnownUuids` names the history entries
   dated *before* its acceptance (or undatable): they can never be its echo.
3. **Merging** (`merge_accepted_into_pending`). The page folds those into its
   own optimistic copies: an accepted entry already pending (same uuid, or the
   same normalized text, consumed one for one) is dropped.
4. **Reconciling** (`reconcile_pending`). A pending entry is retired once its
   normalized text appears in one of the newest `len(pending) + 5` user
   entries of the transcript that is not in its baseline, oldest first. Each
   match removes the first occurrence of the text from that entry, so one
   durable "yes" retires one pending "yes", while a drained queue turn (texts
   joined with "\\n\\n") retires several. A pending entry whose normalized text
   is empty is dropped.

Texts are compared through `normalize_for_compare`, which removes what only one
of the three copies of a message carries: `[image not displayed]`
placeholders, `[imageN]`/`[image#N]` composer tokens, and the attributes of the
opening `<typed>`/`<speech>` tag. It does not trim.

Time is an argument (`now`), never read from a clock. Timestamps are ISO-8601
strings read by `parse_iso_timestamp` to the millisecond, as JavaScript's
`Date` holds them; an unreadable timestamp is `None`, and each rule says what
`None` means for it.

The patterns here are ASCII-only, as JavaScript's are: `\\d` is `[0-9]` and a
word boundary `\\b` sees only `[A-Za-z0-9_]` as word characters.

"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TypedDict

from beebox_spec.attribution import user_identity
from beebox_spec.entries import (
    IMAGE_NOT_DISPLAYED,
    JsonValue,
    PendingMessage,
    SessionContentBlock,
    SessionEntry,
    entry_text,
)
from beebox_spec.errors import InvariantError
from beebox_spec.js_values import parse_iso_timestamp

__all__ = [
    "ACCEPTED_SCAN_LIMIT",
    "ACCEPTED_WINDOW",
    "IMAGE_TOKEN_RE",
    "RECONCILE_LOOKBACK_EXTRA",
    "AcceptedRow",
    "AcceptedRowUser",
    "HistoryMarker",
    "ReconcileResult",
    "accepted_message",
    "accepted_row_from_bus",
    "baseline_for",
    "existed_before",
    "matches_session",
    "matches_user",
    "merge_accepted_into_pending",
    "normalize_for_compare",
    "read_accepted_messages",
    "reconcile_pending",
]

# ---------------------------------------------------------------------------
# Constants (names as in the original)
# ---------------------------------------------------------------------------

# §2.2 `ACCEPTED_WINDOW_MS`: how long an acceptance still means "not yet".
# Matched to the original's `RUN_START_TIMEOUT_MS`, the longest a cold engine
# spawn is given; an older acceptance still missing from the transcript has
# failed, and is no longer shown.
ACCEPTED_WINDOW = timedelta(minutes=10)

# §2.2 `ACCEPTED_SCAN_LIMIT`: how many of the newest `chat-user-message` rows
# the read considers. The caller reads the last 50 rows from the bus and hands
# them to `read_accepted_messages` oldest first; the rule looks at no more.
ACCEPTED_SCAN_LIMIT = 50

# §2.2 `IMAGE_TOKEN_RE` = /\[image#?\d+]/g: a composer's image token, in both
# the current form `[image#1]` and the pre-2026-08-25 form `[image1]`. ASCII
# digits only, as in JavaScript.
IMAGE_TOKEN_RE = re.compile(r"\[image#?[0-9]+]")

# §2.5: the opening `<typed …>` / `<speech …>` tag, attributes and all. `\b`
# after the name, so `<typedx>` is not one but `<typed-x …>` is (as in the
# original's /<(typed|speech)\b[^>]*>/g).
_TYPED_OR_SPEECH_OPENING_TAG = re.compile(r"<(typed|speech)\b[^>]*>", re.ASCII)

# §2.5: reconciliation looks at the newest `len(pending) + 5` user entries. The
# original writes the 5 inline (`pendingMessages.length + 5`); the name is ours.
RECONCILE_LOOKBACK_EXTRA = 5

# ---------------------------------------------------------------------------
# Timestamps
# ---------------------------------------------------------------------------


def _to_milliseconds(moment: datetime) -> datetime:
    """`moment` in UTC, cut to the millisecond (a JavaScript `Date` has no finer grain)."""
    # A naive datetime names no instant: passing one is a caller bug.
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise InvariantError(f"a moment must be timezone-aware: {moment!r}")
    utc = moment.astimezone(UTC)
    return utc.replace(microsecond=utc.microsecond - utc.microsecond % 1000)


# ---------------------------------------------------------------------------
# The comparison
# ---------------------------------------------------------------------------


def normalize_for_compare(text: str) -> str:
    """A message's text as the three copies of it can agree on (§2.5 `normalizeForCompare`).

    Removes every `[image not displayed]`, removes every image token
    (`[image1]`, `[image#2]`), and rewrites each opening `<typed …>`/`<speech …>`
    tag to bare `<typed>`/`<speech>`. Nothing is trimmed.
    """
    text = text.replace(IMAGE_NOT_DISPLAYED, "")
    text = IMAGE_TOKEN_RE.sub("", text)
    return _TYPED_OR_SPEECH_OPENING_TAG.sub(r"<\1>", text)


# ---------------------------------------------------------------------------
# 2. Reading the acceptance record (the server, for `chat.bootstrap.pending`)
# ---------------------------------------------------------------------------


class AcceptedRowUser(TypedDict):
    """The sender a `chat-user-message` row names."""

    email: str
    name: str


class AcceptedRow(TypedDict):
    """One `chat-user-message` bus row (§2.1 step 7), as the read needs it.

    `sessionId` is null for a message accepted before the engine assigned an
    id; `user` is null when the send had no identified sender.
    """

    id: int
    sessionId: str | None
    message: str
    user: AcceptedRowUser | None
    timestamp: str


class HistoryMarker(TypedDict):
    """A history entry as the read needs it: its identity and its time."""

    uuid: str
    timestamp: str


def accepted_row_from_bus(row_id: int, data: JsonValue) -> AcceptedRow:
    """A bus row's payload narrowed to `AcceptedRow`, as the original narrows it (§2.2).

    Anything of the wrong type reads as missing: a non-string `sessionId` as
    null, a non-string `message` or `timestamp` as `""` (which the read then
    skips), and a `user` that is not an object with a string `email` as no
    sender (only the email takes part in the read; a non-string name reads `""`).
    """
    payload = data if isinstance(data, dict) else {}
    session_id = payload.get("sessionId")
    message = payload.get("message")
    timestamp = payload.get("timestamp")
    raw_user = payload.get("user")
    sender = raw_user if isinstance(raw_user, dict) else {}
    email = sender.get("email")
    name = sender.get("name")
    user: AcceptedRowUser | None = None
    # A sender is known only by a string email.
    if isinstance(email, str):
        user = {"email": email, "name": name if isinstance(name, str) else ""}
    return {
        "id": row_id,
        "sessionId": session_id if isinstance(session_id, str) else None,
        "message": message if isinstance(message, str) else "",
        "user": user,
        "timestamp": timestamp if isinstance(timestamp, str) else "",
    }


def matches_session(row_session_id: str | None, session_id: str | None) -> bool:
    """Is this row's session the one asked about? (§2.2 `matchesSession`)

    A row with an id belongs to that session only. A row with no id (accepted
    before the engine assigned one) belongs only to a request with no session.
    """
    if row_session_id is None:
        return session_id is None
    return row_session_id == session_id


def matches_user(row_email: str | None, viewer_email: str | None) -> bool:
    """May this viewer see this session-less row? (§2.2 `matchesUser`, fails closed)

    A row with no sender is visible to all; a row with a sender only to a
    viewer with that same email (a viewer with no identity sees none of them).
    """
    if row_email is None:
        return True
    return row_email == viewer_email


def existed_before(entry_at: datetime | None, accepted_at: datetime) -> bool:
    """Whether a history entry dated ``entry_at`` (None: undatable) existed when a
    message was accepted at ``accepted_at``, so cannot be that message's echo (§2.2).

    An entry dated strictly before `accepted_at` existed; so, by rule, did an
    entry whose timestamp cannot be read (the echo is written after the
    acceptance, so an undatable entry is far likelier old history). An entry
    dated at or after `accepted_at` may be the echo and stays a candidate.
    """
    return entry_at is None or entry_at < accepted_at


def baseline_for(history: Sequence[HistoryMarker], accepted_at: datetime) -> list[str]:
    """The uuids of the history entries that existed when a message was accepted
    (`existed_before`), in the history's order (§2.2)."""
    return [
        entry["uuid"]
        for entry in history
        if existed_before(parse_iso_timestamp(entry["timestamp"]), accepted_at)
    ]


def read_accepted_messages(
    rows: Sequence[AcceptedRow],
    session_id: str | None,
    now: datetime,
    viewer_email: str | None,
    history: Sequence[HistoryMarker],
    *,
    settled_through: int = 0,
) -> list[PendingMessage]:
    """The messages the box accepted for `session_id` and may still owe, oldest first (§2.2).

    `rows` are the last `ACCEPTED_SCAN_LIMIT` `chat-user-message` rows, oldest
    first: the caller reads them from the bus (should it pass more, only the
    newest `ACCEPTED_SCAN_LIMIT` count). Each becomes an entry by
    `accepted_message`, or is left out. Nothing here decides whether the
    transcript already holds the message: the client does (`reconcile_pending`).
    A row at or before `settled_through` — the bus row of the chat's last
    deliberate stop or reset — is owed no more: the stop dropped what it had not
    delivered, on purpose, and its entry says so (``dropped: true``) so that a page
    shows it as not sent rather than on its way
    (ours, `docs/spec-decisions.md#stop-dropped-not-pending`).
    """
    # Only the newest ACCEPTED_SCAN_LIMIT rows count (the caller reads no more than that).
    entries: list[PendingMessage] = []
    for row in rows[-ACCEPTED_SCAN_LIMIT:]:
        entry = accepted_message(row, session_id, now, viewer_email, history)
        if entry is None:
            continue
        if row["id"] <= settled_through:
            entry["dropped"] = True
        entries.append(entry)
    return entries


def accepted_message(
    row: AcceptedRow,
    session_id: str | None,
    now: datetime,
    viewer_email: str | None,
    history: Sequence[HistoryMarker],
) -> PendingMessage | None:
    """One accepted row as the pending user entry `read_accepted_messages` shows, or None.

    A row is kept when its message is not empty, its session matches, a
    session-less row's sender matches the viewer, and its timestamp is readable
    and no older than `now - ACCEPTED_WINDOW` (exactly ten minutes old is still
    kept). It becomes a user entry `accepted-<rowId>` with one text block (the
    message, image tokens removed), `user`/`userEmail` from its tag's attributes
    when present, and `reconcileKnownUuids` from `baseline_for`; `history` is the
    history returned alongside (uuid and timestamp of each entry).
    """
    # An empty message was never a send.
    if row["message"] == "":
        return None
    # The row belongs to the session asked about.
    if not matches_session(row["sessionId"], session_id):
        return None
    row_email = row["user"]["email"] if row["user"] is not None else None
    # A session-less row is shown only to its own sender (or to all, if it has none).
    if row["sessionId"] is None and not matches_user(row_email, viewer_email):
        return None
    accepted_at = parse_iso_timestamp(row["timestamp"])
    # An undatable acceptance, or one older than the window, is no longer owed.
    if accepted_at is None or accepted_at < _to_milliseconds(now) - ACCEPTED_WINDOW:
        return None
    content: list[SessionContentBlock] = [
        {"type": "text", "text": IMAGE_TOKEN_RE.sub("", row["message"])}
    ]
    entry: PendingMessage = {
        "uuid": f"accepted-{row['id']}",
        "type": "user",
        "timestamp": row["timestamp"],
        "content": content,
    }
    user = user_identity(content, "user")
    user_email = user_identity(content, "user-email")
    if user is not None:
        entry["user"] = user
    if user_email is not None:
        entry["userEmail"] = user_email
    entry["reconcileKnownUuids"] = baseline_for(history, accepted_at)
    return entry


# ---------------------------------------------------------------------------
# 3. Merging the acceptance record into the page's own pending copies
# ---------------------------------------------------------------------------


def merge_accepted_into_pending(
    pending: Sequence[PendingMessage], accepted: Sequence[PendingMessage]
) -> list[PendingMessage]:
    """The page's pending list with the box's accepted messages folded in (§2.5).

    With no accepted entries, the pending list is unchanged. Otherwise each
    accepted entry, in order, is skipped when its uuid is already seen (a
    pending uuid, or an accepted entry kept before it), or when its normalized
    text is non-empty and equal to a pending entry's normalized text not yet
    matched (that text is then used up: two real sends of "yes" stay two).
    Every other accepted entry is kept, after all the pending ones.
    """
    if not accepted:
        return list(pending)
    seen_uuids = {entry["uuid"] for entry in pending}
    unmatched_texts = [normalize_for_compare(entry_text(entry)) for entry in pending]
    unmatched_texts = [text for text in unmatched_texts if text != ""]
    kept: list[PendingMessage] = []
    for entry in accepted:
        # The same entry is already pending (or was kept a moment ago).
        if entry["uuid"] in seen_uuids:
            continue
        text = normalize_for_compare(entry_text(entry))
        # A pending copy already carries this text: use that copy up, keep it alone.
        if text != "" and text in unmatched_texts:
            unmatched_texts.remove(text)
            continue
        seen_uuids.add(entry["uuid"])
        kept.append(entry)
    return [*pending, *kept]


# ---------------------------------------------------------------------------
# 4. Reconciling pending messages against the transcript (the client)
# ---------------------------------------------------------------------------


class ReconcileResult(TypedDict):
    """What `reconcile_pending` returns: the entries to show, and what is still pending."""

    messages: list[SessionEntry]
    pendingMessages: list[PendingMessage]


class _Candidate(TypedDict):
    """A transcript user entry a pending message may be the echo of."""

    uuid: str
    remainingText: str


def reconcile_pending(
    server_messages: Sequence[SessionEntry], pending_messages: Sequence[PendingMessage]
) -> ReconcileResult:
    """Retire the pending messages the transcript has caught up with (§2.5 `reconcilePending`).

    1. No pending messages: the server messages as they are.
    2. Walk the server messages newest to oldest, collecting user entries
       (uuid, normalized text) until `len(pending) + RECONCILE_LOOKBACK_EXTRA`
       are collected; put them back in chronological order.
    3. For each pending message in order: an empty normalized text drops it.
       Otherwise the oldest collected entry whose uuid is not in the pending
       message's `reconcileKnownUuids` and whose remaining text contains the
       pending text retires it, and loses the first occurrence of that text.
       No such entry: it stays pending.
    4. The result shows the server messages followed by those still pending.

    Removing an occurrence joins the text on either side of it; the rule
    compares what remains, as the original does.
    """
    if not pending_messages:
        return {"messages": list(server_messages), "pendingMessages": []}

    lookback = len(pending_messages) + RECONCILE_LOOKBACK_EXTRA
    candidates: list[_Candidate] = []
    for entry in reversed(server_messages):
        # Enough user entries collected: older ones cannot be an echo.
        if len(candidates) >= lookback:
            break
        # Only a user entry can echo a user's message.
        if entry["type"] == "user":
            candidates.append(
                {"uuid": entry["uuid"], "remainingText": normalize_for_compare(entry_text(entry))}
            )
    candidates.reverse()

    still_pending: list[PendingMessage] = []
    for pending in pending_messages:
        pending_text = normalize_for_compare(entry_text(pending))
        # Nothing left to compare: the entry is dropped, neither shown nor kept.
        if pending_text == "":
            continue
        baseline = set(pending.get("reconcileKnownUuids", []))
        echo = next(
            (
                candidate
                for candidate in candidates
                # Not an entry that existed before this message, and it holds the text.
                if candidate["uuid"] not in baseline and pending_text in candidate["remainingText"]
            ),
            None,
        )
        if echo is None:
            still_pending.append(pending)
            continue
        # One durable occurrence retires one pending message.
        echo["remainingText"] = echo["remainingText"].replace(pending_text, "", 1)

    return {"messages": [*server_messages, *still_pending], "pendingMessages": still_pending}
