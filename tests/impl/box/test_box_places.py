"""Where a box writes, and how its photos come back (issue 34).

The offline echo engine files its made-up transcripts inside the box, never in
Claude Code's folder; a box made in a git checkout offers git nothing of its
state; the history reads every photo by reference unless the box's settings
choose the original's rule.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from beebox_impl.box import Box, init_box
from beebox_impl.services.send import SendRequest, TurnStarted
from beebox_impl.session.chat_events import Done
from beebox_impl.settings import settings_path
from beebox_impl.store.acceptance import Attachment
from beebox_impl.transcript import MediaFound, PageSlice
from beebox_impl.transcript.location import (
    CLAUDE_CONFIG_DIR_ENV,
    PROJECTS_DIR_ENV,
    box_projects_root,
    transcript_path,
)
from beebox_spec.entries import SessionContentBlock, SessionHistory

# A real PNG's worth of bytes (6.5 KB): far under the original's 256 KiB line bound.
SMALL_PHOTO = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 25


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home folder of the test's own, with nothing pointing transcripts elsewhere."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv(PROJECTS_DIR_ENV, raising=False)
    monkeypatch.delenv(CLAUDE_CONFIG_DIR_ENV, raising=False)
    return home


async def send_and_wait(box: Box, text: str, *photos: bytes) -> str:
    """Send through the box, wait for the echo's turn to end; the session id."""
    images = tuple(Attachment("image/png", photo) for photo in photos)
    with box._session.subscribe() as events:
        outcome = await box.send(SendRequest(message=text, images=images))
        assert isinstance(outcome, TurnStarted), outcome
        async for event in events:
            if isinstance(event, Done):
                break
    session_id = box.session_id
    assert session_id is not None
    return session_id


def photos_in(history: SessionHistory) -> list[SessionContentBlock]:
    return [
        block
        for entry in history["entries"]
        for block in entry["content"]
        if block["type"] == "image"
    ]


@pytest.mark.anyio
async def test_the_echo_engine_writes_inside_the_box_not_in_claude_codes_folder(
    tmp_path: Path, home: Path
) -> None:
    box_root = tmp_path / "box"
    async with Box.open(box_root) as box:
        session_id = await send_and_wait(box, "hello")
        history = await box.history(session_id, PageSlice(0, 10))
    # Claude Code lists the sessions it finds under ~/.claude/projects: none of ours.
    assert not (home / ".claude").exists()
    written = transcript_path(box_root.resolve(), session_id, box_projects_root(box_root.resolve()))
    assert written.is_file()
    assert [entry["type"] for entry in history["entries"]] == ["user", "assistant"]


@pytest.mark.anyio
async def test_the_box_reads_claude_codes_transcripts_too(tmp_path: Path, home: Path) -> None:
    # A session the real agent wrote where Claude Code writes: the box finds it there.
    box_root = (tmp_path / "box").resolve()
    init_box(box_root)
    claude_written = transcript_path(box_root, "s-claude", home / ".claude" / "projects")
    claude_written.parent.mkdir(parents=True)
    line = {
        "type": "user",
        "uuid": "u-1",
        "timestamp": "2026-12-05T10:00:00.000Z",
        "message": {"role": "user", "content": "from Claude Code"},
    }
    claude_written.write_text(json.dumps(line) + "\n")
    async with Box.open(box_root) as box:
        history = await box.history("s-claude", PageSlice(0, 10))
    assert [entry["uuid"] for entry in history["entries"]] == ["u-1"]


@pytest.mark.anyio
async def test_a_box_told_where_writes_and_reads_only_there(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    told = tmp_path / "elsewhere"
    monkeypatch.setenv(PROJECTS_DIR_ENV, str(told))
    box_root = tmp_path / "box"
    async with Box.open(box_root) as box:
        session_id = await send_and_wait(box, "hello")
    assert transcript_path(box_root.resolve(), session_id, told).is_file()
    assert not box_projects_root(box_root.resolve()).exists()


@pytest.mark.anyio
async def test_every_photo_comes_back_by_reference_by_default(tmp_path: Path, home: Path) -> None:
    async with Box.open(tmp_path / "box") as box:
        session_id = await send_and_wait(box, "look", SMALL_PHOTO)
        history = await box.history(session_id, PageSlice(0, 10))
        (photo,) = photos_in(history)
        assert set(photo) == {"type", "imageRef", "mediaType"}
        found = await box.media(photo["imageRef"])
    assert isinstance(found, MediaFound)
    assert found.data == SMALL_PHOTO
    # No photo bytes anywhere in what a client receives.
    assert base64.b64encode(SMALL_PHOTO[:600]).decode() not in json.dumps(history)


@pytest.mark.anyio
async def test_the_original_photo_mode_is_a_setting(tmp_path: Path, home: Path) -> None:
    box_root = tmp_path / "box"
    init_box(box_root)
    settings_path(box_root).write_text("history:\n  photos: original\n")
    async with Box.open(box_root) as box:
        session_id = await send_and_wait(box, "look", SMALL_PHOTO)
        history = await box.history(session_id, PageSlice(0, 10))
    (photo,) = [
        block
        for entry in history["entries"]
        for block in entry["content"]
        if block["type"] == "image"
    ]
    assert base64.b64decode(photo["dataBase64"]) == SMALL_PHOTO


def test_a_box_made_in_a_git_checkout_offers_git_none_of_its_state(tmp_path: Path) -> None:
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run([git, "init", "-q", str(checkout)], check=True, env=env)
    paths = init_box(checkout)
    assert paths.token.is_file()
    assert paths.database.is_file()
    untracked = subprocess.run(
        [git, "-C", str(checkout), "status", "--porcelain", "--untracked-files=all"],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    # The settings and the cards are the boxholder's to keep; the state folder is not.
    assert ".beebox" not in untracked
    assert "_config/settings.yaml" in untracked
    # Written once: the boxholder may edit it.
    gitignore = paths.state_dir / ".gitignore"
    gitignore.write_text("token\n")
    init_box(checkout)
    assert gitignore.read_text() == "token\n"
