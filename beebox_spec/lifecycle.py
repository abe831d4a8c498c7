"""The chat run lifecycle: a phase, and the run handle it owns.

Spec sources: `docs/sources.md#lifecycle-phases` (every change of phase goes through
`nextLifecycle`) and `docs/sources.md#facts-3-1` (§3.1: the lifecycle union,
`afterTurnResult`).

Theory of operation
-------------------

The five phases and the one table of legal moves between them are
`beebox_spec.phases`. A *lifecycle* value is a phase together with what the phase
owns: the run handle in ``ready``, ``streaming`` and ``stopping``, and in
``stopping`` whether the run was mid-turn when it was stopped (``was_busy``). The
run handle's type is a parameter, so the implementation uses these same classes
with its real run objects.

Every change of a session's lifecycle goes through `next_lifecycle`, which moves
only along a row of `LEGAL_TRANSITIONS` and raises `InvariantError` on any other
move: such a move is a bug in the caller over the box's own state, never a
condition to degrade.

Two readings of "busy" exist and both are kept:

- `lifecycle_busy` is the pure reading of the lifecycle union (§3.1): only a
  turn in flight is busy (``streaming``, and ``stopping`` when it was busy).
- `session_is_busy` is what a *session* reports: `is_busy` of its phase, where
  ``starting`` reads busy too (a second send arriving mid-start is queued onto the
  starting run instead of racing a second run), and ``stopping`` reads busy when
  the stopped run was mid-turn.

`is_running` is true exactly when the phase holds a run handle, as the phase table
reads. A session's own ``isRunning()`` (`has_open_run`) further asks whether it has
asked to close that run: a run being closed takes no more turns, so in ``stopping``
the session holds a handle but no open run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeAlias, TypeVar

from beebox_spec.phases import Phase, is_busy, transition_phase

__all__ = [
    "IDLE",
    "Idle",
    "Lifecycle",
    "Ready",
    "Starting",
    "Stopping",
    "Streaming",
    "accepts_send",
    "after_turn_result",
    "has_open_run",
    "lifecycle_busy",
    "lifecycle_run",
    "next_lifecycle",
    "session_is_busy",
]

RunT = TypeVar("RunT")


@dataclass(frozen=True, slots=True)
class Idle:
    """No run."""

    phase: Phase = Phase.IDLE


@dataclass(frozen=True, slots=True)
class Starting:
    """A run is being started; no handle yet."""

    phase: Phase = Phase.STARTING


@dataclass(frozen=True, slots=True)
class Ready(Generic[RunT]):
    """The run is open and waiting for a turn."""

    run: RunT
    phase: Phase = Phase.READY


@dataclass(frozen=True, slots=True)
class Streaming(Generic[RunT]):
    """A turn is in flight on the run."""

    run: RunT
    phase: Phase = Phase.STREAMING


@dataclass(frozen=True, slots=True)
class Stopping(Generic[RunT]):
    """A deliberate stop closed the run; ``was_busy`` records whether a turn was in flight."""

    run: RunT
    was_busy: bool
    phase: Phase = Phase.STOPPING


Lifecycle: TypeAlias = Idle | Starting | Ready[RunT] | Streaming[RunT] | Stopping[RunT]

IDLE = Idle()


def next_lifecycle(current: Lifecycle[RunT], target: Lifecycle[RunT]) -> Lifecycle[RunT]:
    """The one write path of a lifecycle: returns ``target`` if the move is legal.

    Raises `InvariantError` with ``illegal chat lifecycle transition: <from> → <to>``
    otherwise (`nextLifecycle`, §3.1).
    """
    transition_phase(current.phase, target.phase)
    return target


# The states that own a run handle. A tuple, not a union: `isinstance` reads it as
# it is, where ``Ready | Streaming | Stopping`` would build a union on every call.
_RUN_OWNING_STATES = (Ready, Streaming, Stopping)


def lifecycle_run(state: Lifecycle[RunT]) -> RunT | None:
    """The run handle the phase owns: none in ``idle`` and ``starting`` (`lifecycleRun`)."""
    if isinstance(state, _RUN_OWNING_STATES):
        return state.run
    return None


def lifecycle_busy(state: Lifecycle[RunT]) -> bool:
    """The lifecycle union's own reading (`lifecycleBusy`, §3.1): `is_busy`, except that
    ``starting`` is not busy — no turn is in flight yet."""
    if isinstance(state, Starting):
        return False
    return is_busy(state.phase, was_busy=isinstance(state, Stopping) and state.was_busy)


def session_is_busy(state: Lifecycle[RunT]) -> bool:
    """`isBusy()` of a session in ``state``: `is_busy` of its phase, ``starting``
    included (a run is on its way), ``stopping`` when the stopped run was mid-turn."""
    return is_busy(state.phase, was_busy=isinstance(state, Stopping) and state.was_busy)


def accepts_send(state: Lifecycle[RunT], *, close_requested: bool) -> bool:
    """Whether a session in ``state`` takes a send as a turn now: it is not busy, and
    an open run takes the turn or, with no run, an idle session starts one."""
    # A busy session refuses; the caller must enqueue.
    if session_is_busy(state):
        return False
    return has_open_run(state, close_requested=close_requested) or isinstance(state, Idle)


def has_open_run(state: Lifecycle[RunT], *, close_requested: bool) -> bool:
    """`isRunning()` of a session: its phase holds a run and the session has not asked
    to close it. Once a close is asked for, the run takes no more turns, even while its
    message stream is still ending — so ``stopping``, whose stop always closed the run,
    holds a run handle (`is_running`) but no open run."""
    return lifecycle_run(state) is not None and not close_requested


def after_turn_result(state: Lifecycle[RunT]) -> Lifecycle[RunT]:
    """The lifecycle after a turn's ``result`` arrived (`afterTurnResult`, §3.1).

    ``streaming → ready`` on the same run; ``stopping`` stays ``stopping`` but is no
    longer busy; any other phase is unchanged. Callers apply this *before* anything
    that reacts to the turn ending (feature deltas, the queue drain), so those
    reactions already see the session as not busy — the busy-flip ordering.
    """
    if isinstance(state, Streaming):
        return next_lifecycle(state, Ready(state.run))
    if isinstance(state, Stopping):
        return Stopping(state.run, was_busy=False)
    return state
