"""Serving one photo back: the line whose own uuid is the id, then that one payload.

Proven equal to the spec's route: `find_media_line` to
`beebox_spec.media.find_line_by_uuid` over the file's lines (the line whose own
top-level `uuid` is the id, `docs/design.md#design-5-line-lookup`; a candidate over
`MAX_MEDIA_LINE_BYTES` answers too-large), and `fetch_media` to that lookup followed by
`beebox_spec.media.extract_media` on the line found, reasons included.

The lookup asks the file's index first (`beebox_impl.transcript.index`): one seek
to the recorded offset, where the line read back must still carry the id as its
own uuid; on a mismatch the index is dropped and the file scanned. A lookup does
not build an index (a history read does): without one, or with a stale one, an id
of the media reference grammar is found by a needle scan — `bytes.find` of
``"uuid":"<id>"`` over the file in blocks, and only the lines holding it are read
as lines (for such an id the needle is in the bytes exactly when it is in the
decoded line, stripped or not: see `beebox_impl.transcript.lines`). Ids outside
the grammar (which no reference can carry) are looked up by a scan that applies
`find_line_by_uuid`'s test to every line. Both hold bounded memory, except that,
like the spec, they parse a candidate of up to 16 MiB whole.

The extraction detaches payloads with the byte scanner (`PayloadScanner`, a slot
token in place of each, their spans remembered), lets the spec's `choose_payload`
parse what is left and pick `image_blocks(...)[index]`'s slot and media type, then
reads and decodes only that payload (`payloads.decode_payload`: the spec's
`decode_base64_payload`, at SIMD speed). When the index found the line and its pass
stripped it, the spans are the pass's (`StrippedLine`): only the bytes between the
payloads are read, with the slot tokens put in, and then the one payload — a photo
in a drained turn of forty costs its own bytes, not the turn's. A span that no
longer holds base64 (the file rewritten under the index) sends the fetch back to a
scan, as a line that is no longer the id's does.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, Literal, NamedTuple, TypeAlias

from beebox_impl.logs import debug
from beebox_impl.transcript.index import (
    TranscriptIndex,
    TranscriptIndexCache,
    is_indexed_uuid,
    uuid_needle,
)
from beebox_impl.transcript.lines import (
    LineRecord,
    TranscriptChanged,
    open_transcript,
    read_chunks,
    read_line_record_at,
    read_line_without_payloads,
    scan_line_records,
)
from beebox_impl.transcript.location import sub_agent_transcripts
from beebox_impl.transcript.payloads import decode_payload, is_alphabet_run
from beebox_impl.transcript.strip import PayloadScanner
from beebox_spec.entries import JsonValue
from beebox_spec.js_values import parse_json_object_or_none
from beebox_spec.media import (
    MAX_MEDIA_LINE_BYTES,
    SLOT_PREFIX,
    LineLookup,
    LineNotFound,
    MediaRef,
    choose_payload,
)

__all__ = [
    "MediaFound",
    "MediaMissing",
    "MediaMissingReason",
    "extract_media_from_line",
    "fetch_media",
    "fetch_session_media",
    "find_media_line",
]


MediaMissingReason: TypeAlias = Literal[
    "not-found", "too-large", "unparsable", "no-such-image", "no-payload"
]


class MediaFound(NamedTuple):
    """The photo: its servable media type and its decoded bytes."""

    media_type: str
    data: bytes


class MediaMissing(NamedTuple):
    """Why there is no photo: the lookup's reason, or the extraction's."""

    reason: MediaMissingReason

    @property
    def status_hint(self) -> int:
        """The HTTP status for it (§1.7): 413 for a line too large to read, else 404."""
        return 413 if self.reason == "too-large" else 404


class _LineAt(NamedTuple):
    # A line found for an id; `verified` when it was read (and parsed) just now;
    # `payload_spans` where its payloads are, when the index's pass stripped it.
    line_number: int
    offset: int
    length: int
    verified: bool
    payload_spans: tuple[tuple[int, int], ...] | None = None


_Located: TypeAlias = _LineAt | LineNotFound

_NOT_FOUND: LineNotFound = {"found": False, "reason": "not-found"}
_TOO_LARGE: LineNotFound = {"found": False, "reason": "too-large"}


def find_media_line(path: Path, uuid: str, *, cache: TranscriptIndexCache) -> LineLookup:
    """`find_line_by_uuid` over the transcript at `path` (1-based line number).

    A missing, unreadable or non-regular file is not-found, as in the original.
    """
    try:
        file = open_transcript(path)
        if file is None:
            return _NOT_FOUND
        with file:
            located = _locate(path, file, uuid, cache, verify=True)
    except OSError:
        return _NOT_FOUND
    if isinstance(located, _LineAt):
        return {"found": True, "lineNumber": located.line_number}
    return located


def fetch_media(
    path: Path, ref: MediaRef, *, cache: TranscriptIndexCache
) -> MediaFound | MediaMissing:
    """The photo `ref` names in the transcript at `path`, or why there is none."""
    uuid, image_index = ref["entryUuid"], ref["index"]
    try:
        file = open_transcript(path)
        if file is None:
            return MediaMissing("not-found")
        with file:
            located = _locate(path, file, uuid, cache, verify=False)
            if not isinstance(located, _LineAt):
                return MediaMissing(located["reason"])
            try:
                expected = None if located.verified else uuid
                served = _extract_at(file, located, image_index, expected, cache.block_size)
            except TranscriptChanged:
                served = None
            if served is not None:
                return served
            # The index pointed at a line that is no longer the id's: scan instead.
            debug(
                __name__, "stale index for %s: line %d is not %s", path, located.line_number, uuid
            )
            cache.discard(path)
            located = _scan_for_line(file, uuid, cache.block_size)
            if not isinstance(located, _LineAt):
                return MediaMissing(located["reason"])
            served = _extract_at(file, located, image_index, None, cache.block_size)
            assert served is not None, "an unverified extraction always answers"
            return served
    except (OSError, TranscriptChanged):
        # The file vanished or shrank mid-read: as for a missing file.
        return MediaMissing("not-found")


def fetch_session_media(
    session_transcript: Path, ref: MediaRef, *, cache: TranscriptIndexCache
) -> MediaFound | MediaMissing:
    """The photo `ref` names among its session's transcripts, or why there is none.

    The session's own transcript first, then each of its sub-agents' (where
    `locate_sub_agent_transcript` looks): a sub-agent's history is read under its
    session's id (``?agent=``), so the references it mints name the session, and
    the line they name is in the sub-agent's transcript. An entry's uuid names one
    line whichever file holds it; only a line not found in one file sends the
    search on to the next.
    """
    found = fetch_media(session_transcript, ref, cache=cache)
    if not _no_such_line(found):
        return found
    for sub_agent in sub_agent_transcripts(session_transcript):
        in_sub_agent = fetch_media(sub_agent, ref, cache=cache)
        if not _no_such_line(in_sub_agent):
            return in_sub_agent
    return found


def _no_such_line(fetched: MediaFound | MediaMissing) -> bool:
    return isinstance(fetched, MediaMissing) and fetched.reason == "not-found"


def extract_media_from_line(line: bytes, index: int) -> MediaFound | MediaMissing:
    """`beebox_spec.media.extract_media` on one line's UTF-8 bytes."""
    scanner = PayloadScanner(replacement=_slot_token)
    scanner.feed(line)
    scanned = scanner.finish()
    assert scanned.output is not None, "an unlimited scan keeps its output"
    return _choose_and_decode(
        scanned.output, scanned.payloads, index, lambda start, stop: line[start:stop]
    )


