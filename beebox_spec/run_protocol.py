"""What a session and the engine running its SDK run say to each other.

Spec sources, in `docs/sources.md`: `docs/sources.md#lifecycle-shared-code` ("Shared
code": both session classes drive their run through the same lifecycle and read it
through the same adapter) and `docs/sources.md#facts-3-2` (§3.2–§3.5, that section
and the three after it: `startRun`, `run.send`, `run.close`, the consume loop).

Both session models (`beebox_spec.chat_session`, `beebox_spec.thread_pool`) are
driven by the same engine *events* and make the same run *requests*, so those are
defined once, here. Runs are numbered from 1 in the order the session asked for
them. A start's outcome (`RunStarted`, `RunStartFailed`) is about the one run the
session is starting; every later event names the run it is about, so a model can
tell the current run from one it already let go of.

Engine events:

- `RunStarted` — the run the session asked for is open;
- `RunStartFailed` — it could not be opened;
- `SdkMessageArrived` — the run produced an SDK message, already adapted by the
  one `sdk_messages.adapt_sdk_message`;
- `RunClosed` — the run's message stream ended, because the session closed it or
  on its own;
- `TurnRefused` — the run's send of the turn in flight raised: the run refused
  the turn (ours, `docs/spec-decisions.md#refused-turn-closes-run`).

Requests (effects) of a session to its engine:

- `StartRun` — open run number ``run``, resuming an SDK session when one is known;
- `SendTurn` — send one turn's text on the run;
- `CloseRun` — close the run; its message stream ends and `RunClosed` follows.

And what both sessions share with their callers: the calls `Send` (a message) and
`Stop`, whose rules each session states (the chat session's stop clears its queue,
a thread session's forgets its session id), and the effect `Emit`, telling
listeners an event of the session's own kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from beebox_spec.sdk_messages import AdaptedMessage

__all__ = [
    "CloseRun",
    "Emit",
    "RunClosed",
    "RunStartFailed",
    "RunStarted",
    "SdkMessageArrived",
    "Send",
    "SendTurn",
    "StartRun",
    "Stop",
    "TurnRefused",
]

# The events a session tells its listeners of (each session names its own).
EventT_co = TypeVar("EventT_co", bound=str, covariant=True)


@dataclass(frozen=True)
class Send:
    """The caller sends a message (a chat session's `send`, a pool's send on a thread)."""

    text: str


@dataclass(frozen=True)
class Stop:
    """The caller stops the session (each session's rule says what goes with it)."""


@dataclass(frozen=True)
class Emit(Generic[EventT_co]):
    """Tell listeners: ``event`` with ``detail`` (a message, a text, a close code)."""

    event: EventT_co
    detail: object = None


@dataclass(frozen=True)
class RunStarted:
    """The engine opened the run the session asked for."""


@dataclass(frozen=True)
class RunStartFailed:
    """The engine could not open the run; ``reason`` says why."""

    reason: str


@dataclass(frozen=True)
class SdkMessageArrived:
    """Run ``run`` produced ``message`` (adapted by `adapt_sdk_message`)."""

    run: int
    message: AdaptedMessage


@dataclass(frozen=True)
class RunClosed:
    """The message stream of run ``run`` ended."""

    run: int


@dataclass(frozen=True)
class TurnRefused:
    """Run ``run``'s send of the turn in flight raised: it refused the turn."""

    run: int


@dataclass(frozen=True)
class StartRun:
    """Open run ``run``, resuming ``resume_session_id`` when it is set."""

    run: int
    resume_session_id: str | None


@dataclass(frozen=True)
class SendTurn:
    """Send ``text`` as one turn on run ``run``."""

    run: int
    text: str


@dataclass(frozen=True)
class CloseRun:
    """Close run ``run``."""

    run: int
