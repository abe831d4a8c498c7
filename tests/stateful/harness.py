"""What the stateful machines share: settling a loop, an engine whose closes the
test can hold open, and the raw SDK messages the machines make a run say.

Settling (`docs/design.md#design-2-stateful-tests`): after each command the machine
waits until every task on the loop is blocked, never for a time.

- trio: `trio.testing.wait_all_tasks_blocked` is exact and cheap.
- asyncio: anyio's `wait_all_tasks_blocked` sleeps 100 ms whenever a task is
  runnable, so `_settle_asyncio` instead yields with ``asyncio.sleep(0)`` until
  every other task is waiting on a future that is not done and no callback is
  ready to run — twice in a row, so a wake-up scheduled by the last step is seen.

Both count a task waiting on a worker thread as blocked, so the machines use
stores that stay on the loop (`beebox_impl.store.memory`).

Held closes: the protocol lets a run's stream end "soon after" `close()`.
`ScriptedEngine`'s runs end at once, which leaves the close window — the session
asked to close, the close has not come back — open only between two
instructions. `HoldingEngine` can hold each close until the machine releases it,
so the close window, and a result that races a stop, are ordinary states the
machine reaches and observes between steps.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Literal, TypeAlias, TypeVar

from anyio.from_thread import BlockingPortal
from anyio.lowlevel import checkpoint

from beebox_impl.engine import ScriptedEngine, ScriptedRun
from beebox_impl.engine.messages import assistant_message, init_message, result_message
from beebox_impl.engine.protocol import StartOptions, TurnContent
from beebox_impl.testing import settle
from beebox_spec.entries import JsonObject
from beebox_spec.permissions import PermissionRequest

__all__ = [
    "SUB_AGENT_KINDS",
    "HeldRun",
    "HoldingEngine",
    "MessageKind",
    "TurnRefusedByMachine",
    "call_and_settle",
    "numbered_request",
    "raw_message",
    "settle",
]

T = TypeVar("T")


class TurnRefusedByMachine(RuntimeError):
    """A run's send raised because the machine said so (`ScriptedRun.refuse_next_send`)."""


def call_and_settle(portal: BlockingPortal, action: Callable[[], Awaitable[T]]) -> T:
    """Run ``action`` on the portal's loop, settle, and return what it returned (or,
    settled all the same, raise what it raised)."""

    async def act() -> T:
        try:
            return await action()
        finally:
            await settle()

    return portal.call(act)


class HeldRun:
    """A `ScriptedRun` whose `close` the machine may hold: the stream ends on `release_close`."""

    def __init__(self, inner: ScriptedRun, *, hold_closes: bool) -> None:
        self.inner = inner
        self.hold_closes = hold_closes
        self.close_requested = False

    @property
    def closed(self) -> bool:
        return self.inner.closed

    @property
    def sent(self) -> list[TurnContent]:
        return self.inner.sent

    @property
    def interrupts(self) -> int:
        return self.inner.interrupts

    @property
    def options(self) -> StartOptions:
        return self.inner.options

    def messages(self) -> AsyncIterator[JsonObject]:
        return self.inner.messages()

    async def send(self, content: TurnContent) -> None:
        await self.inner.send(content)

    async def interrupt(self) -> None:
        await self.inner.interrupt()

    async def close(self) -> None:
        self.close_requested = True
        if self.hold_closes:
            await checkpoint()
        else:
            await self.inner.close()

    def release_close(self) -> None:
        """The held close completes: the stream ends now."""
        self.inner.close_nowait()

    @property
    def ended(self) -> bool:
        return self.inner.ended


class HoldingEngine:
    """`ScriptedEngine` with every run wrapped in a `HeldRun`."""

    def __init__(self, *, hold_closes: bool) -> None:
        self.scripted = ScriptedEngine()
        self.hold_closes = hold_closes
        self.runs: list[HeldRun] = []

    async def start(self, options: StartOptions) -> HeldRun:
        run = HeldRun(await self.scripted.start(options), hold_closes=self.hold_closes)
        self.runs.append(run)
        return run

    @property
    def starts(self) -> list[StartOptions]:
        return self.scripted.starts

    @property
    def waiting_starts(self) -> int:
        return self.scripted.waiting_starts


MessageKind: TypeAlias = Literal[
    "init",
    "assistant",
    "result",
    "error-result",
    "task",
    "stream-event",
    "ignored",
    "unknown",
    "sub-agent-assistant",
    "sub-agent-prompt",
    "sub-agent-stream-event",
]
# The kinds a sub-agent says (a Task or Agent call's work): none of them is the turn's.
SUB_AGENT_KINDS: tuple[MessageKind, ...] = (
    "sub-agent-assistant",
    "sub-agent-prompt",
    "sub-agent-stream-event",
)
# The call whose sub-agent says them.
SUB_AGENT_CALL = "toolu-machine"


def raw_message(kind: MessageKind, text: str, session_id: str, ordinal: int) -> JsonObject:
    """A raw SDK message of ``kind`` (``session_id`` "" for one that names none)."""
    uuid = f"machine-{ordinal}"
    if kind == "init":
        return init_message(session_id or "s-init")
    if kind in ("assistant", "sub-agent-assistant"):
        return assistant_message(
            text,
            session_id=session_id,
            uuid=uuid,
            message_id=f"msg-{ordinal}",
            model="machine",
            parent_tool_use_id=SUB_AGENT_CALL if kind == "sub-agent-assistant" else None,
        )
    if kind == "sub-agent-prompt":
        return {
            "type": "user",
            "message": {"role": "user", "content": [{"type": "text", "text": text}]},
            "parent_tool_use_id": SUB_AGENT_CALL,
            "session_id": session_id,
            "uuid": uuid,
        }
    if kind == "result":
        return result_message(session_id=session_id, uuid=uuid, result=text)
    if kind == "error-result":
        return result_message(
            session_id=session_id, uuid=uuid, subtype="error_during_execution", is_error=True
        )
    if kind == "task":
        return {
            "type": "system",
            "subtype": "task_started",
            "session_id": session_id or "s-task",
            "uuid": uuid,
            "task_id": f"task-{ordinal}",
            "description": text,
        }
    if kind in ("stream-event", "sub-agent-stream-event"):
        # A piece of the message in progress: ``text`` as its text delta (none for "").
        delta: JsonObject = {"type": "text_delta", "text": text}
        return {
            "type": "stream_event",
            "session_id": session_id or "s-stream",
            "uuid": uuid,
            "event": {"type": "content_block_delta", "index": 0, "delta": delta},
            "parent_tool_use_id": SUB_AGENT_CALL if kind == "sub-agent-stream-event" else None,
        }
    if kind == "ignored":
        return {"type": "tool_progress", "session_id": session_id, "uuid": uuid}
    return {"type": "mystery", "session_id": session_id, "uuid": uuid, "text": text}


def numbered_request(number: int, tool: str, *, can_always_allow: bool) -> PermissionRequest:
    """The machines' ``number``-th permission request (ids ``permission-<n>``)."""
    return {
        "id": f"permission-{number}",
        "toolName": tool,
        "input": {"ask": number},
        "toolUseId": f"toolu-{number}",
        "canAlwaysAllow": can_always_allow,
    }
