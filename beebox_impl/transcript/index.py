"""Per-transcript offset indexes, and the cache that keeps them.

Why they exist: `docs/design.md#design-5-offset-index` (§5: a photo costs one seek)
and `docs/design.md#design-5-tail-reads` (§5: a page read uses an offset index).

An index records, for one file as it was at one `(path, device, inode, size,
mtime)`, where every line sits and what it contributes: which lines yield history
entries (so a slice of history reads only its own lines, by offset, and of a long
line stripped of its photos only the bytes around them), and which
line is the first whose own top-level `uuid` is a given id (so a photo costs one
seek). It is built by one forward pass of the guarded reader
(`beebox_impl.transcript.lines`), with the spec's per-line rules
(`beebox_spec.transcript.entry_from_record`, `oversize_entry_from_head`), so it
agrees with `beebox_spec.transcript.entries_from_lines` and
`beebox_spec.media.find_line_by_uuid` by construction; the property tests check it.

**The media lookup.** `find_line_by_uuid` takes, in file order, the lines holding
the needle ``"uuid":"<id>"``: one over `MAX_MEDIA_LINE_BYTES` answers too-large,
one that parses with that own uuid answers found. The index answers for ids of the
media reference grammar (`SAFE_ID_RE`; others are looked up by a scan) from:

- `line_uuid_keys`: for every line the pass parsed (its text, stripped or not:
  stripping changes only base64 string contents, so the parse succeeds or fails
  alike and the top-level `uuid` is the same), its own uuid when the line also
  holds that uuid's needle, as a 64-bit key (a digest: the same in every process);
  the first line with an id's key is found by `ChunkedIntArray.index`, at C
  speed within each chunk. Eight bytes a line instead of a dict entry of about a
  hundred: 64 cached indexes of long chats stay small. Two ids sharing a key cost
  a scan, never a wrong answer (the line found is verified);
- `opaque_lines`: the lines the pass could not settle that way: oversize lines
  (never parsed by the history read) and lines over `MAX_MEDIA_LINE_BYTES`, each
  with the ids its ``"uuid":"`` needles name (`LineRecord.uuid_values`). Before
  the first parsed line, a lookup walks these in order: a too-large one holding
  the needle answers too-large, an oversize one holding it is parsed then (once;
  the spec also materialises a line of up to 16 MiB to parse it).

An id's needle holds no quote, so its presence is the same in the raw line and in
the stripped one (a payload lies between two consecutive quotes, and a needle
cannot end on a payload's opening quote).

**Tool results.** A call's result sits in a later line than its call (the spec's
rule 5, `beebox_spec.transcript.entries_from_lines`), so reading an entry by
offset also reads the lines that answered its calls: `result_links` records, for
each answered call, the entry, the result's line and which of that line's results
it was (`ToolResultLinks`); `open_calls` the calls still unanswered when the
complete lines end, by id (latest entry), for an extension to answer. The pass
itself attaches results to the entries it hands over.

**Staleness.** An index is a snapshot, not changed after it is built (several
threads may read it; only its cache of opaque lines' own uuids fills on demand,
each entry written whole). When the file at the path is the same inode grown
longer, and the bytes just before the last complete line's end are unchanged, a
new index extends the old one from that point (a last line without its newline is
read again, complete or not); any other change builds a new index. Reads through
an index verify what they find (the line at an offset must still yield an entry,
or carry the uuid); a mismatch drops the index.
"""

from __future__ import annotations

import os

# `threading.Lock` itself, without the rest of `threading` (~0.6 ms of a read).
from _thread import allocate_lock
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Final, NamedTuple

from beebox_impl.blake2 import blake2b
from beebox_impl.files import FileIdentity
from beebox_impl.logs import debug
from beebox_impl.transcript.chunked import ChunkedIntArray
from beebox_impl.transcript.lines import (
    DEFAULT_BLOCK_BYTES,
    LineRecord,
    scan_line_records,
)
from beebox_spec.entries import JsonObject, SessionContentBlock, SessionEntry
from beebox_spec.errors import InvalidArgument
from beebox_spec.js_values import parse_json_object_or_none
from beebox_spec.media import MAX_MEDIA_LINE_BYTES, SAFE_ID_RE
from beebox_spec.transcript import (
    PhotoMode,
    attach_tool_result,
    entry_from_record,
    oversize_entry_from_head,
    tool_results_of_record,
)

