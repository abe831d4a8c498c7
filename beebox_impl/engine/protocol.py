"""What a chat session needs of an agent engine: start a run, talk to it, close it.

Spec sources: `docs/sources.md#lifecycle` (a session drives one SDK run at a time),
`docs/sources.md#facts-3-2` (§3.2: the backend starts a run resuming the saved
session and model; the run's message stream, send, interrupt, close and `closed`),
`docs/sources.md#format-8` (§8: the stream-json messages a run produces).

An `Engine` starts a `Run`. A run is one long-lived SDK conversation in streaming
input mode: the session sends it turns, and the run produces *raw* SDK messages —
the CLI's stream-json objects (`system/init`, `assistant`, `user`, `result`, …) —
which every session reads through the one `beebox_spec.sdk_messages.adapt_sdk_message`.

The message stream is the run's life: it ends when the run closes, whether the
session asked (`close`) or the engine died. `closed` turns true when the stream
has ended. A stream is consumed once, by the session's pump.

Every method that may block is async and checkpoints; a run's methods are called
from the session's event loop (asyncio or trio, through anyio).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeAlias, runtime_checkable

from beebox_spec.entries import JsonObject
from beebox_spec.errors import BeeboxError
from beebox_spec.permissions import PermissionReply, PermissionRequest

__all__ = [
    "AskPermission",
    "Engine",
    "EngineStartError",
    "PreparableEngine",
    "Run",
    "StartOptions",
    "TurnContent",
]

# One turn: plain text, or Messages-API content blocks (text and base64 image blocks).
TurnContent: TypeAlias = str | list[JsonObject]

# How a run asks its session before a tool runs (`beebox_spec.permissions`): the
# request, and, awaited, the answer; None when the request ended unanswered (its run
# ended, or the session let it go). Cancelled, it means the run took its ask back.
AskPermission: TypeAlias = Callable[[PermissionRequest], Awaitable[PermissionReply | None]]


class EngineStartError(BeeboxError):
    """The engine could not start a run (the binary is missing, the SDK refused, …)."""


@dataclass(frozen=True)
class StartOptions:
    """How to start a run.

    ``cwd`` is the box folder (transcripts are filed under its encoded path);
    ``resume_session_id`` continues an SDK session, ``None`` starts a new one;
    ``system_prompt`` is the prompt a *new* session starts with — the engine gives
    it only when it starts one (a resumed session keeps the prompt it began with,
    `docs/sources.md#facts-3-3`), so a caller passes it every time: an engine may
    start a new session where a resume was asked (the Claude engine does, for a
    session its CLI never wrote); ``env`` adds to the engine process's environment.
    """

    cwd: Path
    resume_session_id: str | None = None
    system_prompt: str | None = None
    model: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    # Where the run asks before a tool that needs a person's answer runs
    # (`beebox_spec.permissions`); without it, an engine denies such a call.
    ask_permission: AskPermission | None = None


class Run(Protocol):
    """One open SDK conversation."""

    @property
    def closed(self) -> bool:
        """True once the message stream has ended."""
        ...

    def messages(self) -> AsyncIterator[JsonObject]:
        """The raw SDK messages, in order, until the run closes. Consumed once."""
        ...

    async def send(self, content: TurnContent) -> None:
        """Send one user turn."""
        ...

    async def interrupt(self) -> None:
        """Interrupt the turn in flight; the run stays open."""
        ...

    async def close(self) -> None:
        """Close the run; its message stream ends soon after. Idempotent."""
        ...


class Engine(Protocol):
    """Starts runs."""

    async def start(self, options: StartOptions) -> Run:
        """Open a run, or raise `EngineStartError`."""
        ...


@runtime_checkable
class PreparableEngine(Engine, Protocol):
    """An engine with work it can do ahead of its first start (the Claude engine
    imports its SDK), which a host may ask for while it waits for a first send."""

    async def prepare(self) -> None:
        """Do that work now; raise `EngineStartError` when the engine cannot start."""
        ...
