"""`bbx serve` as a process: conformance vectors over HTTP, `bbx chat send`, clean SIGTERM,
and a request in flight answered before the process exits on SIGTERM or SIGINT."""

from __future__ import annotations

import contextlib
import http.client
import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from beebox_impl.cli import main as bbx
from beebox_impl.cli.box import serve_file_path
from conformance.__main__ import main as conformance_main
from conformance.runner import count_kinds
from tests.impl.http.support import PHOTO_BYTES, read_address, start_serve, stop_serve

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

VECTORS = Path(__file__).resolve().parents[3] / "conformance" / "vectors" / "http"


def test_bbx_serve_passes_the_http_vectors_and_takes_chat_send(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    box = tmp_path / "box"
    process = start_serve(box, tmp_path / "projects")
    try:
        url, token = read_address(process, box)
        assert token == (box / ".beebox" / "token").read_text().strip()

        # A box of the test's own: the cases that reset or write run too.
        arguments = ["--url", url, f"--token={token}", "--allow-writes", str(VECTORS)]
        assert conformance_main(arguments) == 0
        cases = count_kinds([VECTORS])["http/exchange"]
        assert capsys.readouterr().out.strip().endswith(f"{cases} passed, 0 failed")

        photo = tmp_path / "photo.png"
        photo.write_bytes(PHOTO_BYTES)
        monkeypatch.chdir(tmp_path)
        assert bbx(["chat", "send", "from the cli", "--image", str(photo), "--box", str(box)]) == 0
        answer = json.loads(capsys.readouterr().out)
        assert set(answer) in ({"turnId", "sessionId"}, {"queued", "sessionId"})
        assert bbx(["chat", "send", "x", "--box", str(box), "--token", "wrong"]) == 1
        assert "401" in capsys.readouterr().err
    finally:
        code, errors = stop_serve(process)
    assert code == 0, errors
    assert "SIGTERM: shutting down" in errors
    # It said which permission mode was in force (the box's template: default).
    assert "bbx: permission mode default: Claude Code asks on the page" in errors
    # Clean: the serve file is gone and SQLite checkpointed its WAL on close.
    assert not serve_file_path(box).exists()
    assert not (box / ".beebox" / "box.sqlite3-wal").exists()


def test_bbx_init_then_serve_refuses_a_remote_host_without_the_flag(tmp_path: Path) -> None:
    assert bbx(["init", str(tmp_path / "box")]) == 0
    assert bbx(["serve", "--box", str(tmp_path / "box"), "--host", "0.0.0.0"]) == 2


CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


def wait_until_gone(path: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while path.exists():
        assert time.monotonic() < deadline, f"{path} is still there"
        time.sleep(0.01)


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_send_in_flight_when_bbx_serve_is_signalled_is_answered_and_recorded(
    tmp_path: Path, stop_signal: signal.Signals
) -> None:
    box = tmp_path / "box"
    process = start_serve(box, tmp_path / "projects")
    signalled = False
    try:
        url, token = read_address(process, box)
        address = urlsplit(url)
        assert address.hostname is not None
        body = json.dumps({"message": "in flight", "messageId": "in-flight"}).encode()
        connection = http.client.HTTPConnection(address.hostname, address.port, timeout=30)
        try:
            connection.putrequest("POST", "/api/chat/send")
            connection.putheader("Authorization", f"Bearer {token}")
            connection.putheader("Content-Type", "application/json")
            connection.putheader("Content-Length", str(len(body)))
            connection.putheader("Expect", "100-continue")
            connection.endheaders()
            # The server invites the body only once it reads it: the request is in
            # flight, past the head, before the signal.
            continued = b""
            while len(continued) < len(CONTINUE):
                assert connection.sock is not None
                continued += connection.sock.recv(len(CONTINUE) - len(continued))
            assert continued == CONTINUE
            process.send_signal(stop_signal)
            signalled = True
            # The shutdown has begun (the serve file goes first); the unfinished send
            # holds the exit.
            wait_until_gone(serve_file_path(box))
            with pytest.raises(subprocess.TimeoutExpired):
                process.wait(timeout=0.5)
            connection.send(body)
            answer = connection.getresponse()
            assert answer.status == 200
            assert set(json.loads(answer.read())) == {"turnId"}
        finally:
            connection.close()
    finally:
        code, errors = stop_serve(process, None if signalled else signal.SIGTERM)
    assert code == 0, errors
    assert f"{stop_signal.name}: shutting down" in errors
    # Recorded: its bus row, claimed by its id.
    with contextlib.closing(sqlite3.connect(box / ".beebox" / "box.sqlite3")) as database:
        ((row_id, payload),) = database.execute("SELECT id, payload FROM bus_events").fetchall()
        claims = database.execute("SELECT message_id, bus_row_id FROM message_claims").fetchall()
    assert json.loads(payload)["message"] == "in flight"
    assert claims == [("in-flight", row_id)]
