"""The `impl` target: vector kinds answered by `beebox_impl`.

Transcript and media kinds run through the implementation's file readers: each
case's lines are written to a fresh temporary file, joined by ``\\n`` as
`CONFORMANCE.md` says, and read back with a fresh index cache. Kinds whose rule the
implementation takes from the spec unchanged (the reference grammar,
`transform_content`) are answered by that same function, which is the point of
"one rule, one place". Session kinds run on a chosen backend
(`conformance.targets.impl_session`). Kinds of parts not built yet are skipped by
the runner.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from beebox_impl.transcript import (
    MediaFound,
    PageSlice,
    TranscriptIndexCache,
    extract_media_from_line,
    find_media_line,
    read_history,
    read_line_records,
)
from beebox_spec.entries import MAX_SESSION_ENTRIES
from conformance.targets import HandlerTable
from conformance.targets.impl_session import impl_session_handlers
from conformance.targets.spec_media import HANDLERS as SPEC_MEDIA

__all__ = ["TRANSCRIPT_HANDLERS", "impl_handlers"]

T = TypeVar("T")


@contextmanager
def _transcript_file(lines: list[str]) -> Iterator[Path]:
    # Lone surrogates cannot be UTF-8; surrogatepass writes the bytes a broken writer would.
    with tempfile.TemporaryDirectory(prefix="bbx-conformance-") as folder:
        path = Path(folder) / "session.jsonl"
        path.write_bytes("\n".join(lines).encode("utf-8", "surrogatepass"))
        yield path


def _with_file(case_input: Any, read: Callable[[Path], T]) -> T:
    with _transcript_file(list(case_input["lines"])) as path:
        return read(path)


def _read_lines(case_input: Any) -> Any:
    return _with_file(
        case_input,
        lambda path: [
            {"lineNumber": r.line_number, "kind": r.kind, "mediaStripped": r.media_stripped}
            for r in read_line_records(path)
        ],
    )


def _entries(case_input: Any) -> Any:
    window = PageSlice(0, MAX_SESSION_ENTRIES)
    return _with_file(
        case_input,
        lambda path: read_history(
            path, case_input["sessionId"], window, cache=TranscriptIndexCache()
        )["entries"],
    )


def _find_line(case_input: Any) -> Any:
    return _with_file(
        case_input,
        lambda path: find_media_line(path, case_input["uuid"], cache=TranscriptIndexCache()),
    )


def _extract(case_input: Any) -> Any:
    result = extract_media_from_line(
        case_input["line"].encode("utf-8", "surrogatepass"), case_input["index"]
    )
    if isinstance(result, MediaFound):
        return {
            "ok": True,
            "mediaType": result.media_type,
            "sha256": hashlib.sha256(result.data).hexdigest(),
            "size": len(result.data),
        }
    return {"ok": False, "reason": result.reason}


TRANSCRIPT_HANDLERS: HandlerTable = {
    "media-ref/parse": SPEC_MEDIA["media-ref/parse"],
    "media-ref/encode": SPEC_MEDIA["media-ref/encode"],
    "content/transform": SPEC_MEDIA["content/transform"],
    "transcript/read-lines": _read_lines,
    "transcript/entries": _entries,
    "media/find-line": _find_line,
    "media/extract": _extract,
}


def impl_handlers(backend: str) -> HandlerTable:
    """Every kind the implementation answers, its sessions running on ``backend``."""
    return {**TRANSCRIPT_HANDLERS, **impl_session_handlers(backend)}
