"""What ``bbx chat sessions`` lists, and which session is the box's current chat.

The box's chat sessions are the ones the page lists: one a husk card, read by
`beebox_impl.web.sessions.list_chat_sessions` (so a card means the same here), and
the chat's current session (``.beebox/chat-session-id.json``) before its husk is
made at the end of its first turn. For each: its title (the card's, as the page
shows it), when its transcript was last written (what the review's deferral reads
too), how many entries its history has and how many photos those show (image
blocks). Newest first; a session with no transcript here (a husk synced from
another machine) last.

Only the sessions listed are read, and through the transcript index (the box's
shelf when there is one): a history read page by page costs what its entries' text
costs, a photo's bytes skipped (`beebox_impl.transcript.history`), so a chat of
150 MB of photos counts in tens of milliseconds once indexed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO, TypedDict

import anyio

from beebox_impl.store.session_id import SessionIdFile
from beebox_impl.transcript import PageSlice, TranscriptIndexCache, read_history
from beebox_impl.transcript.location import InvalidSessionId
from beebox_impl.web.sessions import ChatSessionCard, list_chat_sessions
from beebox_spec.entries import MAX_SESSION_ENTRIES, SessionHistory
from beebox_spec.js_values import to_iso_timestamp

__all__ = [
    "SessionSummary",
    "current_session_id",
    "list_sessions",
    "shown_title",
    "write_sessions",
]

# Where a session's transcript is (`InvalidSessionId` for an id that names none).
TranscriptOf = Callable[[str], Path]

# Before any transcript was written: where a session with none sorts.
_NEVER = datetime.min.replace(tzinfo=UTC)


class SessionSummary(TypedDict):
    """One session as ``bbx chat sessions --json`` prints it.

    ``sessionId``, ``title``, ``contains`` and ``card`` are `GET /api/chat/sessions`'s
    (``title`` and ``contains`` null until set; ``card`` null for the current session
    before its husk is made); ``lastActivity`` is when the transcript was last
    written (ISO, UTC; null when there is none here); ``entries`` and ``photos``
    count its history and the image blocks in it; ``current`` marks the chat's.
    """

    sessionId: str
    title: str | None
    contains: str | None
    card: str | None
    current: bool
    lastActivity: str | None
    entries: int
    photos: int


def current_session_id(box_root: Path) -> str | None:
    """The SDK session id the box's chat goes on with (None: none yet)."""
    return anyio.run(SessionIdFile.for_box(box_root).load)


def list_sessions(
    box_root: Path,
    *,
    transcript_of: TranscriptOf,
    cache: TranscriptIndexCache,
    limit: int,
) -> tuple[list[SessionSummary], int]:
    """The ``limit`` newest sessions of the box, and how many more there are."""
    current = current_session_id(box_root)
    found: dict[str, SessionSummary] = {}
    for card in list_chat_sessions(box_root):
        # Two husks of one session (a hand-made copy) list it once: the newest card's.
        if card["sessionId"] not in found:
            found[card["sessionId"]] = _unread(card, current)
    if current is not None and current not in found:
        found[current] = _unread(None, current)
    rows = []
    for session_id, session in found.items():
        path = _transcript(transcript_of, session_id)
        rows.append((_written_at(path), path, session))
    # Newest first, those with no transcript here last; the card order breaks ties.
    rows.sort(key=lambda row: row[0] or _NEVER, reverse=True)
    for written, path, session in rows[:limit]:
        if written is None or path is None:
            continue
        session["lastActivity"] = to_iso_timestamp(written)
        session["entries"], session["photos"] = _history_counts(path, session["sessionId"], cache)
    return [session for _, _, session in rows[:limit]], max(0, len(rows) - limit)


def _unread(card: ChatSessionCard | None, current: str | None) -> SessionSummary:
    # A session's listing before its transcript is read (and if it cannot be); no
    # card: the current session, before its husk is made.
    session_id = card["sessionId"] if card is not None else current
    assert session_id is not None, "a session without a card is the current one"
    return {
        "sessionId": session_id,
        "title": card["title"] if card is not None else None,
        "contains": card["contains"] if card is not None else None,
        "card": card["card"] if card is not None else None,
        "current": session_id == current,
        "lastActivity": None,
        "entries": 0,
        "photos": 0,
    }


def _transcript(transcript_of: TranscriptOf, session_id: str) -> Path | None:
    try:
        return transcript_of(session_id)
    except InvalidSessionId:
        # A card naming an id no transcript can have: listed, with nothing to read.
        return None


def _written_at(path: Path | None) -> datetime | None:
    if path is None:
        return None
    try:
        return datetime.fromtimestamp(os.stat(path).st_mtime_ns / 1e9, UTC)
    except OSError:
        return None


def _history_counts(path: Path, session_id: str, cache: TranscriptIndexCache) -> tuple[int, int]:
    """How many entries the session's history has, and how many image blocks they hold."""
    photos = 0
    total = 0
    for page in _history_pages(path, session_id, cache):
        total = page["total"]
        for entry in page["entries"]:
            photos += sum(1 for block in entry["content"] if block["type"] == "image")
    return total, photos


def _history_pages(
    path: Path, session_id: str, cache: TranscriptIndexCache
) -> Iterator[SessionHistory]:
    # The whole history, a page at a time: a page is the most one read may hold.
    offset = 0
    while True:
        page = read_history(path, session_id, PageSlice(offset, MAX_SESSION_ENTRIES), cache=cache)
        yield page
        offset += len(page["entries"])
        if not page["entries"] or offset >= page["total"]:
            return


def shown_title(session: SessionSummary) -> str:
    """The session's title as the page shows it: the card's, else a name from its id."""
    # The page's own fallback (`beebox_impl/web/view.js`, the session list).
    return session["title"] or f"Session {session['sessionId'][:8]}"


def write_sessions(sessions: list[SessionSummary], more: int, out: TextIO) -> None:
    """The sessions as a table, the current one starred, for a person at a terminal."""
    if not sessions:
        out.write("no chat sessions yet: `bbx chat send TEXT` starts one\n")
        return
    out.write(f"  {'SESSION':<36}  {'LAST ACTIVITY':<16}  {'ENTRIES':>7}  {'PHOTOS':>6}  TITLE\n")
    for session in sessions:
        mark = "*" if session["current"] else " "
        out.write(
            f"{mark} {session['sessionId']:<36}  {_local_time(session['lastActivity']):<16}"
            f"  {session['entries']:>7}  {session['photos']:>6}  {shown_title(session)}\n"
        )
    if any(session["current"] for session in sessions):
        out.write("(* the box's current chat: `bbx chat history` shows it)\n")
    if more:
        out.write(f"({more} older not shown: --limit N shows more)\n")


def _local_time(iso: str | None) -> str:
    if iso is None:
        return "no transcript"
    return datetime.fromisoformat(iso).astimezone().strftime("%Y-%m-%d %H:%M")
