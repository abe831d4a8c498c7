"""`python -m conformance --serve`: a `bbx serve` it starts answers over HTTP."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest

from beebox_spec.transcript import PhotoMode
from conformance.__main__ import main as conformance_main
from conformance.runner import PACKAGED_VECTORS, count_kinds
from conformance.serve import ServedBox, ServeFailed, served_box
from conformance.targets.http import HttpHost, ServedMediaExtract, served_transcript_handlers


def test_the_served_box_answers_http_and_transcript_vectors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    vectors = [PACKAGED_VECTORS / "http", PACKAGED_VECTORS / "transcript"]
    assert conformance_main(["--target", "spec", "--serve", *map(str, vectors)]) == 0
    lines = capsys.readouterr().out.splitlines()
    counts = count_kinds(vectors)
    http, entries, read_lines = (
        counts[kind] for kind in ("http/exchange", "transcript/entries", "transcript/read-lines")
    )
    # Each target says what it ran and what it left out, and why; the served box is the
    # run's own, so every http case ran there, writes included.
    assert lines == [
        f"spec: {entries + read_lines} passed, {http} skipped "
        "(kinds this target does not answer: http/exchange)",
        f"serve: {http + entries} passed, {read_lines} skipped "
        "(kinds this target does not answer: transcript/read-lines)",
        f"{http + 2 * entries + read_lines} passed, 0 failed, {http + read_lines} skipped",
    ]


class _NotStarting:
    """A `served_box` whose `bbx serve` never says it is serving."""

    def __init__(self, photos: PhotoMode = "refs") -> None:
        self.photos = photos

    def __enter__(self) -> ServedBox:
        raise ServeFailed("bbx serve did not start: address already in use")

    def __exit__(self, *exc_info: object) -> None:
        return None


def test_a_bbx_serve_that_does_not_start_fails_the_run_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("conformance.__main__.served_box", _NotStarting)
    vectors = str(PACKAGED_VECTORS / "http")
    assert conformance_main(["--target", "spec", "--serve", vectors]) == 1
    # Nothing else ran: the one line says why.
    assert capsys.readouterr().out == (
        "FAIL --serve: bbx serve did not start: address already in use\n"
    )


def test_a_history_that_differs_from_the_transcript_fails_the_case(tmp_path: Path) -> None:
    # The API answer is what is compared: a transcript written elsewhere reads empty.
    with served_box() as served:
        host = HttpHost(served.url, served.token)

        def write_elsewhere(_session: str, data: bytes) -> None:
            (tmp_path / "elsewhere.jsonl").write_bytes(data)

        misplaced = served_transcript_handlers({served.photos: (host, write_elsewhere)})
        line = '{"type":"user","uuid":"u-1","timestamp":"t","message":{"content":"hi"}}'
        case = {"sessionId": "s-1", "lines": [line], "photoMode": served.photos}
        assert misplaced["transcript/entries"](case) == []
        placed = served_transcript_handlers({served.photos: (host, served.write_transcript)})
        (entry,) = placed["transcript/entries"](case)
        assert entry["uuid"] == "u-1"


def test_a_photo_is_read_back_through_the_media_route_and_misses_by_status() -> None:
    photo = base64.b64encode(b"\x89PNG" + bytes(range(256)) * 8).decode()
    line = json.dumps(
        {
            "type": "user",
            "message": {
                "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                 "data": photo}},
                ]
            },
        },
        separators=(",", ":"),  # as transcripts are written: the payload rule needs it
    )  # fmt: skip
    with served_box() as served:
        extract = ServedMediaExtract(HttpHost(served.url, served.token), served.write_transcript)
        got = extract({"line": line, "index": 0})
        assert got == {
            "ok": True,
            "mediaType": "image/png",
            "sha256": hashlib.sha256(base64.b64decode(photo)).hexdigest(),
            "size": len(base64.b64decode(photo)),
        }
        assert extract({"line": line, "index": 1}) == {"ok": False, "status": 404}
    # A miss passes only with the status its reason maps to.
    no_image = {"ok": False, "reason": "no-such-image"}
    assert ServedMediaExtract.project(no_image, {"ok": False, "status": 404}) == no_image
    too_large = {"ok": False, "reason": "too-large"}
    assert ServedMediaExtract.project(too_large, {"ok": False, "status": 404}) != too_large
