"""A `bbx serve` on a temporary box, for running the `http/*` vectors against it.

`python -m conformance --serve` (and `nox -s conformance`) starts the box's own
server as a separate process, exactly as a person would (`bbx serve --port 0`,
its transcripts in the temporary folder too), reads the URL and token from the
one line it prints, and stops it with SIGTERM when the run is done. A box reads
photos in one mode (its settings' ``history.photos``), so the run serves one box
per mode it reads transcript cases in.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from beebox_impl.box import init_box
from beebox_impl.cli.box import parse_serving_line
from beebox_impl.settings import settings_path
from beebox_impl.transcript.location import transcript_path
from beebox_spec.transcript import PhotoMode

__all__ = ["ServeFailed", "ServedBox", "served_box"]

_STOP_TIMEOUT_S: Final = 30


class ServeFailed(RuntimeError):
    """`bbx serve` did not come up (its stderr is in the message)."""


@dataclass(frozen=True)
class ServedBox:
    """A running `bbx serve`: where it answers, its token, and where its files are."""

    url: str
    token: str
    box_root: Path
    projects_root: Path
    photos: PhotoMode

    def write_transcript(self, session_id: str, data: bytes) -> None:
        """Make ``data`` the transcript of ``session_id`` in this box."""
        path = transcript_path(self.box_root, session_id, self.projects_root)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


@contextmanager
def served_box(photos: PhotoMode = "refs") -> Iterator[ServedBox]:
    """A `bbx serve` on a fresh temporary box reading photos in mode ``photos``,
    stopped on exit."""
    with tempfile.TemporaryDirectory(prefix="bbx-conformance-serve-") as folder:
        root = Path(folder)
        init_box(root / "box")
        settings_path(root / "box").write_text(f"history:\n  photos: {photos}\n")
        env = {**os.environ, "BBX_CLAUDE_PROJECTS_DIR": str(root / "projects")}
        command = [sys.executable, "-m", "beebox_impl", "serve"]
        process = subprocess.Popen(
            [*command, "--box", str(root / "box"), "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        assert process.stdout is not None
        assert process.stderr is not None
        try:
            serving = parse_serving_line(process.stdout.readline())
            if serving is None:
                process.kill()
                raise ServeFailed(f"bbx serve did not start: {process.stderr.read().strip()}")
            url, token = serving
            yield ServedBox(url, token, (root / "box").resolve(), root / "projects", photos)
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=_STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            process.stdout.close()
            process.stderr.close()
