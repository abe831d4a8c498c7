"""History slices of a transcript: the last N entries, or a page, and the total.

Proven equal (`tests/impl/transcript/test_equivalence.py`) to
`beebox_spec.transcript.history_tail` / `history_page` over
`entries_from_lines(session_id, split_transcript_lines(file bytes))`, the slice
bounds checked by the spec's own `check_history_tail` / `check_history_page`.

`total` counts every entry, so it needs every line classified once: the file's
index (`beebox_impl.transcript.index`) is built by one forward pass on first use,
and extended, not rebuilt, as the transcript grows. The pass hands over the
entries it meets, and the ones the slice wants are kept, so a cold read reads the
file once. With a current index a slice reads only its own lines, by offset, and
of a photo line only the bytes around its photos (the pass recorded where they
are): opening a long chat costs what its last N entries' text costs.

Each line read by offset must still yield an entry; if one does not (the file was
rewritten under an index whose key still matched), the index is dropped and the
slice is read again from one full pass, which cannot disagree with itself. A
missing, unreadable or non-regular file reads as an empty history (§2.4: a session
with no readable log reads as empty).
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import BinaryIO, NamedTuple, Self

from beebox_impl.logs import debug
from beebox_impl.transcript.index import TranscriptIndex, TranscriptIndexCache, interpret_line
from beebox_impl.transcript.lines import (
    LineRecord,
    TranscriptChanged,
    open_transcript,
    read_line_record_at,
    read_stripped_line_at,
)
from beebox_spec.entries import SessionEntry, SessionHistory
from beebox_spec.js_values import parse_json_object_or_none
from beebox_spec.transcript import (
    attach_tool_result,
    check_history_page,
    check_history_tail,
    tool_results_of_record,
)

__all__ = ["PageSlice", "TailSlice", "read_history"]


class _Tail(NamedTuple):
    tail: int


class TailSlice(_Tail):
    """The last `tail` entries (1 to `MAX_SESSION_ENTRIES`; all when there are fewer).

    A named tuple that checks its bounds as it is made (`InvalidHistorySlice`); no
    dataclass on the read path (`beebox_impl.transcript`).
    """

    __slots__ = ()

    def __new__(cls, tail: int) -> Self:
        check_history_tail(tail)
        return super().__new__(cls, tail)


class _Page(NamedTuple):
    offset: int
    limit: int


class PageSlice(_Page):
    """Entries `offset` to `offset + limit` (offset ≥ 0, limit 1 to `MAX_SESSION_ENTRIES`),
    checked as it is made, as `TailSlice` is."""

    __slots__ = ()

    def __new__(cls, offset: int, limit: int) -> Self:
        check_history_page(offset, limit)
        return super().__new__(cls, offset, limit)


def read_history(
    path: Path,
    session_id: str,
    slice: TailSlice | PageSlice,
    *,
    cache: TranscriptIndexCache,
) -> SessionHistory:
    """The slice of the session's history in the transcript at `path`, and its total."""
    try:
        file = open_transcript(path)
        if file is None:
            return _empty(session_id)
        with file:
            try:
                return _read_slice(path, file, session_id, slice, cache, rebuild=False)
            except TranscriptChanged as error:
                debug(__name__, "stale index for %s (%s): reading it whole", path, error)
                cache.discard(path)
            # A rebuilt index reads every entry the slice wants in its own pass.
            return _read_slice(path, file, session_id, slice, cache, rebuild=True)
    except OSError as error:
        debug(__name__, "transcript %s unreadable (%s): empty history", path, error)
        return _empty(session_id)


def _empty(session_id: str) -> SessionHistory:
    return {"sessionId": session_id, "entries": [], "total": 0}


def _read_slice(
    path: Path,
    file: BinaryIO,
    session_id: str,
    slice: TailSlice | PageSlice,
    cache: TranscriptIndexCache,
    *,
    rebuild: bool,
) -> SessionHistory:
    kept: dict[int, SessionEntry] = {}
    # A tail's entries are the last ones the pass meets; a page's are known by position.
    recent: deque[tuple[int, SessionEntry]] = deque(
        maxlen=slice.tail if isinstance(slice, TailSlice) else 0
    )

    def keep(position: int, entry: SessionEntry) -> None:
        # Whatever part of the file the index reads passes its entries through here.
        if isinstance(slice, TailSlice):
            recent.append((position, entry))
        elif slice.offset <= position < slice.offset + slice.limit:
            kept[position] = entry

    index = cache.index_for(path, file, session_id=session_id, sink=keep, rebuild=rebuild)
    if index is None:
        return _empty(session_id)
    total = index.entry_count
    if isinstance(slice, TailSlice):
        wanted = range(max(0, total - slice.tail), total)
        kept.update(recent)
    else:
        wanted = range(min(slice.offset, total), min(slice.offset + slice.limit, total))
    entries = [
        kept[position] if position in kept else _entry_at(file, index, position, session_id, cache)
        for position in wanted
    ]
    return {"sessionId": session_id, "entries": entries, "total": total}


def _entry_at(
    file: BinaryIO,
    index: TranscriptIndex,
    position: int,
    session_id: str,
    cache: TranscriptIndexCache,
) -> SessionEntry:
    # The entry at `position` of the history, read from its line alone.
    line_index = index.entry_lines[position]
    record = _read_indexed_line(file, index, line_index, cache)
    entry, _ = interpret_line(record, session_id)
    # The index said this line yields an entry: if it no longer does, it is stale.
    if entry is None:
        raise TranscriptChanged(f"line {line_index + 1} no longer yields entry {position}")
    for result_line, ordinal in index.results_for(position):
        _attach_result(file, index, entry, (result_line, ordinal), cache)
    return entry


def _read_indexed_line(
    file: BinaryIO, index: TranscriptIndex, line_index: int, cache: TranscriptIndexCache
) -> LineRecord:
    # Line `line_index`, by its offset; a photo line's structure is read around its
    # photos (the pass recorded where they are), not through them.
    offset, length = index.line_span(line_index)
    stripped = index.stripped_lines.get(line_index)
    if stripped is not None:
        return read_stripped_line_at(
            file,
            offset=offset,
            length=length,
            line_number=line_index + 1,
            payload_spans=stripped.payload_spans,
            utf8_bytes=stripped.utf8_bytes,
        )
    return read_line_record_at(
        file,
        offset=offset,
        length=length,
        line_number=line_index + 1,
        block_size=cache.block_size,
        photos=index.photos,
    )


def _attach_result(
    file: BinaryIO,
    index: TranscriptIndex,
    entry: SessionEntry,
    link: tuple[int, int],
    cache: TranscriptIndexCache,
) -> None:
    # Result `ordinal` of line `line_index` answered a call of `entry` (rule 5 of
    # `beebox_spec.transcript`): the last of the entry's calls with its id takes it.
    line_index, ordinal = link
    record = _read_indexed_line(file, index, line_index, cache)
    parsed = parse_json_object_or_none(record.text) if record.text is not None else None
    results = tool_results_of_record(parsed) if parsed is not None else []
    if ordinal >= len(results):
        raise TranscriptChanged(f"line {line_index + 1} no longer holds tool result {ordinal}")
    result = results[ordinal]
    for block in reversed(entry["content"]):
        if block["type"] == "tool_use" and block.get("toolId") == result["toolUseId"]:
            attach_tool_result(block, result)
            return
    raise TranscriptChanged(f"line {line_index + 1}'s tool result answers no call of its entry")
