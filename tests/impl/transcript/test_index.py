"""The offset index: extended as a transcript grows, rebuilt on any other change,
dropped when a read finds it stale, and shared safely between threads."""

from __future__ import annotations

import base64
import logging
import os
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import beebox_impl.transcript.chunked as chunked_module
import beebox_impl.transcript.index as index_module
import beebox_impl.transcript.media as transcript_media
from beebox_impl.transcript import (
    MediaFound,
    PageSlice,
    TailSlice,
    TranscriptIndexCache,
    fetch_media,
    find_media_line,
    read_history,
)
from beebox_impl.transcript.index import StrippedLine, StrippedLines
from beebox_impl.transcript.lines import open_transcript
from beebox_spec.entries import MAX_SESSION_ENTRIES
from beebox_spec.media import MediaRef, find_line_by_uuid
from beebox_spec.transcript import (
    InvalidHistorySlice,
    entries_from_lines,
    history_page,
    history_tail,
    split_transcript_lines,
)
from tests.impl.transcript.strategies import (
    UUIDS,
    GeneratedTranscript,
    compact,
    transcripts,
)

SESSION = "sess-1"


@contextmanager
def folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="bbx-index-") as name:
        yield Path(name)


def photo_line(uuid: str, photo: bytes) -> bytes:
    data = base64.b64encode(photo).decode()
    source = {"type": "base64", "media_type": "image/png", "data": data}
    content = [{"type": "image", "source": source}]
    record = {"type": "user", "uuid": uuid, "timestamp": "t", "message": {"content": content}}
    return compact(record).encode()


def user_line(uuid: str, text: str) -> bytes:
    record = {"type": "user", "uuid": uuid, "timestamp": "t", "message": {"content": text}}
    return compact(record).encode()


def assert_rebuilt(path: Path, cache: TranscriptIndexCache) -> None:
    # The next read builds from the top (checked before any lookup could drop it).
    read_history(path, SESSION, TailSlice(1), cache=cache)
    index = cache.cached(path)
    assert index is not None
    assert index.scanned_from == 0


def assert_reads_as_spec(path: Path, cache: TranscriptIndexCache, tail: int = 3) -> None:
    data = path.read_bytes()
    file_lines = split_transcript_lines(data)
    entries = entries_from_lines(SESSION, file_lines)
    whole = PageSlice(0, MAX_SESSION_ENTRIES)
    assert read_history(path, SESSION, whole, cache=cache) == history_page(
        SESSION, entries, 0, MAX_SESSION_ENTRIES
    )
    assert read_history(path, SESSION, TailSlice(tail), cache=cache) == history_tail(
        SESSION, entries, tail
    )
    for uuid in UUIDS:
        assert find_media_line(path, uuid, cache=cache) == find_line_by_uuid(file_lines, uuid)


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(
    transcripts(max_lines=8),
    transcripts(max_lines=8),
    st.sampled_from([509, 65_536]),
    st.sampled_from([1, 2, chunked_module.DEFAULT_CHUNK_ITEMS]),
)
def test_a_grown_transcript_extends_its_index(
    first: GeneratedTranscript, more: GeneratedTranscript, block_size: int, chunk_items: int
) -> None:
    # Small chunks put an extension's cut inside a chunk, at its edge, past it.
    with folder() as where, pytest.MonkeyPatch.context() as patch:
        patch.setattr(chunked_module, "DEFAULT_CHUNK_ITEMS", chunk_items)
        path = where / "session.jsonl"
        path.write_bytes(first.data)
        cache = TranscriptIndexCache(block_size=block_size)
        assert_reads_as_spec(path, cache)
        before = cache.cached(path)
        assert before is not None
        # Appended to: a torn last line is completed by what follows, as a writer would.
        with path.open("ab") as file:
            file.write(more.data)
        assert_reads_as_spec(path, cache)
        after = cache.cached(path)
        assert after is not None
        if more.data:
            # Read on from the last complete line, not from the top.
            assert after.scanned_from == first.data.rfind(b"\n") + 1
            assert after.scanned_from == before.committed_end


