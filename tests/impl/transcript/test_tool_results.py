"""Tool results riding on their calls (the spec's transcript rule 5), through the index.

A result sits in a later line than its call, so the index keeps which line answered
which call (`ToolResultLinks`) and which calls were still open where its complete
lines end. These pin the paths a generated transcript reaches only by luck: a warm
read by offset, a result appended after the index was built, a last line without
its newline that answers a call, a shelved index, a result line rewritten in place.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import BinaryIO

import pytest

import beebox_impl.transcript.history as history_module
from beebox_impl.transcript import (
    IndexShelf,
    PageSlice,
    TailSlice,
    TranscriptIndexCache,
    read_history,
)
from beebox_impl.transcript.chunked import ChunkedIntArray
from beebox_impl.transcript.index import ToolResultLinks
from beebox_impl.transcript.lines import open_transcript
from beebox_spec.entries import MAX_SESSION_ENTRIES, SessionHistory
from beebox_spec.transcript import entries_from_lines, history_page, split_transcript_lines
from tests.impl.transcript.strategies import compact
from tests.impl.transcript.test_index import SESSION, folder, rewrite_keeping_identity, user_line

WHOLE = PageSlice(0, MAX_SESSION_ENTRIES)


def call_line(uuid: str, *tool_ids: str) -> bytes:
    content = [
        {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": tool_id}}
        for tool_id in tool_ids
    ]
    record = {
        "type": "assistant",
        "uuid": uuid,
        "timestamp": "t",
        "message": {"role": "assistant", "model": "m", "content": content},
    }
    return compact(record).encode()


def result_line(uuid: str, *results: tuple[str, str], error: bool = False) -> bytes:
    content = [
        {"type": "tool_result", "tool_use_id": tool_id, "content": out, "is_error": error}
        for tool_id, out in results
    ]
    record = {"type": "user", "uuid": uuid, "timestamp": "t", "message": {"content": content}}
    return compact(record).encode()


def spec_history(data: bytes) -> SessionHistory:
    entries = entries_from_lines(SESSION, split_transcript_lines(data))
    return history_page(SESSION, entries, 0, MAX_SESSION_ENTRIES)


def summaries(history: SessionHistory) -> dict[str, str | None]:
    """Each call's result summary (None: unanswered), by tool id."""
    return {
        str(block.get("toolId")): block.get("resultSummary")
        for entry in history["entries"]
        for block in entry["content"]
        if block["type"] == "tool_use"
    }


def test_warm_reads_by_offset_read_the_results_too() -> None:
    lines = [
        user_line("u-1", "go"),
        call_line("a-1", "t1", "t2"),
        call_line("a-2", "t3"),
        result_line("r-1", ("t2", "two"), ("t1", "one")),
        user_line("u-2", "and"),
        result_line("r-2", ("t3", "three"), error=True),
    ]
    data = b"\n".join(lines) + b"\n"
    with folder() as where:
        path = where / "s.jsonl"
        path.write_bytes(data)
        cache = TranscriptIndexCache()
        cold = read_history(path, SESSION, WHOLE, cache=cache)
        # Warm: each entry read alone, by offset, and its results by theirs.
        warm = read_history(path, SESSION, WHOLE, cache=cache)
        tail = read_history(path, SESSION, TailSlice(2), cache=cache)
        page = read_history(path, SESSION, PageSlice(1, 1), cache=cache)
    expected = spec_history(data)
    assert cold == warm == expected
    assert summaries(expected) == {"t1": "one", "t2": "two", "t3": "three"}
    assert tail["entries"] == expected["entries"][-2:]
    assert page["entries"] == expected["entries"][1:2]
    (t3,) = expected["entries"][2]["content"]
    assert t3.get("isError") is True


def test_a_result_appended_later_answers_a_call_the_index_holds_open() -> None:
    first = [call_line("a-1", "t1"), call_line("a-2", "t2"), result_line("r-2", ("t2", "two"))]
    later = [user_line("u-1", "meanwhile"), result_line("r-1", ("t1", "one, at last"))]
    with folder() as where:
        path = where / "s.jsonl"
        path.write_bytes(b"\n".join(first) + b"\n")
        cache = TranscriptIndexCache()
        before = read_history(path, SESSION, WHOLE, cache=cache)
        assert summaries(before) == {"t1": None, "t2": "two"}
        with path.open("ab") as file:
            file.write(b"\n".join(later) + b"\n")
        # The extension answers an older call than the last one answered.
        grown = read_history(path, SESSION, TailSlice(1), cache=cache)
        assert grown["entries"][0]["uuid"] == "u-1"
        whole = read_history(path, SESSION, WHOLE, cache=cache)
        index = cache.cached(path)
    assert whole == spec_history(path_data := b"\n".join(first + later) + b"\n")
    assert summaries(whole) == {"t1": "one, at last", "t2": "two"}
    assert index is not None
    assert index.open_calls == {}
    assert [(entry, line) for entry, line, _ in index.result_links] == [(0, 4), (1, 2)]
    assert path_data


