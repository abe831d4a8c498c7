"""Helpers for the reliability tests: a served box for synchronous tests, `bbx serve` as a child.

The reliability tests are synchronous: the box and its server run on an asyncio
loop in a portal thread (`served_box_sync`) exactly as `bbx serve` runs them, and
the test talks to it over a real loopback socket with `tests.impl.http.support.Client`.
One event loop is enough here: what these tests hold the box to is the transport
and the files, which the loop does not change (the HTTP suite runs both loops).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from anyio.from_thread import BlockingPortal, start_blocking_portal

from beebox_impl.box import Box
from beebox_impl.cli.box import parse_serving_line
from beebox_impl.engine.bounded import DEFAULT_START_TIMEOUT
from beebox_impl.engine.echo import EchoEngine
from beebox_impl.engine.protocol import Engine
from beebox_impl.http.server import HttpLimits, RunningServer, serve_box
from tests.impl.http.support import Client, fixed_clock

SERVE = (sys.executable, "-m", "beebox_impl", "serve")


@dataclass(frozen=True)
class Served:
    """A box served on 127.0.0.1:0, its portal, and a client that holds its token."""

    box: Box
    client: Client
    running: RunningServer
    portal: BlockingPortal
    projects: Path


@contextmanager
def served_box_sync(
    folder: Path,
    *,
    engine: Engine | None = None,
    limits: HttpLimits | None = None,
    start_timeout: float = DEFAULT_START_TIMEOUT,
) -> Iterator[Served]:
    """A fresh box under ``folder`` served until the block ends (EchoEngine by default)."""
    projects = folder / "projects"
    chosen = engine if engine is not None else EchoEngine(projects, fixed_clock())
    with start_blocking_portal("asyncio") as portal:
        box_context = Box.open(
            folder / "box", engine=chosen, projects_root=projects, start_timeout=start_timeout
        )
        with portal.wrap_async_context_manager(box_context) as box:
            server = serve_box(box, port=0, limits=limits)
            with portal.wrap_async_context_manager(server) as running:
                client = Client(running.host, running.port, box.token)
                yield Served(box, client, running, portal, projects)


@dataclass
class ServeProcess:
    """One `bbx serve` child: its process, where it listens, its token, what it printed."""

    process: subprocess.Popen[bytes]
    port: int
    token: str
    first_line: str
    # stderr goes to a file: a pipe nobody reads would block the server's logging.
    log: Path

    def stop(self) -> tuple[int, str]:
        """SIGTERM, wait; the exit status and everything else it wrote (stdout, stderr)."""
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=60)
        assert self.process.stdout is not None
        rest = self.process.stdout.read().decode("utf-8", "replace")
        self.process.stdout.close()
        return code, rest + self.log.read_text(encoding="utf-8", errors="replace")


def start_serve(
    box: Path,
    projects: Path,
    extra: Sequence[str] = (),
    *,
    env: dict[str, str] | None = None,
    max_file_bytes: int | None = None,
) -> ServeProcess:
    """Start ``bbx serve --box BOX --port 0`` and read its first line.

    ``max_file_bytes`` runs it under ``RLIMIT_FSIZE`` with ``SIGXFSZ`` ignored: a
    write past that size fails (``EFBIG``), as a full disk fails it.
    """
    environment = {**os.environ, "BBX_CLAUDE_PROJECTS_DIR": str(projects), **(env or {})}
    command = [*SERVE, "--box", str(box), "--port", "0", *extra]
    if max_file_bytes is not None:
        command = [*limited(max_file_bytes), *command]
    box.parent.mkdir(parents=True, exist_ok=True)
    log = box.parent / f"serve-{os.getpid()}-{len(list(box.parent.glob('serve-*.log')))}.log"
    with log.open("wb") as errors:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, env=environment)
    assert process.stdout is not None
    line = process.stdout.readline().decode("utf-8", "replace")
    serving = parse_serving_line(line)
    if serving is None:
        process.kill()
        process.wait()
        raise AssertionError(f"bbx serve did not start: {line!r} {log.read_text()!r}")
    url, token = serving
    return ServeProcess(process, int(url.rsplit(":", 1)[1]), token, line, log)


def limited(max_file_bytes: int) -> list[str]:
    """A command prefix that runs the rest under a file-size limit (the disk-full shim)."""
    shim = (
        "import os, resource, signal, sys;"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN);"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({max_file_bytes}, {max_file_bytes}));"
        "os.execv(sys.argv[1], sys.argv[1:])"
    )
    return [sys.executable, "-c", shim]


def kill_serve(served: ServeProcess) -> None:
    """SIGKILL, as a crash would."""
    served.process.send_signal(signal.SIGKILL)
    served.process.wait()
    if served.process.stdout is not None:
        served.process.stdout.close()