if TYPE_CHECKING:
    from beebox_impl.transcript.persist import IndexShelf

__all__ = [
    "DEFAULT_SHELVE_EVERY_BYTES",
    "OpaqueLine",
    "StrippedLine",
    "StrippedLines",
    "ToolResultLinks",
    "TranscriptIndex",
    "TranscriptIndexCache",
    "interpret_line",
    "is_indexed_uuid",
    "uuid_key",
    "uuid_needle",
]


# How much an index may have read past its shelved copy before it is shelved again.
DEFAULT_SHELVE_EVERY_BYTES: Final = 1024 * 1024

# How many bytes before the last complete line's end must be unchanged for a grown
# file to be taken as appended to.
_FINGERPRINT_BYTES: Final = 4096

EntrySink = Callable[[int, SessionEntry], None]


def uuid_needle(uuid: str) -> str:
    """What `find_line_by_uuid` looks for in a line: ``"uuid":"<id>"``."""
    return f'"uuid":"{uuid}"'


# The key of a line without an id to find it by; no id's key is ever this.
_NO_UUID: Final = 0


def uuid_key(uuid: str) -> int:
    """The 64-bit key an id is indexed under (never `_NO_UUID`).

    A digest, not `hash`: the key is the same in every process, so an index kept
    on disk (`beebox_impl.transcript.persist`) answers in the next one.
    """
    digest = blake2b(uuid.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True) or 1


def is_indexed_uuid(uuid: str) -> bool:
    """Whether the index answers for this id (the media reference grammar)."""
    return SAFE_ID_RE.fullmatch(uuid) is not None


def interpret_line(
    record: LineRecord, session_id: str | None
) -> tuple[SessionEntry | None, JsonObject | None]:
    """What a classified line contributes: its entry (or None), and its parse.

    `entries_from_lines` for one line. `session_id` names the session for the
    references of a stripped line; whether there is an entry does not depend on it
    (a stripped image shows as a reference or as its placeholder text, both kept).
    """
    if record.kind == "oversize":
        assert record.head is not None, "an oversize line keeps its head"
        stub = oversize_entry_from_head(record.head, record.utf8_bytes, record.line_number)
        return stub, None
    assert record.text is not None, "a parseable line keeps its text"
    parsed = parse_json_object_or_none(record.text)
    # Blank, a comment, half-written, or not an object: skipped.
    if parsed is None:
        return None, None
    media_session_id = session_id if record.media_stripped else None
    return entry_from_record(parsed, media_session_id), parsed


class StrippedLine(NamedTuple):
    """A long line the pass stripped into an entry: where its payloads were.

    A later read of its entry reads only the bytes between them
    (`read_stripped_line_at`): a photo's bytes are read by the pass and by a fetch
    of that photo, not by every history read that shows its turn.
    """

    payload_spans: tuple[tuple[int, int], ...]
    utf8_bytes: int


