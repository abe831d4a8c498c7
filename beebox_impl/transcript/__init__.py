"""Reading agent transcripts: history slices, stripped photos, and photos served back.

The production reader of Claude Code's JSONL transcripts, proven equal to the
executable spec (`beebox_spec.transcript`, `beebox_spec.media`) by the property
tests in `tests/impl/transcript/`; only the I/O and the speed differ:

- `lines`: the one guarded reader (`read_line_records`): lines classified
  parseable / stripped / oversize in memory bounded by the block size;
- `strip`: the strip rule on bytes (`strip_inline_media_bytes`), fast, and
  streaming over a line fed in chunks (`PayloadScanner`);
- `index`: per-file offset indexes keyed by (path, device, inode, size, mtime),
  extended as a transcript grows, in a thread-safe LRU (`TranscriptIndexCache`);
- `persist`: indexes kept on disk between processes (`IndexShelf`);
- `history`: tail and page slices and the total (`read_history`);
- `media`: the line by its own uuid (`find_media_line`) and one photo
  (`fetch_media`; among a session's transcripts, its sub-agents' too,
  `fetch_session_media`);
- `location`: where a box's transcripts live.

Everything here is synchronous, blocking file work; async callers run it in a
worker thread. There is no module state: caches are objects the caller owns.

The records of a read are named tuples, and the few mutable objects plain classes
with ``__slots__``; none is a dataclass. `bbx chat history` and `bbx chat media`
run a read in a process of their own, where importing `dataclasses` (with
`inspect` under it) and creating some twenty of them took ~13 ms of a ~66 ms
command (issue 38; `tests/impl/test_cli_imports.py` holds the reads to it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from beebox_impl.lazy import lazy_names

if TYPE_CHECKING:
    from beebox_impl.transcript.history import PageSlice, TailSlice, read_history
    from beebox_impl.transcript.index import TranscriptIndex, TranscriptIndexCache
    from beebox_impl.transcript.lines import LineRecord, read_line_records
    from beebox_impl.transcript.media import (
        MediaFound,
        MediaMissing,
        MediaMissingReason,
        extract_media_from_line,
        fetch_media,
        fetch_session_media,
        find_media_line,
    )
    from beebox_impl.transcript.persist import IndexShelf
    from beebox_impl.transcript.strip import strip_inline_media_bytes

__all__ = [
    "IndexShelf",
    "LineRecord",
    "MediaFound",
    "MediaMissing",
    "MediaMissingReason",
    "PageSlice",
    "TailSlice",
    "TranscriptIndex",
    "TranscriptIndexCache",
    "extract_media_from_line",
    "fetch_media",
    "fetch_session_media",
    "find_media_line",
    "read_history",
    "read_line_records",
    "strip_inline_media_bytes",
]

# Where each name lives: imported on first use (`beebox_impl.lazy`), so a command that
# reads a history does not import the photo fetch, nor a host the whole reader.
_HOMES: dict[str, str] = {
    "PageSlice": "beebox_impl.transcript.history",
    "TailSlice": "beebox_impl.transcript.history",
    "read_history": "beebox_impl.transcript.history",
    "TranscriptIndex": "beebox_impl.transcript.index",
    "TranscriptIndexCache": "beebox_impl.transcript.index",
    "LineRecord": "beebox_impl.transcript.lines",
    "read_line_records": "beebox_impl.transcript.lines",
    "MediaFound": "beebox_impl.transcript.media",
    "MediaMissing": "beebox_impl.transcript.media",
    "MediaMissingReason": "beebox_impl.transcript.media",
    "extract_media_from_line": "beebox_impl.transcript.media",
    "fetch_media": "beebox_impl.transcript.media",
    "fetch_session_media": "beebox_impl.transcript.media",
    "find_media_line": "beebox_impl.transcript.media",
    "IndexShelf": "beebox_impl.transcript.persist",
    "strip_inline_media_bytes": "beebox_impl.transcript.strip",
}

__getattr__, __dir__ = lazy_names(__name__, globals(), _HOMES)
