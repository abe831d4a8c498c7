"""The implementation reads generated transcript files exactly as the spec does.

For every generated file: `read_line_records` classifies each line as
`read_transcript_lines` does; `read_history` answers what `history_page` /
`history_tail` answer over `entries_from_lines` (cold, warm, any block size);
`find_media_line` answers what `find_line_by_uuid` answers for every id in the file
and for absent ones; and `fetch_media` answers what the spec's route does
(`find_line_by_uuid` then `extract_media`), each minted reference giving back the
original photo's bytes.
"""

from __future__ import annotations

import itertools
import json
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beebox_impl.transcript import (
    LineRecord,
    MediaFound,
    MediaMissing,
    PageSlice,
    TailSlice,
    TranscriptIndexCache,
    fetch_media,
    find_media_line,
    read_history,
    read_line_records,
)
from beebox_impl.transcript.lines import read_line_record_at
from beebox_spec.entries import MAX_SESSION_ENTRIES, SessionEntry
from beebox_spec.js_values import parse_json_object_or_none, utf8_length, utf16_prefix
from beebox_spec.media import (
    MediaRef,
    decode_base64_payload,
    find_line_by_uuid,
    image_blocks,
    message_content,
    parse_media_ref,
)
from beebox_spec.transcript import (
    MAX_SESSION_LINE_BYTES,
    PHOTO_MODES,
    SNIFF_CHARS,
    PhotoMode,
    entries_from_lines,
    history_page,
    history_tail,
    read_transcript_lines,
    split_transcript_lines,
)
from tests.impl.transcript.strategies import (
    ABSENT_UUIDS,
    UUIDS,
    GeneratedTranscript,
    spec_fetch,
    transcripts,
)

BLOCK_SIZES = st.sampled_from([509, 4096, 65_536, 256 * 1024])
PHOTOS = st.sampled_from(PHOTO_MODES)
SLOW = settings(
    max_examples=60, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


@contextmanager
def written(data: bytes) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="bbx-test-") as folder:
        path = Path(folder) / "session.jsonl"
        path.write_bytes(data)
        yield path


@SLOW
@given(transcripts(), BLOCK_SIZES, PHOTOS)
def test_lines_are_classified_as_the_spec_does(
    made: GeneratedTranscript, block_size: int, photos: PhotoMode
) -> None:
    assert_classified_as_spec(made.data, block_size, photos)


def assert_classified_as_spec(data: bytes, block_size: int, photos: PhotoMode = "original") -> None:
    file_lines = split_transcript_lines(data)
    expected = read_transcript_lines(file_lines, photos=photos)
    with written(data) as path:
        records = list(read_line_records(path, block_size=block_size, photos=photos))
        assert len(records) == len(expected)
        with path.open("rb", buffering=0) as file:
            for record, line, raw in zip(records, expected, file_lines, strict=True):
                assert record.line_number == line["lineNumber"]
                assert record.kind == line["kind"]
                if line["kind"] == "parseable":
                    assert (record.text, record.media_stripped) == (
                        line["text"],
                        line["mediaStripped"],
                    )
                else:
                    assert record.head == utf16_prefix(line["raw"], SNIFF_CHARS)
                assert record.utf8_bytes == utf8_length(raw)
                # Offset and length delimit the line's own bytes.
                span = data[record.offset : record.offset + record.length]
                assert span.decode("utf-8", "replace") == raw
                again = read_line_record_at(
                    file,
                    offset=record.offset,
                    length=record.length,
                    line_number=record.line_number,
                    block_size=block_size,
                    photos=photos,
                )
                assert (again.kind, again.text, again.head, again.utf8_bytes) == (
                    record.kind,
                    record.text,
                    record.head,
                    record.utf8_bytes,
                )
    # Every line but a torn last one ends in a newline; the next starts after it.
    for record, following in itertools.pairwise(records):
        assert record.terminated
        assert record.end == following.offset


def line_with_crs(number: int, block_size: int, line_start: int) -> bytes:
    # A photo line with two "\r" as JSON whitespace past its first 256 KiB, each the
    # last byte of a block of the file (the line starts at byte `line_start`).
    head = f'{{"type":"user","uuid":"u-{number}","message":{{"content":['.encode()
    photo = b'{"type":"image","source":{"type":"base64","data":"' + b"QUJD" * 70_000 + b'"}},'
    line = head + photo
    end_of_block = -(line_start + len(line) + 1) % block_size
    line += b" " * end_of_block + b"\r" + b" " * (block_size - 1) + b"\r"
    assert (line_start + len(line)) % block_size == 0
    return line + b'{"type":"text","text":"b"}]}}'


