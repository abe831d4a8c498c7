"""Crash test: `bbx serve` SIGKILLed at random moments while 10 clients send 500 messages.

Each client sends its messages one after another, each with its own message id, and
retries a send that got no answer (connection refused or reset, timeout) until it
gets one — against whichever server is up. The test kills the server with SIGKILL at
random moments and starts it again on the same box. Afterwards, from the box's
database: every id that was ever answered 200 is in the bus exactly once, no id has
two rows, and every row has its claim (`docs/design.md#design-5-sqlite-claims`: bus
row and claim are one transaction); and every answered id, sent once more, is answered
as a duplicate.

A second test kills a server whose engine never finishes starting, right after it
answered a send: the reopened box shows that send pending.
"""

from __future__ import annotations

import contextlib
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
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest

from beebox_impl.cli.box import parse_serving_line
from beebox_impl.engine.scripted import ScriptedEngine
from tests.impl.http.support import served_box

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX-only")

CLIENTS = 10
SENDS_PER_CLIENT = 50
KILLS = 6
SERVE = (sys.executable, "-m", "beebox_impl", "serve")
# `bbx serve` whose engine never finishes a start: a send is recorded and answered,
# and the chat stays `starting` (the moment between acceptance and the engine's start).
STALLED_SERVE = (
    sys.executable,
    "-c",
    "import sys\n"
    "import beebox_impl.cli.box as cli_box\n"
    "from beebox_impl.cli import main\n"
    "from beebox_impl.engine.scripted import ScriptedEngine\n"
    "cli_box._engine = lambda name, permissions: ScriptedEngine(start_mode='wait')\n"
    "sys.exit(main(sys.argv[1:]))\n",
    "serve",
)


class Server:
    """The `bbx serve` child of the moment: its address, restartable."""

    def __init__(self, box: Path, env: dict[str, str], command: Sequence[str] = SERVE) -> None:
        self._box = box
        self._env = env
        self._command = command
        self._lock = threading.Lock()
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.token = ""

    def start(self) -> None:
        process = subprocess.Popen(
            [*self._command, "--box", str(self._box), "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=self._env,
        )
        assert process.stdout is not None
        line = process.stdout.readline().decode()
        serving = parse_serving_line(line)
        assert serving is not None, line
        url, token = serving
        with self._lock:
            self.process = process
            self.port = int(url.rsplit(":", 1)[1])
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


def _send_until_answered(server: Server, message_id: str) -> dict[str, object] | None:
    """`_send`, tried again a few times: a loaded machine may time out one try."""
    for _ in range(5):
        answer = _send(*server.address(), message_id)
        if answer is not None:
            return answer
        time.sleep(0.1)
    return None


def _kill_while_sending(
    server: Server, answered: Mapping[str, object], threads: Sequence[threading.Thread]
) -> int:
    """Kill -9 the server `KILLS` times while the client ``threads`` send, starting it
    again after each; how many kills landed before the clients were done."""
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
    return kills


def _assert_each_id_recorded_once(box: Path, answered: Collection[str]) -> None:
    """The box's database is whole, and holds one row for each ``answered`` id and no
    other, each claimed by its own id."""
    with contextlib.closing(sqlite3.connect(box / ".beebox" / "box.sqlite3")) as database:
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


def test_answered_sends_survive_sigkill_exactly_once(tmp_path: Path) -> None:
    box = tmp_path / "box"
    env = {**os.environ, "BBX_CLAUDE_PROJECTS_DIR": str(tmp_path / "projects")}
    server = Server(box, env)
    server.start()
    answered: dict[str, dict[str, object]] = {}
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
                            answered[message_id] = answer
                        break
                    time.sleep(0.02)
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for thread in threads:
        thread.start()
    kills = _kill_while_sending(server, answered, threads)
    for thread in threads:
        thread.join(timeout=60)
    # Every answered id once more, to the last server: most were claimed by a server
    # killed since, and each must be answered as a duplicate (the rows are read after).
    with ThreadPoolExecutor(CLIENTS) as pool:
        again = list(pool.map(partial(_send_until_answered, server), answered))
    assert server.stop() == 0
    assert not failures, failures
    assert len(answered) == CLIENTS * SENDS_PER_CLIENT
    # Every kill landed while sends were going on.
    assert kills == KILLS

    _assert_each_id_recorded_once(box, answered)
    # The sends again were each answered as a duplicate, and added no row (above).
    assert again == [{"deduplicated": True}] * len(answered)


async def _bootstrap_reopened(folder: Path) -> Any:
    """``GET /api/chat/bootstrap`` of the box under ``folder``, reopened and served.

    Its engine never finishes a start either: nothing is delivered in between, and
    what the answer shows of the send is the acceptance record alone."""
    async with served_box(folder, engine=ScriptedEngine(start_mode="wait")) as (_, client, _):
        answer = await client.call("GET", "/api/chat/bootstrap")
    assert answer.status == 200
    return answer.json()


def test_a_send_answered_before_the_engine_started_is_pending_after_sigkill(
    tmp_path: Path,
) -> None:
    box = tmp_path / "box"
    env = {**os.environ, "BBX_CLAUDE_PROJECTS_DIR": str(tmp_path / "projects")}
    server = Server(box, env, STALLED_SERVE)
    server.start()
    answer = _send(*server.address(), "accepted, then the crash")
    server.kill()
    assert answer is not None
    assert set(answer) == {"turnId"}

    boot = anyio.run(_bootstrap_reopened, tmp_path, backend="asyncio")

    with contextlib.closing(sqlite3.connect(box / ".beebox" / "box.sqlite3")) as database:
        ((row_id, payload),) = database.execute("SELECT id, payload FROM bus_events").fetchall()
    # No engine ever assigned a session: the chat is empty, its one send pending.
    assert set(boot) == {
        "kind",
        "sessionId",
        "history",
        "label",
        "status",
        "pending",
        "permissions",
        "liveText",
    }
    assert boot["permissions"] == []
    assert boot["liveText"] is None
    assert boot["kind"] == "empty"
    assert boot["sessionId"] is None
    assert boot["history"] is None
    assert boot["pending"] == [
        {
            "uuid": f"accepted-{row_id}",
            "type": "user",
            "timestamp": json.loads(payload)["timestamp"],
            "content": [{"type": "text", "text": "accepted, then the crash"}],
            "reconcileKnownUuids": [],
        }
    ]
