"""The load harness (`bench/load.py`): its RSS reading, and a smoke run."""

from __future__ import annotations

import pytest

# Through `tests/bench/__init__.py`, which puts `bench/` on sys.path (see test_generate).
from load import _rss_figures  # type: ignore[import-not-found, unused-ignore]

from tests.bench import run_quick


def test_the_rss_level_is_the_median_of_each_third_not_one_reading() -> None:
    # A swing at the end (a photo decode in flight) moves the readings, not the level.
    samples = [80.0, 90.0, 85.0, 88.0, 82.0, 90.0, 84.0, 86.0, 99.0]
    figures = _rss_figures(40.0, samples)
    assert figures["start"] == 80.0
    assert figures["end"] == 99.0
    assert figures["growth_pct"] == pytest.approx(23.8)
    assert figures["level_first_third"] == 85.0
    assert figures["level_last_third"] == 86.0
    assert figures["level_growth_pct"] == pytest.approx(1.2)
    assert (figures["low"], figures["high"]) == (80.0, 99.0)
    # Memory that stays held raises the level.
    held = _rss_figures(40.0, [80.0, 81.0, 80.0, 90.0, 91.0, 90.0, 100.0, 101.0, 100.0])
    assert held["level_growth_pct"] == pytest.approx(25.0)


def test_quick_load_run_answers_every_request() -> None:
    out = run_quick("load.py", timeout=240)
    assert "  errors           0 (target 0)" in out, out
    assert "  server RSS       level " in out, out
    assert "  clean exit       True" in out, out
