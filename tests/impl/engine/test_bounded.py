"""`BoundedStartEngine`: a start that hangs fails after its timeout; others pass through."""

from __future__ import annotations

import math
from pathlib import Path

import anyio
import pytest

from beebox_impl.cli import main as bbx
from beebox_impl.engine import BoundedStartEngine, EngineStartError, ScriptedEngine, StartOptions

pytestmark = pytest.mark.anyio


def options(tmp_path: Path) -> StartOptions:
    return StartOptions(cwd=tmp_path)


async def test_a_start_that_hangs_fails_and_is_cancelled(tmp_path: Path) -> None:
    inner = ScriptedEngine(start_mode="wait")
    bounded = BoundedStartEngine(inner, timeout=0.05)
    with pytest.raises(EngineStartError, match=r"did not start a run within 0\.05 s"):
        await bounded.start(options(tmp_path))
    # The inner start was cancelled, not abandoned: nothing waits for an answer.
    assert inner.waiting_starts == 0
    assert inner.runs == []


async def test_a_start_within_the_timeout_is_the_inner_run(tmp_path: Path) -> None:
    inner = ScriptedEngine(start_mode="wait")
    bounded = BoundedStartEngine(inner, timeout=30)
    async with anyio.create_task_group() as task_group:

        async def answer() -> None:
            await inner.wait_start_requested()
            inner.accept_start()

        task_group.start_soon(answer)
        run = await bounded.start(options(tmp_path))
    assert run is inner.last_run


async def test_a_failing_start_fails_as_itself(tmp_path: Path) -> None:
    bounded = BoundedStartEngine(ScriptedEngine(start_mode="fail", fail_reason="no binary"))
    with pytest.raises(EngineStartError, match="no binary"):
        await bounded.start(options(tmp_path))


@pytest.mark.parametrize("timeout", [0, -1, math.inf, math.nan])
def test_a_timeout_is_a_positive_finite_number(timeout: float) -> None:
    with pytest.raises(ValueError, match="positive number of seconds"):
        BoundedStartEngine(ScriptedEngine(), timeout=timeout)


@pytest.mark.parametrize("value", ["0", "-3", "soon", "inf"])
def test_bbx_serve_refuses_a_bad_start_timeout(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        bbx(["serve", "--box", str(tmp_path), "--start-timeout", value])
    assert exited.value.code == 2
    assert f"not a start timeout: '{value}'" in capsys.readouterr().err