# -- finding the line -------------------------------------------------------------


class _LineSpan(NamedTuple):
    line_number: int
    offset: int
    length: int


def _locate(
    path: Path, file: BinaryIO, uuid: str, cache: TranscriptIndexCache, *, verify: bool
) -> _Located:
    if is_indexed_uuid(uuid):
        index = cache.index_for(path, file, build=False)
        if index is not None:
            try:
                located = _locate_in_index(index, file, uuid, cache.block_size)
                if not verify or not isinstance(located, _LineAt) or located.verified:
                    return located
                # Verified on use: the line at the offset must still be the id's.
                if _line_is_the_ids(file, located, uuid, cache.block_size):
                    return located
            except TranscriptChanged:
                pass
            debug(__name__, "stale index for %s: scanning for %s", path, uuid)
            cache.discard(path, index)
    return _scan_for_line(file, uuid, cache.block_size)


def _scan_for_line(file: BinaryIO, uuid: str, block_size: int) -> _Located:
    # `find_line_by_uuid` without an index: only lines holding the needle are candidates.
    if is_indexed_uuid(uuid):
        return _scan_candidates(file, uuid, _lines_holding(file, uuid, block_size), block_size)
    return _scan_every_line(file, uuid, block_size)


def _lines_holding(file: BinaryIO, uuid: str, block_size: int) -> Iterator[_LineSpan]:
    # The lines whose bytes hold the id's needle, in order. The needle holds no
    # newline, so each occurrence lies inside one line; a block boundary may cut it,
    # hence the carry of the previous block's last bytes.
    needle = uuid_needle(uuid).encode("ascii")
    position, line_start, line_number, carry = 0, 0, 1, b""
    while True:
        file.seek(position)
        block = file.read(block_size)
        if not block:
            return
        window, window_start = carry + block, position - len(carry)
        hit = window.find(needle)
        if hit == -1:
            # Every newline of the block is counted once: the carry's were counted before.
            newlines = block.count(b"\n")
            if newlines:
                line_number += newlines
                line_start = position + block.rfind(b"\n") + 1
            carry = window[-(len(needle) - 1) :]
            position += len(block)
            continue
        hit_at = window_start + hit
        line_number += block.count(b"\n", 0, max(0, hit_at - position))
        before = window.rfind(b"\n", 0, hit)
        if before != -1:
            line_start = window_start + before + 1
        end, terminated = _line_end(file, hit_at + len(needle), block_size)
        yield _LineSpan(line_number, line_start, _content_length(file, line_start, end))
        if not terminated:
            return
        position, line_start, line_number, carry = end + 1, end + 1, line_number + 1, b""


