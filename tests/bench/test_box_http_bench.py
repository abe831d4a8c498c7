"""Smoke run of the HTTP benchmark (`bench/box_http.py --quick`)."""

from __future__ import annotations

from tests.bench import lines_in_order, run_quick


def test_quick_http_benchmark_prints_every_figure() -> None:
    out = run_quick("box_http.py", timeout=300)
    found = lines_in_order(
        out,
        (
            "fsync p50 on the box's disk:",
            "  baseline fixed 200, 1 client(s)",
            "  baseline fixed 200, 16 client(s)",
            "  architecture floor, 1 client(s)",
            "  architecture floor, 16 client(s)",
            "  box send, 1 client(s)",
            "  box send, 16 client(s)",
            "  baseline in-process tail=200",
            "  box history tail=200 over HTTP",
            "  send, 1 client(s): p50",
            "    (info) architecture floor, 1 client(s): p50",
            "  send, 16 client(s): p50",
            "    (info) architecture floor, 16 client(s): p50",
            "  history tail=200: p50",
        ),
    )
    for line in found:
        if "req/s" in line:
            # No request of the smoke run failed.
            assert line.endswith("failed 0"), line