@pytest.mark.parametrize("chunk_items", [1, 3, chunked_module.DEFAULT_CHUNK_ITEMS])
def test_each_read_of_a_growing_file_reads_only_what_is_new(
    chunk_items: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each extension shares chunks the previous one shared (small chunks: many).
    monkeypatch.setattr(chunked_module, "DEFAULT_CHUNK_ITEMS", chunk_items)
    with folder() as where:
        path = where / "session.jsonl"
        cache = TranscriptIndexCache()
        written = b""
        for number in range(6):
            line = user_line(UUIDS[number % len(UUIDS)], f"turn {number}")
            # Written in two halves: the first read sees a torn line, the next its end.
            for part in (line[: len(line) // 2], line[len(line) // 2 :] + b"\n"):
                with path.open("ab") as file:
                    file.write(part)
                previous_end = written.rfind(b"\n") + 1
                written += part
                assert_reads_as_spec(path, cache)
                index = cache.cached(path)
                assert index is not None
                assert index.scanned_from == previous_end


def test_a_rewrite_of_the_same_size_rebuilds() -> None:
    with folder() as where:
        path = where / "session.jsonl"
        path.write_bytes(user_line("u-1", "aaaa") + b"\n" + user_line("u-2", "bbbb") + b"\n")
        cache = TranscriptIndexCache()
        assert_reads_as_spec(path, cache)
        status = path.stat()
        # Same inode, same size, other content, a later mtime.
        with path.open("r+b") as file:
            file.write(user_line("u-3", "cccc") + b"\n" + user_line("u-1", "dddd") + b"\n")
        os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns + 10**9))
        assert path.stat().st_ino == status.st_ino
        assert path.stat().st_size == status.st_size
        assert_rebuilt(path, cache)
        assert_reads_as_spec(path, cache)


def test_a_new_inode_rebuilds_even_when_longer() -> None:
    with folder() as where:
        path = where / "session.jsonl"
        path.write_bytes(user_line("u-1", "aaaa") + b"\n")
        cache = TranscriptIndexCache()
        assert_reads_as_spec(path, cache)
        replacement = where / "next.jsonl"
        # The old content as a prefix: only the inode says it is another file.
        replacement.write_bytes(path.read_bytes() + user_line("u-2", "bbbb") + b"\n")
        os.replace(replacement, path)
        assert_rebuilt(path, cache)
        assert_reads_as_spec(path, cache)


def test_a_longer_file_whose_old_part_changed_rebuilds() -> None:
    with folder() as where:
        path = where / "session.jsonl"
        path.write_bytes(user_line("u-1", "aaaa") + b"\n")
        cache = TranscriptIndexCache()
        assert_reads_as_spec(path, cache)
        with path.open("r+b") as file:
            file.write(user_line("u-2", "bbbb") + b"\n" + user_line("u-3", "more") + b"\n")
        assert_rebuilt(path, cache)
        assert_reads_as_spec(path, cache)


def rewrite_keeping_identity(path: Path, data: bytes) -> None:
    # Same inode, size and mtime: a change the index's key cannot see.
    status = path.stat()
    assert len(data) == status.st_size
    with path.open("r+b") as file:
        file.write(data)
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))


def test_a_stale_offset_falls_back_to_a_scan() -> None:
    with folder() as where:
        path = where / "session.jsonl"
        first, second = user_line("u-1", "aaaa"), user_line("u-2", "bbbb")
        path.write_bytes(first + b"\n" + second + b"\n")
        cache = TranscriptIndexCache()
        # A lookup finds without building an index; a history read builds one.
        assert find_media_line(path, "u-1", cache=cache) == {"found": True, "lineNumber": 1}
        assert cache.cached(path) is None
        read_history(path, SESSION, TailSlice(1), cache=cache)
        assert find_media_line(path, "u-1", cache=cache) == {"found": True, "lineNumber": 1}
        stale = cache.cached(path)
        assert stale is not None
        rewrite_keeping_identity(path, second + b"\n" + first + b"\n")
        assert cache.cached(path) is stale
        # The line at the recorded offset is now u-2's: the index is dropped.
        assert find_media_line(path, "u-1", cache=cache) == {"found": True, "lineNumber": 2}
        assert cache.cached(path) is not stale


def test_a_stale_photo_offset_falls_back_to_a_scan() -> None:
    with folder() as where:
        path = where / "session.jsonl"
        first, second = photo_line("u-1", b"\x01" * 200_000), photo_line("u-2", b"\x02" * 200_000)
        path.write_bytes(first + b"\n" + second + b"\n")
        cache = TranscriptIndexCache()
        ref: MediaRef = {"sessionId": SESSION, "entryUuid": "u-1", "index": 0}
        read_history(path, SESSION, TailSlice(1), cache=cache)
        assert fetch_media(path, ref, cache=cache) == MediaFound("image/png", b"\x01" * 200_000)
        assert cache.cached(path) is not None
        rewrite_keeping_identity(path, second + b"\n" + first + b"\n")
        # The line at u-1's recorded offset is u-2's now: its photo is not served as u-1's.
        assert fetch_media(path, ref, cache=cache) == MediaFound("image/png", b"\x01" * 200_000)


