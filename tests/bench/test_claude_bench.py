"""Smoke run of the Claude benchmark (`bench/claude.py --quick`): the real CLI, offline."""

from __future__ import annotations

from tests.bench import run_quick

# Every row the quick run prints, by the start of its measure.
ROWS = (
    "warm turn p50",
    "warm turn, the box's added time",
    "warm turn p90",
    "cold first send",
    "cold, the CLI alone without the initialize request",
    "RSS, bbx serve + its CLI",
    "RSS, in-process host, 1 thread session",
    "RSS, in-process host, 4 thread session",
)
# The rows that are judged against a target; the others are figures for information.
JUDGED = ROWS[:2] + ROWS[3:4]


def test_quick_claude_benchmark_prints_its_table() -> None:
    out = run_quick("claude.py", timeout=90)
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("measure "))
    for column in ("| ours", "| baseline", "| ratio", "| target", "| ok?"):
        assert column in header
    rows = [line for line in lines if line.count(" | ") == 5][1:]
    for start in ROWS:
        assert sum(row.startswith(start) for row in rows) == 1, f"{start!r} in:\n{out}"
    statuses = {row.rsplit(" | ", 1)[1].strip() for row in rows}
    # MISSED is a figure, not a failure; ERROR and WRONG mean the run is broken.
    assert statuses <= {"ok", "MISSED", "info"}, out
    for row in rows:
        judged = row.startswith(JUDGED)
        assert row.endswith((" | ok", " | MISSED") if judged else " | info"), row
    assert "SUMMARY:" in out
    assert "outlived their owner" not in out
