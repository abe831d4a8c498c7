"""The one guarded reader of a transcript: its lines, classified, in bounded memory.

Proven equal (`tests/impl/transcript/test_equivalence.py`), in either photo mode, to
`beebox_spec.transcript.read_transcript_lines(split_transcript_lines(file bytes), photos=…)`:
the same lines, numbered the same, each `parseable` (as written, or stripped of
its payloads) or `oversize`, with the same text; an oversize line's stub is
`beebox_spec.transcript.oversize_entry_from_head` of the head and size kept here.

What differs from the spec is only how the bytes are held:

- **Splitting** is done on bytes. `"\\n"` and `"\\r"` are ASCII, and an ASCII byte
  always decodes to itself (it ends any malformed sequence before it), so
  splitting the bytes and decoding each line with `errors="replace"` gives the
  spec's lines of the decoded file. A final newline adds no line; an empty file
  has none; one `"\\r"` before a line's end is dropped, a final unterminated line
  included.
- **Short lines** (at most `LONG_LINE_BYTES` bytes) are held and classified with
  the spec's own measures (`utf8_length`, `is_oversize_line`) on the decoded text;
  one the mode strips is scanned once, which also gives its payloads' spans.
- **Long lines** are never held. They are fed in blocks to a `PayloadScanner`
  (which keeps the stripped line only while it could still fit
  `MAX_SESSION_LINE_BYTES`), an incremental UTF-8 decoder that counts the decoded
  text's UTF-8 length (invalid bytes become U+FFFD, three bytes each), the first
  `HEAD_BYTES` bytes (enough for `SNIFF_CHARS` UTF-16 units: no unit takes more
  than three bytes), and a collector of the ids that follow ``"uuid":"`` (for the
  media lookup, `beebox_impl.transcript.index`). A line longer than the bound is
  oversize before stripping, since decoding never shortens a line's UTF-8.

A line's `offset` and `length` delimit its bytes without the terminator (and
without the dropped `"\\r"`), so `read_line_record_at` can read it again alone.
"""

from __future__ import annotations

import codecs
import errno
import os
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, Final, Literal, NamedTuple

from beebox_impl.transcript.strip import (
    PAYLOAD_KEYS,
    PayloadScanner,
    ScannedLine,
    find_quoted,
    scan_inline_media_chunks,
)
from beebox_spec.errors import BeeboxError
from beebox_spec.js_values import utf8_length, utf16_prefix
from beebox_spec.media import MAX_ID_CHARS, SAFE_ID_CHARS, STRIPPED_MEDIA_MARKER
from beebox_spec.transcript import (
    MAX_SESSION_LINE_BYTES,
    SNIFF_CHARS,
    STRIPS_EVERY_LINE,
    PhotoMode,
    is_oversize_line,
)

__all__ = [
    "DEFAULT_BLOCK_BYTES",
    "HEAD_BYTES",
    "LONG_LINE_BYTES",
    "MAX_UUID_VALUES",
    "LineRecord",
    "TranscriptChanged",
    "UuidValueCollector",
    "classify_line",
    "open_transcript",
    "read_chunks",
    "read_line_record_at",
    "read_line_records",
    "read_line_without_payloads",
    "read_stripped_line_at",
    "scan_line_records",
]

# How much of the file one read takes: the reader's memory is a small multiple of it.
DEFAULT_BLOCK_BYTES: Final = 256 * 1024

# A line of more bytes than this is long: read in blocks, never held. One over the
# bound, because one byte seen may be a "\r" its terminator takes, and the long path
# relies on a long line's own bytes exceeding the bound (oversize before stripping).
LONG_LINE_BYTES: Final = MAX_SESSION_LINE_BYTES + 1

# The bytes kept of a long line's start for its stub: SNIFF_CHARS UTF-16 units
# take at most 3 bytes each, plus a cut character's bytes.
HEAD_BYTES: Final = 3 * SNIFF_CHARS + 16

