"""Smoke run of the permission benchmark (`bench/permissions.py --quick`): the real CLI."""

from __future__ import annotations

from tests.bench import run_quick

ROWS = (
    "approval round trip p50",
    "approval round trip p90",
    "the event's way to the page p50",
    "the page's POST, sent to its answer read, p50",
    "the CLI's own time between asks p50",
)


def test_quick_permission_benchmark_prints_its_table() -> None:
    out = run_quick("permissions.py", timeout=120)
    assert "12 answered, 0 refused" in out
    rows = [line for line in out.splitlines() if line.count(" | ") == 5][1:]
    for start in ROWS:
        assert sum(row.startswith(start) for row in rows) == 1, f"{start!r} in:\n{out}"
    judged = rows[0]
    # MISSED is a figure, not a failure; ERROR means the run is broken.
    assert judged.endswith((" | ok", " | MISSED")), judged
    assert all(row.endswith(" | info") for row in rows[1:]), out
    assert "SUMMARY:" in out
    assert "outlived their owner" not in out