@pytest.mark.parametrize("completed", [True, False], ids=["completed", "replaced"])
def test_a_last_line_without_its_newline_is_read_again(completed: bool) -> None:
    # The result on the last line (no newline yet) answers t1 for this read; the
    # extension reads that line again, and what it has become decides.
    calls = call_line("a-1", "t1")
    answer = result_line("r-1", ("t1", "one"))
    with folder() as where:
        path = where / "s.jsonl"
        path.write_bytes(calls + b"\n" + answer)
        cache = TranscriptIndexCache()
        assert summaries(read_history(path, SESSION, WHOLE, cache=cache)) == {"t1": "one"}
        index = cache.cached(path)
        assert index is not None
        assert index.open_calls == {"t1": 0}
        assert index.tail_result_links == ((0, 1, 0),)
        if completed:
            data = calls + b"\n" + answer + b"\n" + result_line("r-2", ("t1", "again")) + b"\n"
        else:
            # The writer's line turned out longer: it answers nothing; a later one does.
            data = calls + b"\n" + answer + b" junk\n" + result_line("r-2", ("t1", "late")) + b"\n"
        path.write_bytes(data)
        history = read_history(path, SESSION, WHOLE, cache=cache)
        grown = cache.cached(path)
    assert grown is not None
    assert grown.scanned_from == len(calls) + 1
    assert history == spec_history(data)
    assert summaries(history) == {"t1": "one" if completed else "late"}


def test_a_shelved_index_keeps_its_links_and_open_calls(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    where = tmp_path_factory.mktemp("shelf")
    path = where / "s.jsonl"
    data = (
        b"\n".join([call_line("a-1", "t1", "t2"), result_line("r-1", ("t1", "one"))])
        + b"\n"
        + result_line("r-2", ("t2", "two"))
    )
    path.write_bytes(data)
    shelf = IndexShelf(where / "shelf")
    first = TranscriptIndexCache(shelf=shelf)
    expected = read_history(path, SESSION, WHOLE, cache=first)
    assert summaries(expected) == {"t1": "one", "t2": "two"}
    # A new process: the shelf's index, read by offset.
    fresh = TranscriptIndexCache(shelf=shelf)
    assert read_history(path, SESSION, WHOLE, cache=fresh) == expected == spec_history(data)
    held, shelved = first.cached(path), fresh.cached(path)
    assert held is not None
    assert shelved is not None
    assert list(shelved.result_links) == list(held.result_links)
    assert shelved.open_calls == held.open_calls == {"t2": 0}
    assert shelved.tail_result_links == held.tail_result_links == ((0, 2, 0),)


def test_a_result_line_rewritten_in_place_is_read_again_whole() -> None:
    lines = [call_line("a-1", "t1"), result_line("r-1", ("t1", "one"))]
    with folder() as where:
        path = where / "s.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        cache = TranscriptIndexCache()
        read_history(path, SESSION, WHOLE, cache=cache)
        # Same size and identity, but the result now answers another call.
        rewritten = b"\n".join([lines[0], lines[1].replace(b'"t1"', b'"t9"')]) + b"\n"
        rewrite_keeping_identity(path, rewritten)
        history = read_history(path, SESSION, WHOLE, cache=cache)
    assert history == spec_history(rewritten)
    assert summaries(history) == {"t1": None}


def test_links_from_a_shelf_must_be_a_set_a_build_makes() -> None:
    def arrays(*values: list[int]) -> list[ChunkedIntArray]:
        return [ChunkedIntArray(column) for column in values]

    assert list(ToolResultLinks.from_arrays(*arrays([0, 0, 2], [3, 5, 4], [0, 1, 0]))) == [
        (0, 3, 0),
        (0, 5, 1),
        (2, 4, 0),
    ]
    with pytest.raises(ValueError, match="out of order"):
        ToolResultLinks.from_arrays(*arrays([2, 0], [4, 3], [0, 0]))
    with pytest.raises(ValueError, match="different lengths"):
        ToolResultLinks.from_arrays(*arrays([0], [3, 4], [0]))
    with pytest.raises(ValueError, match="out of order"):
        ToolResultLinks.from_arrays(*arrays([0], [3], [-1]))


def test_a_warm_read_reads_a_photo_result_around_its_photo(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A Read of an image answers with the image: a long line, stripped by the pass. A
    # warm read of its call reads that line around the photo, as it does an entry's.
    photo = base64.b64encode(bytes(range(256)) * 1200).decode("ascii")
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": photo},
    }
    record = {
        "type": "user",
        "uuid": "r-1",
        "timestamp": "t",
        "message": {"content": [{"type": "tool_result", "tool_use_id": "t1", "content": [image]}]},
    }
    answer = compact(record).encode()
    data = call_line("a-1", "t1") + b"\n" + answer + b"\n"
    with folder() as where:
        path = where / "s.jsonl"
        path.write_bytes(data)
        cache = TranscriptIndexCache()
        cold = read_history(path, SESSION, WHOLE, cache=cache)
        index = cache.cached(path)
        assert index is not None
        assert 1 in index.stripped_lines
        read: list[int] = []
        real_open = open_transcript

        def counting_open(at: Path) -> BinaryIO | None:
            opened = real_open(at)
            if opened is None:
                return None
            original_read = opened.read

            def counted(size: int = -1) -> bytes:
                chunk = original_read(size)
                read.append(len(chunk))
                return chunk

            monkeypatch.setattr(opened, "read", counted)
            return opened

        monkeypatch.setattr(history_module, "open_transcript", counting_open)
        warm = read_history(path, SESSION, WHOLE, cache=cache)
    assert warm == cold == spec_history(data)
    assert summaries(warm) == {"t1": ""}
    # The photo's 410 KB were not read again.
    assert sum(read) < len(data) - len(photo)
