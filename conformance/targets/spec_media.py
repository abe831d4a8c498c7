"""The spec (`beebox_spec.media`, `beebox_spec.transcript`) as a conformance target.

Handlers for the photo and transcript-reading kinds of `docs/conformance.md`. The
reference and content kinds are answered by any `MediaRefCodec` or
`ContentTransformer` (`media_ref_handlers`, `content_transform_handlers`); this
target gives them `beebox_spec.media` itself. Each handler is a thin call into the
spec: it narrows the case's JSON input, calls one spec function and shapes the
answer as the kind's `expect`. Transcript lines arrive as strings (after `$json`
expansion) and are conceptually written to a file joined by "\\n", so they go
through `split_transcript_lines` exactly as a file's text would.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import beebox_spec.media
from beebox_spec.media import MediaEntryRef, MediaRef, extract_media, find_line_by_uuid
from beebox_spec.transcript import (
    entries_from_lines,
    read_transcript_lines,
    split_transcript_lines,
)
from conformance.protocols import ContentTransformer, MediaRefCodec
from conformance.targets import HandlerTable
from conformance.targets.transcript_files import case_photo_mode

__all__ = ["HANDLERS", "content_transform_handlers", "media_ref_handlers"]


def _file_lines(case_input: dict[str, Any]) -> list[str]:
    # The case's lines as a transcript file holds them: joined by "\n", read back.
    # A trailing "" is not a blank line of its own: `["a", ""]` is written "a\n",
    # one line and the final newline that ends it, and a final newline opens no
    # further line (`split_transcript_lines`), so it reads back as one record.
    # `["a", "", ""]` is "a\n\n": "a" and one blank line. The read-lines vectors
    # pin both, so every host writes and reads the case the same way.
    lines = case_input["lines"]
    assert isinstance(lines, list)
    assert all(isinstance(line, str) for line in lines)
    return split_transcript_lines("\n".join(lines))


def media_ref_handlers(make_codec: Callable[[], MediaRefCodec]) -> HandlerTable:
    """The `media-ref/*` kinds answered by a fresh ``make_codec()`` each case."""

    def parse(case_input: Any) -> Any:
        assert isinstance(case_input, str)
        return make_codec().parse_media_ref_or_none(case_input)

    def encode(case_input: Any) -> Any:
        assert isinstance(case_input, dict)
        ref: MediaRef = {
            "sessionId": case_input["sessionId"],
            "entryUuid": case_input["entryUuid"],
            "index": case_input["index"],
        }
        return make_codec().encode_media_ref(ref)

    return {"media-ref/parse": parse, "media-ref/encode": encode}


def content_transform_handlers(make_transformer: Callable[[], ContentTransformer]) -> HandlerTable:
    """The `content/transform` kind answered by a fresh ``make_transformer()`` each case."""

    def transform(case_input: Any) -> Any:
        assert isinstance(case_input, dict)
        raw_ref = case_input["mediaRef"]
        media_ref: MediaEntryRef | None = (
            None
            if raw_ref is None
            else {"sessionId": raw_ref["sessionId"], "entryUuid": raw_ref["entryUuid"]}
        )
        return list(make_transformer().transform_content(case_input["content"], media_ref))

    return {"content/transform": transform}


def _transcript_read_lines(case_input: Any) -> Any:
    assert isinstance(case_input, dict)
    return [
        {
            "lineNumber": line["lineNumber"],
            "kind": line["kind"],
            "mediaStripped": line["kind"] == "parseable" and line["mediaStripped"],
        }
        for line in read_transcript_lines(
            _file_lines(case_input), photos=case_photo_mode(case_input)
        )
    ]


def _transcript_entries(case_input: Any) -> Any:
    assert isinstance(case_input, dict)
    return entries_from_lines(
        case_input["sessionId"], _file_lines(case_input), photos=case_photo_mode(case_input)
    )


def _media_find_line(case_input: Any) -> Any:
    assert isinstance(case_input, dict)
    return find_line_by_uuid(_file_lines(case_input), case_input["uuid"])


def _media_extract(case_input: Any) -> Any:
    assert isinstance(case_input, dict)
    result = extract_media(case_input["line"], case_input["index"])
    if not result["ok"]:
        return {"ok": False, "reason": result["reason"]}
    return {
        "ok": True,
        "mediaType": result["mediaType"],
        "sha256": hashlib.sha256(result["data"]).hexdigest(),
        "size": len(result["data"]),
    }


HANDLERS: HandlerTable = {
    **media_ref_handlers(lambda: beebox_spec.media),
    **content_transform_handlers(lambda: beebox_spec.media),
    "transcript/read-lines": _transcript_read_lines,
    "transcript/entries": _transcript_entries,
    "media/find-line": _media_find_line,
    "media/extract": _media_extract,
}
