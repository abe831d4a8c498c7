"""The span walk: the unread part of a transcript, in one page of memory (§4.3).

`beebox_spec.review.journal.resolve_span` states the rule over a list of every
entry. Here the same answer comes from a walk over a *stream* of entries from the top:

- the prefix hash is folded entry by entry (`PrefixHasher`: SHA-256 over the
  same parts `prefix_hash` joins), so nothing before the boundary is kept;
- at the first entry carrying the journal's `endUuid` the running digest is
  compared with the journal's `prefixHash`; on a match the walk collects the
  following entries, at most `limit` (one page, `MAX_SESSION_ENTRIES`), and
  looks one further to know whether the span is `clipped`;
- a bootstrap (no journal, boundary missing, prefix rewritten) opens the stream
  again and takes its first `limit` entries, so the walk never holds more than
  one page.

A stream is anything that yields ``(entry, tag)`` pairs; the tag rides along
(for files: where the entry's line ends) and comes back for the span's last entry
and the boundary. `entries_from_pages` adapts §4.3's `readPage({offset, limit})`
to a stream (the walk ends on an empty page or once the offset reaches the
total, not on a short page). The Hypothesis tests prove every answer equal to
the spec's.

`TranscriptEntries` streams a transcript file through the production reader
(`beebox_impl.transcript`: the guarded line reader and the spec's per-line
rules), counting real user turns (§4.2) on its first pass. A walk can also
*resume* at a boundary it has seen: `BoundaryMark` keeps the hash state there
and the byte offset where the boundary's line ends, with a digest of the file's
bytes before it. If the file still starts with exactly those bytes, every entry
up to the boundary, and so the prefix hash, is what it was; the walk reads on
from that offset instead of from the top. The run uses this to read a grown
transcript once, not twice, between discovery and the review step.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Generic, TypeAlias, TypeVar

from beebox_impl.transcript.index import interpret_line
from beebox_impl.transcript.lines import scan_line_records
from beebox_spec.entries import MAX_SESSION_ENTRIES, JsonObject, SessionEntry, SessionHistory
from beebox_spec.errors import InvariantError
from beebox_spec.review.journal import BootstrapReason, JournalBoundary, ResolvedSpan
from beebox_spec.review.rendering import render_entries
from beebox_spec.review.snippets import FIRST_MESSAGE_WINDOW, first_message_snippet
from beebox_spec.review.turns import first_real_user_snippet, real_user_turn_text

__all__ = [
    "BoundaryMark",
    "FileTag",
    "PrefixHasher",
    "SpanWalk",
    "TranscriptEntries",
    "entries_from_pages",
    "first_message_title",
    "hash_on",
    "raw_prefix_digest",
    "raw_prefix_hash",
    "resolve_span_walk",
]

T = TypeVar("T")
Blake2b: TypeAlias = "hashlib.blake2b"

_SURROGATE: Final = re.compile("[\ud800-\udfff]")


class PrefixHasher:
    """`beebox_spec.review.journal.prefix_hash`, folded one entry at a time.

    The spec hashes ``"\\n".join(uuid + "\\u0000" + render_entries([entry]))``;
    feeding the same parts with the same separators to one SHA-256 gives the
    same digest. A lone surrogate is encoded as U+FFFD, as `content_hash` does.
    """

    __slots__ = ("_folded", "_sha")

    def __init__(self) -> None:
        self._sha = hashlib.sha256()
        self._folded = 0

    def fold(self, entry: SessionEntry) -> None:
        """Add the next entry of the prefix."""
        part = f"{entry['uuid']}\u0000{render_entries([entry])}"
        try:
            encoded = part.encode("utf-8")
        except UnicodeEncodeError:
            encoded = _SURROGATE.sub("\ufffd", part).encode("utf-8")
        if self._folded:
            self._sha.update(b"\n")
        self._sha.update(encoded)
        self._folded += 1

    def digest(self) -> str:
        """The prefix hash of the entries folded so far (16 hex digits)."""
        return self._sha.hexdigest()[:16]

    def copy(self) -> PrefixHasher:
        """An independent hasher in the same state."""
        twin = PrefixHasher()
        twin._sha = self._sha.copy()
        twin._folded = self._folded
        return twin


@dataclass(frozen=True)
class BoundaryMark(Generic[T]):
    """The walk's state just after the journal's boundary entry: where to resume.

    `hasher` has folded every entry through the boundary, `index` is the
    boundary's absolute index, `tag` the boundary entry's tag.
    """

    hasher: PrefixHasher
    index: int
    tag: T


@dataclass(frozen=True)
class SpanWalk(Generic[T]):
    """The resolved span, the tag of its last entry, and the boundary it continued from."""

    span: ResolvedSpan
    last_tag: T | None
    boundary: BoundaryMark[T] | None


EntryStream = Iterator[tuple[SessionEntry, T]]


def resolve_span_walk(
    open_entries: Callable[[], EntryStream[T]],
    applied: JournalBoundary | None,
    limit: int = MAX_SESSION_ENTRIES,
    *,
    resume: tuple[BoundaryMark[T], EntryStream[T]] | None = None,
    drain: bool = False,
) -> SpanWalk[T]:
    """`beebox_spec.review.journal.resolve_span` over a stream opened by `open_entries`.

    `resume` is a boundary mark for `applied` and the stream of the entries
    after it (the caller has proven the prefix unchanged). `drain` reads the
    first stream opened to its end even when the answer is known earlier, for
    a stream that counts something on the way (`TranscriptEntries`).
    """
    # A span of no entries would never advance: a caller bug (as in the spec).
    if limit < 1:
        raise InvariantError(f"span limit must be at least 1, got {limit}")
    if applied is None:
        return _bootstrap(open_entries(), limit, "no-journal", drain)
    if applied["endUuid"] == "":
        return _bootstrap(open_entries(), limit, "boundary-missing", drain)
    if resume is not None:
        mark, after = resume
        return _continue(mark.hasher.copy(), mark, after, limit, drain)
    stream = open_entries()
    hasher = PrefixHasher()
    for index, (entry, tag) in enumerate(stream):
        hasher.fold(entry)
        if entry["uuid"] != applied["endUuid"]:
            continue
        if hasher.digest() != applied["prefixHash"]:
            _drain(stream, drain)
            return _bootstrap(open_entries(), limit, "prefix-rewritten", False)
        mark = BoundaryMark(hasher.copy(), index, tag)
        return _continue(hasher, mark, stream, limit, drain)
    return _bootstrap(open_entries(), limit, "boundary-missing", False)


def _drain(stream: Iterator[object], drain: bool) -> None:
    if drain:
        for _ in stream:
            pass


def _take_span(
    hasher: PrefixHasher, stream: EntryStream[T], limit: int
) -> tuple[list[SessionEntry], T | None, bool]:
    # Up to `limit` entries, each folded into the hash: the span, its last tag, and
    # whether more followed (clipped: the rest waits for a later pass).
    span: list[SessionEntry] = []
    last_tag: T | None = None
    for entry, tag in stream:
        if len(span) == limit:
            return span, last_tag, True
        hasher.fold(entry)
        span.append(entry)
        last_tag = tag
    return span, last_tag, False


def _continue(
    hasher: PrefixHasher,
    mark: BoundaryMark[T],
    stream: EntryStream[T],
    limit: int,
    drain: bool,
) -> SpanWalk[T]:
    span, last_tag, clipped = _take_span(hasher, stream, limit)
    _drain(stream, drain)
    return SpanWalk(
        {
            "entries": span,
            "endIndex": mark.index + len(span) if span else -1,
            "endPrefixHash": hasher.digest() if span else None,
            "bootstrap": None,
            "clipped": clipped,
        },
        last_tag,
        mark,
    )


def _bootstrap(
    stream: EntryStream[T], limit: int, reason: BootstrapReason, drain: bool
) -> SpanWalk[T]:
    hasher = PrefixHasher()
    span, last_tag, clipped = _take_span(hasher, stream, limit)
    _drain(stream, drain)
    return SpanWalk(
        {
            "entries": span,
            "endIndex": len(span) - 1,
            "endPrefixHash": hasher.digest() if span else None,
            "bootstrap": reason,
            "clipped": clipped,
        },
        last_tag,
        None,
    )


def entries_from_pages(
    read_page: Callable[[int, int], SessionHistory], page_size: int = MAX_SESSION_ENTRIES
) -> Iterator[tuple[SessionEntry, None]]:
    """§4.3's paged read as a stream: pages until one is empty or the offset reaches `total`."""
    offset = 0
    while True:
        page = read_page(offset, page_size)
        entries = page["entries"]
        if not entries:
            return
        for entry in entries:
            yield entry, None
        offset += len(entries)
        if offset >= page["total"]:
            return


