"""`bbx chat history` and `bbx chat media` for people at a terminal."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

from beebox_impl.cli import main as bbx
from beebox_impl.transcript.location import PROJECTS_DIR_ENV, transcript_path

SESSION = "7f0c3e52-2a51-4d4b-9b0e-0d8f6f1c2a10"
PHOTO = os.urandom(300_000)  # big enough that its line is over 256 KiB and gets stripped


def compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@pytest.fixture
def box(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A box folder whose session transcript holds a caption and a photo, then a reply."""
    root = tmp_path / "projects"
    monkeypatch.setenv(PROJECTS_DIR_ENV, str(root))
    box = tmp_path / "box"
    box.mkdir()
    path = transcript_path(box, SESSION, root)
    path.parent.mkdir(parents=True)
    photo = {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": "image/png",
            "data": base64.b64encode(PHOTO).decode(),
        },
    }
    lines = [
        {"type": "user", "uuid": "u-1", "parentUuid": None, "sessionId": SESSION,
         "timestamp": "2026-12-01T10:00:00.000Z",
         "message": {"role": "user", "content": [{"type": "text", "text": "look at this"}, photo]}},
        {"type": "assistant", "uuid": "a-1", "parentUuid": "u-1", "sessionId": SESSION,
         "timestamp": "2026-12-01T10:00:05.000Z",
         "message": {"role": "assistant", "content": [{"type": "text", "text": "a fine photo"}]}},
    ]  # fmt: skip
    path.write_text("".join(compact(line) + "\n" for line in lines), encoding="utf-8")
    return box


def test_history_prints_the_entries_with_a_photo_reference(
    box: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bbx(["chat", "history", SESSION, "--box", str(box)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"session {SESSION}: 2 entries, showing 2\n")
    assert "look at this" in out
    assert f"[photo: bbx chat media {SESSION}/u-1/0 -o FILE]" in out
    assert "a fine photo" in out


def test_history_json_and_tail(box: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert bbx(["chat", "history", SESSION, "--box", str(box), "--tail", "1", "--json"]) == 0
    history = json.loads(capsys.readouterr().out)
    assert history["total"] == 2
    assert [entry["uuid"] for entry in history["entries"]] == ["a-1"]


def test_history_in_an_initialised_box_shelves_its_index(
    box: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Outside a box's state folder nothing is written; inside one, the index is kept.
    assert bbx(["chat", "history", SESSION, "--box", str(box)]) == 0
    assert not (box / ".beebox").exists()
    unshelved = capsys.readouterr().out
    (box / ".beebox").mkdir()
    assert bbx(["chat", "history", SESSION, "--box", str(box)]) == 0
    shelved = list((box / ".beebox" / "cache" / "transcript-index").iterdir())
    assert [path.suffix for path in shelved] == [".idx"]
    # Read through the shelved index, the answer is the same.
    assert bbx(["chat", "history", SESSION, "--box", str(box)]) == 0
    assert capsys.readouterr().out == unshelved * 2


def test_media_writes_the_photo(
    box: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "photo.png"
    assert bbx(["chat", "media", f"{SESSION}/u-1/0", "-o", str(out), "--box", str(box)]) == 0
    assert out.read_bytes() == PHOTO
    assert f"wrote {len(PHOTO)} bytes (image/png)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["chat", "media", "../../etc/passwd/0", "-o", "x"], 2, "malformed media reference"),
        (["chat", "media", f"{SESSION}/u-1/1", "-o", "x"], 1, "no-such-image"),
        (["chat", "media", f"{SESSION}/nope/0", "-o", "x"], 1, "not-found"),
        (["chat", "history", "no-such-session"], 1, "no transcript for session"),
        (["chat", "history", "../escape"], 2, "not a session id"),
        (["chat", "history", SESSION, "--tail", "0"], 2, ""),
    ],
)
def test_bad_requests_get_a_clear_error(
    box: Path, capsys: pytest.CaptureFixture[str], argv: list[str], code: int, message: str
) -> None:
    assert bbx([*argv, "--box", str(box)]) == code
    assert message in capsys.readouterr().err
