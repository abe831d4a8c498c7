"""Smoke run of the session benchmark (`bench/sessions.py --quick`)."""

from __future__ import annotations

from tests.bench import run_quick


def test_quick_session_benchmark_prints_its_table() -> None:
    out = run_quick("sessions.py", timeout=120)
    header = next(line for line in out.splitlines() if line.startswith("measure "))
    for column in ("| ours", "| baseline", "| ratio", "| target", "| ok?"):
        assert column in header
    rows = [line for line in out.splitlines() if line.count(" | ") == 5][1:]
    for backend in ("asyncio", "trio"):
        measured = [row for row in rows if row.startswith(f"{backend}:")]
        assert len(measured) == 4, out
    statuses = {row.rsplit(" | ", 1)[1].strip() for row in rows}
    # MISSED is a figure, not a failure; ERROR and WRONG mean the run is broken.
    assert statuses <= {"ok", "MISSED"}, out
    assert "SUMMARY:" in out
