"""The held-objects harness (`bench/held_objects.py`): smoke runs."""

from __future__ import annotations

import re

from tests.bench import lines_in_order, run_quick


def test_quick_held_objects_run_prints_its_samples_and_verdicts() -> None:
    out = run_quick("held_objects.py", "--size-classes", timeout=180)
    assert "clients: " in out, out
    assert "errors 0" in out, out
    lines_in_order(
        out,
        (
            "held objects: ",
            " t (s)",
            "allocated blocks: ",
            "gc objects: ",
            "RSS MiB: ",
            "py arenas MiB: ",
            "heap in use MiB: ",
            "heap free MiB: ",
            "heap held MiB: ",
            "block size, pools and blocks in use: ",
        ),
    )
    assert "traced: " not in out, out
    assert "none read" not in out, out


def test_quick_run_with_streams_and_sites_charges_traced_memory_to_the_box_code() -> None:
    out = run_quick("held_objects.py", "--streams", "--sites", "40", timeout=240)
    assert "event streams on, tracing on" in out, out
    events = re.search(r"errors 0, events (\d+)", out)
    assert events is not None, out
    assert int(events.group(1)) > 0, out
    _traced, header = lines_in_order(out, ("traced: ", " grew MiB"))
    sites = out.splitlines()[out.splitlines().index(header) + 1 :]
    assert 1 <= len(sites) <= 40, out
    # Some block is charged to a site in the box's own code, named by its package path.
    assert any(
        re.search(r"\S+\.py:\d+", site) and "outside the box" not in site for site in sites
    ), out