@pytest.mark.parametrize("block_size", [509, 4096])
def test_carriage_returns_at_block_ends(block_size: int) -> None:
    # Inside a long line a "\r" on a block's last byte is kept; before "\n" it goes.
    data = line_with_crs(1, block_size, 0) + b"\r\n"
    data += line_with_crs(2, block_size, len(data)) + b"\r\r\n"
    # A long line whose "\r\n" is cut by a block boundary between the two bytes.
    third = line_with_crs(3, block_size, len(data))
    third += b" " * (-(len(data) + len(third) + 1) % block_size) + b"\r"
    data += third + b"\n"
    data += line_with_crs(4, block_size, len(data)) + b"\r"
    assert_classified_as_spec(data, block_size)
    records = read_line_records_of(data, block_size)
    assert [record.kind for record in records] == ["parseable"] * 4
    assert [(record.text or "").count("\r") for record in records] == [2, 3, 2, 2]


def read_line_records_of(data: bytes, block_size: int) -> list[LineRecord]:
    with written(data) as path:
        return list(read_line_records(path, block_size=block_size))


@SLOW
@given(
    transcripts(),
    BLOCK_SIZES,
    st.tuples(st.integers(1, 8), st.integers(0, 10), st.integers(1, 8)),
    PHOTOS,
)
def test_history_slices_are_the_specs(
    made: GeneratedTranscript,
    block_size: int,
    slices: tuple[int, int, int],
    photos: PhotoMode,
) -> None:
    tail, offset, limit = slices
    session = made.session_id
    entries = entries_from_lines(session, split_transcript_lines(made.data), photos=photos)
    with written(made.data) as path:
        cache = TranscriptIndexCache(block_size=block_size, photos=photos)
        # Cold: the index is built by this read.
        whole = read_history(path, session, PageSlice(0, MAX_SESSION_ENTRIES), cache=cache)
        assert whole == history_page(session, entries, 0, MAX_SESSION_ENTRIES)
        # Warm: only the slice's lines are read, by offset.
        assert read_history(path, session, TailSlice(tail), cache=cache) == history_tail(
            session, entries, tail
        )
        page = PageSlice(offset, limit)
        assert read_history(path, session, page, cache=cache) == history_page(
            session, entries, offset, limit
        )
        # Cold slices, each from its own pass.
        for window in (TailSlice(tail), page):
            fresh = TranscriptIndexCache(block_size=block_size, photos=photos)
            assert read_history(path, session, window, cache=fresh) == read_history(
                path, session, window, cache=cache
            )
        # The index does not depend on the session it was read for.
        other = "other-session"
        assert read_history(path, other, TailSlice(tail), cache=cache) == history_tail(
            other,
            entries_from_lines(other, split_transcript_lines(made.data), photos=photos),
            tail,
        )


def uuids_named_in(data: bytes) -> set[str]:
    text = data.decode("utf-8", "replace")
    named = set(re.findall(r'"uuid":\s*"([^"\\]*)"', text))
    for line in split_transcript_lines(data):
        record = parse_json_object_or_none(line)
        if record is not None and isinstance(record.get("uuid"), str):
            named.add(str(record["uuid"]))
    return named


@SLOW
@given(transcripts(), BLOCK_SIZES, PHOTOS)
def test_line_lookups_are_the_specs(
    made: GeneratedTranscript, block_size: int, photos: PhotoMode
) -> None:
    # "\r\n" line breaks too: the needle scan must end a line where the reader does.
    for data in (made.data, made.data.replace(b"\n", b"\r\n")):
        file_lines = split_transcript_lines(data)
        with written(data) as path:
            # Through the index a history read built, in either photo mode.
            cache = TranscriptIndexCache(block_size=block_size, photos=photos)
            # Through the index a history read built.
            read_history(path, made.session_id, TailSlice(1), cache=cache)
            for uuid in sorted(uuids_named_in(data) | set(UUIDS) | set(ABSENT_UUIDS)):
                expected = find_line_by_uuid(file_lines, uuid)
                assert find_media_line(path, uuid, cache=cache) == expected, uuid
                # Without an index (a lookup builds none: a scan) the answer is the same.
                fresh = TranscriptIndexCache(block_size=block_size)
                assert find_media_line(path, uuid, cache=fresh) == expected, uuid
                assert fresh.cached(path) is None


def minted_refs(entries: list[SessionEntry]) -> list[MediaRef]:
    return [
        parse_media_ref(block["imageRef"])
        for entry in entries
        for block in entry["content"]
        if "imageRef" in block
    ]


def original_photo(line: str, index: int) -> bytes:
    # The photo as it sits in the line, read by a plain JSON parse.
    block = image_blocks(message_content(json.loads(line)))[index]
    source = block["source"]
    assert isinstance(source, dict)
    data = source["data"]
    assert isinstance(data, str)
    return decode_base64_payload(data)