class StrippedLines:
    """The index's `StrippedLine` of every line the pass stripped, in integer arrays.

    A chat with photos has one on most of its turns; kept as a dict of tuples they
    cost ~700 bytes a line (15 objects), a long chat's index growing by megabytes.
    Here a line costs 8 bytes for its number, 8 for its size, 8 for where its spans
    end and 16 a payload. Lines are added in increasing order; `get` finds one by
    bisection. The builder fills its own copy; an index's is not changed after.
    """

    __slots__ = ("_bounds", "_lines", "_span_ends", "_utf8_bytes")

    def __init__(self) -> None:
        self._lines = ChunkedIntArray()
        self._utf8_bytes = ChunkedIntArray()
        # Where each line's payload bounds end in `_bounds` (start, stop, start, ...).
        self._span_ends = ChunkedIntArray()
        self._bounds = ChunkedIntArray()

    def add(self, line_index: int, known: StrippedLine) -> None:
        """Record line ``line_index`` (after every line already recorded)."""
        if self._lines and line_index <= self._lines[-1]:
            raise InvalidArgument(f"stripped line {line_index} added out of order")
        self._lines.append(line_index)
        self._utf8_bytes.append(known.utf8_bytes)
        for start, stop in known.payload_spans:
            self._bounds.append(start)
            self._bounds.append(stop)
        self._span_ends.append(len(self._bounds))

    def get(self, line_index: int) -> StrippedLine | None:
        """Line ``line_index``'s record, or None when the pass did not strip it."""
        position = self._lines.bisect_left(line_index)
        if position == len(self._lines) or self._lines[position] != line_index:
            return None
        return self._record(position)

    def _record(self, position: int) -> StrippedLine:
        start = self._span_ends[position - 1] if position else 0
        bounds = self._bounds.values_between(start, self._span_ends[position])
        spans = tuple(zip(bounds[::2], bounds[1::2], strict=True))
        return StrippedLine(spans, self._utf8_bytes[position])

    def before(self, line_count: int) -> StrippedLines:
        """A copy holding the lines before ``line_count`` (an extension's start),
        sharing this one's full chunks (`ChunkedIntArray.prefix`)."""
        kept = self._lines.bisect_left(line_count)
        copy = StrippedLines()
        copy._lines = self._lines.prefix(kept)
        copy._utf8_bytes = self._utf8_bytes.prefix(kept)
        copy._span_ends = self._span_ends.prefix(kept)
        copy._bounds = self._bounds.prefix(self._span_ends[kept - 1] if kept else 0)
        return copy

    def arrays(self) -> tuple[ChunkedIntArray, ChunkedIntArray, ChunkedIntArray, ChunkedIntArray]:
        """The four arrays that hold the records, for `from_arrays` (a shelf's copy):
        line numbers, sizes, where each line's bounds end, the payload bounds."""
        return self._lines, self._utf8_bytes, self._span_ends, self._bounds

    @classmethod
    def from_arrays(
        cls,
        lines: ChunkedIntArray,
        utf8_bytes: ChunkedIntArray,
        span_ends: ChunkedIntArray,
        bounds: ChunkedIntArray,
    ) -> StrippedLines:
        """The records `arrays` gave; ValueError when they are not such a set."""
        if not len(lines) == len(utf8_bytes) == len(span_ends):
            raise InvalidArgument("stripped lines: arrays of different lengths")
        if (span_ends[-1] if len(span_ends) else 0) != len(bounds):
            raise InvalidArgument("stripped lines: payload bounds do not end where the lines say")
        previous_line, previous_end = -1, 0
        for line, end in zip(lines, span_ends, strict=True):
            if line <= previous_line or end < previous_end or end % 2:
                raise InvalidArgument(f"stripped lines: line {line} or its bounds out of order")
            previous_line, previous_end = line, end
        records = cls()
        records._lines, records._utf8_bytes = lines, utf8_bytes
        records._span_ends, records._bounds = span_ends, bounds
        return records

    def items(self) -> Iterator[tuple[int, StrippedLine]]:
        """Every line and its record, in line order."""
        for position, line_index in enumerate(self._lines):
            yield line_index, self._record(position)

    def __contains__(self, line_index: object) -> bool:
        return isinstance(line_index, int) and self.get(line_index) is not None

    def __len__(self) -> int:
        return len(self._lines)


