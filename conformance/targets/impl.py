"""The `impl` target: vector kinds answered by `beebox_impl`.

Transcript and media kinds run through the implementation's file readers
(`ImplTranscriptReader`, a fresh index cache each case) on a temporary file per
case (`conformance.targets.transcript_files`). Kinds whose rule the implementation
takes from the spec unchanged (the reference grammar, `transform_content`) are
answered by that same function, which is the point of "one rule, one place".
Session kinds run on a chosen backend (`conformance.targets.impl_session`). Kinds
of parts not built yet are skipped by the runner.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from beebox_impl.transcript import (
    MediaFound,
    PageSlice,
    TranscriptIndexCache,
    extract_media_from_line,
    find_media_line,
    read_history,
    read_line_records,
)
from beebox_spec.entries import MAX_SESSION_ENTRIES, SessionEntry
from beebox_spec.media import ExtractResult, LineLookup
from beebox_spec.transcript import PhotoMode
from conformance.protocols import LineReading
from conformance.targets import HandlerTable
from conformance.targets.impl_review import IMPL_REVIEW_HANDLERS
from conformance.targets.impl_session import impl_session_handlers
from conformance.targets.spec_media import HANDLERS as SPEC_MEDIA
from conformance.targets.transcript_files import transcript_file_handlers

__all__ = ["TRANSCRIPT_HANDLERS", "ImplTranscriptReader", "impl_handlers"]


class ImplTranscriptReader:
    """`beebox_impl.transcript`'s readers as a `TranscriptReader`, with its own index
    cache, reading photos in mode ``photos``."""

    def __init__(self, photos: PhotoMode = "original") -> None:
        self._photos = photos
        self._cache = TranscriptIndexCache(photos=photos)

    def read_lines(self, path: Path, /) -> Sequence[LineReading]:
        return [
            {"lineNumber": r.line_number, "kind": r.kind, "mediaStripped": r.media_stripped}
            for r in read_line_records(path, photos=self._photos)
        ]

    def read_entries(self, path: Path, session_id: str, /) -> Sequence[SessionEntry]:
        window = PageSlice(0, MAX_SESSION_ENTRIES)
        return read_history(path, session_id, window, cache=self._cache)["entries"]

    def find_line(self, path: Path, uuid: str, /) -> LineLookup:
        return find_media_line(path, uuid, cache=self._cache)

    def extract_media(self, line: bytes, index: int, /) -> ExtractResult:
        result = extract_media_from_line(line, index)
        if isinstance(result, MediaFound):
            return {"ok": True, "mediaType": result.media_type, "data": result.data}
        match result.reason:
            case "unparsable" | "no-such-image" | "no-payload" as reason:
                return {"ok": False, "reason": reason}
            case _:
                # Finding a line is not extracting from one: a lookup's reason here is a bug.
                raise AssertionError(f"extracting from a line answered {result.reason!r}")


TRANSCRIPT_HANDLERS: HandlerTable = {
    "media-ref/parse": SPEC_MEDIA["media-ref/parse"],
    "media-ref/encode": SPEC_MEDIA["media-ref/encode"],
    "content/transform": SPEC_MEDIA["content/transform"],
    **transcript_file_handlers(ImplTranscriptReader),
}


def impl_handlers(backend: str) -> HandlerTable:
    """Every kind the implementation answers, its sessions running on ``backend``."""
    return {**TRANSCRIPT_HANDLERS, **IMPL_REVIEW_HANDLERS, **impl_session_handlers(backend)}
