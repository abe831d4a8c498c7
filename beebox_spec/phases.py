"""The chat run phases: five phases and the ONE table of legal moves between them.

Spec sources: `docs/sources.md#lifecycle-phases` ("Phases": the phase table, and
every change of phase goes through `nextLifecycle`) and `docs/sources.md#facts-3-1`
(§3.1: the lifecycle union, `LEGAL_TRANSITIONS`).

Theory of operation
-------------------

A chat session drives at most one SDK run at a time. Where that run stands is its
*phase*, one of five:

- ``idle`` — no run. The start state, and where every run ends.
- ``starting`` — a run is being started; there is no run handle yet.
- ``ready`` — the run is open and waiting for the next turn.
- ``streaming`` — a turn is in flight.
- ``stopping`` — a deliberate ``stop()`` closed the run; the close handler must not
  drain the queue. Only the whole-box `ChatSession` enters it: a thread session
  closes straight through to ``idle``.

The legal moves are the rows of `LEGAL_TRANSITIONS` below, and nothing else is.
Self-loops are not moves (``idle → idle`` is illegal). Every change of phase, in
the specification and in the implementation, goes through `transition_phase` (by
way of `beebox_spec.lifecycle.next_lifecycle`, which moves a lifecycle value),
which raises `InvariantError` on an illegal move: such a move is a bug in the
caller over the box's own state, never a condition to degrade.

A phase has two readings of its own, both in the phase table:

- `is_running` is true exactly when the phase holds a run handle (``ready``,
  ``streaming``, ``stopping``).
- `is_busy` is what a *session* reports: a turn in flight is busy, and so is
  ``starting``, so a second send arriving mid-start is queued onto the starting
  run instead of racing a second run. A session stuck in ``starting`` therefore
  reads as permanently busy (§3.1 note). ``stopping`` is busy exactly when the
  stopped run was mid-turn, which the phase alone does not say: its lifecycle value
  does (`beebox_spec.lifecycle`).

This module is the phase table alone, apart from the lifecycle values that carry a
run: `bbx phases` and ``python -m beebox_spec`` print it (`phase_doc`) standing on
nothing but `enum`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from beebox_spec.errors import InvariantError

__all__ = [
    "LEGAL_TRANSITIONS",
    "PHASE_MEANINGS",
    "Phase",
    "is_busy",
    "is_legal_transition",
    "is_running",
    "transition_phase",
]


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


def is_running(phase: Phase) -> bool:
    """Whether the phase holds a run handle (``ready``, ``streaming``, ``stopping``)."""
    return phase in (Phase.READY, Phase.STREAMING, Phase.STOPPING)
