"""Smoke run of the page benchmark (`bench/page.py --quick`): Chromium, the real CLI."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.bench import run_quick

ROWS = (
    "delta leaving the API double → text on the page p50",
    "… p90",
    "… the page's own share",
    "one Load earlier p50",
    "Load earlier with ",
    "longest long task while paging",
    "frame time while paging",
)


def test_quick_page_benchmark_prints_its_table() -> None:
    if not Path("/usr/bin/chromium").exists() or importlib.util.find_spec("playwright") is None:
        pytest.skip("the page benchmark needs /usr/bin/chromium and playwright (test extra)")
    if importlib.util.find_spec("claude_agent_sdk") is None:
        pytest.skip("the page benchmark's live-text part needs the claude extra")
    out = run_quick("page.py", timeout=300)
    assert "# live text: 10 pieces in 1 replies" in out, out
    rows = [line for line in out.splitlines() if line.count(" | ") == 5][1:]
    for start in ROWS:
        assert sum(row.startswith(start) for row in rows) == 1, f"{start!r} in:\n{out}"
    # MISSED is a figure, not a failure; ERROR means the run is broken.
    assert all(row.endswith((" | ok", " | MISSED", " | info")) for row in rows), out
    assert "SUMMARY:" in out
