"""The load harness (`bench/load.py`): its RSS reading, and a smoke run."""

from __future__ import annotations

import json

import pytest

# Through `tests/bench/__init__.py`, which puts `bench/` on sys.path (see test_generate).
from load import (  # type: ignore[import-not-found, unused-ignore]
    _rss_figures,
    _rss_trend_mib_per_min,
    send_body,
)

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


def test_the_rss_trend_is_the_least_squares_slope_a_minute() -> None:
    # 0.5 MiB a minute under a swing of +-3 MiB that alternates reading by reading.
    samples = [(10.0 * i, 100.0 + 0.5 * i / 6 + (3.0 if i % 2 else -3.0)) for i in range(61)]
    assert _rss_trend_mib_per_min(samples) == pytest.approx(0.5, abs=0.1)
    assert _rss_trend_mib_per_min([(10.0 * i, 90.0) for i in range(10)]) == 0.0
    # One reading (or one time) has no slope.
    assert _rss_trend_mib_per_min([(0.0, 90.0)]) == 0.0


def test_a_send_body_carries_the_photo_only_when_there_is_one() -> None:
    with_photo = json.loads(send_body(3, "aGk="))
    assert with_photo["images"] == [{"mediaType": "image/png", "data": "aGk="}]
    assert with_photo["message"].startswith("client 3 says ")
    without = json.loads(send_body(3, None))
    assert set(without) == {"message", "messageId"}
    assert without["messageId"] != with_photo["messageId"]


def test_quick_load_run_answers_every_request() -> None:
    out = run_quick("load.py", timeout=240)
    assert "  errors           0 (target 0)" in out, out
    assert "  server RSS       level " in out, out
    assert "                   trend " in out, out
    assert "  clean exit       True" in out, out
