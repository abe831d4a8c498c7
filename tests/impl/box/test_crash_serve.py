"""Crash test: `bbx serve` SIGKILLed at random moments while 10 clients send 500 messages.

Each client sends its messages one after another, each with its own message id, and
retries a send that got no answer (connection refused or reset, timeout) until it
gets one — against whichever server is up. The test kills the server with SIGKILL at
random moments and starts it again on the same box. Afterwards, from the box's
database: every id that was ever answered 200 is in the bus exactly once, no id has
two rows, and every row has its claim (DESIGN.md §5: bus row and claim are one
transaction).
"""

from __future__ import annotations

import http.client
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX-only")

CLIENTS = 10
SENDS_PER_CLIENT = 50
KILLS = 6
SERVE = (sys.executable, "-m", "beebox_impl", "serve")


class Server:
    """The `bbx serve` child of the moment: its address, restartable."""

    def __init__(self, box: Path, env: dict[str, str]) -> None:
        self._box = box
        self._env = env
        self._lock = threading.Lock()
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.token = ""

    def start(self) -> None:
        process = subprocess.Popen(
            [*SERVE, "--box", str(self._box), "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=self._env,
        )
        assert process.stdout is not None
        line = process.stdout.readline().decode()
        assert line.startswith("beebox serving "), line
        url = line.rsplit(" at ", 1)[1].strip()
        address, _, token = url.partition("/?token=")
        with self._lock:
            self.process = process
            self.port = int(address.rsplit(":", 1)[1])
            self.token = token

    def address(self) -> tuple[int, str]:
        with self._lock:
            return self.port, self.token

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        assert self.process.stdout is not None
        self.process.stdout.close()

    def stop(self) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=30)
        assert self.process.stdout is not None
        self.process.stdout.close()
        return code


def _send(port: int, token: str, message_id: str) -> dict[str, object] | None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        body = json.dumps({"message": message_id, "messageId": message_id})
        connection.request(
            "POST",
            "/api/chat/send",
            body=body,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        )
        response = connection.getresponse()
        data = response.read()
        if response.status != 200:
            return None
        answer: dict[str, object] = json.loads(data)
        return answer
    except (OSError, http.client.HTTPException):
        return None
    finally:
        connection.close()


def test_answered_sends_survive_sigkill_exactly_once(tmp_path: Path) -> None:
    box = tmp_path / "box"
    env = {**os.environ, "BBX_CLAUDE_PROJECTS_DIR": str(tmp_path / "projects")}
    server = Server(box, env)
    server.start()
    answered: dict[str, list[dict[str, object]]] = {}
    answered_lock = threading.Lock()
    failures: list[BaseException] = []

    def client(number: int) -> None:
        try:
            for n in range(SENDS_PER_CLIENT):
                message_id = f"c{number}-m{n}"
                deadline = time.monotonic() + 40
                while True:
                    assert time.monotonic() < deadline, f"{message_id} never answered"
                    port, token = server.address()
                    answer = _send(port, token, message_id)
                    if answer is not None:
                        with answered_lock:
                            answered.setdefault(message_id, []).append(answer)
                        break
                    time.sleep(0.02)
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for thread in threads:
        thread.start()
    chooser = random.Random(5)
    kills = 0
    total = CLIENTS * SENDS_PER_CLIENT
    stride = total // (KILLS + 1)
    for k in range(1, KILLS + 1):
        # Each kill lands at a random point of its own stretch of the run, counted in
        # answered sends (not seconds), so a fast machine cannot finish first.
        target = k * stride + chooser.randrange(-stride // 2, stride // 2)
        deadline = time.monotonic() + 60
        while len(answered) < target and time.monotonic() < deadline:
            time.sleep(0.005)
        if not any(thread.is_alive() for thread in threads):
            break
        server.kill()
        kills += 1
        server.start()
    for thread in threads:
        thread.join(timeout=60)
    assert server.stop() == 0
    assert not failures, failures
    assert len(answered) == CLIENTS * SENDS_PER_CLIENT
    # Every kill landed while sends were going on.
    assert kills == KILLS

    with sqlite3.connect(box / ".beebox" / "box.sqlite3") as database:
        rows = database.execute("SELECT id, payload FROM bus_events").fetchall()
        claims = dict(database.execute("SELECT message_id, bus_row_id FROM message_claims"))
        (integrity,) = database.execute("PRAGMA integrity_check").fetchone()
    assert integrity == "ok"
    per_message = Counter(json.loads(payload)["message"] for _, payload in rows)
    # No id has two rows; every answered id has exactly one.
    assert max(per_message.values()) == 1
    assert set(per_message) == set(answered)
    # Every row is claimed by its own id: row and claim were one transaction.
    row_of = {json.loads(payload)["message"]: row_id for row_id, payload in rows}
    assert claims == row_of
    # An id answered more than once (a retry after the answer was lost) was deduplicated.
    for answers in answered.values():
        assert all(answer == {"deduplicated": True} for answer in answers[1:])
