"""Helpers for the HTTP tests: a box served on 127.0.0.1:0, a blocking client, engines.

The server runs on the test's event loop (asyncio or trio) exactly as `bbx serve`
runs it; the client is `http.client` in a worker thread, so requests cross a real
socket and reach the box as the server's handlers do (`anyio.from_thread.run` with the
loop's token).
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from beebox_impl.box import Box
from beebox_impl.cli.box import parse_serving_line, serving_line
from beebox_impl.engine.echo import EchoEngine
from beebox_impl.engine.protocol import Engine
from beebox_impl.http.server import HttpLimits, RunningServer, serve_box
from beebox_impl.testing import HeldResultEngine

# A photo the strip takes out of the read: its line is over the 256 KiB oversize mark.
PHOTO_BYTES = bytes(range(256)) * 1200
PHOTO_BASE64 = base64.b64encode(PHOTO_BYTES).decode("ascii")


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True)
class Client:
    """A blocking client of one served box; call it from a worker thread."""

    host: str
    port: int
    token: str

    def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        auth: bool = True,
        timeout: float = 30,
    ) -> Response:
        sent_headers = dict(headers or {})
        if auth:
            sent_headers.setdefault("Authorization", f"Bearer {self.token}")
        if json_body is not None:
            body = json.dumps(json_body).encode("utf-8")
            sent_headers.setdefault("Content-Type", "application/json")
        connection = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            connection.request(method, path, body=body, headers=sent_headers)
            answer = connection.getresponse()
            data = answer.read()
            return Response(answer.status, {k.lower(): v for k, v in answer.getheaders()}, data)
        finally:
            connection.close()

    async def call(
        self, method: str, path: str, limiter: anyio.CapacityLimiter | None = None, **options: Any
    ) -> Response:
        """`request` from async code, in a worker thread (``limiter``: not the box's threads)."""
        return await anyio.to_thread.run_sync(
            lambda: self.request(method, path, **options), limiter=limiter
        )

    def open_events(
        self, timeout: float
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """``GET /api/events`` with the token: the connection (the caller closes it)
        and the response, checked to be a 200 event stream."""
        connection = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            connection.request(
                "GET", "/api/events", headers={"Authorization": f"Bearer {self.token}"}
            )
            response = connection.getresponse()
            assert response.status == 200
            assert response.getheader("Content-Type", "").startswith("text/event-stream")
        except BaseException:
            connection.close()
            raise
        return connection, response

    def raw(self, data: bytes, *, read_timeout: float = 10) -> bytes:
        """Send raw bytes on a fresh connection; everything the server says until it closes."""
        with socket.create_connection((self.host, self.port), timeout=read_timeout) as sock:
            sock.sendall(data)
            chunks = []
            while True:
                try:
                    chunk = sock.recv(65536)
                except (ConnectionResetError, TimeoutError):
                    break
                if not chunk:
                    break
                chunks.append(chunk)
            return b"".join(chunks)


def fixed_clock() -> Callable[[], datetime]:
    return lambda: datetime.now(UTC)


@asynccontextmanager
async def served_box(
    tmp_path: Path,
    *,
    engine: Engine | None = None,
    limits: HttpLimits | None = None,
) -> AsyncIterator[tuple[Box, Client, RunningServer]]:
    """A fresh box under ``tmp_path`` served on 127.0.0.1:0 (EchoEngine by default)."""
    projects = tmp_path / "projects"
    chosen = engine if engine is not None else EchoEngine(projects, fixed_clock())
    async with (
        Box.open(tmp_path / "box", engine=chosen, projects_root=projects) as box,
        serve_box(box, port=0, limits=limits) as running,
    ):
        yield box, Client(running.host, running.port, box.token), running


async def wait_until(predicate: Callable[[], bool], timeout: float = 10) -> None:
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.005)


async def wait_idle(box: Box) -> None:
    """Until the chat has a session, no turn in flight and nothing queued."""
    await wait_until(
        lambda: box.session_id is not None and not box._session.busy and not box._session.queue
    )


class GatedEngine(HeldResultEngine):
    """Wraps an engine: each turn ends only when the test releases it; records every turn."""

    def __init__(self, inner: Engine, *, gated: bool = True) -> None:
        super().__init__(inner, self._wait_released)
        self.gated = gated
        self._released = 0
        self._changed = anyio.Event()

    def release(self) -> None:
        self._released += 1
        self._changed.set()
        self._changed = anyio.Event()

    async def _wait_released(self, turn: int) -> None:
        while self.gated and self._released < turn:
            await self._changed.wait()


# --- `bbx serve` as a process -------------------------------------------------------


def start_serve(box: Path, projects: Path) -> subprocess.Popen[bytes]:
    """`bbx serve` on ``box`` (created if missing), any free port; it prints its URL first."""
    env = {**os.environ, "BBX_CLAUDE_PROJECTS_DIR": str(projects)}
    return subprocess.Popen(
        [sys.executable, "-m", "beebox_impl", "serve", "--box", str(box), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def read_address(process: subprocess.Popen[bytes], box: Path) -> tuple[str, str]:
    """The base URL and the token of the `bbx serve` ``process`` serving ``box``."""
    assert process.stdout is not None
    line = process.stdout.readline().decode()
    assert line.startswith(serving_line(box.resolve(), "http://127.0.0.1:")), line
    serving = parse_serving_line(line)
    assert serving is not None
    return serving


def stop_serve(
    process: subprocess.Popen[bytes], stop_signal: signal.Signals | None = signal.SIGTERM
) -> tuple[int, str]:
    """Send ``stop_signal`` (None: it was sent already) and wait: the exit status and stderr."""
    assert process.stdout is not None
    assert process.stderr is not None
    if stop_signal is not None:
        process.send_signal(stop_signal)
    code = process.wait(timeout=30)
    process.stdout.close()
    errors = process.stderr.read().decode()
    process.stderr.close()
    return code, errors