# ---------------------------------------------------------------------------
# Transcript files
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FileTag:
    """Where an entry's line ends in the file (`end`: the next line's first byte).

    `user_turns` and `first_user_snippet` are what the counting pass had seen
    through this line (zero and None on a pass that does not count).
    """

    end: int
    terminated: bool
    line_number: int
    user_turns: int
    first_user_snippet: str | None


class TranscriptEntries:
    """A transcript's entries as streams, and its real user turns (§4.2) on the first pass.

    `open()` starts a stream from the top; `open_after(mark)` starts one after a
    boundary mark. The first stream opened counts `user_turns` and finds
    `first_user_snippet` (seeded from the mark's tag for a resumed walk, which
    does not see the lines before the boundary); later streams count nothing.
    A missing or unreadable file raises its `OSError` from the stream.
    """

    def __init__(self, path: Path, session_id: str) -> None:
        self.path = path
        self.session_id = session_id
        self.user_turns = 0
        self.first_user_snippet: str | None = None
        self.bytes_read = 0
        # Where the counting pass's last complete line ended, and its number.
        self.counted_end = 0
        self.counted_lines = 0
        self._passes = 0

    def open(self) -> EntryStream[FileTag]:
        """The entries from the top of the file."""
        return self._stream(0, 1)

    def open_at(self, offset: int, first_line: int) -> EntryStream[FileTag]:
        """The entries from byte `offset`, a line start (line `first_line`): a counting
        pass over what follows a part of the file already counted elsewhere."""
        self.counted_end, self.counted_lines = offset, first_line - 1
        return self._stream(offset, first_line)

    def open_after(self, mark: BoundaryMark[FileTag]) -> EntryStream[FileTag]:
        """The entries after the boundary line `mark` names (its prefix counted by its tag)."""
        self.user_turns = mark.tag.user_turns
        self.first_user_snippet = mark.tag.first_user_snippet
        return self._stream(mark.tag.end, mark.tag.line_number + 1)

    def _stream(self, start: int, first_line: int) -> EntryStream[FileTag]:
        counting = self._passes == 0
        self._passes += 1
        with self.path.open("rb", buffering=0) as file:
            for record in scan_line_records(file, start=start, first_line_number=first_line):
                self.bytes_read += record.end - record.offset
                entry, parsed = interpret_line(record, self.session_id)
                # Only a user line can be a real turn: the others skip the check.
                if counting and parsed is not None and parsed.get("type") == "user":
                    self._count(parsed)
                if counting and record.terminated:
                    self.counted_end, self.counted_lines = record.end, record.line_number
                if entry is not None:
                    yield (
                        entry,
                        FileTag(
                            record.end,
                            record.terminated,
                            record.line_number,
                            self.user_turns,
                            self.first_user_snippet,
                        ),
                    )

    def _count(self, parsed: JsonObject) -> None:
        if real_user_turn_text(parsed) is None:
            return
        self.user_turns += 1
        if self.first_user_snippet is None:
            self.first_user_snippet = first_real_user_snippet([parsed])


