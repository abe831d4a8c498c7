"""A box served for the browser tests, in a process of its own so a test can kill it.

``python -m tests.web.box_server --box DIR --projects DIR --port N [--gate DIR]``
opens the box on the offline `EchoEngine` (transcripts under ``--projects``),
serves it with `serve_box` exactly as ``bbx serve`` does, and prints one line,
``READY <login URL>``, once it listens. SIGTERM or SIGINT stops it cleanly; a
test that wants a crash sends SIGKILL.

``--gate DIR`` makes the engine slow on the test's command: turn *n*'s ``result``
(the message that ends the turn and frees the chat) is held until the file
``DIR/<n>`` exists. The echo engine has already written the turn's user and
assistant lines to the transcript by then, so a held turn is "busy, answered on
disk, not done": what a real engine looks like mid-turn. Turns are counted from 1
in this process.
"""

from __future__ import annotations

import argparse
import signal
import sys
from datetime import UTC, datetime
from pathlib import Path

import anyio

from beebox_impl.box import Box
from beebox_impl.engine.echo import EchoEngine
from beebox_impl.engine.protocol import Engine
from beebox_impl.http.server import serve_box
from beebox_impl.testing import HeldResultEngine

# How often a held turn looks for its gate file.
GATE_POLL_SECONDS = 0.05


def file_gated(inner: Engine, gate: Path) -> HeldResultEngine:
    """Wraps an engine: turn n ends only once the file ``gate/<n>`` exists."""

    async def wait_for_file(turn: int) -> None:
        while not await anyio.Path(gate / str(turn)).exists():
            await anyio.sleep(GATE_POLL_SECONDS)

    return HeldResultEngine(inner, wait_for_file)


async def serve(box_dir: Path, projects: Path, port: int, gate: Path | None) -> None:
    engine: Engine = EchoEngine(projects, lambda: datetime.now(UTC))
    if gate is not None:
        engine = file_gated(engine, gate)
    async with (
        Box.open(box_dir, engine=engine, projects_root=projects) as box,
        serve_box(box, port=port) as running,
    ):
        print(f"READY {running.login_url}", flush=True)
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--box", type=Path, required=True)
    parser.add_argument("--projects", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--gate", type=Path)
    args = parser.parse_args()
    anyio.run(serve, args.box, args.projects, args.port, args.gate)
    sys.exit(0)


if __name__ == "__main__":
    main()
