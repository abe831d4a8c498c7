"""The benchmark's transcript generator (`bench/generate_transcript.py`).

Fast checks that the generated file is what the benchmark assumes: the same bytes
for the same seed, compact JSON on every line, photo lines past the history
read's byte bound (so the strip path runs), a consistent uuid chain, and a
description (photo offsets, entry count) that the executable spec agrees with.
Plus one smoke run of `bench/transcripts.py --quick`.
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import itertools
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# Resolved through `tests/bench/__init__.py`, which puts `bench/` on sys.path. A
# whole-repo mypy run does not see `bench/`, hence the ignore (unused when mypy is
# run on `bench tests/bench`, where the module is part of the build).
from generate_transcript import (  # type: ignore[import-not-found, unused-ignore]
    GeneratedTranscript,
    generate_transcript,
)

from beebox_spec.media import (
    STRIPPED_MEDIA_MARKER,
    extract_media,
    find_line_by_uuid,
    strip_inline_media,
)
from beebox_spec.transcript import (
    MAX_SESSION_LINE_BYTES,
    entries_from_lines,
    split_transcript_lines,
)
from tests.bench import BENCH_DIR, run_quick

# Small but real: default-size (~1 MB) photos, a few of them.
ENTRIES = 60
PHOTOS = 4
TIMESTAMP_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
IMPL_NAMES = (
    "TranscriptIndexCache",
    "TailSlice",
    "PageSlice",
    "read_history",
    "fetch_media",
    "find_media_line",
    "strip_inline_media_bytes",
)


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> GeneratedTranscript:
    """One generated transcript, shared by the read-only checks below."""
    made: GeneratedTranscript = generate_transcript(
        tmp_path_factory.mktemp("transcript"), entries=ENTRIES, photos=PHOTOS, seed=7
    )
    return made


def _records(made: GeneratedTranscript) -> list[dict[str, Any]]:
    with made.path.open("rb") as handle:
        return [json.loads(line) for line in handle]


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    first = generate_transcript(tmp_path / "a", entries=40, photos=2, photo_chars=4000, seed=3)
    second = generate_transcript(tmp_path / "b", entries=40, photos=2, photo_chars=4000, seed=3)
    other = generate_transcript(tmp_path / "c", entries=40, photos=2, photo_chars=4000, seed=4)
    assert first.path.read_bytes() == second.path.read_bytes()
    assert first.photos == second.photos
    assert first.entry_offsets == second.entry_offsets
    assert first.path.name == second.path.name
    assert other.path.read_bytes() != first.path.read_bytes()


def test_counts_and_scale(tmp_path: Path) -> None:
    one = generate_transcript(tmp_path / "x1", entries=50, photos=3, photo_chars=2000)
    three = generate_transcript(tmp_path / "x3", entries=50, photos=3, photo_chars=2000, scale=3)
    assert (one.line_count, len(one.photos)) == (50, 3)
    assert (three.line_count, len(three.photos)) == (150, 9)
    assert three.size_bytes > 2 * one.size_bytes
    for made in (one, three):
        assert made.size_bytes == made.path.stat().st_size
        assert made.path.read_bytes().count(b"\n") == made.line_count
        assert made.middle_photo == made.photos[len(made.photos) // 2]


def test_the_command_line_writes_a_transcript_without_photos(tmp_path: Path) -> None:
    # It raised IndexError asking for the middle photo, after writing the file.
    script = str(BENCH_DIR / "generate_transcript.py")
    done = subprocess.run(
        [sys.executable, script, str(tmp_path), "--entries", "40", "--photos", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert "photos: 0" in done.stdout
    assert "middle photo" not in done.stdout
    [written] = tmp_path.glob("*.jsonl")
    assert written.read_bytes().count(b"\n") == 40


def test_impossible_plans_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot hold"):
        generate_transcript(tmp_path, entries=10, photos=5, photo_chars=2000)
    with pytest.raises(ValueError, match="scale"):
        generate_transcript(tmp_path, scale=0)
    with pytest.raises(ValueError, match="photo_chars"):
        generate_transcript(tmp_path, entries=10, photos=1, photo_chars=100)


def test_every_line_is_compact_json(made: GeneratedTranscript) -> None:
    with made.path.open("rb") as handle:
        for raw in handle:
            assert raw.endswith(b"\n")
            text = raw[:-1].decode("utf-8")
            record = json.loads(text)
            assert isinstance(record, dict)
            assert isinstance(record.get("type"), str)
            # Byte for byte what Claude Code's compact writer produces.
            assert json.dumps(record, separators=(",", ":"), ensure_ascii=False) == text
    # Non-ASCII is written as itself, so byte and character offsets differ.
    assert not made.path.read_bytes().isascii()


def test_photo_lines_are_oversize_and_described(made: GeneratedTranscript) -> None:
    assert len(made.photos) == PHOTOS
    with made.path.open("rb") as handle:
        lines = handle.read().split(b"\n")
    for photo in made.photos:
        with made.path.open("rb") as handle:
            handle.seek(photo.offset)
            line = handle.read(photo.length + 1)
        assert line.endswith(b"\n")
        assert line[:-1] == lines[photo.line_number - 1]
        # Past the history read's bound: the strip path, not the plain parse.
        assert photo.length > MAX_SESSION_LINE_BYTES
        record = json.loads(line)
        assert record["uuid"] == photo.uuid
        assert record["type"] == "user"
        images = [block for block in record["message"]["content"] if block["type"] == "image"]
        assert len(images) == 1
        source = images[0]["source"]
        assert source["type"] == "base64"
        assert source["media_type"] == photo.media_type == "image/jpeg"
        data = base64.b64decode(source["data"], validate=True)
        assert hashlib.sha256(data).hexdigest() == photo.sha256
        stripped = strip_inline_media(line[:-1].decode("utf-8"))
        assert stripped is not None
        assert STRIPPED_MEDIA_MARKER in stripped
        assert len(stripped.encode("utf-8")) <= MAX_SESSION_LINE_BYTES
    # All different photos.
    assert len({photo.sha256 for photo in made.photos}) == PHOTOS


def test_uuid_chain_is_consistent(made: GeneratedTranscript) -> None:
    records = _records(made)
    chain = [record for record in records if "uuid" in record]
    metadata = [record for record in records if "uuid" not in record]
    assert {record["type"] for record in metadata} <= {"file-history-snapshot"}
    assert {record["type"] for record in chain} == {"user", "assistant", "progress", "system"}
    uuids = [record["uuid"] for record in chain]
    assert len(set(uuids)) == len(uuids)
    assert chain[0]["parentUuid"] is None
    for previous, record in itertools.pairwise(chain):
        assert record["parentUuid"] == previous["uuid"]
    timestamps = [record["timestamp"] for record in chain]
    assert all(TIMESTAMP_RE.fullmatch(stamp) for stamp in timestamps)
    assert timestamps == sorted(timestamps)
    for record in chain:
        assert record["sessionId"] == made.session_id
        assert record["userType"] == "external"
        assert record["isSidechain"] is False
        assert {"cwd", "version", "gitBranch"} <= record.keys()
    assert made.path.name == f"{made.session_id}.jsonl"
    # One API response is several lines sharing message.id, each tool_use answered.
    tool_ids = {
        block["id"]
        for record in chain
        if record["type"] == "assistant"
        for block in record["message"]["content"]
        if block["type"] == "tool_use"
    }
    answered = {
        block["tool_use_id"]
        for record in chain
        if record["type"] == "user" and isinstance(record["message"]["content"], list)
        for block in record["message"]["content"]
        if block["type"] == "tool_result"
    }
    assert tool_ids == answered


def test_the_spec_agrees_with_the_description(made: GeneratedTranscript) -> None:
    data = made.path.read_bytes()
    lines = split_transcript_lines(data)
    entries = entries_from_lines(made.session_id, lines)
    assert len(entries) == made.history_total
    refs = [
        block["imageRef"]
        for entry in entries
        for block in entry["content"]
        if block["type"] == "image" and "imageRef" in block
    ]
    assert refs == [f"{made.session_id}/{uuid}/0" for uuid in made.photo_uuids]
    # Entry offsets are line starts, in file order, of the lines that became entries.
    starts = [0, *[index + 1 for index, byte in enumerate(data) if byte == 0x0A][:-1]]
    assert set(made.entry_offsets) <= set(starts)
    assert list(made.entry_offsets) == sorted(made.entry_offsets)
    by_offset = {start: number for number, start in enumerate(starts)}
    entry_uuids = [json.loads(lines[by_offset[offset]])["uuid"] for offset in made.entry_offsets]
    assert entry_uuids == [entry["uuid"] for entry in entries]
    tail_start = made.tail_start_offset(5)
    assert tail_start == made.entry_offsets[-5]
    # The middle photo is found and extracted the way the media route does it.
    middle = made.middle_photo
    assert find_line_by_uuid(lines, middle.uuid) == {
        "found": True,
        "lineNumber": middle.line_number,
    }
    extracted = extract_media(lines[middle.line_number - 1], 0)
    assert extracted["ok"]
    assert hashlib.sha256(extracted["data"]).hexdigest() == middle.sha256


def _impl_missing() -> str | None:
    try:
        module = importlib.import_module("beebox_impl.transcript")
    except ImportError as error:
        return f"beebox_impl.transcript is not importable yet ({error})"
    missing = [name for name in IMPL_NAMES if not hasattr(module, name)]
    if missing:
        return "beebox_impl.transcript does not have yet: " + ", ".join(missing)
    return None


def test_quick_benchmark_prints_its_table() -> None:
    missing = _impl_missing()
    if missing is not None:
        pytest.skip(missing)
    out = run_quick("transcripts.py", timeout=120)
    assert "measure" in out
    assert "| ours" in out
    assert "| baseline" in out
    assert "| ratio" in out
    assert "| target" in out
    assert "| ok?" in out
    rows = [line for line in out.splitlines() if line.count(" | ") == 5]
    assert len(rows) == 1 + 28 + 1  # the header, every measure, the first-read floor
    statuses = [row.rsplit(" | ", 1)[1].strip() for row in rows[1:]]
    # MISSED is a figure, not a failure; ERROR and WRONG mean the run is broken.
    assert set(statuses) <= {"ok", "MISSED", "info"}, out
    [floor] = [row for row in rows if row.startswith("first-read floor vs naive")]
    assert floor.endswith("| info"), floor
    assert "SUMMARY:" in out
    assert "page cache" in out