def _line_end(file: BinaryIO, start: int, block_size: int) -> tuple[int, bool]:
    # Where the line holding byte `start - 1` ends: its newline, or the end of the file.
    position = start
    while True:
        file.seek(position)
        block = file.read(block_size)
        if not block:
            return position, False
        newline = block.find(b"\n")
        if newline != -1:
            return position + newline, True
        position += len(block)


def _content_length(file: BinaryIO, start: int, end: int) -> int:
    # "\r\n" is one line break: the "\r" belongs to the terminator (as `lines` reads it).
    if end > start:
        file.seek(end - 1)
        if file.read(1) == b"\r":
            return end - 1 - start
    return end - start


def _scan_candidates(
    file: BinaryIO, uuid: str, spans: Iterator[_LineSpan], block_size: int
) -> _Located:
    for span in spans:
        record = read_line_record_at(
            file,
            offset=span.offset,
            length=span.length,
            line_number=span.line_number,
            block_size=block_size,
        )
        # Too big to parse on a client's say-so: answered before it is verified.
        if record.utf8_bytes > MAX_MEDIA_LINE_BYTES:
            return _TOO_LARGE
        # Only the line's own uuid counts, not a copy nested inside it.
        if _record_own_uuid(file, record, block_size) == uuid:
            return _LineAt(record.line_number, record.offset, record.length, verified=True)
    return _NOT_FOUND


def _locate_in_index(
    index: TranscriptIndex, file: BinaryIO, uuid: str, block_size: int
) -> _Located:
    target = index.first_line_with_uuid(uuid)
    needle = uuid_needle(uuid)
    # Lines the pass could not settle come first when they come before the target.
    for opaque in index.opaque_lines:
        if target is not None and opaque.line_index > target:
            break
        offset, length = index.line_span(opaque.line_index)
        if opaque.uuid_values is not None:
            holds = uuid in opaque.uuid_values
        else:
            holds = _line_contains(file, offset, length, needle, block_size)
        # Not a candidate for this id.
        if not holds:
            continue
        # A candidate too big to parse on a client's say-so.
        if opaque.too_large:
            return _TOO_LARGE
        if opaque.line_index not in index.opaque_own_uuids:
            own = _own_uuid(_parse_line_at(file, offset, length, block_size))
            index.opaque_own_uuids[opaque.line_index] = own if isinstance(own, str) else None
        if index.opaque_own_uuids[opaque.line_index] == uuid:
            return _LineAt(opaque.line_index + 1, offset, length, verified=True)
    if target is None:
        return _NOT_FOUND
    offset, length = index.line_span(target)
    stripped = index.stripped_lines.get(target)
    spans = stripped.payload_spans if stripped is not None else None
    return _LineAt(target + 1, offset, length, verified=False, payload_spans=spans)


def _line_is_the_ids(file: BinaryIO, located: _LineAt, uuid: str, block_size: int) -> bool:
    record = read_line_record_at(
        file,
        offset=located.offset,
        length=located.length,
        line_number=located.line_number,
        block_size=block_size,
    )
    if record.kind != "parseable":
        return False
    assert record.text is not None, "a parseable line keeps its text"
    return (
        _own_uuid(parse_json_object_or_none(record.text)) == uuid
        and uuid_needle(uuid) in record.text
    )


def _scan_every_line(file: BinaryIO, uuid: str, block_size: int) -> _Located:
    # `find_line_by_uuid`, line by line, for any id.
    needle = uuid_needle(uuid)
    for record in scan_line_records(file, block_size=block_size):
        # A candidate holds the needle somewhere; `parentUuid` never does.
        if not _holds_needle(file, record, uuid, needle, block_size):
            continue
        # Too big to parse on a client's say-so: answered before it is verified.
        if record.utf8_bytes > MAX_MEDIA_LINE_BYTES:
            return _TOO_LARGE
        # Only the line's own uuid counts, not a copy nested inside it.
        if _record_own_uuid(file, record, block_size) == uuid:
            return _LineAt(record.line_number, record.offset, record.length, verified=True)
    return _NOT_FOUND