# A line naming more ids than this after ``"uuid":"`` records none of them, and a
# lookup reads the line again instead (a bound on the index's memory).
MAX_UUID_VALUES: Final = 256

_MARKER: Final = STRIPPED_MEDIA_MARKER.encode("ascii")
# A scan of a line without a payload key: nothing found, nothing replaced.
_NOTHING_SCANNED: Final = ScannedLine((), None, 0)
_UUID_KEY: Final = b'"uuid":"'
# An id of the media reference grammar (`SAFE_ID_RE`'s parts, in bytes) after the
# key, its closing quote looked at but not consumed: a quote can close one value and
# open the next key.
_UUID_VALUE_RE: Final = re.compile(
    re.escape(_UUID_KEY)
    + b"(["
    + re.escape(SAFE_ID_CHARS.encode("ascii"))
    + b']{1,%d})(?=")' % MAX_ID_CHARS
)
# The longest match, less one byte: a match cut by a block boundary starts in these.
_UUID_CARRY_BYTES: Final = len(_UUID_KEY) + MAX_ID_CHARS


class TranscriptChanged(BeeboxError):
    """The file no longer holds what an index recorded (a short read at an offset)."""


class LineRecord(NamedTuple):
    """One line of a transcript as the guard classifies it.

    `offset`/`length` are its bytes in the file (terminator excluded), `end` where
    the next line starts, `terminated` False only for a last line without a
    newline (a line being written). `text` is the parseable text (stripped when
    `media_stripped`); `head` and `utf8_bytes` are what an oversize line's stub
    reads (`utf8_bytes` is the decoded line's UTF-8 length for every line).
    `uuid_values`, for oversize lines and long ones (those the index may have to
    look into again), are the ids X for which ``"uuid":"X"`` occurs in the line, or
    None when there were too many; for other lines it is None (their text is here).
    `payload_spans` are where a stripped line's payloads were, from the line's
    start: with them `read_stripped_line_at` reads such a line again without its
    payloads (None for every other line).
    """

    line_number: int
    offset: int
    length: int
    end: int
    terminated: bool
    kind: Literal["parseable", "oversize"]
    media_stripped: bool
    text: str | None
    head: str | None
    utf8_bytes: int
    uuid_values: frozenset[str] | None
    payload_spans: tuple[tuple[int, int], ...] | None


class UuidValueCollector:
    """The media-grammar ids X for which ``"uuid":"X"`` occurs in bytes fed in chunks.

    For such an X (ASCII, no quote) the needle occurs in the decoded line exactly
    when it occurs in the bytes, and exactly when this collects X: the id is the
    whole run of id characters up to the next quote.
    """

    def __init__(self) -> None:
        self._carry = b""
        self._values: set[str] | None = set()

    def feed(self, chunk: bytes) -> None:
        """Look at the next bytes (matches cut by the boundary are found next time)."""
        if self._values is None:
            return
        # Without a quote (base64, say) the chunk completes no match; it may only
        # be the middle of one that started in the carry.
        if b'"' not in chunk:
            self.pass_over(chunk)
            return
        # A match cut by the boundary lies within the carry and the chunk's start;
        # one seen twice lands in the set once. The chunk itself is not copied.
        self._collect(self._carry + chunk[:_UUID_CARRY_BYTES])
        self._collect(chunk)
        if len(chunk) >= _UUID_CARRY_BYTES:
            self._carry = chunk[-_UUID_CARRY_BYTES:]
        else:
            self._carry = (self._carry + chunk)[-_UUID_CARRY_BYTES:]

    def pass_over(self, quoteless: bytes) -> None:
        """Move past bytes known to hold no quote: they complete no match, and only
        their last `_UUID_CARRY_BYTES` can belong to one still open."""
        self._carry = (self._carry + quoteless[-_UUID_CARRY_BYTES:])[-_UUID_CARRY_BYTES:]

    def _collect(self, window: bytes) -> None:
        at, _ = find_quoted(window, (_UUID_KEY,), 0)
        while at != -1 and self._values is not None:
            match = _UUID_VALUE_RE.match(window, at)
            if match is not None:
                self._values.add(match.group(1).decode("ascii"))
                # Too many to list: the lookup will read the line instead.
                if len(self._values) > MAX_UUID_VALUES:
                    self._values = None
            at, _ = find_quoted(window, (_UUID_KEY,), at + 1)

    def values(self) -> frozenset[str] | None:
        """The ids seen, or None when there were more than `MAX_UUID_VALUES`."""
        return frozenset(self._values) if self._values is not None else None