class ToolResultLinks:
    """Which line answered which call: ``(entry, line, result)`` triples, in order.

    ``entry`` is the history position of the entry holding the call, ``line`` the
    index of the line holding its result, ``result`` which of that line's
    `tool_result` blocks it is (`tool_results_of_record`'s order). Kept sorted by
    entry (then line) in three integer arrays, so an entry's results are found by
    bisection. Results nearly always come in the order of their calls, so an
    extension appends; one that answers an older call rebuilds the arrays.
    """

    __slots__ = ("_entries", "_lines", "_results")

    def __init__(self) -> None:
        self._entries = ChunkedIntArray()
        self._lines = ChunkedIntArray()
        self._results = ChunkedIntArray()

    def for_entry(self, position: int) -> list[tuple[int, int]]:
        """The ``(line, result)`` pairs that answered calls of entry ``position``."""
        at = self._entries.bisect_left(position)
        found = []
        while at < len(self._entries) and self._entries[at] == position:
            found.append((self._lines[at], self._results[at]))
            at += 1
        return found

    def with_links(self, links: list[tuple[int, int, int]]) -> ToolResultLinks:
        """A copy with ``links`` (in line order) added; this one is not changed."""
        if not links:
            return self
        ordered = sorted(links)
        last = (self._entries[-1], self._lines[-1]) if self._entries else None
        grown = ToolResultLinks()
        if last is None or ordered[0][:2] > last:
            # After every link held: share the held arrays' full chunks.
            count = len(self._entries)
            grown._entries = self._entries.prefix(count)
            grown._lines = self._lines.prefix(count)
            grown._results = self._results.prefix(count)
        else:
            ordered = sorted([*self, *ordered])
        for entry, line, result in ordered:
            grown._entries.append(entry)
            grown._lines.append(line)
            grown._results.append(result)
        return grown

    def __iter__(self) -> Iterator[tuple[int, int, int]]:
        return zip(self._entries, self._lines, self._results, strict=True)

    def __len__(self) -> int:
        return len(self._entries)

    def arrays(self) -> tuple[ChunkedIntArray, ChunkedIntArray, ChunkedIntArray]:
        """The three arrays (entries, lines, results), for `from_arrays` (a shelf's copy)."""
        return self._entries, self._lines, self._results

    @classmethod
    def from_arrays(
        cls, entries: ChunkedIntArray, lines: ChunkedIntArray, results: ChunkedIntArray
    ) -> ToolResultLinks:
        """The links `arrays` gave; ValueError when they are not such a set."""
        if not len(entries) == len(lines) == len(results):
            raise InvalidArgument("tool result links: arrays of different lengths")
        previous = (-1, -1)
        for entry, line, result in zip(entries, lines, results, strict=True):
            if (entry, line) < previous or min(entry, line, result) < 0:
                raise InvalidArgument(f"tool result links: ({entry}, {line}) out of order")
            previous = (entry, line)
        links = cls()
        links._entries, links._lines, links._results = entries, lines, results
        return links


class OpaqueLine(NamedTuple):
    """A line whose own uuid the pass did not read, or that is too large to serve.

    `uuid_values` are the ids its ``"uuid":"`` needles name; None means too many
    to list, and a lookup reads the line to look for its needle.
    """

    line_index: int
    too_large: bool
    uuid_values: frozenset[str] | None


class TranscriptIndex:
    """One transcript's lines, as they were at `identity` (a snapshot, never changed).

    Lines are indexed from 0 (line number − 1). The first `committed_lines` end
    in a newline; a last line without one follows them, and an extension reads it
    again. Every `committed_*` count says how much of the matching part belongs to
    the complete lines. `scanned_from` is the byte where the pass that made this
    snapshot started (0 for a build, the old end of complete lines for an extension).

    Every attribute is `Final`: the type checker refuses a change, as a frozen
    dataclass would at run time (no dataclass here: `beebox_impl.transcript`). Two
    indexes are equal only if they are one object.
    """

    __slots__ = (
        "committed_end",
        "committed_entries",
        "committed_lines",
        "committed_opaque",
        "committed_unparsable",
        "entry_lines",
        "fingerprint",
        "identity",
        "line_lengths",
        "line_offsets",
        "line_uuid_keys",
        "opaque_lines",
        "opaque_own_uuids",
        "open_calls",
        "path",
        "photos",
        "result_links",
        "scanned_from",
        "stripped_lines",
        "tail_result_links",
        "unparsable_lines",
    )

    def __init__(  # noqa: PLR0913 - the snapshot's parts, each named at the call
        self,
        *,
        identity: FileIdentity,
        path: str,
        line_offsets: ChunkedIntArray,
        line_lengths: ChunkedIntArray,
        entry_lines: ChunkedIntArray,
        line_uuid_keys: ChunkedIntArray,
        stripped_lines: StrippedLines,
        opaque_lines: tuple[OpaqueLine, ...],
        unparsable_lines: int,
        committed_lines: int,
        committed_end: int,
        committed_entries: int,
        committed_opaque: int,
        committed_unparsable: int,
        fingerprint: bytes,
        scanned_from: int,
        photos: PhotoMode = "original",
        result_links: ToolResultLinks | None = None,
        open_calls: dict[str, int] | None = None,
        tail_result_links: tuple[tuple[int, int, int], ...] = (),
        opaque_own_uuids: dict[int, str | None] | None = None,
    ) -> None:
        self.identity: Final = identity
        self.path: Final = path
        self.line_offsets: Final = line_offsets
        self.line_lengths: Final = line_lengths
        self.entry_lines: Final = entry_lines
        self.line_uuid_keys: Final = line_uuid_keys
        self.stripped_lines: Final = stripped_lines
        self.opaque_lines: Final = opaque_lines
        self.unparsable_lines: Final = unparsable_lines
        self.committed_lines: Final = committed_lines
        self.committed_end: Final = committed_end
        self.committed_entries: Final = committed_entries
        self.committed_opaque: Final = committed_opaque
        self.committed_unparsable: Final = committed_unparsable
        self.fingerprint: Final = fingerprint
        self.scanned_from: Final = scanned_from
        # The photo mode its lines were classified in (`beebox_spec.transcript`, rule 2).
        self.photos: Final = photos
        # The answered calls of the complete lines, and the calls still open there.
        self.result_links: Final = ToolResultLinks() if result_links is None else result_links
        self.open_calls: Final = {} if open_calls is None else open_calls
        # The links a last line without its newline made (read again by an extension).
        self.tail_result_links: Final = tail_result_links
        # Own uuids of opaque lines read on demand (a cache beside the snapshot:
        # a line's own uuid does not change while the identity holds).
        self.opaque_own_uuids: Final = {} if opaque_own_uuids is None else opaque_own_uuids

    @property
    def line_count(self) -> int:
        """Every line, blank and unparsable ones included."""
        return len(self.line_offsets)

    @property
    def entry_count(self) -> int:
        """The history's total: how many lines yield an entry."""
        return len(self.entry_lines)

    def results_for(self, position: int) -> list[tuple[int, int]]:
        """The ``(line, result)`` pairs that answered the calls of entry ``position``,
        in line order (`ToolResultLinks`)."""
        found = self.result_links.for_entry(position)
        found.extend(
            (line, result) for entry, line, result in self.tail_result_links if entry == position
        )
        return found

    def line_span(self, line_index: int) -> tuple[int, int]:
        """Where line `line_index` sits: its byte offset and length."""
        return self.line_offsets[line_index], self.line_lengths[line_index]

    def first_line_with_uuid(self, uuid: str) -> int | None:
        """The first parsed line whose own uuid is `uuid` (or shares its key) and
        that holds its needle; the caller verifies it."""
        try:
            return self.line_uuid_keys.index(uuid_key(uuid))
        except ValueError:
            return None


