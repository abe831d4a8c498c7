"""Indexes shelved on disk: a new process reads a long chat without a pass over it."""

from __future__ import annotations

import itertools
import json
import logging
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import beebox_impl.transcript.index as index_module
from beebox_impl.files import FileIdentity
from beebox_impl.transcript import (
    IndexShelf,
    PageSlice,
    TailSlice,
    TranscriptIndexCache,
    find_media_line,
    read_history,
)
from beebox_impl.transcript.chunked import ChunkedIntArray
from beebox_impl.transcript.index import (
    StrippedLine,
    StrippedLines,
    TranscriptIndex,
    build_index,
    uuid_key,
)
from tests.impl.transcript.strategies import GeneratedTranscript, transcripts
from tests.impl.transcript.test_index import (
    SESSION,
    assert_reads_as_spec,
    folder,
    photo_line,
    rewrite_keeping_identity,
    user_line,
)


class BuildCounter:
    """Counts full and partial passes (`build_index` calls) and where each started."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.starts: list[int] = []
        real = index_module.build_index

        def counting(*args: object, **kwargs: object) -> TranscriptIndex:
            index = real(*args, **kwargs)  # type: ignore[arg-type]
            self.starts.append(index.scanned_from)
            return index

        monkeypatch.setattr(index_module, "build_index", counting)


def write_chat(path: Path) -> bytes:
    lines = [user_line(f"u-{number}", f"turn {number}") for number in range(20)]
    lines.insert(5, photo_line("p-1", b"\x89PNG" + bytes(range(256)) * 8))
    data = b"\n".join(lines) + b"\n"
    path.write_bytes(data)
    return data


def test_a_new_process_reads_from_the_shelf_without_a_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "chat.jsonl"
    write_chat(path)
    shelf = IndexShelf(tmp_path / "shelf")
    first = read_history(path, SESSION, TailSlice(3), cache=TranscriptIndexCache(shelf=shelf))
    counter = BuildCounter(monkeypatch)
    # A fresh cache stands for a fresh process: only the shelf is shared.
    fresh = TranscriptIndexCache(shelf=shelf)
    assert read_history(path, SESSION, TailSlice(3), cache=fresh) == first
    assert find_media_line(path, "p-1", cache=fresh) == {"found": True, "lineNumber": 6}
    assert counter.starts == []
    assert_reads_as_spec(path, fresh)


def test_a_grown_transcript_extends_the_shelved_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "chat.jsonl"
    data = write_chat(path)
    shelf = IndexShelf(tmp_path / "shelf")
    read_history(path, SESSION, TailSlice(3), cache=TranscriptIndexCache(shelf=shelf))
    with path.open("ab") as file:
        file.write(user_line("u-new", "appended") + b"\n")
    counter = BuildCounter(monkeypatch)
    fresh = TranscriptIndexCache(shelf=shelf)
    history = read_history(path, SESSION, TailSlice(1), cache=fresh)
    assert history["entries"][0]["uuid"] == "u-new"
    # Only the appended bytes were read.
    assert counter.starts == [len(data)]
    # A small extension is not shelved at once: a third process extends it again.
    counter.starts.clear()
    read_history(path, SESSION, TailSlice(1), cache=TranscriptIndexCache(shelf=shelf))
    assert counter.starts == [len(data)]
    # Shelved on `shelve_all` (a box closing), it is read by the next with no pass.
    fresh.shelve_all()
    counter.starts.clear()
    read_history(path, SESSION, TailSlice(1), cache=TranscriptIndexCache(shelf=shelf))
    assert counter.starts == []


def test_an_index_is_shelved_again_once_it_has_read_enough_past_its_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "chat.jsonl"
    write_chat(path)
    shelf = IndexShelf(tmp_path / "shelf")
    cache = TranscriptIndexCache(shelf=shelf, shelve_every_bytes=200)
    read_history(path, SESSION, TailSlice(1), cache=cache)
    saved: list[int] = []
    real_save = shelf.save

    def recording_save(index: TranscriptIndex) -> None:
        saved.append(index.committed_end)
        real_save(index)

    monkeypatch.setattr(shelf, "save", recording_save)
    for number in range(6):
        with path.open("ab") as file:
            file.write(user_line(f"w-{number}", "more") + b"\n")
        read_history(path, SESSION, TailSlice(1), cache=cache)
    line = len(user_line("w-0", "more")) + 1
    # Each line is ~80 bytes: shelved every third extension, not every one.
    assert 0 < len(saved) < 6
    assert all(later - earlier >= 200 for earlier, later in itertools.pairwise(saved))
    assert line * 2 < 200 <= line * 3


def test_a_rewritten_transcript_is_not_read_through_a_stale_shelf(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    shelf = IndexShelf(tmp_path / "shelf")
    first, second = user_line("u-1", "aaaa"), user_line("u-2", "bbbb")
    path.write_bytes(first + b"\n" + second + b"\n")
    read_history(path, SESSION, TailSlice(2), cache=TranscriptIndexCache(shelf=shelf))
    # Same inode, size and mtime: only verification on use can tell.
    rewrite_keeping_identity(path, second + b"\n" + first + b"\n")
    fresh = TranscriptIndexCache(shelf=shelf)
    assert find_media_line(path, "u-1", cache=fresh) == {"found": True, "lineNumber": 2}
    assert_reads_as_spec(path, TranscriptIndexCache(shelf=shelf))
    # A replaced file (new inode) is rebuilt too.
    replacement = tmp_path / "replacement.jsonl"
    replacement.write_bytes(user_line("u-9", "new") + b"\n")
    os.replace(replacement, path)
    assert_reads_as_spec(path, TranscriptIndexCache(shelf=shelf))


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(
    transcripts(max_lines=6),
    st.data(),
)
def test_a_damaged_shelf_costs_a_pass_never_an_answer(
    generated: GeneratedTranscript, data: st.DataObject
) -> None:
    with folder() as where:
        path = where / "session.jsonl"
        path.write_bytes(generated.data)
        shelf = IndexShelf(where / "shelf")
        read_history(path, SESSION, TailSlice(2), cache=TranscriptIndexCache(shelf=shelf))
        (shelved,) = (where / "shelf").iterdir()
        raw = bytearray(shelved.read_bytes())
        damage = data.draw(st.sampled_from(["flip", "cut", "append", "empty"]))
        if damage == "flip":
            at = data.draw(st.integers(0, len(raw) - 1))
            raw[at] ^= data.draw(st.integers(1, 255))
        elif damage == "cut":
            del raw[data.draw(st.integers(0, len(raw) - 1)) :]
        elif damage == "append":
            raw += data.draw(st.binary(min_size=1, max_size=16))
        else:
            raw.clear()
        shelved.write_bytes(bytes(raw))
        assert_reads_as_spec(path, TranscriptIndexCache(shelf=shelf))


def test_a_shelf_of_another_rules_version_is_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "chat.jsonl"
    write_chat(path)
    shelf = IndexShelf(tmp_path / "shelf")
    read_history(path, SESSION, TailSlice(3), cache=TranscriptIndexCache(shelf=shelf))
    monkeypatch.setattr("beebox_impl.transcript.persist.RULES_VERSION", 999)
    counter = BuildCounter(monkeypatch)
    read_history(path, SESSION, TailSlice(3), cache=TranscriptIndexCache(shelf=shelf))
    assert counter.starts == [0]


def test_a_shelf_read_in_the_other_photo_mode_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # write_chat's photo line is short: kept inline in `original`, a reference in `refs`.
    path = tmp_path / "chat.jsonl"
    write_chat(path)
    shelf = IndexShelf(tmp_path / "shelf")
    window = PageSlice(0, 30)
    inline = read_history(path, SESSION, window, cache=TranscriptIndexCache(shelf=shelf))
    counter = BuildCounter(monkeypatch)
    as_refs = read_history(
        path, SESSION, window, cache=TranscriptIndexCache(shelf=shelf, photos="refs")
    )
    # The `original` shelf was passed over: a pass from the top, in `refs`.
    assert counter.starts == [0]
    (photo,) = [block for entry in as_refs["entries"] for block in entry["content"]
                if block["type"] == "image"]  # fmt: skip
    assert photo == {"type": "image", "imageRef": f"{SESSION}/p-1/0", "mediaType": "image/png"}
    assert "dataBase64" in json.dumps(inline)
    # And now the shelf holds the `refs` index, read without a pass.
    again = read_history(
        path, SESSION, window, cache=TranscriptIndexCache(shelf=shelf, photos="refs")
    )
    assert again == as_refs
    assert counter.starts == [0]


def test_an_index_is_extended_only_in_its_own_photo_mode(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    write_chat(path)
    with path.open("rb", buffering=0) as file:
        identity = FileIdentity.of_open_file(file)
        assert identity is not None
        base = build_index(path, file, identity, photos="original")
        with pytest.raises(ValueError, match="'original' in 'refs'"):
            build_index(path, file, identity, base=base, photos="refs")


def test_an_unwritable_shelf_is_logged_and_the_read_answers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "chat.jsonl"
    write_chat(path)
    blocked = tmp_path / "shelf"
    blocked.write_text("a file where the folder should be")
    cache = TranscriptIndexCache(shelf=IndexShelf(blocked))
    with caplog.at_level(logging.WARNING, logger="beebox_impl.transcript.persist"):
        history = read_history(path, SESSION, TailSlice(2), cache=cache)
    assert [entry["uuid"] for entry in history["entries"]] == ["u-18", "u-19"]
    assert "could not shelve" in caplog.text
    assert blocked.read_text() == "a file where the folder should be"


def test_shelved_files_leave_no_temporaries(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    write_chat(path)
    shelf = IndexShelf(tmp_path / "shelf")
    cache = TranscriptIndexCache(shelf=shelf)
    for number in range(3):
        with path.open("ab") as file:
            file.write(user_line(f"v-{number}", "more") + b"\n")
        read_history(path, SESSION, TailSlice(1), cache=cache)
    assert [entry.suffix for entry in (tmp_path / "shelf").iterdir()] == [".idx"]


def test_uuid_keys_are_the_same_in_every_process() -> None:
    # `hash` of a str differs between processes; a shelved key must not.
    script = "from beebox_impl.transcript.index import uuid_key; print(uuid_key('u-1'))"
    keys = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("1", "2")
    }
    assert keys == {str(uuid_key("u-1"))}


def _shelved_again(shelf: IndexShelf, index: TranscriptIndex) -> TranscriptIndex:
    shelf.save(index)
    loaded = shelf.load(Path(index.path))
    assert loaded is not None
    return loaded


def test_photo_lines_come_back_from_the_shelf_as_they_were(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    # Long enough to be stripped by the pass (over 256 KiB a line), which records them.
    photo = b"\x89PNG" + bytes(range(256)) * 800
    lines = [photo_line(f"p-{number}", photo) if number % 2 else user_line(f"u-{number}", "hi")
             for number in range(12)]  # fmt: skip
    path.write_bytes(b"\n".join(lines) + b"\n")
    cache = TranscriptIndexCache()
    read_history(path, SESSION, TailSlice(1), cache=cache)
    built = cache.cached(path)
    assert built is not None
    assert len(built.stripped_lines) == 6
    loaded = _shelved_again(IndexShelf(tmp_path / "shelf"), built)
    assert list(loaded.stripped_lines.items()) == list(built.stripped_lines.items())
    for name in ("line_offsets", "line_lengths", "entry_lines", "line_uuid_keys"):
        assert getattr(loaded, name) == getattr(built, name), name


def test_shelving_a_long_chat_makes_no_object_a_line(tmp_path: Path) -> None:
    # Format 1 wrote the photo lines' records into the JSON header: a list, its
    # numbers and its spans for every photo line, every turn or two, as many more
    # as the chat grew; Python's arenas grew with each peak (docs/reliability.md).
    path = tmp_path / "chat.jsonl"
    path.write_bytes(user_line("u-1", "hi") + b"\n")
    cache = TranscriptIndexCache()
    read_history(path, SESSION, TailSlice(1), cache=cache)
    small = cache.cached(path)
    assert small is not None
    records = StrippedLines()
    for line in range(30_000):
        records.add(line, StrippedLine(((line * 1000 + 10, line * 1000 + 900),), line * 1000))
    parts = {name: getattr(small, name) for name in TranscriptIndex.__slots__}
    long_chat = TranscriptIndex(**{**parts, "stripped_lines": records})
    shelf = IndexShelf(tmp_path / "shelf")
    shelf.save(long_chat)
    blocks_before = sys.getallocatedblocks()
    tracemalloc.start()
    try:
        shelf.save(long_chat)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Its arrays as bytes (150,000 values: 1.2 MB), written part by part: 1.7 MB
    # traced; format 1 peaked at 14.9 MB here, most of it small objects.
    assert peak < 3_000_000, peak
    assert sys.getallocatedblocks() - blocks_before < 1_000
    (shelved,) = shelf.directory.glob("*.idx")
    assert shelved.stat().st_size > 8 * 4 * 30_000


@pytest.mark.parametrize(
    ("lines", "utf8_bytes", "span_ends", "bounds", "reason"),
    [
        ([1, 2], [5], [2, 4], [0, 1, 2, 3], "different lengths"),
        ([1], [5], [2], [0, 1, 2, 3], "do not end where"),
        ([2, 1], [5, 5], [2, 4], [0, 1, 2, 3], "out of order"),
        ([1, 1], [5, 5], [2, 4], [0, 1, 2, 3], "out of order"),
        ([1, 2], [5, 5], [3, 4], [0, 1, 2, 3], "out of order"),
        ([1, 2], [5, 5], [4, 2], [0, 1, 2, 3], "do not end where"),
    ],
)
def test_stripped_lines_from_a_shelf_must_be_a_set_a_build_makes(
    lines: list[int], utf8_bytes: list[int], span_ends: list[int], bounds: list[int], reason: str
) -> None:
    with pytest.raises(ValueError, match=reason):
        StrippedLines.from_arrays(
            *(ChunkedIntArray(values) for values in (lines, utf8_bytes, span_ends, bounds))
        )
