"""Tests of the benchmark tooling under `bench/` (the generator; a smoke run).

`bench/` is a directory of scripts, not a package: its modules import each other
by bare name when run as scripts, so the tests put it on `sys.path` the same way.
"""

from __future__ import annotations

import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"

if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))
