"""The chat run lifecycle: five phases and the one table of legal moves between them.

Spec sources: `docs/sources.md#lifecycle-phases` ("Phases": the phase table, and
every change of phase goes through `nextLifecycle`) and `docs/sources.md#facts-3-1`
(§3.1: the lifecycle union, `LEGAL_TRANSITIONS`, `afterTurnResult`).

Theory of operation
-------------------

A chat session drives at most one SDK run at a time. Where that run stands is its
*lifecycle*, one of five phases:

- ``idle`` — no run. The start state, and where every run ends.
- ``starting`` — a run is being started; there is no run handle yet.
- ``ready`` — the run is open and waiting for the next turn.
- ``streaming`` — a turn is in flight.
- ``stopping`` — a deliberate ``stop()`` closed the run; the close handler must not
  drain the queue. Only the whole-box `ChatSession` enters it: a thread session
  closes straight through to ``idle``.

The legal moves are the rows of `LEGAL_TRANSITIONS` below, and nothing else is.
Self-loops are not moves (``idle → idle`` is illegal). Every change of phase, in
the specification and in the implementation, goes through `next_lifecycle`, which
raises `InvariantError` on an illegal move: such a move is a bug in the caller over
the box's own state, never a condition to degrade.

A lifecycle value carries what its phase owns: the run handle in ``ready``,
``streaming`` and ``stopping``, and in ``stopping`` whether the run was mid-turn
when it was stopped (``was_busy``). The run handle's type is a parameter, so the
implementation uses these same classes with its real run objects.

Two readings of "busy" exist and both are kept here:

- `lifecycle_busy` is the pure reading of the lifecycle union (§3.1): only a
  turn in flight is busy (``streaming``, and ``stopping`` when it was busy).
- `is_busy` is what a *session* reports (the phase table of
  `docs/sources.md#lifecycle-phases`): ``starting`` reads busy too, so a second
  send arriving mid-start is queued onto the starting run instead of racing a
  second run. A session stuck in ``starting`` therefore reads as permanently busy
  (§3.1 note).

`is_running` is true exactly when the phase holds a run handle (``ready``,
``streaming``, ``stopping``), as the phase table reads. A session's own
``isRunning()`` (`has_open_run`) further asks whether it has asked to close that
run: a run being closed takes no more turns, so in ``stopping`` the session holds
a handle but no open run.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic, TypeAlias, TypeVar

from beebox_spec.errors import InvariantError

__all__ = [
    "IDLE",
    "LEGAL_TRANSITIONS",
    "PHASE_MEANINGS",
    "Idle",
    "Lifecycle",
    "Phase",
    "Ready",
    "Starting",
    "Stopping",
    "Streaming",
    "accepts_send",
    "after_turn_result",
    "has_open_run",
    "is_busy",
    "is_legal_transition",
    "is_running",
    "lifecycle_busy",
    "lifecycle_run",
    "next_lifecycle",
    "session_is_busy",
    "transition_phase",
]

RunT = TypeVar("RunT")


class Phase(enum.StrEnum):
    """Where a session's SDK run stands (`ChatRunPhase`)."""

    IDLE = "idle"
    STARTING = "starting"
    READY = "ready"
    STREAMING = "streaming"
    STOPPING = "stopping"


# THE table of legal moves (`LEGAL_TRANSITIONS`, §3.1). Anything not
# listed, self-loops included, is illegal.
LEGAL_TRANSITIONS: Mapping[Phase, frozenset[Phase]] = {
    Phase.IDLE: frozenset({Phase.STARTING}),
    Phase.STARTING: frozenset({Phase.READY, Phase.IDLE}),
    Phase.READY: frozenset({Phase.STREAMING, Phase.STOPPING, Phase.IDLE}),
    Phase.STREAMING: frozenset({Phase.READY, Phase.STOPPING, Phase.IDLE}),
    Phase.STOPPING: frozenset({Phase.IDLE}),
}

# What each phase means, after the phase table of `docs/sources.md#lifecycle-phases`.
PHASE_MEANINGS: Mapping[Phase, str] = {
    Phase.IDLE: "no SDK run; start state and where every run ends",
    Phase.STARTING: "a run is being started; no run handle yet",
    Phase.READY: "run open and idle, waiting for the next turn",
    Phase.STREAMING: "a turn is in flight",
    Phase.STOPPING: "a graceful stop() closed the run; the close handler will not drain",
}


def is_legal_transition(source: Phase, target: Phase) -> bool:
    """Whether ``source → target`` is a row of `LEGAL_TRANSITIONS`."""
    return target in LEGAL_TRANSITIONS[source]


def transition_phase(source: Phase, target: Phase) -> Phase:
    """Move from ``source`` to ``target``, or raise `InvariantError` if the table forbids it."""
    # The move must be a row of the one table; anything else is a caller bug.
    if not is_legal_transition(source, target):
        raise InvariantError(f"illegal chat lifecycle transition: {source} → {target}")
    return target


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


def is_busy(phase: Phase, *, was_busy: bool = False) -> bool:
    """The session-level busy reading of a phase (`docs/sources.md#lifecycle-phases`).

    A turn in flight is busy (``streaming``; ``stopping`` when the stopped run was
    mid-turn), and so is ``starting``: a run is on its way, so a second send must
    queue onto it rather than race a second run. A send that finds the session busy
    is not accepted; the caller enqueues instead.
    """
    if phase is Phase.STOPPING:
        return was_busy
    return phase in (Phase.STARTING, Phase.STREAMING)


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


def is_running(phase: Phase) -> bool:
    """Whether the phase holds a run handle (``ready``, ``streaming``, ``stopping``)."""
    return phase in (Phase.READY, Phase.STREAMING, Phase.STOPPING)


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
