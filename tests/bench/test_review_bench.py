"""Smoke run of the chat review benchmark (`bench/review.py --quick`)."""

from __future__ import annotations

from tests.bench import lines_in_order, run_quick


def test_quick_review_benchmark_prints_every_figure() -> None:
    out = run_quick("review.py", timeout=300)
    # Each measure once, in order, each judged line with its verdict.
    found = lines_in_order(
        out,
        (
            "corpus: 60 husks",
            "first run (all read from the top):",
            "  baseline json.loads of every line:",
            "status, nothing changed:",
            "  the spec's prefix-hash work over the grown transcripts",
            "status, 6 grown:",
            "run --reviewer extractive, 6 grown:",
            "peak RSS of a run:",
        ),
    )
    assert "x the parse floor" in found[4]