def photos_line(uuid: str, photos: list[bytes], text: str = "look") -> bytes:
    # The text first: a longer text moves every payload.
    content: list[object] = [{"type": "text", "text": text}]
    content += [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": b64(photo)},
        }
        for photo in photos
    ]
    record = {"type": "user", "uuid": uuid, "timestamp": "t", "message": {"content": content}}
    return compact(record).encode()


def b64(photo: bytes) -> str:
    return base64.b64encode(photo).decode()


def test_an_indexed_fetch_reads_the_gaps_and_the_one_photo_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    photos = [bytes([n]) * 120_000 for n in range(1, 4)]
    with folder() as where:
        path = where / "session.jsonl"
        line = photos_line("u-1", photos)
        path.write_bytes(user_line("u-0", "hi") + b"\n" + line + b"\n")
        cache = TranscriptIndexCache()
        read_history(path, SESSION, TailSlice(1), cache=cache)
        index = cache.cached(path)
        assert index is not None
        assert 1 in index.stripped_lines
        for number, photo in enumerate(photos):
            ref: MediaRef = {"sessionId": SESSION, "entryUuid": "u-1", "index": number}
            assert fetch_media(path, ref, cache=cache) == MediaFound("image/png", photo)
        # Only the gaps and the one payload were read: not the other photos.
        read: list[int] = []
        real_open = open_transcript

        def counting_open(at: Path) -> BinaryIO | None:
            opened = real_open(at)
            if opened is None:
                return None
            original_read = opened.read

            def counted(size: int = -1) -> bytes:
                data = original_read(size)
                read.append(len(data))
                return data

            monkeypatch.setattr(opened, "read", counted)
            return opened

        monkeypatch.setattr(transcript_media, "open_transcript", counting_open)
        ref = {"sessionId": SESSION, "entryUuid": "u-1", "index": 2}
        assert fetch_media(path, ref, cache=cache) == MediaFound("image/png", photos[2])
        assert sum(read) == len(line) - 2 * len(b64(photos[0]))


def test_stale_payload_spans_are_not_served() -> None:
    with folder() as where:
        path = where / "session.jsonl"
        first = photos_line("u-1", [b"\x01" * 120_000, b"\x02" * 120_000])
        path.write_bytes(first + b"\n")
        cache = TranscriptIndexCache()
        read_history(path, SESSION, TailSlice(1), cache=cache)
        # The same size and mtime, every payload 4 bytes further on (4 base64
        # characters fewer in the last photo make up for the longer text).
        moved = photos_line("u-1", [b"\x03" * 120_000, b"\x04" * 119_997], text="look now")
        assert len(moved) == len(first)
        rewrite_keeping_identity(path, moved + b"\n")
        for number, photo in enumerate([b"\x03" * 120_000, b"\x04" * 119_997]):
            ref: MediaRef = {"sessionId": SESSION, "entryUuid": "u-1", "index": number}
            assert fetch_media(path, ref, cache=cache) == MediaFound("image/png", photo)


def test_a_payload_span_holding_something_else_now_is_not_decoded() -> None:
    with folder() as where:
        path = where / "session.jsonl"
        photos = [b"\x01" * 120_000, b"\x02" * 120_000]
        line = photos_line("u-1", photos)
        path.write_bytes(line + b"\n")
        cache = TranscriptIndexCache()
        read_history(path, SESSION, TailSlice(1), cache=cache)
        # Every byte between the payloads as it was; the second payload's first
        # characters are a quote and a key now (the line no longer parses).
        at = line.index(b64(photos[1]).encode())
        rewrite_keeping_identity(path, line[:at] + b'","a' + line[at + 4 :] + b"\n")
        ref: MediaRef = {"sessionId": SESSION, "entryUuid": "u-1", "index": 1}
        assert fetch_media(path, ref, cache=cache) == fetch_media(
            path, ref, cache=TranscriptIndexCache()
        )


def test_a_stale_entry_line_makes_the_history_read_whole() -> None:
    with folder() as where:
        path = where / "session.jsonl"
        first, second = user_line("u-1", "aaaa"), user_line("u-2", "bbbb")
        path.write_bytes(first + b"\n" + second + b"\n")
        cache = TranscriptIndexCache()
        assert_reads_as_spec(path, cache)
        # Line 2 no longer yields an entry, at the same size and mtime.
        system = compact({"type": "system", "uuid": "s", "content": ""}).encode()
        system = system[:-1] + b',"x":"' + b"p" * (len(second) - len(system) - 7) + b'"}'
        assert len(system) == len(second)
        rewrite_keeping_identity(path, first + b"\n" + system + b"\n")
        assert_reads_as_spec(path, cache)


