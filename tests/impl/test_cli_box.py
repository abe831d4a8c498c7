"""`bbx init`, `bbx serve` and `bbx chat send` given bad input: a clear error, an exit
status, nothing lost, and never a traceback."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from beebox_impl.box import init_box
from beebox_impl.cli import main as bbx
from beebox_impl.cli.box import serve_file_path
from beebox_impl.transcript.location import PROJECTS_DIR_ENV
from tests.impl.http.support import read_address, start_serve, stop_serve

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and flock")


def test_init_on_a_regular_file_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a-file").write_text("mine")
    assert bbx(["init", str(tmp_path / "a-file")]) == 1
    assert "cannot make a box at" in capsys.readouterr().err
    assert (tmp_path / "a-file").read_text() == "mine"


@pytest.mark.parametrize("damage", ["empty", "not ascii", "a folder"])
def test_init_and_serve_name_a_damaged_token_and_keep_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    paths = init_box(tmp_path / "box")
    paths.token.unlink()
    if damage == "a folder":
        paths.token.mkdir(mode=0o755)
        (paths.token / "kept").write_text("kept")
    else:
        paths.token.write_bytes(b"" if damage == "empty" else b"\xff\xfe token")
    assert bbx(["init", str(paths.root)]) == 1
    assert str(paths.token) in capsys.readouterr().err
    assert bbx(["serve", "--box", str(paths.root), "--port", "0"]) == 1
    assert str(paths.token) in capsys.readouterr().err
    if damage == "a folder":
        # Not chmod-ed shut as a token file readable by others would be.
        assert stat.S_IMODE(paths.token.stat().st_mode) == 0o755
        assert (paths.token / "kept").read_text() == "kept"


def test_init_and_serve_name_a_database_that_is_not_one_and_keep_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = init_box(tmp_path / "box")
    garbage = os.urandom(8192)
    paths.database.write_bytes(garbage)
    assert bbx(["init", str(paths.root)]) == 1
    assert str(paths.database) in capsys.readouterr().err
    assert bbx(["serve", "--box", str(paths.root), "--port", "0"]) == 1
    assert str(paths.database) in capsys.readouterr().err
    assert paths.database.read_bytes() == garbage


@pytest.mark.parametrize("port", ["70000", "-1"])
def test_serve_refuses_a_port_out_of_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], port: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        bbx(["serve", "--box", str(tmp_path / "box"), "--port", port])
    assert exited.value.code == 2
    assert "0 to 65535" in capsys.readouterr().err
    assert not (tmp_path / "box").exists(), "refused before the box is touched"


def test_serve_on_a_port_in_use_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert bbx(["serve", "--box", str(tmp_path / "box"), "--port", str(port)]) == 1
    assert capsys.readouterr().err == (
        f"bbx: cannot serve: port {port} on 127.0.0.1 is already in use (another program"
        " listens there); pass --port 0 to take any free port\n"
    )


def test_a_second_serve_of_one_box_is_refused_and_the_first_keeps_serving(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    box = tmp_path / "box"
    first = start_serve(box, tmp_path / "projects")
    try:
        url, _ = read_address(first, box)
        serve_file = serve_file_path(box).read_text()
        second = subprocess.run(
            [sys.executable, "-m", "beebox_impl", "serve", "--box", str(box), "--port", "0"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert second.returncode == 1, second.stderr
        assert "already served" in second.stderr
        assert url in second.stderr
        # The first one's serve file is as it wrote it, and it still answers.
        assert serve_file_path(box).read_text() == serve_file
        assert bbx(["chat", "send", "still here", "--box", str(box)]) == 0
        answer = json.loads(capsys.readouterr().out)
        assert set(answer) in ({"turnId", "sessionId"}, {"queued", "sessionId"})
    finally:
        code, errors = stop_serve(first)
    assert code == 0, errors


def test_chat_send_names_a_missing_image_not_a_missing_box(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    box = init_box(tmp_path / "box").root
    code = bbx(["chat", "send", "x", "--box", str(box), "--url", "http://127.0.0.1:9",
                "--image", str(tmp_path / "nope.png")])  # fmt: skip
    assert code == 2
    assert capsys.readouterr().err == (
        f"bbx: cannot send the photo {tmp_path / 'nope.png'}: No such file or directory\n"
    )


def test_chat_send_refuses_a_photo_too_large_to_send_before_reading_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    box = init_box(tmp_path / "box").root
    huge = tmp_path / "huge.jpg"
    with huge.open("wb") as out:
        out.truncate(4 * 1024**3)  # sparse: reading it whole would take 4 GiB
    code = bbx(["chat", "send", "x", "--box", str(box), "--url", "http://127.0.0.1:9",
                "--image", str(huge)])  # fmt: skip
    assert code == 2
    assert "too large" in capsys.readouterr().err


@pytest.mark.parametrize("content", ["not json", "{}", "[1]", '{"url": 7}', '{"url": "x"}'])
def test_chat_send_says_a_serve_file_is_not_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str
) -> None:
    box = init_box(tmp_path / "box").root
    serve_file_path(box).write_text(content)
    assert bbx(["chat", "send", "x", "--box", str(box)]) == 1
    error = capsys.readouterr().err
    assert str(serve_file_path(box)) in error
    assert "restart `bbx serve`" in error


def test_chat_send_names_an_empty_token_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = init_box(tmp_path / "box")
    serve_file_path(paths.root).write_text('{"url": "http://127.0.0.1:9"}')
    paths.token.write_text("")
    assert bbx(["chat", "send", "x", "--box", str(paths.root)]) == 1
    assert str(paths.token) in capsys.readouterr().err


def test_the_serve_lock_goes_with_a_killed_serve(tmp_path: Path) -> None:
    # However a serve ends, the next one starts: the lock is the process's.
    box = tmp_path / "box"
    first = start_serve(box, tmp_path / "projects")
    read_address(first, box)
    first.send_signal(signal.SIGKILL)
    stop_serve(first, None)
    second = start_serve(box, tmp_path / "projects")
    try:
        read_address(second, box)
    finally:
        code, errors = stop_serve(second)
    assert code == 0, errors
    with contextlib.closing(sqlite3.connect(box / ".beebox" / "box.sqlite3")) as database:
        assert database.execute("PRAGMA integrity_check").fetchone() == ("ok",)


@pytest.mark.parametrize("url", ["foo", "http://[::1", "ftp://127.0.0.1:9"])
def test_chat_send_refuses_a_url_that_is_not_a_boxs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        bbx(["chat", "send", "x", "--url", url, "--token", "t"])
    assert exited.value.code == 2
    assert f"not a box's http(s) URL: {url!r}" in capsys.readouterr().err


def test_chat_send_names_the_session_that_sessions_and_history_then_show(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    box, projects = tmp_path / "box", tmp_path / "projects"
    monkeypatch.setenv(PROJECTS_DIR_ENV, str(projects))
    serve = start_serve(box, projects)
    try:
        read_address(serve, box)
        assert bbx(["chat", "send", "the first message", "--box", str(box)]) == 0
        first = json.loads(capsys.readouterr().out)
        assert bbx(["chat", "send", "the second", "--box", str(box)]) == 0
        second = json.loads(capsys.readouterr().out)
    finally:
        code, errors = stop_serve(serve)
    assert code == 0, errors
    # A new chat's session, named once the engine named it; the next send goes on in it.
    assert isinstance(first["sessionId"], str)
    assert second["sessionId"] == first["sessionId"]

    assert bbx(["chat", "sessions", "--box", str(box), "--json"]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert (listed["sessionId"], listed["current"]) == (first["sessionId"], True)
    assert listed["entries"] >= 2
    assert bbx(["chat", "history", "--box", str(box)]) == 0
    assert capsys.readouterr().out.startswith(f"session {first['sessionId']}: ")
