"""What a session and the engine running its SDK run say to each other.

Spec sources: `chat-session-lifecycle.md` (both session classes drive their run
through the same lifecycle and read it through the same adapter; "Shared code")
and `original-facts.md` §3.2–§3.5 (`startRun`, `run.send`, `run.close`, the
consume loop).

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
  the turn (ours: the original left that turn in flight until the run closed).

Requests (effects) of a session to its engine:

- `StartRun` — open run number ``run``, resuming an SDK session when one is known;
- `SendTurn` — send one turn's text on the run;
- `CloseRun` — close the run; its message stream ends and `RunClosed` follows.
"""

from __future__ import annotations

from dataclasses import dataclass

from beebox_spec.sdk_messages import AdaptedMessage

__all__ = [
    "CloseRun",
    "RunClosed",
    "RunStartFailed",
    "RunStarted",
    "SdkMessageArrived",
    "SendTurn",
    "StartRun",
    "TurnRefused",
]


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
