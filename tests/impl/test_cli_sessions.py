"""Finding a session from a terminal: `bbx chat sessions`, and `bbx chat history`
with no SESSION (the box's current chat); the CLI reads where, and as, the box does
(its transcript folders, its photo mode)."""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from beebox_impl.box import init_box
from beebox_impl.cli import main as bbx
from beebox_impl.review.cards import ensure_chat_husk
from beebox_impl.review.origin import MachineOrigin
from beebox_impl.store.session_id import session_id_path
from beebox_impl.transcript.location import (
    CLAUDE_CONFIG_DIR_ENV,
    PROJECTS_DIR_ENV,
    box_projects_root,
    transcript_path,
)

HERE = MachineOrigin("origin-here", "laptop")
OLDER = "0a000000-0000-4000-8000-000000000001"
NEWER = "0b000000-0000-4000-8000-000000000002"
SYNCED = "0c000000-0000-4000-8000-000000000003"
# One photo big enough that its line is stripped (over 256 KiB), one small enough to
# stay inline: the history shows both as image blocks.
BIG_PHOTO = os.urandom(300_000)
SMALL_PHOTO = os.urandom(2_000)


@dataclass
class Box:
    root: Path
    projects: Path

    def transcript(self, session_id: str, lines: list[dict[str, object]], written: int) -> Path:
        """``lines`` as the session's transcript, last written at ``written`` (Unix time)."""
        path = transcript_path(self.root, session_id, self.projects)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
        path.write_text(text, encoding="utf-8")
        os.utime(path, (written, written))
        return path

    def husk(self, session_id: str, title: str | None) -> None:
        ensure_chat_husk(self.root, session_id, origin=HERE, created=date(2026, 12, 1), title=title)

    def make_current(self, session_id: str) -> None:
        session_id_path(self.root).write_text(json.dumps({"sessionId": session_id}))


def turn(session_id: str, uuid: str, role: str, *content: dict[str, object]) -> dict[str, object]:
    return {
        "type": role,
        "uuid": uuid,
        "parentUuid": None,
        "sessionId": session_id,
        "timestamp": "2026-12-01T10:00:00.000Z",
        "message": {"role": role, "content": list(content)},
    }


def text(words: str) -> dict[str, object]:
    return {"type": "text", "text": words}


def photo(data: bytes) -> dict[str, object]:
    encoded = base64.b64encode(data).decode()
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": encoded},
    }


# Unix times of the two transcripts' last writes: the newer one is listed first.
OLDER_WRITTEN = int(datetime(2026, 12, 1, 10, 0, tzinfo=UTC).timestamp())
NEWER_WRITTEN = int(datetime(2026, 12, 2, 9, 30, tzinfo=UTC).timestamp())