def test_the_cache_is_a_bounded_lru() -> None:
    with folder() as where:
        paths = [where / f"{name}.jsonl" for name in "abc"]
        for path in paths:
            path.write_bytes(user_line("u-1", path.stem) + b"\n")
        cache = TranscriptIndexCache(capacity=2)
        for path in paths:
            read_history(path, SESSION, TailSlice(1), cache=cache)
        assert len(cache) == 2
        assert cache.cached(paths[0]) is None
        read_history(path=paths[1], session_id=SESSION, slice=TailSlice(1), cache=cache)
        read_history(path=paths[0], session_id=SESSION, slice=TailSlice(1), cache=cache)
        # b was used more recently than c: c goes.
        assert cache.cached(paths[2]) is None
        assert cache.cached(paths[1]) is not None


@pytest.mark.parametrize("capacity", [0, -1])
def test_a_cache_holds_at_least_one(capacity: int) -> None:
    with pytest.raises(ValueError, match="capacity"):
        TranscriptIndexCache(capacity)


def test_threads_share_one_cache() -> None:
    with folder() as where:
        paths = []
        for name in range(3):
            path = where / f"{name}.jsonl"
            path.write_bytes(
                b"".join(user_line(UUIDS[n % 5], f"{name}-{n}") + b"\n" for n in range(40))
            )
            paths.append(path)
        cache = TranscriptIndexCache(capacity=2)
        failures: list[BaseException] = []

        def reader(seed: int) -> None:
            try:
                for round_number in range(15):
                    path = paths[(seed + round_number) % len(paths)]
                    assert_reads_as_spec(path, cache, tail=1 + (seed + round_number) % 7)
            except BaseException as error:
                failures.append(error)

        threads = [threading.Thread(target=reader, args=(seed,)) for seed in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == []


def test_readers_that_miss_together_build_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # The second reader waits for the first's build and finds the index current,
    # instead of reading the same bytes again.
    with folder() as where:
        path = where / "session.jsonl"
        path.write_bytes(b"".join(user_line(UUIDS[n % 5], f"turn {n}") + b"\n" for n in range(9)))
        cache = TranscriptIndexCache()
        started, release = threading.Event(), threading.Event()
        builds: list[int] = []
        real_build = index_module.build_index

        def slow_build(*args: object, **kwargs: object) -> object:
            builds.append(1)
            started.set()
            release.wait(10)
            return real_build(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(index_module, "build_index", slow_build)
        failures: list[BaseException] = []

        def reader() -> None:
            try:
                assert_reads_as_spec(path, cache)
            except BaseException as error:
                failures.append(error)

        first = threading.Thread(target=reader)
        first.start()
        assert started.wait(10)
        second = threading.Thread(target=reader)
        second.start()
        # The second is waiting for the path's build lock, not building.
        while not any(builder.users == 2 for builder in cache._builders.values()):
            time.sleep(0.001)
        release.set()
        first.join()
        second.join()
        assert failures == []
        assert builds == [1]
        assert cache._builders == {}


def test_skipped_lines_are_counted_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    with folder() as where:
        path = where / "session.jsonl"
        path.write_bytes(
            b"// a comment\n\n"
            + user_line("u-1", "kept")
            + b"\n\xff\xfe garbage\n"
            + user_line("u-2", "torn")[:20]
        )
        cache = TranscriptIndexCache()
        with caplog.at_level(logging.DEBUG, logger="beebox_impl.transcript.index"):
            history = read_history(path, SESSION, TailSlice(5), cache=cache)
        assert [entry["uuid"] for entry in history["entries"]] == ["u-1"]
        index = cache.cached(path)
        assert index is not None
        # The comment, the garbage and the torn line; a blank line is not counted.
        assert index.unparsable_lines == 3
        assert index.line_count == 5
        assert "3 unparsable lines skipped" in caplog.text


@pytest.mark.parametrize("tail", [0, -1, MAX_SESSION_ENTRIES + 1, True])
def test_tail_bounds(tail: int) -> None:
    with pytest.raises(InvalidHistorySlice):
        TailSlice(tail)


@pytest.mark.parametrize(
    ("offset", "limit"), [(-1, 1), (0, 0), (0, MAX_SESSION_ENTRIES + 1), (False, 1), (0, True)]
)
def test_page_bounds(offset: int, limit: int) -> None:
    with pytest.raises(InvalidHistorySlice):
        PageSlice(offset, limit)


def test_ids_sharing_a_key_still_answer_right(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every id under one key: each lookup finds some line, verifies it, and scans.
    monkeypatch.setattr("beebox_impl.transcript.index.uuid_key", lambda _uuid: 7)
    with folder() as where:
        path = where / "session.jsonl"
        path.write_bytes(
            user_line("u-2", "first")
            + b"\n"
            + photo_line("u-1", b"\x01" * 200_000)
            + b"\n"
            + photo_line("u-3", b"\x03" * 200_000)
            + b"\n"
        )
        cache = TranscriptIndexCache()
        assert_reads_as_spec(path, cache)
        for uuid, photo in (("u-1", b"\x01"), ("u-3", b"\x03")):
            ref: MediaRef = {"sessionId": SESSION, "entryUuid": uuid, "index": 0}
            assert fetch_media(path, ref, cache=cache) == MediaFound("image/png", photo * 200_000)


# --- The stripped lines' records --------------------------------------------------------


@given(
    st.lists(
        st.tuples(
            st.integers(0, 3),
            st.lists(st.tuples(st.integers(0, 10**9), st.integers(0, 10**9)), max_size=4),
            st.integers(0, 10**9),
        ),
        max_size=30,
    ),
    st.integers(0, 200),
)
def test_stripped_lines_answer_what_was_added_and_a_prefix_keeps_its_lines(
    steps: list[tuple[int, list[tuple[int, int]], int]], cut: int
) -> None:
    records = StrippedLines()
    added: dict[int, StrippedLine] = {}
    line = -1
    for gap, spans, utf8_bytes in steps:
        line += gap + 1
        known = StrippedLine(tuple(spans), utf8_bytes)
        records.add(line, known)
        added[line] = known
    assert len(records) == len(added)
    assert list(records.items()) == sorted(added.items())
    for probe in range(line + 2):
        assert records.get(probe) == added.get(probe)
        assert (probe in records) == (probe in added)
    prefix = records.before(cut)
    assert list(prefix.items()) == [(key, known) for key, known in added.items() if key < cut]
    # The copy is its own: adding to it leaves the original as it was.
    prefix.add(max(cut, line + 1), StrippedLine(((1, 2),), 3))
    assert list(records.items()) == sorted(added.items())


def test_stripped_lines_refuse_a_line_out_of_order() -> None:
    records = StrippedLines()
    records.add(5, StrippedLine(((1, 2),), 10))
    with pytest.raises(ValueError, match="out of order"):
        records.add(5, StrippedLine((), 0))


def test_a_stripped_line_costs_bytes_not_objects() -> None:
    # A dict of tuples held ~700 bytes a photo line (the 50-minute soak of
    # docs/reliability.md); flat arrays hold 8 bytes a number.
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        records = StrippedLines()
        for line in range(10_000):
            base = line * 1_000_000
            spans = tuple((base + k * 1000, base + k * 1000 + 900) for k in range(5))
            records.add(line, StrippedLine(spans, base))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(records) == 10_000
    # 3 numbers a line and 2 a photo: 13 × 8 = 104 bytes, with the arrays' slack.
    assert held / 10_000 < 160


def test_extending_a_long_chat_copies_chunks_not_its_index() -> None:
    # A chat appended to a turn at a time gets a new index each turn; copying the
    # old one whole allocated ever-larger arrays among the photo buffers, and the
    # heap's free space grew with the lines appended (docs/reliability.md).
    lines = 100_000
    with folder() as where:
        path = where / "session.jsonl"
        path.write_bytes(b"".join(user_line(f"u{n}", "hi") + b"\n" for n in range(lines)))
        cache = TranscriptIndexCache()
        read_history(path, SESSION, TailSlice(1), cache=cache)
        old_size = path.stat().st_size
        with path.open("ab") as file:
            file.write(user_line("last", "bye") + b"\n")
        tracemalloc.start()
        try:
            read_history(path, SESSION, TailSlice(1), cache=cache)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        index = cache.cached(path)
        assert index is not None
        # Extended, not rebuilt.
        assert (index.line_count, index.scanned_from) == (lines + 1, old_size)
    # Flat arrays copied 4 × 8 bytes × 100,000 lines: 3.2 MB. Chunks: at most
    # one of 64 KiB an array, with the reads' own buffers.
    assert peak < 1_000_000, peak
