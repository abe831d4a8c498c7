"""Bad input gives the documented answer, never an exception, in bounded memory."""

from __future__ import annotations

import base64
import os
import random
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from beebox_impl.transcript import (
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
from beebox_spec.entries import MAX_SESSION_ENTRIES
from beebox_spec.media import MediaRef, find_line_by_uuid
from beebox_spec.transcript import (
    entries_from_lines,
    history_page,
    split_transcript_lines,
)
from tests.impl.transcript.strategies import compact, spec_fetch

SESSION = "sess-1"
EMPTY = {"sessionId": SESSION, "entries": [], "total": 0}
# Far below any line in these tests: what a reader may hold at once.
MEMORY_BOUND = 4 * 1024 * 1024


def ref(uuid: str, index: int = 0) -> MediaRef:
    return {"sessionId": SESSION, "entryUuid": uuid, "index": index}


def photo_line(uuid: str, photo: bytes, *, caption: str = "look") -> str:
    return compact(
        {
            "type": "user",
            "uuid": uuid,
            "timestamp": "t",
            "message": {
                "role": "user",
                "content": [
                    {"type": "text", "text": caption},
                    {
                        "type": "image",
                        "source": {
                            "type": "base64",
                            "media_type": "image/png",
                            "data": base64.b64encode(photo).decode(),
                        },
                    },
                ],
            },
        }
    )


def assert_equal_to_spec(path: Path, uuids: list[str]) -> None:
    data = path.read_bytes()
    file_lines = split_transcript_lines(data)
    entries = entries_from_lines(SESSION, file_lines)
    cache = TranscriptIndexCache()
    whole = PageSlice(0, MAX_SESSION_ENTRIES)
    assert read_history(path, SESSION, whole, cache=cache) == history_page(
        SESSION, entries, 0, MAX_SESSION_ENTRIES
    )
    for uuid in uuids:
        assert find_media_line(path, uuid, cache=cache) == find_line_by_uuid(file_lines, uuid)
        for index in range(3):
            served = fetch_media(path, ref(uuid, index), cache=cache)
            expected = spec_fetch(file_lines, ref(uuid, index))
            if isinstance(served, MediaFound):
                assert expected == ("ok", served.media_type.encode() + b"\0" + served.data)
            else:
                assert expected == ("missing", served.reason)


@pytest.mark.parametrize("kind", ["missing", "directory", "fifo"])
def test_no_readable_transcript_reads_as_empty(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "session.jsonl"
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        if not hasattr(os, "mkfifo"):
            pytest.skip("no FIFOs here")
        # Opening a FIFO would wait for a writer: it must not even be opened.
        os.mkfifo(path)
    cache = TranscriptIndexCache()
    for window in (TailSlice(10), PageSlice(0, 10)):
        assert read_history(path, SESSION, window, cache=cache) == EMPTY
    assert find_media_line(path, "u-1", cache=cache) == {"found": False, "reason": "not-found"}
    assert fetch_media(path, ref("u-1"), cache=cache) == MediaMissing("not-found")


@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_the_guarded_reader_raises_the_os_error(tmp_path: Path, kind: str) -> None:
    # §1.2: a missing log is the fs error, not "empty" (the history read decides).
    path = tmp_path / "session.jsonl"
    if kind == "directory":
        path.mkdir()
    with pytest.raises(OSError):  # noqa: PT011 - ENOENT or EISDIR, as the platform says
        list(read_line_records(path))


def test_an_unreadable_file_reads_as_empty(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    path.write_text(photo_line("u-1", b"x" * 2000) + "\n")
    path.chmod(0)
    try:
        if os.access(path, os.R_OK):
            pytest.skip("running with privileges that read anything")
        cache = TranscriptIndexCache()
        assert read_history(path, SESSION, TailSlice(1), cache=cache) == EMPTY
        assert fetch_media(path, ref("u-1"), cache=cache) == MediaMissing("not-found")
    finally:
        path.chmod(0o600)


def test_binary_garbage_reads_as_the_spec_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    noise = random.Random(7).randbytes(300_000)
    path.write_bytes(noise + b"\n" + compact({"type": "user", "uuid": "u-1"}).encode() + noise)
    assert_equal_to_spec(path, ["u-1"])


def test_a_line_cut_mid_payload(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    whole = photo_line("u-1", os.urandom(220_000))
    torn = photo_line("u-2", os.urandom(220_000))
    path.write_text(whole + "\n" + torn[: len(torn) // 2])
    assert_equal_to_spec(path, ["u-1", "u-2"])
    cache = TranscriptIndexCache()
    history = read_history(path, SESSION, TailSlice(5), cache=cache)
    assert [entry["uuid"] for entry in history["entries"]] == ["u-1"]
    assert fetch_media(path, ref("u-2"), cache=cache) == MediaMissing("not-found")
    served = fetch_media(path, ref("u-1", 0), cache=cache)
    assert isinstance(served, MediaFound)


def test_references_that_name_no_photo(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    failed = compact(
        {
            "type": "user",
            "uuid": "u-failed",
            "message": {
                "content": [
                    {"type": "image", "source": {"type": "base64", "data": ""}},
                    {"type": "image", "source": {"type": "base64", "data": "QUJD"}},
                    {"type": "image", "source": "nope"},
                ]
            },
        }
    )
    path.write_text(
        compact({"type": "user", "uuid": "u-text", "message": {"content": "no images"}})
        + "\n"
        + failed
        + "\n"
        + photo_line("u-1", b"\x89PNG" * 70_000)
        + "\n"
    )
    cache = TranscriptIndexCache()
    assert fetch_media(path, ref("u-text"), cache=cache) == MediaMissing("no-such-image")
    assert fetch_media(path, ref("u-failed", 0), cache=cache) == MediaMissing("no-payload")
    assert fetch_media(path, ref("u-failed", 1), cache=cache) == MediaMissing("no-payload")
    assert fetch_media(path, ref("u-failed", 2), cache=cache) == MediaMissing("no-such-image")
    assert fetch_media(path, ref("u-1", 1), cache=cache) == MediaMissing("no-such-image")
    assert fetch_media(path, ref("u-absent"), cache=cache) == MediaMissing("not-found")
    assert fetch_media(path, ref("u-1"), cache=cache) == MediaFound(
        "image/png", b"\x89PNG" * 70_000
    )
    assert_equal_to_spec(path, ["u-text", "u-failed", "u-1", "u-absent"])


def test_a_nested_copy_and_a_parent_uuid_are_not_the_line(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    progress = compact(
        {"type": "progress", "uuid": "p-1", "data": {"message": {"uuid": "u-1", "content": "x"}}}
    )
    child = compact({"type": "user", "parentUuid": "u-1", "uuid": "u-2", "message": {}})
    path.write_text(progress + "\n" + child + "\n" + photo_line("u-1", b"\xff" * 250_000) + "\n")
    cache = TranscriptIndexCache()
    assert find_media_line(path, "u-1", cache=cache) == {"found": True, "lineNumber": 3}
    assert isinstance(fetch_media(path, ref("u-1"), cache=cache), MediaFound)
    assert_equal_to_spec(path, ["u-1", "u-2", "p-1"])


def peak_while(call: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("shape", ["photo", "text"])
def test_a_20_mb_line_is_never_held(tmp_path: Path, shape: str) -> None:
    path = tmp_path / "session.jsonl"
    if shape == "photo":
        line = photo_line("u-big", random.Random(1).randbytes(15_000_000))
    else:
        record = {"type": "user", "uuid": "u-big", "message": {"content": "é→" * 4_100_000}}
        line = compact(record)
    path.write_text(compact({"type": "user", "uuid": "u-1", "message": {"content": "hi"}}) + "\n")
    with path.open("a") as file:
        file.write(line + "\n")
    assert path.stat().st_size > 20_000_000
    del line
    calls: list[Callable[[], object]] = [
        lambda: list(read_line_records(path)),
        lambda: read_history(path, SESSION, TailSlice(5), cache=TranscriptIndexCache()),
        lambda: read_history(path, SESSION, PageSlice(0, 5), cache=TranscriptIndexCache()),
        lambda: find_media_line(path, "u-big", cache=TranscriptIndexCache()),
        lambda: fetch_media(path, ref("u-big"), cache=TranscriptIndexCache()),
        lambda: find_media_line(path, "u-absent", cache=TranscriptIndexCache()),
    ]
    for call in calls:
        assert peak_while(call) < MEMORY_BOUND
    # And the answers are the spec's: a stub or a stripped turn; the line is too large.
    assert_equal_to_spec(path, ["u-big", "u-1"])


def test_photo_transcript_reads_in_bounded_memory(tmp_path: Path) -> None:
    # A scaled-down bench transcript: 40 one-megabyte photo lines among small ones.
    path = tmp_path / "session.jsonl"
    noise = random.Random(3)
    with path.open("w") as file:
        for number in range(400):
            if number % 10 == 5:
                file.write(photo_line(f"p-{number}", noise.randbytes(750_000)) + "\n")
            else:
                text = f"turn {number} " * 20
                file.write(
                    compact({"type": "user", "uuid": f"u-{number}", "message": {"content": text}})
                )
                file.write("\n")
    cache = TranscriptIndexCache()
    for call in (
        lambda: read_history(path, SESSION, TailSlice(200), cache=TranscriptIndexCache()),
        lambda: read_history(path, SESSION, PageSlice(0, 5000), cache=cache),
        lambda: read_history(path, SESSION, TailSlice(200), cache=cache),
        lambda: fetch_media(path, ref("p-205"), cache=cache),
    ):
        assert peak_while(call) < MEMORY_BOUND + 2 * 1024 * 1024
    history = read_history(path, SESSION, TailSlice(200), cache=cache)
    assert history["total"] == 400
    assert sum("imageRef" in block for entry in history["entries"] for block in entry["content"])
