"""Smoke run of the whole-process benchmark (`bench/peers.py --quick`)."""

from __future__ import annotations

from tests.bench import run_quick


def test_quick_peers_benchmark_prints_its_table() -> None:
    out = run_quick("peers.py", timeout=300)
    header = next(line for line in out.splitlines() if line.startswith("measure "))
    for column in ("| ours", "| baseline", "| ratio", "| target", "| ok?"):
        assert column in header
    rows = [line for line in out.splitlines() if line.count(" | ") == 5][1:]
    measured = {row.split(" | ", 1)[0].strip() for row in rows}
    for kind in ("text", "photos"):
        assert f"{kind}: history --tail 200, warm" in measured
        assert f"{kind}: history --tail 200, cold index" in measured
        assert f"{kind}: history --page 0 2000, warm" in measured
        assert f"{kind}: naive json.loads of every line" in measured
    assert {"bbx --help", "bbx phases", "photos: media REF -o FILE, warm"} <= measured
    assert "bbx serve: start to first answered request" in measured
    statuses = {row.rsplit(" | ", 1)[1].strip() for row in rows}
    # MISSED is a figure, not a failure; n/a is the peer not installed here. ERROR
    # and WRONG mean the run is broken.
    assert statuses <= {"ok", "MISSED", "info", "n/a"}, out
    assert "SUMMARY:" in out
