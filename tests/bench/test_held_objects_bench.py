"""The held-objects harness (`bench/held_objects.py`): a smoke run."""

from __future__ import annotations

from tests.bench import lines_in_order, run_quick


def test_quick_held_objects_run_prints_its_samples_and_verdicts() -> None:
    out = run_quick("held_objects.py", timeout=180)
    assert "clients: " in out, out
    assert "errors 0" in out, out
    lines_in_order(out, ("held objects: ", " t (s)", "allocated blocks: ", "gc objects: "))
