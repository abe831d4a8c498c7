"""The streaming span walk equals `beebox_spec.review.journal.resolve_span` (§4.3).

On generated entry lists against journals of every kind (none, a real boundary,
a boundary whose prefix changed, a boundary that is gone, an empty uuid), on
pages of every size, and on real transcript files read through the production
reader — including a walk resumed at a boundary.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beebox_impl.review.walk import (
    PrefixHasher,
    TranscriptEntries,
    entries_from_pages,
    first_message_title,
    raw_prefix_digest,
    resolve_span_walk,
)
from beebox_spec.entries import SessionEntry, SessionHistory
from beebox_spec.review.journal import JournalBoundary, prefix_hash, resolve_span
from beebox_spec.review.turns import count_real_user_turns, first_real_user_snippet
from beebox_spec.transcript import entries_from_lines, split_transcript_lines
from tests.impl.review.boxes import compact, line_for

_uuids = st.sampled_from(["u1", "u2", "u3", "u4", "", "u\ud800"])
_texts = st.sampled_from(["hello", "  padded  ", "", "<typed>hi</typed>", "ünï", "x" * 50])


@st.composite
def entries(draw: st.DrawFn) -> SessionEntry:
    blocks = draw(
        st.lists(
            st.one_of(
                st.builds(lambda text: {"type": "text", "text": text}, _texts),
                st.builds(lambda name: {"type": "tool_use", "toolName": name}, _texts),
            ),
            max_size=2,
        )
    )
    return {
        "uuid": draw(_uuids),
        "type": draw(st.sampled_from(["user", "assistant"])),
        "timestamp": "t",
        "content": blocks,
    }


@st.composite
def journals(draw: st.DrawFn, listed: list[SessionEntry]) -> JournalBoundary | None:
    kind = draw(st.sampled_from(["none", "real", "stale-hash", "missing", "empty"]))
    if kind == "none":
        return None
    if kind == "empty" or not listed:
        return {"endUuid": "", "endIndex": 0, "prefixHash": "0" * 16}
    index = draw(st.integers(0, len(listed) - 1))
    uuid = listed[index]["uuid"]
    if kind == "missing":
        uuid = "never-seen"
    digest = prefix_hash(listed, index) if kind == "real" else "f" * 16
    return {"endUuid": uuid, "endIndex": index, "prefixHash": digest}


def _pages(
    listed: list[SessionEntry], page_size: int
) -> Callable[[], Iterator[tuple[SessionEntry, None]]]:
    def read_page(offset: int, limit: int) -> SessionHistory:
        return {"sessionId": "s", "entries": listed[offset : offset + limit], "total": len(listed)}

    return lambda: entries_from_pages(read_page, page_size)


@settings(max_examples=400)
@given(st.data())
def test_the_paged_walk_equals_the_spec(data: st.DataObject) -> None:
    listed = data.draw(st.lists(entries(), max_size=12))
    journal = data.draw(journals(listed))
    limit = data.draw(st.integers(1, 6))
    page_size = data.draw(st.integers(1, 5))

    walk = resolve_span_walk(_pages(listed, page_size), journal, limit)

    assert walk.span == resolve_span(listed, journal, limit)


@given(st.lists(entries(), max_size=10), st.integers(-1, 9))
def test_the_folded_hash_equals_the_prefix_hash(listed: list[SessionEntry], end: int) -> None:
    hasher = PrefixHasher()
    for entry in listed[: end + 1]:
        hasher.fold(entry)
    assert hasher.digest() == prefix_hash(listed, min(end, len(listed)))


def _transcript(tmp_path: Path, texts: list[str]) -> tuple[Path, list[str]]:
    path = tmp_path / "s.jsonl"
    uuids = [f"e{n}" for n in range(len(texts))]
    lines = [
        line_for("user" if n % 3 == 0 else "assistant", text, uuids[n], "s")
        for n, text in enumerate(texts)
    ]
    # Lines a history read skips, among the entries: they must not count or shift.
    lines.insert(2, compact({"type": "system", "uuid": "sys", "content": "x"}))
    lines.insert(4, "not json")
    lines.insert(5, compact({"type": "user", "uuid": "m", "isMeta": True, "message": {}}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, uuids


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.sampled_from(["plan the trip", "ok", "Tool loaded.", "más", "", "<task-notification>x"]),
        max_size=14,
    ),
    st.integers(0, 13),
    st.integers(1, 5),
)
def test_a_file_walk_and_its_counts_equal_the_spec(
    tmp_path_factory: pytest.TempPathFactory, texts: list[str], boundary: int, limit: int
) -> None:
    folder = tmp_path_factory.mktemp("walk")
    path, _ = _transcript(folder, texts)
    raw = path.read_bytes()
    expected_entries = entries_from_lines("s", split_transcript_lines(raw))
    parsed = [json.loads(line) for line in split_transcript_lines(raw) if line.startswith("{")]
    applied: JournalBoundary | None = None
    if expected_entries and boundary < len(expected_entries):
        applied = {
            "endUuid": expected_entries[boundary]["uuid"],
            "endIndex": boundary,
            "prefixHash": prefix_hash(expected_entries, boundary),
        }
    source = TranscriptEntries(path, "s")

    walk = resolve_span_walk(source.open, applied, limit, drain=True)

    assert walk.span == resolve_span(expected_entries, applied, limit)
    assert source.user_turns == count_real_user_turns(parsed)
    assert source.first_user_snippet == first_real_user_snippet(parsed)
    # Resumed at the boundary, on the same bytes, the walk answers the same.
    if walk.boundary is not None:
        assert raw_prefix_digest(path, walk.boundary.tag.end) is not None
        again = TranscriptEntries(path, "s")
        resumed = resolve_span_walk(
            again.open,
            applied,
            limit,
            resume=(walk.boundary, again.open_after(walk.boundary)),
            drain=True,
        )
        assert resumed.span == walk.span
        assert again.user_turns == source.user_turns


def test_a_resume_point_is_refused_once_the_prefix_bytes_change(tmp_path: Path) -> None:
    path, _ = _transcript(tmp_path, ["first words", "reply", "more", "again"])
    digest = raw_prefix_digest(path, 200)
    path.write_bytes(path.read_bytes().replace(b"first", b"FIRST"))

    assert raw_prefix_digest(path, 200) != digest
    assert raw_prefix_digest(path, 10**9) is None


def test_first_message_title_is_the_snippet_of_the_first_user_entry(tmp_path: Path) -> None:
    path, _ = _transcript(tmp_path, ["<typed>  can you   plan a trip </typed>", "sure"])

    assert first_message_title(path, "s") == "can you plan a trip"
    assert first_message_title(tmp_path / "missing.jsonl", "s") is None