def _collect_uuid_values(content: bytes) -> frozenset[str] | None:
    collector = UuidValueCollector()
    collector.feed(content)
    return collector.values()


# The pieces a long line's chunks are checked for non-ASCII bytes in (a decoded
# piece costs its length in characters, four bytes each once one is past U+FFFF).
_UTF8_PIECE_BYTES: Final = 64 * 1024


class _Utf8Counter:
    # The UTF-8 length of the line's decoded text, fed in chunks.
    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.count = 0

    def add_ascii(self, length: int) -> None:
        # Bytes known to be ASCII, met between whole characters (they follow the
        # run's own ASCII bytes, so nothing is pending in the decoder).
        assert not self._decoder.getstate()[0], "ASCII after a whole character"
        self.count += length

    def feed(self, chunk: bytes) -> None:
        if len(chunk) <= _UTF8_PIECE_BYTES:
            self._feed_piece(chunk)
            return
        # A photo's base64, between whole characters: its own length, one scan.
        if chunk.isascii() and not self._decoder.getstate()[0]:
            self.count += len(chunk)
            return
        # A long chunk is mostly ASCII (a photo's base64) around a little text:
        # only the pieces holding non-ASCII bytes are decoded.
        for start in range(0, len(chunk), _UTF8_PIECE_BYTES):
            self._feed_piece(chunk[start : start + _UTF8_PIECE_BYTES])

    def _feed_piece(self, chunk: bytes) -> None:
        pending_before = len(self._decoder.getstate()[0])
        # ASCII between whole characters decodes to itself, byte for byte.
        if not pending_before and chunk.isascii():
            self.count += len(chunk)
            return
        text = self._decoder.decode(chunk)
        pending_after = len(self._decoder.getstate()[0])
        # Nothing replaced: the bytes consumed were valid UTF-8, and are the encoding.
        if "\ufffd" not in text:
            self.count += pending_before + len(chunk) - pending_after
            return
        self.count += utf8_length(text)

    def finish(self) -> int:
        self.count += utf8_length(self._decoder.decode(b"", True))
        return self.count


def _decoded_utf8_length(content: bytes, text: str) -> int:
    # Without a U+FFFD nothing was replaced: the bytes were valid and are the encoding.
    if "\ufffd" not in text:
        return len(content)
    return utf8_length(text)


def classify_line(
    content: bytes,
    *,
    line_number: int,
    offset: int,
    end: int,
    terminated: bool,
    photos: PhotoMode = "original",
) -> LineRecord:
    """The guard on a line held in memory (`read_transcript_lines` for one line)."""
    text = content.decode("utf-8", "replace")
    utf8_bytes = _decoded_utf8_length(content, text)
    fits = utf8_bytes <= MAX_SESSION_LINE_BYTES
    # Within the bound, in a mode that leaves such lines be: parsed as written.
    if fits and not STRIPS_EVERY_LINE[photos]:
        return LineRecord(
            line_number, offset, len(content), end, terminated,
            "parseable", False, text, None, utf8_bytes, None, None,
        )  # fmt: skip
    # Most lines hold no payload key at all: one C-speed search each says so.
    if any(key in content for key in PAYLOAD_KEYS):
        scanned = scan_inline_media_chunks((content,))
    else:
        scanned = _NOTHING_SCANNED
    if scanned.payloads:
        assert scanned.output is not None, "an unlimited scan keeps its output"
        stripped_text = scanned.output.decode("utf-8", "replace")
        # Something was stripped and the rest fits: parsed without its payloads,
        # whose spans let a later read skip them.
        if not is_oversize_line(stripped_text):
            return LineRecord(
                line_number, offset, len(content), end, terminated,
                "parseable", True, stripped_text, None, utf8_bytes, None, scanned.payloads,
            )  # fmt: skip
    # Nothing stripped, and within the bound: parsed as written.
    elif fits:
        return LineRecord(
            line_number, offset, len(content), end, terminated,
            "parseable", False, text, None, utf8_bytes, None, None,
        )  # fmt: skip
    # Nothing to strip, or still too big: never parsed, only sniffed.
    return LineRecord(
        line_number, offset, len(content), end, terminated,
        "oversize", False, None, utf16_prefix(text, SNIFF_CHARS), utf8_bytes,
        _collect_uuid_values(content), None,
    )  # fmt: skip


