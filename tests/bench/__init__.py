"""Tests of the benchmark tooling under `bench/` (the generator; a smoke run).

`bench/` is a directory of scripts, not a package: its modules import each other
by bare name when run as scripts, so the tests put it on `sys.path` the same way.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"

if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))


def run_quick(script: str, *arguments: str, timeout: float) -> str:
    """Run `bench/<script> --quick [arguments]` and answer what it printed (it must exit 0)."""
    done = subprocess.run(
        [sys.executable, str(BENCH_DIR / script), "--quick", *arguments],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def lines_in_order(out: str, starts: tuple[str, ...]) -> list[str]:
    """For each of ``starts`` in turn, the first line of ``out`` after the previous
    one found that starts with it; each must be there. A line with a verdict (one
    that names a target, other than an ``(info)`` line beside it) must end in one (a
    MISSED is a figure, not a failure: the run answered)."""
    lines = out.splitlines()
    found: list[str] = []
    position = 0
    for start in starts:
        at = next((i for i in range(position, len(lines)) if lines[i].startswith(start)), None)
        assert at is not None, f"no line starting {start!r} in order in:\n{out}"
        found.append(lines[at])
        position = at + 1
    for line in found:
        if "target" in line and "(info)" not in line:
            assert line.endswith((": ok", ": MISSED")), line
    return found
