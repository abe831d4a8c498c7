"""The async test wiring: every anyio test runs on asyncio and on trio."""

from __future__ import annotations

import inspect
import re
import tomllib
from pathlib import Path

import anyio
import pytest
import sniffio


@pytest.mark.anyio
async def test_runs_on_the_backend_the_fixture_names(anyio_backend: str) -> None:
    await anyio.sleep(0)
    assert sniffio.current_async_library() == anyio_backend


def test_every_anyio_test_is_collected_on_both_backends(request: pytest.FixtureRequest) -> None:
    # Read off the collection, not off the runs: under pytest-xdist the two runs of
    # a test may happen in two worker processes. Only what this session selected is
    # seen (a `-k` that keeps one backend's runs is the person's choice).
    backends: dict[str, set[object]] = {}
    for item in request.session.items:
        # The marker runs coroutine functions on the backends; a plain function under a
        # module's marker just runs.
        if (
            isinstance(item, pytest.Function)
            and item.get_closest_marker("anyio") is not None
            and inspect.iscoroutinefunction(item.function)
        ):
            name = item.nodeid.partition("[")[0]
            backends.setdefault(name, set()).add(item.callspec.params.get("anyio_backend"))
    if not backends:
        pytest.skip("no anyio test selected in this session")
    assert {name: seen for name, seen in backends.items() if seen != {"asyncio", "trio"}} == {}


def test_both_loops_come_with_a_plain_install() -> None:
    # `pip install .` alone must run the box on trio (the embedding guide's trio
    # host, `python -m conformance --target all`): trio is a dependency, no extra.
    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    required = {
        re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower()
        for requirement in project["project"]["dependencies"]
    }
    assert {"anyio", "trio"} <= required