def _holds_needle(
    file: BinaryIO, record: LineRecord, uuid: str, needle: str, block_size: int
) -> bool:
    # The text of a line parsed as written is the line itself.
    if record.kind == "parseable" and not record.media_stripped:
        assert record.text is not None, "a parseable line keeps its text"
        return needle in record.text
    if is_indexed_uuid(uuid):
        # A grammar id's needle survives stripping, and is among the ids collected.
        if record.text is not None:
            return needle in record.text
        if record.uuid_values is not None:
            return uuid in record.uuid_values
    # Any other id is looked for in the line as written.
    return _line_contains(file, record.offset, record.length, needle, block_size)


def _record_own_uuid(file: BinaryIO, record: LineRecord, block_size: int) -> JsonValue:
    # A stripped line parses exactly when the line does, with the same top-level uuid.
    if record.text is not None:
        return _own_uuid(parse_json_object_or_none(record.text))
    return _own_uuid(_parse_line_at(file, record.offset, record.length, block_size))


def _own_uuid(record: dict[str, JsonValue] | None) -> JsonValue:
    return record.get("uuid") if record is not None else None


def _parse_line_at(
    file: BinaryIO, offset: int, length: int, block_size: int
) -> dict[str, JsonValue] | None:
    # The line parsed whole (the spec's 16 MiB bound applies), its payloads stripped
    # first so that only the structure is held.
    scanner = PayloadScanner()
    for chunk in read_chunks(file, offset, length, block_size):
        scanner.feed(chunk)
    output = scanner.finish().output
    assert output is not None, "an unlimited scan keeps its output"
    return parse_json_object_or_none(output.decode("utf-8", "replace"))


def _line_contains(file: BinaryIO, offset: int, length: int, needle: str, block_size: int) -> bool:
    # `needle in line` on the decoded line, read in blocks; the carry keeps a needle
    # cut by a block boundary.
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    carry = ""
    read = 0
    for chunk in read_chunks(file, offset, length, block_size):
        read += len(chunk)
        text = carry + decoder.decode(chunk, read == length)
        if needle in text:
            return True
        carry = text[-(len(needle) - 1) :]
    return False


# -- following the reference back -------------------------------------------------


def _slot_token(ordinal: int) -> bytes:
    # What the detach step writes in place of payload n (as `extract_media` does).
    return f"{SLOT_PREFIX}{ordinal}".encode("ascii")


def _extract_at(
    file: BinaryIO, located: _LineAt, image_index: int, expected_uuid: str | None, block_size: int
) -> MediaFound | MediaMissing | None:
    # The photo on the line at `located`; None when `expected_uuid` is not its own.
    from_index = located.payload_spans is not None
    if located.payload_spans is not None:
        # The index's pass found the payloads: only the bytes between them are read.
        spans = located.payload_spans
        structure = read_line_without_payloads(
            file,
            offset=located.offset,
            length=located.length,
            line_number=located.line_number,
            payload_spans=spans,
            replacement=_slot_token,
        )
    else:
        scanner = PayloadScanner(replacement=_slot_token)
        for chunk in read_chunks(file, located.offset, located.length, block_size):
            scanner.feed(chunk)
        scanned = scanner.finish()
        assert scanned.output is not None, "an unlimited scan keeps its output"
        structure, spans = scanned.output, scanned.payloads
    if expected_uuid is not None:
        # Slot tokens hold no quote: the needle and the own uuid read as in the line.
        text = structure.decode("utf-8", "replace")
        own = _own_uuid(parse_json_object_or_none(text))
        if own != expected_uuid or uuid_needle(expected_uuid) not in text:
            return None

    def read_payload(start: int, stop: int) -> bytes:
        file.seek(located.offset + start)
        payload = file.read(stop - start)
        if len(payload) != stop - start:
            raise TranscriptChanged(f"the payload at byte {located.offset + start} is cut short")
        # Spans from an index: what lies there now must still be a payload (a scan's
        # spans are payloads by construction, and are not checked twice).
        if from_index and not is_alphabet_run(payload, 0, len(payload)):
            raise TranscriptChanged(f"no payload at byte {located.offset + start} any more")
        return payload

    return _choose_and_decode(structure, spans, image_index, read_payload)


def _choose_and_decode(
    structure: bytes,
    payloads: tuple[tuple[int, int], ...],
    image_index: int,
    read_payload: Callable[[int, int], bytes],
) -> MediaFound | MediaMissing:
    chosen = choose_payload(structure.decode("utf-8", "replace"), image_index, len(payloads))
    if not chosen["ok"]:
        return MediaMissing(chosen["reason"])
    start, stop = payloads[chosen["slot"]]
    # Only the one payload asked for is read and decoded (it is base64 alphabet: ASCII).
    data = decode_payload(read_payload(start, stop))
    return MediaFound(chosen["mediaType"], data)