class _IndexBuilder:
    # Accumulates a new index from a forward pass, starting from an older index's
    # complete lines when extending it.
    def __init__(self, base: TranscriptIndex | None) -> None:
        if base is None:
            self.line_offsets = ChunkedIntArray()
            self.line_lengths = ChunkedIntArray()
            self.entry_lines = ChunkedIntArray()
            self.line_uuid_keys = ChunkedIntArray()
            self.stripped_lines = StrippedLines()
            self.opaque: list[OpaqueLine] = []
            self.unparsable = 0
            self.opaque_own_uuids: dict[int, str | None] = {}
            self.committed_end = 0
            self.result_links = ToolResultLinks()
            self.open_calls: dict[str, int] = {}
        else:
            # Prefixes share the base's full chunks: an extension copies at most
            # one chunk an array, not the whole index (`ChunkedIntArray`).
            lines = base.committed_lines
            self.line_offsets = base.line_offsets.prefix(lines)
            self.line_lengths = base.line_lengths.prefix(lines)
            self.entry_lines = base.entry_lines.prefix(base.committed_entries)
            self.line_uuid_keys = base.line_uuid_keys.prefix(lines)
            self.stripped_lines = base.stripped_lines.before(lines)
            self.opaque = list(base.opaque_lines[: base.committed_opaque])
            self.unparsable = base.committed_unparsable
            self.opaque_own_uuids = {
                line: own for line, own in base.opaque_own_uuids.items() if line < lines
            }
            self.committed_end = base.committed_end
            self.result_links = base.result_links
            self.open_calls = dict(base.open_calls)
        # This pass's links, in line order; those of complete lines come first.
        self.new_links: list[tuple[int, int, int]] = []
        self.committed_new_links = 0
        # The open calls as the complete lines left them, taken when a last line
        # without its newline is met (an extension starts from these).
        self.committed_open_calls: dict[str, int] | None = None
        # The blocks of this pass's entries whose calls are open, by id: the pass
        # attaches results to the entries it hands over (rule 5, as the spec reads).
        self.pass_calls: dict[str, SessionContentBlock] = {}
        self.committed_lines = len(self.line_offsets)
        self.committed_entries = len(self.entry_lines)
        self.committed_opaque = len(self.opaque)
        self.committed_unparsable = self.unparsable

    def add(self, record: LineRecord, session_id: str | None, sink: EntrySink | None) -> None:
        line_index = record.line_number - 1
        assert line_index == len(self.line_offsets), "lines arrive in order"
        self.line_offsets.append(record.offset)
        self.line_lengths.append(record.length)
        entry, parsed = interpret_line(record, session_id)
        if record.kind == "parseable" and parsed is None and record.text:
            self.unparsable += 1
        if not record.terminated and self.committed_open_calls is None:
            # Read again by an extension: what it does to the open calls is not kept.
            self.committed_open_calls = dict(self.open_calls)
        if entry is not None:
            position = len(self.entry_lines)
            if sink is not None:
                sink(position, entry)
            self.entry_lines.append(line_index)
            self._open_calls_of(entry, position, keep_blocks=sink is not None)
        answered = parsed is not None and self._answer_calls(parsed, line_index)
        own_uuid = _own_indexed_uuid(record, parsed)
        too_large = record.utf8_bytes > MAX_MEDIA_LINE_BYTES
        # Unsettled by the parse, or too large to serve, and naming some id.
        if (record.kind == "oversize" or too_large) and record.uuid_values != frozenset():
            self.opaque.append(OpaqueLine(line_index, too_large, record.uuid_values))
        self.line_uuid_keys.append(_NO_UUID if own_uuid is None else uuid_key(own_uuid))
        # A line read again by offset (an entry, or a result of one) is read around
        # its photos.
        if record.payload_spans is not None and (entry is not None or answered):
            self.stripped_lines.add(
                line_index, StrippedLine(record.payload_spans, record.utf8_bytes)
            )
        if record.terminated:
            self.committed_lines = line_index + 1
            self.committed_end = record.end
            self.committed_entries = len(self.entry_lines)
            self.committed_opaque = len(self.opaque)
            self.committed_unparsable = self.unparsable
            self.committed_new_links = len(self.new_links)

    def _open_calls_of(self, entry: SessionEntry, position: int, *, keep_blocks: bool) -> None:
        # Rule 5: each call with an id waits for its result (the latest block an id).
        for block in entry["content"]:
            tool_id = block.get("toolId", "")
            if block["type"] == "tool_use" and tool_id != "":
                self.open_calls[tool_id] = position
                if keep_blocks:
                    self.pass_calls[tool_id] = block

    def _answer_calls(self, parsed: JsonObject, line_index: int) -> bool:
        # Rule 5: each result answers the open call with its id, if any. Whether one did.
        answered = False
        for ordinal, result in enumerate(tool_results_of_record(parsed)):
            position = self.open_calls.pop(result["toolUseId"], None)
            if position is None:
                continue
            answered = True
            self.new_links.append((position, line_index, ordinal))
            block = self.pass_calls.pop(result["toolUseId"], None)
            if block is not None:
                attach_tool_result(block, result)
        return answered

    def build(
        self,
        path: str,
        identity: FileIdentity,
        fingerprint: bytes,
        scanned_from: int,
        photos: PhotoMode,
    ) -> TranscriptIndex:
        return TranscriptIndex(
            identity=identity,
            path=path,
            line_offsets=self.line_offsets,
            line_lengths=self.line_lengths,
            entry_lines=self.entry_lines,
            line_uuid_keys=self.line_uuid_keys,
            stripped_lines=self.stripped_lines,
            opaque_lines=tuple(self.opaque),
            unparsable_lines=self.unparsable,
            committed_lines=self.committed_lines,
            committed_end=self.committed_end,
            committed_entries=self.committed_entries,
            committed_opaque=self.committed_opaque,
            committed_unparsable=self.committed_unparsable,
            fingerprint=fingerprint,
            scanned_from=scanned_from,
            photos=photos,
            result_links=self.result_links.with_links(self.new_links[: self.committed_new_links]),
            open_calls=(
                self.open_calls if self.committed_open_calls is None else self.committed_open_calls
            ),
            tail_result_links=tuple(self.new_links[self.committed_new_links :]),
            opaque_own_uuids=self.opaque_own_uuids,
        )


