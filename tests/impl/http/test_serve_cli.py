"""`bbx serve` as a process: conformance vectors over HTTP, `bbx chat send`, clean SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from beebox_impl.cli import main as bbx
from beebox_impl.cli_box import serve_file_path
from conformance.__main__ import main as conformance_main
from tests.impl.http.support import PHOTO_BYTES

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

VECTORS = Path(__file__).resolve().parents[3] / "conformance" / "vectors" / "http"


def test_bbx_serve_passes_the_http_vectors_and_takes_chat_send(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    box = tmp_path / "box"
    env = {**os.environ, "BBX_CLAUDE_PROJECTS_DIR": str(tmp_path / "projects")}
    process = subprocess.Popen(
        [sys.executable, "-m", "beebox_impl", "serve", "--box", str(box), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    try:
        line = process.stdout.readline().decode()
        assert line.startswith(f"beebox serving {box.resolve()} at http://127.0.0.1:")
        url, _, token = line.rsplit(" at ", 1)[1].strip().partition("/?token=")
        assert token == (box / ".beebox" / "token").read_text().strip()

        assert conformance_main(["--url", url, f"--token={token}", str(VECTORS)]) == 0
        assert capsys.readouterr().out.strip().endswith("15 passed, 0 failed")

        photo = tmp_path / "photo.png"
        photo.write_bytes(PHOTO_BYTES)
        monkeypatch.chdir(tmp_path)
        assert bbx(["chat", "send", "from the cli", "--image", str(photo), "--box", str(box)]) == 0
        answer = json.loads(capsys.readouterr().out)
        assert set(answer) in ({"turnId"}, {"queued"})
        assert bbx(["chat", "send", "x", "--box", str(box), "--token", "wrong"]) == 1
        assert "401" in capsys.readouterr().err
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=30)
        process.stdout.close()
        errors = process.stderr.read().decode()
        process.stderr.close()
    assert code == 0, errors
    assert "SIGTERM: shutting down" in errors
    # Clean: the serve file is gone and SQLite checkpointed its WAL on close.
    assert not serve_file_path(box).exists()
    assert not (box / ".beebox" / "box.sqlite3-wal").exists()


def test_bbx_init_then_serve_refuses_a_remote_host_without_the_flag(tmp_path: Path) -> None:
    assert bbx(["init", str(tmp_path / "box")]) == 0
    assert bbx(["serve", "--box", str(tmp_path / "box"), "--host", "0.0.0.0"]) == 2