class _LongLine:
    # The guard on a line fed in blocks: everything it needs, nothing held whole.
    def __init__(self) -> None:
        self._scanner = PayloadScanner(keep_limit=MAX_SESSION_LINE_BYTES)
        self._utf8 = _Utf8Counter()
        self._uuids = UuidValueCollector()
        self._head = bytearray()
        self.length = 0

    def feed(self, chunk: bytes) -> None:
        if not chunk:
            return
        self.length += len(chunk)
        if len(self._head) < HEAD_BYTES:
            self._head += chunk[: HEAD_BYTES - len(self._head)]
        # A photo's base64 is read once: the bytes the scanner found to continue a
        # run are ASCII without a quote, their own UTF-8 length and no id's needle.
        alphabet_prefix = self._scanner.feed(chunk)
        if alphabet_prefix:
            self._utf8.add_ascii(alphabet_prefix)
            carried_from = max(0, alphabet_prefix - _UUID_CARRY_BYTES)
            self._uuids.pass_over(chunk[carried_from:alphabet_prefix])
            if alphabet_prefix == len(chunk):
                return
            chunk = chunk[alphabet_prefix:]
        self._utf8.feed(chunk)
        self._uuids.feed(chunk)

    def finish(self, *, line_number: int, offset: int, end: int, terminated: bool) -> LineRecord:
        scanned = self._scanner.finish()
        utf8_bytes = self._utf8.finish()
        # Longer than the bound in bytes, so oversize as written (decoding never
        # shortens); stripped, it is parseable if something went and the rest fits.
        if scanned.payloads and scanned.output is not None:
            stripped_text = scanned.output.decode("utf-8", "replace")
            if not is_oversize_line(stripped_text):
                return LineRecord(
                    line_number, offset, self.length, end, terminated,
                    "parseable", True, stripped_text, None, utf8_bytes, self._uuids.values(),
                    scanned.payloads,
                )  # fmt: skip
        # The head's last character may be cut short; it lies past SNIFF_CHARS units.
        head = utf16_prefix(bytes(self._head).decode("utf-8", "replace"), SNIFF_CHARS)
        return LineRecord(
            line_number, offset, self.length, end, terminated,
            "oversize", False, None, head, utf8_bytes, self._uuids.values(), None,
        )  # fmt: skip