def _own_indexed_uuid(record: LineRecord, parsed: JsonObject | None) -> str | None:
    # The line's own top-level uuid, when the lookup could answer with this line.
    if parsed is None:
        return None
    own = parsed.get("uuid")
    if not isinstance(own, str) or not is_indexed_uuid(own):
        return None
    assert record.text is not None, "a parsed line has its text"
    # Only a line holding its needle is a candidate at all.
    return own if uuid_needle(own) in record.text else None


def _fingerprint(file: BinaryIO, end: int) -> bytes:
    # A digest of the bytes just before `end`: unchanged if the file was only appended to.
    start = max(0, end - _FINGERPRINT_BYTES)
    file.seek(start)
    return blake2b(file.read(end - start), digest_size=16).digest()


def build_index(
    path: Path,
    file: BinaryIO,
    identity: FileIdentity,
    *,
    base: TranscriptIndex | None = None,
    session_id: str | None = None,
    sink: EntrySink | None = None,
    block_size: int = DEFAULT_BLOCK_BYTES,
    photos: PhotoMode = "original",
) -> TranscriptIndex:
    """Index `file` up to `identity.size`, extending `base`'s complete lines if given,
    its lines classified in photo mode `photos` (`base`'s, when extending).

    Every entry the pass meets is handed to `sink` with its position in the
    history (read with `session_id`), so a caller can keep the ones it wants.
    """
    # An index is read in one mode throughout: an extension is its base's.
    if base is not None and base.photos != photos:
        raise InvalidArgument(f"extending an index read in {base.photos!r} in {photos!r}")
    builder = _IndexBuilder(base)
    start, first_line = builder.committed_end, builder.committed_lines + 1
    for record in scan_line_records(
        file,
        start=start,
        stop=identity.size,
        first_line_number=first_line,
        block_size=block_size,
        photos=photos,
    ):
        builder.add(record, session_id, sink)
    index = builder.build(
        os.fspath(path), identity, _fingerprint(file, builder.committed_end), start, photos
    )
    debug(
        __name__,
        "indexed %s: %d lines (%d read from byte %d), %d entries, %d unparsable lines skipped",
        path,
        index.line_count,
        index.line_count - first_line + 1,
        start,
        index.entry_count,
        index.unparsable_lines,
    )
    return index


