"""Transcript and media kinds against any reader of transcript files.

Each case's lines are written to a fresh temporary file, joined by ``\\n`` as
`docs/conformance.md` says (lone surrogates written as the bytes a broken writer would
leave), and read back by a fresh reader from the factory, made for the case's
photo mode (`case_photo_mode`: the input's ``photoMode``, ``"original"`` when it
names none; `beebox_spec.transcript`, rule 2). A `TranscriptReader`
answers in the spec's shapes; these handlers cut the answers to the kinds'
``expect`` (a photo's bytes become their SHA-256 and size). The `impl` target runs
them with `beebox_impl`'s readers; `conformance.check_transcript_reader` with a
host's.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from beebox_spec.transcript import PHOTO_MODES, PhotoMode
from conformance.protocols import TranscriptReader
from conformance.targets import HandlerTable

__all__ = [
    "case_photo_mode",
    "transcript_file",
    "transcript_file_handlers",
]

T = TypeVar("T")


def case_photo_mode(case_input: Any) -> PhotoMode:
    """The photo mode a transcript case is read in: its ``photoMode``, else ``original``."""
    mode = case_input.get("photoMode", "original") if isinstance(case_input, dict) else "original"
    for known in PHOTO_MODES:
        if mode == known:
            return known
    raise ValueError(f"photoMode must be one of {', '.join(PHOTO_MODES)}, not {mode!r}")


def _utf8_bytes(text: str) -> bytes:
    # Lone surrogates cannot be UTF-8; surrogatepass writes the bytes a broken writer would.
    return text.encode("utf-8", "surrogatepass")


@contextmanager
def transcript_file(lines: list[str]) -> Iterator[Path]:
    """A temporary transcript file holding ``lines`` joined by ``\\n``."""
    with tempfile.TemporaryDirectory(prefix="bbx-conformance-") as folder:
        path = Path(folder) / "session.jsonl"
        path.write_bytes(_utf8_bytes("\n".join(lines)))
        yield path


def transcript_file_handlers(
    make_reader: Callable[[PhotoMode], TranscriptReader],
) -> HandlerTable:
    """The transcript-file kinds answered by a fresh ``make_reader(photo_mode)`` each case."""

    def with_file(case_input: Any, read: Callable[[TranscriptReader, Path], T]) -> T:
        with transcript_file(list(case_input["lines"])) as path:
            return read(make_reader(case_photo_mode(case_input)), path)

    def read_lines(case_input: Any) -> Any:
        return with_file(case_input, lambda reader, path: list(reader.read_lines(path)))

    def entries(case_input: Any) -> Any:
        return with_file(
            case_input,
            lambda reader, path: list(reader.read_entries(path, case_input["sessionId"])),
        )

    def find_line(case_input: Any) -> Any:
        return with_file(
            case_input, lambda reader, path: reader.find_line(path, case_input["uuid"])
        )

    def extract(case_input: Any) -> Any:
        reader = make_reader(case_photo_mode(case_input))
        result = reader.extract_media(_utf8_bytes(case_input["line"]), case_input["index"])
        if not result["ok"]:
            return {"ok": False, "reason": result["reason"]}
        return {
            "ok": True,
            "mediaType": result["mediaType"],
            "sha256": hashlib.sha256(result["data"]).hexdigest(),
            "size": len(result["data"]),
        }

    return {
        "transcript/read-lines": read_lines,
        "transcript/entries": entries,
        "media/find-line": find_line,
        "media/extract": extract,
    }