@SLOW
@given(transcripts(), BLOCK_SIZES, st.sampled_from(UUIDS), st.integers(0, 3), PHOTOS)
def test_media_is_served_as_the_spec_serves_it(
    made: GeneratedTranscript, block_size: int, uuid: str, index: int, photos: PhotoMode
) -> None:
    file_lines = split_transcript_lines(made.data)
    entries = entries_from_lines(made.session_id, file_lines, photos=photos)
    with written(made.data) as path:
        cache = TranscriptIndexCache(block_size=block_size, photos=photos)
        read_history(path, made.session_id, TailSlice(1), cache=cache)
        refs = minted_refs(entries)
        asked: MediaRef = {"sessionId": made.session_id, "entryUuid": uuid, "index": index}
        for ref in [*refs, asked]:
            expected = spec_fetch(file_lines, ref)
            # Through the index, and without one (a needle scan).
            for through in (cache, TranscriptIndexCache(block_size=block_size)):
                served = fetch_media(path, ref, cache=through)
                if isinstance(served, MediaFound):
                    assert ("ok", served.media_type.encode() + b"\0" + served.data) == expected
                else:
                    assert ("missing", served.reason) == expected
        # A minted reference gives back the photo that was pasted, whenever its id
        # leads back to the line that minted it (an earlier line may share the id).
        for ref in refs:
            lookup = find_line_by_uuid(file_lines, ref["entryUuid"])
            assert lookup["found"]
            line = file_lines[lookup["lineNumber"] - 1]
            if ref not in minted_refs(entries_from_lines(made.session_id, [line], photos=photos)):
                continue
            served = fetch_media(path, ref, cache=cache)
            assert isinstance(served, MediaFound), ref
            assert served.data == original_photo(line, ref["index"])


@pytest.mark.parametrize("block_size", [509, 4096])
@pytest.mark.parametrize("shift", [1, 4, 8, 11])
def test_an_oversize_lines_own_uuid_cut_by_a_block_boundary(block_size: int, shift: int) -> None:
    # The line's only needle sits past 256 KiB, across a block boundary.
    start = b'{"type":"user","message":{"content":"'
    end = b'"},"uuid":"u-7"}'
    first = b'{"type":"user","uuid":"u-1","message":{"content":"hi"}}\n'
    # The needle's file offset is `shift` bytes before a block boundary.
    needle_at = (MAX_SESSION_LINE_BYTES // block_size + 2) * block_size - shift - len(first)
    text = b"z" * (needle_at - len(start) - len(b'"},'))
    line = start + text + end
    assert (len(first) + line.index(b'"uuid":"u-7"') + shift) % block_size == 0
    data = first + line + b"\n"
    file_lines = split_transcript_lines(data)
    with written(data) as path:
        cache = TranscriptIndexCache(block_size=block_size)
        assert find_media_line(path, "u-7", cache=cache) == find_line_by_uuid(file_lines, "u-7")
        assert find_line_by_uuid(file_lines, "u-7") == {"found": True, "lineNumber": 2}
        ref: MediaRef = {"sessionId": "s", "entryUuid": "u-7", "index": 0}
        assert fetch_media(path, ref, cache=cache) == MediaMissing("no-such-image")


@pytest.mark.parametrize("block_size", [509, 4096])
@pytest.mark.parametrize("bad_at", [300_000, 300_001, 300_002])
def test_a_long_line_with_one_invalid_byte_measures_as_the_spec(
    block_size: int, bad_at: int
) -> None:
    # Two-byte characters cut by every odd block boundary, one invalid byte late on.
    line = bytearray("é".encode() * 200_000)
    line[bad_at] = 0xFF
    assert_classified_as_spec(bytes(line) + b"\n", block_size)


@pytest.mark.parametrize("block_size", [509, 65_536])
@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"\r\r\n", b""])
def test_lines_at_the_bound(block_size: int, ending: bytes) -> None:
    # Lines of 256 KiB give or take a byte, valid and not, with a photo and without.
    lines = []
    for size in range(MAX_SESSION_LINE_BYTES - 2, MAX_SESSION_LINE_BYTES + 3):
        head = b'{"type":"user","uuid":"u-1","message":{"content":"'
        lines.append(head + b"z" * (size - len(head) - 3) + b'"}}')
        lines.append(head + b"\xe9" + b"z" * (size - len(head) - 4) + b'"}}')
        photo = b'{"type":"user","uuid":"u-2","message":{"content":[{"data":"'
        lines.append(photo + b"A" * (size - len(photo) - 5) + b'"}]}}')
    assert {len(line) for line in lines} == set(
        range(MAX_SESSION_LINE_BYTES - 2, MAX_SESSION_LINE_BYTES + 3)
    )
    assert_classified_as_spec(ending.join(lines) + ending, block_size)