def scan_line_records(
    file: BinaryIO,
    *,
    start: int = 0,
    stop: int | None = None,
    first_line_number: int = 1,
    block_size: int = DEFAULT_BLOCK_BYTES,
    photos: PhotoMode = "original",
) -> Iterator[LineRecord]:
    """The lines from byte `start` (a line start) up to `stop` (or the end), forward,
    classified in photo mode `photos`.

    Reads `block_size` bytes at a time from `file` (an unbuffered binary file it
    may seek). Lines are numbered from `first_line_number`. Between two records the
    caller may move the file position: the scan seeks back before reading on.
    """
    position = start  # the next byte to read
    line_start = start
    line_number = first_line_number
    pieces: list[bytes] = []  # the current line, while it is short
    held = 0
    long_line: _LongLine | None = None
    withheld_cr = False  # a long line's "\r", until we know whether the line ends after it
    while stop is None or position < stop:
        file.seek(position)
        block = file.read(block_size if stop is None else min(block_size, stop - position))
        if not block:
            break
        cursor = 0
        while True:
            newline = block.find(b"\n", cursor)
            segment = block[cursor:] if newline == -1 else block[cursor:newline]
            ends = newline != -1
            if long_line is None:
                pieces.append(segment)
                held += len(segment)
                # Too long to hold: from here on the line is fed, not kept.
                if held > LONG_LINE_BYTES:
                    long_line = _LongLine()
                    # Fed as they are: joining them would copy the line's first block.
                    last = len(pieces) - 1
                    for number, piece in enumerate(pieces):
                        withheld_cr = _feed_long(
                            long_line, piece, ends and number == last, withheld_cr
                        )
                    pieces, held = [], 0
            else:
                withheld_cr = _feed_long(long_line, segment, ends, withheld_cr)
            if not ends:
                break
            line_end = position + newline
            yield _finish_line(
                long_line,
                pieces,
                line_number=line_number,
                offset=line_start,
                end=line_end + 1,
                terminated=True,
                photos=photos,
            )
            line_start = line_end + 1
            line_number += 1
            pieces, held, long_line, withheld_cr = [], 0, None, False
            cursor = newline + 1
        position += len(block)
    # A last line without its newline is still a line (a transcript being written).
    if held > 0 or long_line is not None:
        if long_line is not None:
            _feed_long(long_line, b"", True, withheld_cr)
        yield _finish_line(
            long_line,
            pieces,
            line_number=line_number,
            offset=line_start,
            end=position,
            terminated=False,
            photos=photos,
        )


def _feed_long(long_line: _LongLine, segment: bytes, ends: bool, withheld_cr: bool) -> bool:
    # Feed a segment, holding back a final "\r" until the next byte says whether it
    # ends the line (dropped) or not (fed). Answers whether one is held back now.
    if not segment:
        # Nothing new: a withheld "\r" is the terminator's, or still undecided.
        return withheld_cr and not ends
    if withheld_cr:
        long_line.feed(b"\r")
    if segment.endswith(b"\r"):
        long_line.feed(segment[:-1])
        return not ends
    long_line.feed(segment)
    return False


def _finish_line(
    long_line: _LongLine | None,
    pieces: list[bytes],
    *,
    line_number: int,
    offset: int,
    end: int,
    terminated: bool,
    photos: PhotoMode,
) -> LineRecord:
    if long_line is not None:
        return long_line.finish(
            line_number=line_number, offset=offset, end=end, terminated=terminated
        )
    content = pieces[0] if len(pieces) == 1 else b"".join(pieces)
    # "\r\n" is one line break: the "\r" belongs to the terminator, not the line.
    if content.endswith(b"\r"):
        content = content[:-1]
    return classify_line(
        content,
        line_number=line_number,
        offset=offset,
        end=end,
        terminated=terminated,
        photos=photos,
    )


def open_transcript(path: Path) -> BinaryIO | None:
    """`path` opened for reading, or None when it is not a regular file of its folder.

    Symbolic links are not followed, neither the file nor the folder it is in: a
    transcript is a file the engine wrote in the box's project folder, and a link
    planted there must not serve another folder's files. Opened without blocking
    (a FIFO would wait for a writer), then checked. Other failures (missing,
    unreadable) raise their `OSError`.
    """
    # A link as the transcript's folder would lead out of the projects folder.
    if stat.S_ISLNK(os.lstat(path.parent).st_mode):
        return None
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        # ELOOP: the file itself is a link.
        if error.errno == errno.ELOOP:
            return None
        raise
    # A directory, a FIFO, a device: not a transcript.
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        return None
    return os.fdopen(descriptor, "rb", buffering=0)


