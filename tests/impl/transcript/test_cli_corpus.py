"""Transcripts Claude Code itself wrote (`tests/corpus/claude-code/`), read by the spec
and the implementation to the same history.

The files were written by the CLI the ``claude`` extra bundles, driven through the
box (`tests.agent.record_corpus`, which says what each turn is); their lines are the
newest format's (``attachment``, ``api-request``, ``api-request-shape``,
``api-request-blob``, ``atis-latch``, ``cost-state``, ``last-prompt``, ``mode``,
``queue-operation``, ``tools-used`` beside ``user`` and ``assistant``). The photos
in them are `noise_png(256, 200, 1)` and `(…, 2)`, so a fetch is checked against
the bytes that were sent.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from beebox_impl.transcript import (
    MediaFound,
    PageSlice,
    TailSlice,
    TranscriptIndexCache,
    fetch_media,
    read_history,
)
from beebox_spec.entries import MAX_SESSION_ENTRIES, SessionEntry
from beebox_spec.media import (
    STRIPPED_MEDIA_MARKER,
    extract_media,
    find_line_by_uuid,
    parse_media_ref,
)
from beebox_spec.transcript import (
    entries_from_lines,
    history_page,
    history_tail,
    read_transcript_lines,
    split_transcript_lines,
)
from tests.agent.photos import noise_png

CORPUS = Path(__file__).resolve().parents[2] / "corpus" / "claude-code"
SESSIONS = sorted(CORPUS.glob("*/session.jsonl"))
NEW_LINE_TYPES = {
    "attachment",
    "api-request",
    "api-request-shape",
    "api-request-blob",
    "atis-latch",
    "cost-state",
    "last-prompt",
    "queue-operation",
}


def session_id_of(path: Path) -> str:
    first = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    session_id = first["sessionId"]
    assert isinstance(session_id, str)
    return session_id


def test_the_corpus_is_there() -> None:
    # At least the version the extra bundles now (a new one is recorded beside it).
    assert SESSIONS, f"no recorded session under {CORPUS}"
    for path in SESSIONS:
        assert (path.parent / "README.md").is_file()


@pytest.mark.parametrize("path", SESSIONS, ids=lambda path: path.parent.name)
def test_the_spec_and_the_implementation_read_the_same_history(path: Path) -> None:
    session = session_id_of(path)
    data = path.read_bytes()
    entries = entries_from_lines(session, split_transcript_lines(data))
    cache = TranscriptIndexCache(block_size=4096)
    whole = PageSlice(0, MAX_SESSION_ENTRIES)
    # Cold, then warm (by offset), whole and in slices.
    assert read_history(path, session, whole, cache=cache) == history_page(
        session, entries, 0, MAX_SESSION_ENTRIES
    )
    assert read_history(path, session, whole, cache=cache)["entries"] == entries
    for tail in (1, 5, 13):
        assert read_history(path, session, TailSlice(tail), cache=cache) == history_tail(
            session, entries, tail
        )
    assert read_history(path, session, PageSlice(3, 7), cache=cache) == history_page(
        session, entries, 3, 7
    )


@pytest.mark.parametrize("path", SESSIONS, ids=lambda path: path.parent.name)
def test_what_the_history_shows_of_the_recorded_session(path: Path) -> None:
    session = session_id_of(path)
    lines = split_transcript_lines(path.read_bytes())
    types = {json.loads(line).get("type") for line in lines}
    assert types >= NEW_LINE_TYPES | {"user", "assistant"}
    entries = entries_from_lines(session, lines)
    # Only turns: none of the new line types becomes an entry, not even the blob
    # that holds a second copy of the photo turn.
    shown = [(entry["type"], text_of(entry)) for entry in entries]
    assert shown[:3] == [
        ("user", "hello there"),
        ("assistant", "Hello! What shall we look at?"),
        ("user", "[photo] [photo] look at these two"),
    ]
    assert ("user", "first while you talk\n\nsecond while you talk") in shown
    assert ("user", "[Request interrupted by user]") in shown
    assert shown[-2:] == [
        ("user", "are you still there?"),
        ("assistant", "Back in a new process, same session."),
    ]
    # Each tool call carries its result; the one that failed says so.
    calls = [b for entry in entries for b in entry["content"] if b["type"] == "tool_use"]
    assert [call.get("toolName") for call in calls] == ["Write", "Bash", "Read", "Bash"]
    assert all("resultSummary" in call for call in calls)
    assert [call.get("isError", False) for call in calls] == [False, False, False, True]
    # The photo turn and its api-request-blob copy are the two lines stripped.
    stripped = [line for line in read_transcript_lines(lines) if line.get("mediaStripped")]
    assert [
        json.loads(line["text"])["type"] for line in stripped if line["kind"] == "parseable"
    ] == [
        "user",
        "api-request-blob",
    ]


@pytest.mark.parametrize("path", SESSIONS, ids=lambda path: path.parent.name)
def test_each_photo_has_one_ref_and_comes_back_as_it_was_sent(path: Path) -> None:
    session = session_id_of(path)
    lines = split_transcript_lines(path.read_bytes())
    entries = entries_from_lines(session, lines)
    refs = [b["imageRef"] for entry in entries for b in entry["content"] if "imageRef" in b]
    assert len(refs) == 2
    sent = [noise_png(256, 200, seed) for seed in (1, 2)]
    cache = TranscriptIndexCache()
    for ref, photo in zip(refs, sent, strict=True):
        parsed = parse_media_ref(ref)
        assert parsed is not None
        # The spec follows the ref back to its line, then its image.
        lookup = find_line_by_uuid(lines, parsed["entryUuid"])
        assert lookup["found"]
        spec_found = extract_media(lines[lookup["lineNumber"] - 1], parsed["index"])
        assert spec_found["ok"]
        assert spec_found["data"] == photo
        found = fetch_media(path, parsed, cache=cache)
        assert found == MediaFound("image/png", photo)
    assert STRIPPED_MEDIA_MARKER not in json.dumps(entries)


def text_of(entry: SessionEntry) -> str:
    parts = []
    for block in entry["content"]:
        if block["type"] == "text":
            parts.append(block.get("text", ""))
        elif block["type"] == "image":
            parts.append("[photo]")
        elif block["type"] == "tool_use":
            parts.append(f"[tool {block.get('toolName')}]")
        elif block["type"] == "thinking":
            parts.append("[thinking]")
    return " ".join(parts)
