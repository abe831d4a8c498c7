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
            "  floor, commit alone, 1 client(s)",
            "  floor, commit alone, 16 client(s)",
            "  floor, crossing alone, 1 client(s)",
            "  floor, crossing alone, 16 client(s)",
            "  box send, a turn in flight, 1 client(s)",
            "  box send, a turn in flight, 16 client(s)",
            "  box send, an engine answering from memory, 1 client(s)",
            "  box send, an engine answering from memory, 16 client(s)",
            "  box send, 1 client(s)",
            "  box send, 16 client(s)",
            "  baseline in-process tail=200",
            "  baseline fixed 200 GET, 1 client(s)",
            "  box history tail=200 over HTTP",
            "  send while a turn is in flight, 1 client(s): p50",
            "    (info) architecture floor, 1 client(s): p50",
            "  send while a turn is in flight, 16 client(s): p50",
            "    (info) architecture floor, 16 client(s): p50",
            "  send, 1 client(s): p50",
            "    (info) architecture floor, 1 client(s): p50",
            "    (info) an engine answering from memory, 1 client(s): p50",
            "  send, 16 client(s): p50",
            "    (info) architecture floor, 16 client(s): p50",
            "    (info) an engine answering from memory, 16 client(s): p50",
            "  history tail=200: p50",
            "    (info) baseline fixed 200 GET, 1 client(s): p50",
            "  no failed request: 0 failed of",
        ),
    )
    for line in found:
        if "req/s" in line:
            # No request of the smoke run failed.
            assert line.endswith("failed 0"), line
            # Every server's CPU a request is beside its latency (none for the
            # in-process read, which no server answers).
            assert (" ms/req " in line) != ("in-process" in line), line


def test_box_sends_alone_print_the_box_lines_only() -> None:
    out = run_quick("box_http.py", "--box-sends", "32", timeout=120)
    found = lines_in_order(out, ("  box send, 1 client(s)", "  box send, 16 client(s)"))
    assert all(line.endswith("failed 0") for line in found), out
    # A run to profile: nothing but the box serves, and no target is judged.
    assert "baseline" not in out, out
    assert "floor" not in out, out
    assert "target" not in out, out


def test_box_sends_by_one_count_of_clients() -> None:
    out = run_quick("box_http.py", "--box-sends", "24", "--box-clients", "4", timeout=120)
    box_lines = [line for line in out.splitlines() if line.startswith("  box send")]
    assert len(box_lines) == 1, out
    assert box_lines[0].startswith("  box send, 4 client(s)"), out
    assert box_lines[0].endswith("failed 0"), out


def test_box_sends_to_an_engine_answering_from_memory() -> None:
    out = run_quick(
        "box_http.py", "--box-sends", "24", "--box-clients", "4", "--from-memory", timeout=120
    )
    box_lines = [line for line in out.splitlines() if line.startswith("  box send")]
    assert len(box_lines) == 1, out
    assert box_lines[0].startswith("  box send, an engine answering from memory, 4 client(s)")
    assert box_lines[0].endswith("failed 0"), out


def test_box_sends_with_a_turn_in_flight_are_queued_sends() -> None:
    out = run_quick(
        "box_http.py", "--box-sends", "24", "--box-clients", "4", "--turn-in-flight", timeout=120
    )
    box_lines = [line for line in out.splitlines() if line.startswith("  box send")]
    assert len(box_lines) == 1, out
    assert box_lines[0].startswith("  box send, a turn in flight, 4 client(s)"), out
    assert box_lines[0].endswith("failed 0"), out