class _Builder:
    """The build lock of one path, and its users (`TranscriptIndexCache._building`)."""

    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = allocate_lock()
        self.users = 0


class TranscriptIndexCache:
    """A thread-safe LRU of per-file indexes (`capacity` files), keyed by path.

    The lock guards only the map; reading files happens outside it. Two threads
    that miss at once do not both build: the second waits for the first (a lock per
    path) and finds the index current, or extends it by what was appended in
    between. With a `shelf`, a miss looks there before
    reading the file, and indexes are shelved so the next process starts warm: one
    built from the top at once, an extended one once it has read
    `shelve_every_bytes` since it was last shelved (a chat growing a turn at a
    time is not rewritten to disk every turn; the next process extends what was
    shelved by at most that many bytes), and every one not yet shelved on
    `shelve_all` (a box closing).
    """

    def __init__(
        self,
        capacity: int = 64,
        *,
        block_size: int = DEFAULT_BLOCK_BYTES,
        shelf: IndexShelf | None = None,
        shelve_every_bytes: int = DEFAULT_SHELVE_EVERY_BYTES,
        photos: PhotoMode = "original",
    ) -> None:
        # A cache that cannot hold one index would rebuild on every read.
        if capacity < 1:
            raise InvalidArgument(f"capacity must be at least 1, got {capacity}")
        # A block must hold at least one byte for the reader to make progress.
        if block_size < 1:
            raise InvalidArgument(f"block_size must be at least 1, got {block_size}")
        self.capacity = capacity
        self.block_size = block_size
        self.photos = photos
        self.shelf = shelf
        self.shelve_every_bytes = shelve_every_bytes
        # Per path, where the shelved copy's complete lines end (guarded by the lock).
        self._shelved_ends: dict[str, int] = {}
        self._lock = allocate_lock()
        self._indexes: OrderedDict[str, TranscriptIndex] = OrderedDict()
        # Per path being indexed: its build lock and how many threads hold or want
        # it (guarded by the lock; an entry goes with its last user).
        self._builders: dict[str, _Builder] = {}

    def index_for(
        self,
        path: Path,
        file: BinaryIO,
        *,
        session_id: str | None = None,
        sink: EntrySink | None = None,
        rebuild: bool = False,
        build: bool = True,
    ) -> TranscriptIndex | None:
        """The index of `file` (open on `path`), brought up to date; None if not a file.

        `sink` receives the entries of whatever part of the file this call reads
        (nothing when the cached index is current). `rebuild` ignores the cache.
        With `build` False, only an index held (in memory or on the shelf) is
        brought up to date; None when there is none to extend.
        """
        # One reader at a time brings a file's index up to date; one that waited finds
        # it current (or extends it by what was appended since), where each would
        # have read the same new bytes. The file's size is read once the wait is over.
        with self._building(os.fspath(path)):
            return self._index_for_locked(
                path, file, session_id=session_id, sink=sink, rebuild=rebuild, build=build
            )

    def _index_for_locked(
        self,
        path: Path,
        file: BinaryIO,
        *,
        session_id: str | None,
        sink: EntrySink | None,
        rebuild: bool,
        build: bool,
    ) -> TranscriptIndex | None:
        identity = FileIdentity.of_open_file(file)
        if identity is None:
            return None
        key = os.fspath(path)
        with self._lock:
            cached = None if rebuild else self._indexes.get(key)
            if cached is not None:
                self._indexes.move_to_end(key)
        if cached is None and not rebuild and self.shelf is not None:
            cached = self.shelf.load(path)
            # Shelved by a box reading photos in the other mode: of no use here.
            if cached is not None and cached.photos != self.photos:
                cached = None
            if cached is not None:
                with self._lock:
                    self._shelved_ends[key] = cached.committed_end
            if cached is not None and cached.identity == identity:
                self._store(key, cached)
                return cached
        if cached is not None and cached.identity == identity:
            return cached
        # Appended to only if the bytes before the old last line's end are unchanged.
        appended = (
            cached is not None
            and identity.grew_past(cached.identity, cached.identity.size)
            and _fingerprint(file, cached.committed_end) == cached.fingerprint
        )
        base = cached if appended else None
        if base is None and not build:
            return None
        index = build_index(
            path,
            file,
            identity,
            base=base,
            session_id=session_id,
            sink=sink,
            block_size=self.block_size,
            photos=self.photos,
        )
        self._store(key, index)
        if self.shelf is not None:
            with self._lock:
                shelved_end = self._shelved_ends.get(key) if base is not None else None
            unshelved = index.committed_end - (shelved_end or 0)
            if shelved_end is None or unshelved >= self.shelve_every_bytes:
                self._shelve(key, index)
        return index

    @contextmanager
    def _building(self, key: str) -> Iterator[None]:
        # Held while the index of ``key`` is looked up and brought up to date.
        with self._lock:
            builder = self._builders.get(key)
            if builder is None:
                builder = self._builders[key] = _Builder()
            builder.users += 1
        try:
            with builder.lock:
                yield
        finally:
            with self._lock:
                builder.users -= 1
                if not builder.users:
                    del self._builders[key]

    def shelve_all(self) -> None:
        """Shelve every held index that the shelf does not have as it is now."""
        if self.shelf is None:
            return
        with self._lock:
            pending = [
                (key, index)
                for key, index in self._indexes.items()
                if self._shelved_ends.get(key) != index.committed_end
            ]
        for key, index in pending:
            self._shelve(key, index)

    def _shelve(self, key: str, index: TranscriptIndex) -> None:
        assert self.shelf is not None, "only called with a shelf"
        self.shelf.save(index)
        with self._lock:
            self._shelved_ends[key] = index.committed_end

    def _store(self, key: str, index: TranscriptIndex) -> None:
        with self._lock:
            self._indexes[key] = index
            self._indexes.move_to_end(key)
            while len(self._indexes) > self.capacity:
                self._indexes.popitem(last=False)

    def cached(self, path: Path) -> TranscriptIndex | None:
        """The index held for `path`, current or not (for diagnostics and tests)."""
        with self._lock:
            return self._indexes.get(os.fspath(path))

    def discard(self, path: Path, stale: TranscriptIndex | None = None) -> None:
        """Forget `path`'s index (found stale), unless another has replaced `stale`."""
        key = os.fspath(path)
        with self._lock:
            held = self._indexes.get(key)
            if held is not None and (stale is None or held is stale):
                del self._indexes[key]
        # A shelved copy is as stale; a fresh one is shelved by the next build.
        if self.shelf is not None:
            self.shelf.forget(path)
            with self._lock:
                self._shelved_ends.pop(key, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._indexes)