def read_line_records(
    path: Path, *, block_size: int = DEFAULT_BLOCK_BYTES, photos: PhotoMode = "original"
) -> Iterator[LineRecord]:
    """Every line of the transcript at `path`, classified in photo mode `photos`,
    forward, in bounded memory.

    A missing or unreadable file raises its `OSError` (§1.2: not "empty"); closing
    the iterator early closes the file.
    """
    with path.open("rb", buffering=0) as file:
        yield from scan_line_records(file, block_size=block_size, photos=photos)


def read_line_record_at(
    file: BinaryIO,
    *,
    offset: int,
    length: int,
    line_number: int,
    block_size: int = DEFAULT_BLOCK_BYTES,
    photos: PhotoMode = "original",
) -> LineRecord:
    """The line at `offset` (of `length` bytes), read again alone and classified in
    photo mode `photos`.

    Read alone, a line does not know its terminator: its `end` is where its bytes
    stop and it reads as `terminated`. Raises `TranscriptChanged` when the file
    ends before the line does.
    """
    file.seek(offset)
    if length <= LONG_LINE_BYTES:
        content = file.read(length)
        # Shorter than recorded: the file was rewritten under the index.
        if len(content) != length:
            raise TranscriptChanged(f"line {line_number} at byte {offset} is cut short")
        return classify_line(
            content,
            line_number=line_number,
            offset=offset,
            end=offset + length,
            terminated=True,
            photos=photos,
        )
    long_line = _LongLine()
    for chunk in read_chunks(file, offset, length, block_size):
        long_line.feed(chunk)
    return long_line.finish(
        line_number=line_number, offset=offset, end=offset + length, terminated=True
    )


def read_chunks(file: BinaryIO, offset: int, length: int, block_size: int) -> Iterator[bytes]:
    """The bytes ``[offset, offset + length)`` of `file`, at most `block_size` at a time.

    Raises `TranscriptChanged` when the file ends first (it changed under a reader).
    """
    file.seek(offset)
    remaining = length
    while remaining > 0:
        chunk = file.read(min(block_size, remaining))
        if not chunk:
            raise TranscriptChanged(f"the bytes at {offset} end {remaining} bytes short")
        remaining -= len(chunk)
        yield chunk


def read_line_without_payloads(
    file: BinaryIO,
    *,
    offset: int,
    length: int,
    line_number: int,
    payload_spans: tuple[tuple[int, int], ...],
    replacement: Callable[[int], bytes],
) -> bytes:
    """The line at `offset` read from the gaps between its payloads alone, payload n
    (`payload_spans`, from the line's start, in order) written as ``replacement(n)``.

    Raises `TranscriptChanged` when the file is too short.
    """
    parts: list[bytes] = []
    cursor = 0
    for ordinal, (start, stop) in enumerate((*payload_spans, (length, length))):
        gap = start - cursor
        file.seek(offset + cursor)
        part = file.read(gap)
        if len(part) != gap:
            raise TranscriptChanged(f"line {line_number} at byte {offset} is cut short")
        parts.append(part)
        if start < length:
            parts.append(replacement(ordinal))
        cursor = stop
    return b"".join(parts)


def read_stripped_line_at(
    file: BinaryIO,
    *,
    offset: int,
    length: int,
    line_number: int,
    payload_spans: tuple[tuple[int, int], ...],
    utf8_bytes: int,
) -> LineRecord:
    """A long stripped line read again from its gaps alone, its payloads' spans known.

    The line was classified `parseable` and stripped, with these spans, by a pass
    over the same file (same identity); reading only the bytes between payloads
    and writing the marker in place of each gives the same stripped text without
    reading a photo again. Raises `TranscriptChanged` when the file is too short.
    """
    stripped = read_line_without_payloads(
        file,
        offset=offset,
        length=length,
        line_number=line_number,
        payload_spans=payload_spans,
        replacement=lambda _ordinal: _MARKER,
    )
    stripped_text = stripped.decode("utf-8", "replace")
    return LineRecord(
        line_number, offset, length, offset + length, True,
        "parseable", True, stripped_text, None, utf8_bytes, None, payload_spans,
    )  # fmt: skip
