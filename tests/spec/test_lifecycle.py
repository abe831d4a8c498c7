"""The lifecycle table: totality, reachability, and the busy/running readings."""

from __future__ import annotations

from collections import deque

import pytest
from hypothesis import given
from hypothesis import strategies as st

from beebox_spec.errors import InvariantError
from beebox_spec.lifecycle import (
    IDLE,
    Idle,
    Lifecycle,
    Ready,
    Starting,
    Stopping,
    Streaming,
    after_turn_result,
    lifecycle_busy,
    lifecycle_run,
    next_lifecycle,
)
from beebox_spec.phases import Phase, is_busy, is_legal_transition, is_running, transition_phase

# `docs/sources.md#facts-3-1` (§3.1), written out again so the table is checked against the source.
SOURCE_TABLE = {
    ("idle", "starting"),
    ("starting", "ready"),
    ("starting", "idle"),
    ("ready", "streaming"),
    ("ready", "stopping"),
    ("ready", "idle"),
    ("streaming", "ready"),
    ("streaming", "stopping"),
    ("streaming", "idle"),
    ("stopping", "idle"),
}

ALL_PAIRS = [(a, b) for a in Phase for b in Phase]


def lifecycle_in(phase: Phase) -> Lifecycle[str]:
    """A lifecycle value of ``phase`` (with a run handle where the phase owns one)."""
    match phase:
        case Phase.IDLE:
            return IDLE
        case Phase.STARTING:
            return Starting()
        case Phase.READY:
            return Ready("run")
        case Phase.STREAMING:
            return Streaming("run")
        case Phase.STOPPING:
            return Stopping("run", was_busy=True)


@pytest.mark.parametrize(("source", "target"), ALL_PAIRS, ids=str)
def test_every_pair_is_a_legal_result_or_the_typed_error(source: Phase, target: Phase) -> None:
    current, wanted = lifecycle_in(source), lifecycle_in(target)
    if (source.value, target.value) in SOURCE_TABLE:
        assert is_legal_transition(source, target)
        assert next_lifecycle(current, wanted) is wanted
        assert transition_phase(source, target) is target
    else:
        assert not is_legal_transition(source, target)
        message = f"illegal chat lifecycle transition: {source.value} → {target.value}"
        with pytest.raises(InvariantError) as raised:
            next_lifecycle(current, wanted)
        assert str(raised.value) == message


@given(st.sampled_from(Phase), st.sampled_from(Phase))
def test_transition_phase_is_total(source: Phase, target: Phase) -> None:
    if is_legal_transition(source, target):
        assert transition_phase(source, target) is target
    else:
        with pytest.raises(InvariantError, match=r"^illegal chat lifecycle transition: "):
            transition_phase(source, target)


@pytest.mark.parametrize("phase", list(Phase))
def test_self_loops_are_illegal(phase: Phase) -> None:
    assert not is_legal_transition(phase, phase)


def reachable_from(start: Phase) -> set[Phase]:
    seen, frontier = {start}, deque([start])
    while frontier:
        here = frontier.popleft()
        for there in Phase:
            if there not in seen and is_legal_transition(here, there):
                seen.add(there)
                frontier.append(there)
    return seen


def test_every_phase_is_reachable_from_idle() -> None:
    assert reachable_from(Phase.IDLE) == set(Phase)


@given(st.sampled_from(Phase))
def test_idle_is_reachable_from_every_phase(phase: Phase) -> None:
    assert Phase.IDLE in reachable_from(phase)


@given(st.lists(st.sampled_from(Phase), max_size=30))
def test_a_walk_of_legal_moves_never_raises_and_an_illegal_one_always_does(
    targets: list[Phase],
) -> None:
    state: Lifecycle[str] = IDLE
    for target in targets:
        wanted = lifecycle_in(target)
        if is_legal_transition(state.phase, target):
            state = next_lifecycle(state, wanted)
        else:
            with pytest.raises(InvariantError):
                next_lifecycle(state, wanted)
    assert state.phase in Phase


@pytest.mark.parametrize(
    ("state", "running", "busy", "pure_busy", "run"),
    [
        (Idle(), False, False, False, None),
        (Starting(), False, True, False, None),
        (Ready("r"), True, False, False, "r"),
        (Streaming("r"), True, True, True, "r"),
        (Stopping("r", was_busy=True), True, True, True, "r"),
        (Stopping("r", was_busy=False), True, False, False, "r"),
    ],
)
def test_readings(
    state: Lifecycle[str], running: bool, busy: bool, pure_busy: bool, run: str | None
) -> None:
    was_busy = isinstance(state, Stopping) and state.was_busy
    assert is_running(state.phase) is running
    assert is_busy(state.phase, was_busy=was_busy) is busy
    assert lifecycle_busy(state) is pure_busy
    assert lifecycle_run(state) == run


def test_after_turn_result() -> None:
    assert after_turn_result(Streaming("r")) == Ready("r")
    assert after_turn_result(Stopping("r", was_busy=True)) == Stopping("r", was_busy=False)
    for unchanged in (IDLE, Starting(), Ready("r"), Stopping("r", was_busy=False)):
        assert after_turn_result(unchanged) == unchanged