def raw_prefix_digest(path: Path, length: int) -> bytes | None:
    """A digest of the file's first `length` bytes, or None when it is shorter or unreadable."""
    hashed = raw_prefix_hash(path, length)
    return None if hashed is None else hashed.digest()


def raw_prefix_hash(path: Path, length: int) -> Blake2b | None:
    """`raw_prefix_digest`'s hash, to be read or fed on (`hash_on`)."""
    return hash_on(hashlib.blake2b(digest_size=16), path, 0, length)


def hash_on(
    hashed: Blake2b, path: Path, start: int, stop: int, block_size: int = 1 << 20
) -> Blake2b | None:
    """`hashed` fed the file's bytes `start` to `stop`; None when it is shorter or unreadable."""
    remaining = stop - start
    try:
        with path.open("rb", buffering=0) as file:
            file.seek(start)
            while remaining > 0:
                chunk = file.read(min(block_size, remaining))
                if not chunk:
                    return None
                hashed.update(chunk)
                remaining -= len(chunk)
    except OSError:
        return None
    return hashed


def first_message_title(path: Path, session_id: str) -> str | None:
    """The first-message snippet a new husk is titled with (§4.1), None without a transcript.

    Reads only the first `FIRST_MESSAGE_WINDOW` entries.
    """
    source = TranscriptEntries(path, session_id)
    entries: list[SessionEntry] = []
    try:
        for entry, _ in source.open():
            entries.append(entry)
            if len(entries) == FIRST_MESSAGE_WINDOW:
                break
    except OSError:
        return None
    return first_message_snippet(entries)
