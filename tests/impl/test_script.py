"""The ``bbx`` script (`beebox_impl.script`): `bbx serve` restarts before the box's
imports, once, and every command runs as `beebox_impl.cli.main` runs it.

The restart replaces the program, so it is watched from a child process that
wraps `restart_for_serving` to report which of the box's modules were loaded
when it was called, and stands in for the serving loop.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from beebox_impl.script import starts_a_server
from beebox_spec.phase_doc import render_text


@pytest.mark.parametrize(
    ("arguments", "serves"),
    [
        (["serve"], True),
        (["serve", "--port", "0", "--box", "b"], True),
        ([], False),
        (["phases"], False),
        (["--help"], False),
        (["chat", "send", "serve"], False),
        (["init", "serve"], False),
    ],
)
def test_only_bbx_serve_restarts(arguments: list[str], serves: bool) -> None:
    assert starts_a_server(arguments) is serves


_CHILD = r"""
import json, sys
print("started", flush=True)
import anyio
import beebox_impl.allocator as allocator

restart = allocator.restart_for_serving

def witnessed():
    loaded = sorted(name for name in sys.modules if name.startswith("beebox_impl"))
    print("restart " + json.dumps(loaded), flush=True)
    restart()

allocator.restart_for_serving = witnessed
anyio.run = lambda *arguments, **options: print("serving", flush=True)
from beebox_impl.script import main
sys.exit(main())
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the restart is glibc's")
def test_bbx_serve_restarts_before_the_box_is_imported_and_only_once(tmp_path: Path) -> None:
    box = tmp_path / "box"
    finished = subprocess.run(
        [sys.executable, "-c", _CHILD, "serve", "--box", str(box), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        env={key: value for key, value in os.environ.items() if key != "GLIBC_TUNABLES"},
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    lines = finished.stdout.splitlines()
    # Started, restarted (an exec: the script runs again, and its restart returns at
    # once), then served; the command line's own restart was not called again.
    assert [line.split(" ")[0] for line in lines] == [
        "started",
        "restart",
        "started",
        "restart",
        "serving",
    ]
    for line in lines:
        if line.startswith("restart "):
            loaded = json.loads(line.removeprefix("restart "))
            # The package's own (`beebox_impl.lazy`: its names load on first use).
            assert loaded == [
                "beebox_impl",
                "beebox_impl.allocator",
                "beebox_impl.lazy",
                "beebox_impl.script",
            ]


def test_python_m_beebox_impl_is_bbx() -> None:
    finished = subprocess.run(
        [sys.executable, "-m", "beebox_impl", "phases"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout == render_text()