@pytest.fixture
def box(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Box:
    """A box with three husks: two photos and a reply in the older session, one
    exchange in the newer (the current chat), and a husk synced from elsewhere with
    no transcript here."""
    projects = tmp_path / "projects"
    monkeypatch.setenv(PROJECTS_DIR_ENV, str(projects))
    made = Box(init_box(tmp_path / "box").root, projects)
    made.transcript(
        OLDER,
        [
            turn(OLDER, "u-1", "user", text("two photos of the garden"), photo(BIG_PHOTO)),
            turn(OLDER, "u-2", "user", photo(SMALL_PHOTO)),
            turn(OLDER, "a-1", "assistant", text("a fine garden")),
        ],
        OLDER_WRITTEN,
    )
    made.husk(OLDER, "Two photos of the garden")
    made.transcript(
        NEWER,
        [
            turn(NEWER, "u-3", "user", text("plan a trip")),
            turn(NEWER, "a-2", "assistant", text("where to?")),
        ],
        NEWER_WRITTEN,
    )
    made.husk(NEWER, "Plan a trip")
    made.husk(SYNCED, None)
    made.make_current(NEWER)
    return made


def sessions_json(
    box: Box, capsys: pytest.CaptureFixture[str], *argv: str
) -> list[dict[str, object]]:
    assert bbx(["chat", "sessions", "--box", str(box.root), "--json", *argv]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert isinstance(listed, list)
    return listed


def test_sessions_are_listed_newest_first_with_their_counts(
    box: Box, capsys: pytest.CaptureFixture[str]
) -> None:
    listed = sessions_json(box, capsys)

    assert listed == [
        {
            "sessionId": NEWER,
            "title": "Plan a trip",
            "contains": None,
            "card": f"2026-12-01_{NEWER[:8]}.chat.card",
            "current": True,
            "lastActivity": "2026-12-02T09:30:00.000Z",
            "entries": 2,
            "photos": 0,
        },
        {
            "sessionId": OLDER,
            "title": "Two photos of the garden",
            "contains": None,
            "card": f"2026-12-01_{OLDER[:8]}.chat.card",
            "current": False,
            "lastActivity": "2026-12-01T10:00:00.000Z",
            "entries": 3,
            "photos": 2,
        },
        {
            "sessionId": SYNCED,
            "title": None,
            "contains": None,
            "card": f"2026-12-01_{SYNCED[:8]}.chat.card",
            "current": False,
            "lastActivity": None,
            "entries": 0,
            "photos": 0,
        },
    ]


def test_the_table_stars_the_current_chat_and_titles_as_the_page_does(
    box: Box, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bbx(["chat", "sessions", "--box", str(box.root)]) == 0
    lines = capsys.readouterr().out.splitlines()

    assert lines[0].split() == ["SESSION", "LAST", "ACTIVITY", "ENTRIES", "PHOTOS", "TITLE"]
    assert lines[1].startswith(f"* {NEWER}  ")
    assert lines[1].split()[-5:] == ["2", "0", "Plan", "a", "trip"]
    assert lines[2].startswith(f"  {OLDER}  ")
    assert lines[2].split()[-7:] == ["3", "2", "Two", "photos", "of", "the", "garden"]
    # No title on the card: the page's name for it; no transcript here: said so.
    assert lines[3].startswith(f"  {SYNCED}  no transcript ")
    assert lines[3].endswith(f"  0       0  Session {SYNCED[:8]}")
    assert lines[4] == "(* the box's current chat: `bbx chat history` shows it)"


def test_limit_lists_the_newest_and_says_how_many_more(
    box: Box, capsys: pytest.CaptureFixture[str]
) -> None:
    assert [session["sessionId"] for session in sessions_json(box, capsys, "--limit", "1")] == [
        NEWER
    ]
    assert bbx(["chat", "sessions", "--box", str(box.root), "--limit", "2"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == ("(1 older not shown: --limit N shows more)")


def test_the_current_chat_is_listed_before_its_husk_is_made(
    box: Box, capsys: pytest.CaptureFixture[str]
) -> None:
    fresh = "0d000000-0000-4000-8000-000000000004"
    box.transcript(fresh, [turn(fresh, "u-9", "user", text("hi"))], NEWER_WRITTEN + 60)
    box.make_current(fresh)

    listed = sessions_json(box, capsys)

    assert listed[0] == {
        "sessionId": fresh,
        "title": None,
        "contains": None,
        "card": None,
        "current": True,
        "lastActivity": "2026-12-02T09:31:00.000Z",
        "entries": 1,
        "photos": 0,
    }
    assert [session["current"] for session in listed] == [True, False, False, False]


def test_sessions_read_through_the_boxs_index_shelf(
    box: Box, capsys: pytest.CaptureFixture[str]
) -> None:
    shelf = box.root / ".beebox" / "cache" / "transcript-index"
    listed = sessions_json(box, capsys)
    # One index a transcript read: the next listing, or history, starts warm.
    assert len(list(shelf.glob("*.idx"))) == 2
    assert sessions_json(box, capsys) == listed


def test_an_empty_box_says_how_a_session_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = init_box(tmp_path / "box").root
    assert bbx(["chat", "sessions", "--box", str(root)]) == 0
    assert capsys.readouterr().out == "no chat sessions yet: `bbx chat send TEXT` starts one\n"
    assert bbx(["chat", "sessions", "--box", str(root), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


@pytest.mark.parametrize(
    "argv", [["chat", "sessions"], ["chat", "history"]], ids=["sessions", "history"]
)
@pytest.mark.parametrize("folder", ["missing", "plain"])
def test_a_folder_that_is_not_a_box_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], folder: str
) -> None:
    path = tmp_path / folder
    if folder == "plain":
        path.mkdir()
    assert bbx([*argv, "--box", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("bbx: ")
    assert captured.err.count("\n") == 1
    assert str(path) in captured.err


def test_history_without_a_session_shows_the_current_chat(
    box: Box, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bbx(["chat", "history", "--box", str(box.root)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"session {NEWER}: 2 entries, showing 2\n")
    assert "plan a trip" in out


def test_history_without_a_session_in_a_box_with_no_chat_yet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = init_box(tmp_path / "box").root
    assert bbx(["chat", "history", "--box", str(root)]) == 1
    assert capsys.readouterr().err == (
        f"bbx: the box at {root} has no chat session yet: `bbx chat send TEXT` starts one,"
        " `bbx chat sessions` lists the others\n"
    )


def test_the_cli_finds_sessions_where_the_box_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nothing pointing transcripts elsewhere: the box's own folder, then Claude Code's.
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv(PROJECTS_DIR_ENV, raising=False)
    monkeypatch.delenv(CLAUDE_CONFIG_DIR_ENV, raising=False)
    # The echo engine's in the box; the real agent's where Claude Code writes.
    root = init_box(tmp_path / "box").root
    echoed = Box(root, box_projects_root(root))
    echoed.transcript(OLDER, [turn(OLDER, "u-1", "user", text("to the echo"))], OLDER_WRITTEN)
    echoed.husk(OLDER, "To the echo")
    claude = Box(root, home / ".claude" / "projects")
    claude.transcript(NEWER, [turn(NEWER, "u-2", "user", text("to claude"))], NEWER_WRITTEN)
    claude.husk(NEWER, "To Claude")

    listed = sessions_json(echoed, capsys)
    assert [(session["sessionId"], session["entries"]) for session in listed] == [
        (NEWER, 1),
        (OLDER, 1),
    ]
    assert bbx(["chat", "history", OLDER, "--box", str(root)]) == 0
    assert "to the echo" in capsys.readouterr().out


def small_photo_box(folder: Path, projects: Path, settings: str | None) -> Box:
    """A box whose one session holds a 2 KB photo, its settings file ``settings``."""
    made = Box(init_box(folder).root, projects)
    if settings is not None:
        (made.root / "_config" / "settings.yaml").write_text(settings)
    made.transcript(
        OLDER, [turn(OLDER, "u-1", "user", text("my first photo"), photo(SMALL_PHOTO))], 0
    )
    return made


def test_a_small_photo_comes_back_by_reference_in_the_boxs_default_mode(
    tmp_path: Path, box: Box, capsys: pytest.CaptureFixture[str]
) -> None:
    small = small_photo_box(tmp_path / "small", box.projects, None)
    assert bbx(["chat", "history", OLDER, "--box", str(small.root)]) == 0
    assert f"[photo: bbx chat media {OLDER}/u-1/0 -o FILE]" in capsys.readouterr().out
    assert bbx(["chat", "history", OLDER, "--box", str(small.root), "--json"]) == 0
    assert base64.b64encode(SMALL_PHOTO).decode() not in capsys.readouterr().out
    written = tmp_path / "photo.png"
    assert (
        bbx(["chat", "media", f"{OLDER}/u-1/0", "-o", str(written), "--box", str(small.root)]) == 0
    )
    assert written.read_bytes() == SMALL_PHOTO


def test_a_box_set_to_the_original_photo_mode_keeps_small_photos_inline(
    tmp_path: Path, box: Box, capsys: pytest.CaptureFixture[str]
) -> None:
    inline = small_photo_box(tmp_path / "inline", box.projects, "history:\n  photos: original\n")
    assert bbx(["chat", "history", OLDER, "--box", str(inline.root)]) == 0
    assert "[image]" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ("history: [not, a, mapping\n", "not YAML"),  # ruamel's reading refuses it
        ("history:\n  photos: all\n", ":2: history.photos is 'all'"),  # plain, said with its line
        ("?\n mode:\n  mode:\n", "not YAML beebox can read"),  # ruamel parses, cannot build
    ],
)
def test_a_settings_file_the_box_cannot_read_is_an_error(
    tmp_path: Path, box: Box, capsys: pytest.CaptureFixture[str], settings: str, said: str
) -> None:
    broken = small_photo_box(tmp_path / "broken", box.projects, settings)
    assert bbx(["chat", "history", OLDER, "--box", str(broken.root)]) == 1
    error = capsys.readouterr().err
    assert error.startswith(f"bbx: {broken.root / '_config' / 'settings.yaml'}")
    assert said in error
    assert error.count("\n") == 1
