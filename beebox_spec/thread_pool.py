"""Chat thread sessions and the pool that runs one of them at a time.

Spec sources, in `docs/sources.md` (a bare §N.M below is its anchor `facts-N-M`):
`docs/sources.md#lifecycle-park-evict` ("Park and evict"),
`docs/sources.md#lifecycle-phases` ("Phases": a thread session has no ``stopping``),
`docs/sources.md#lifecycle-shared-code` ("Shared code"), `docs/sources.md#facts-3-3`
(§3.3: `ChatThreadSession`) and `docs/sources.md#facts-3-4` (§3.4: `ChatSessionPool`).

Theory of operation
-------------------

A `ChatThreadSession` serves one external chat thread (a bot bridge, say). It
uses the same lifecycle table as the whole-box session but never enters
``stopping``: it has no queue to protect, so ``park()`` and ``stop()`` close the
run and go straight back to ``idle``. Its rules:

1. **Send.** A send while busy (a turn in flight, or a run starting) is refused
   with `SessionBusyError`; there is no queue. With an open run the turn goes
   onto it; from ``idle`` a run is started and the text becomes its first turn.
   Whenever the session knows its SDK session id at send time, the turn carries
   `REMINDER` (and a session link when the host gives a view base URL): only a
   brand-new session is started with the thread prompt as its system prompt, so
   every other turn restates the one rule the bridge depends on (§3.3).
   Because park and stop close straight through to ``idle``, a thread session
   has no close window: there is never a run it has let go of but not left.
2. **Messages.** The one shared adapter's output is handled as explicit flow
   control: an assistant message's text is buffered and every complete
   ``<chat-response>…</chat-response>`` block in the buffer is delivered at once
   (`sdk_messages.extract_chat_responses`), of the main conversation's text only
   (`sdk_messages.assistant_text`): a sub-agent's reply answers the call that
   started it, never the thread, whatever tags it holds
   (ours, `docs/spec-decisions.md#sub-agent-messages`); ``result`` extracts what
   is left, flips busy off (`lifecycle.after_turn_result`), emits the turn's text and
   settles the turn; ``stream_event`` (partial deltas) and ``task`` (background
   task lifecycle) are deliberate, logged skips; everything else is passed on.
3. **Close.** When the current run's stream ends the session goes ``idle``,
   emits ``close`` and settles a turn still in flight as ``closed``. A run that
   was parked or stopped has been let go of: its late messages are ignored and
   its close only emits ``close``.
4. **Park and stop.** ``park()`` closes the open run and keeps the session id, so
   the thread resumes the same SDK session later; ``stop()`` does the same and
   forgets the id. Both go straight to ``idle``. Parked or stopped while its run
   is still starting, the session settles the waiting turn as ``closed`` at once
   and closes the run the moment it opens, without sending on it
   (ours, `docs/spec-decisions.md#park-while-starting`).
5. **Session id.** The first session id the SDK reports is kept (§3.3 "capture
   first session_id"); a session resuming a known id keeps that one.
6. **A refused turn** (ours, `docs/spec-decisions.md#refused-turn-closes-run`). A
   run whose send raises has refused the turn in flight (`TurnRefused`): the
   session closes that run, and the close settles the turn as ``closed`` (rule
   3). Left open, the run would keep the turn in flight for good: the session
   busy, and the pool waiting on it.
7. **Permission requests** (ours, `docs/spec-decisions.md#permission-requests`),
   by `beebox_spec.permissions`. The run the session holds
   may ask for a person's answer before a tool runs; the request is pending until
   answered, timed out, withdrawn, or ended with its run. Park and
   stop — and closing a run that refused its turn — deny the run's pending
   requests before the close (``permission-ended``, how ``stopped``): a parked
   thread's turn ends on an answer, not on a missing one. A run the session has
   let go of is answered at once, denied, and nothing is announced. The current
   run's close ends the rest unanswered. Requests change no phase: a turn waiting
   for an answer is in flight, so the session reads busy (a send is refused, and
   the pool waits on it as on any busy session before parking it).

The `ChatSessionPool` holds at most one active thread session. Its decisions are
pure functions here; the waiting (for the active session's turn to finish, up to
`BUSY_TIMEOUT`) belongs to the implementation:

- a message for another thread parks the active one first, keeping its session
  id in the thread's record;
- a thread's record is rotated to a fresh SDK session once it has carried
  `MAX_MESSAGES` messages or is `MAX_AGE` old;
- a successful turn bumps ``lastUsedAt`` and ``messageCount``; a failed one stops
  the session and deletes the record;
- registry eviction is ``stop()``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import ClassVar, Literal, TypeAlias, TypedDict, assert_never

from beebox_spec.errors import InvariantError, Rejection
from beebox_spec.js_values import parse_iso_timestamp, to_iso_timestamp
from beebox_spec.lifecycle import (
    IDLE,
    Lifecycle,
    Ready,
    Starting,
    Stopping,
    Streaming,
    after_turn_result,
    has_open_run,
    lifecycle_run,
    next_lifecycle,
)
from beebox_spec.permissions import (
    AnswerAsk,
    AnswerPermission,
    PendingPermission,
    PermissionAsked,
    PermissionNotPending,
    PermissionStep,
    PermissionTimedOut,
    PermissionWithdrawn,
    deny_run,
    drop_run,
    in_order,
    settle,
)
from beebox_spec.permissions import ask as ask_permission
from beebox_spec.phases import is_busy
from beebox_spec.run_protocol import (
    CloseRun,
    Emit,
    RunClosed,
    RunStarted,
    RunStartFailed,
    SdkMessageArrived,
    Send,
    SendTurn,
    StartRun,
    Stop,
    TurnRefused,
)
from beebox_spec.sdk_messages import AdaptedMessage, assistant_text, extract_chat_responses

__all__ = [
    "BUSY_TIMEOUT",
    "MAX_AGE",
    "MAX_MESSAGES",
    "REMINDER",
    "AnswerAsk",
    "AnswerPermission",
    "CloseRun",
    "Emit",
    "LogSkip",
    "Park",
    "PermissionAsked",
    "PermissionNotPending",
    "PermissionTimedOut",
    "PermissionWithdrawn",
    "PoolPlan",
    "RunClosed",
    "RunStartFailed",
    "RunStarted",
    "SdkMessageArrived",
    "Send",
    "SendTurn",
    "SessionBusyError",
    "SettleTurn",
    "StartRun",
    "Stop",
    "ThreadEffect",
    "ThreadEvent",
    "ThreadRecord",
    "ThreadSessionState",
    "ThreadStep",
    "TurnOutcome",
    "TurnRefused",
    "compose_turn",
    "initial_thread_state",
    "plan_send",
    "record_after_failure",
    "record_after_success",
    "session_running",
    "should_rotate",
    "step",
]

# §3.3: appended to a turn sent on a resumed session.
REMINDER = (
    "\n\n[Reminder: wrap replies in <chat-response>your reply</chat-response> tags. "
    "Send an acknowledgment first if you'll do work.]"
)

# §3.4: a thread record is rotated to a fresh session after this many messages or this age.
MAX_MESSAGES = 50
MAX_AGE = timedelta(hours=24)
# §3.4: how long the pool waits for a busy session to go idle before parking it anyway.
BUSY_TIMEOUT = timedelta(seconds=60)


class SessionBusyError(Rejection):
    """A send reached a thread session with a turn in flight ("Session is busy")."""

    status_hint: ClassVar[int] = 409

    def __init__(self) -> None:
        super().__init__("Session is busy")


# --- The thread session ----------------------------------------------------------


@dataclass(frozen=True)
class ThreadSessionState:
    """A thread session's state.

    ``start_abandoned`` is true when the session was parked or stopped while its run
    was starting: the run is closed as soon as it opens. ``permissions`` are the
    pending permission requests, in the order asked (rule 7).
    """

    lifecycle: Lifecycle[int] = IDLE
    start_abandoned: bool = False
    session_id: str | None = None
    first_turn: str | None = None
    response_buffer: str = ""
    turn_text: str = ""
    turn_pending: bool = False
    runs_started: int = 0
    view_base_url: str | None = None
    permissions: tuple[PendingPermission, ...] = ()


def initial_thread_state(
    session_id: str | None = None, view_base_url: str | None = None
) -> ThreadSessionState:
    """A thread session with no run, resuming ``session_id`` if the pool has one."""
    return ThreadSessionState(session_id=session_id, view_base_url=view_base_url)


def compose_turn(text: str, session_id: str | None, view_base_url: str | None) -> str:
    """The text sent for one turn: the reminder (and session link) when resuming."""
    # A new session gets the thread prompt as its system prompt; only a resumed one needs this.
    if session_id is None:
        return text
    turn = text + REMINDER
    if view_base_url:
        turn += f"\n[Session link: {view_base_url}?session={session_id}]"
    return turn


@dataclass(frozen=True)
class Park:
    """Close the run, keep the session id for resume."""


ThreadEvent: TypeAlias = (
    Send
    | Park
    | Stop
    | RunStarted
    | RunStartFailed
    | SdkMessageArrived
    | RunClosed
    | TurnRefused
    | PermissionAsked
    | PermissionWithdrawn
    | AnswerPermission
    | PermissionTimedOut
)


TurnOutcome: TypeAlias = Literal["done", "closed", "start-failed"]


@dataclass(frozen=True)
class SettleTurn:
    """The send in flight is over: its result arrived, its run closed, or it never started."""

    outcome: TurnOutcome
    reason: str | None = None


@dataclass(frozen=True)
class LogSkip:
    """A message type this path deliberately does not deliver (logged, not dropped silently)."""

    message_type: Literal["stream_event", "task"]


ThreadEmitted: TypeAlias = Literal[
    "session",
    "chat-response",
    "turn-text",
    "done",
    "message",
    "close",
    "permission-request",
    "permission-ended",
]


ThreadEffect: TypeAlias = (
    StartRun | SendTurn | CloseRun | SettleTurn | LogSkip | Emit[ThreadEmitted] | AnswerAsk
)


@dataclass(frozen=True)
class ThreadStep:
    """The next state and the effects, in order."""

    state: ThreadSessionState
    effects: tuple[ThreadEffect, ...] = field(default=())


def session_running(state: ThreadSessionState) -> bool:
    """`isRunning()`: the session holds a run (it closes runs straight through to idle)."""
    return has_open_run(state.lifecycle, close_requested=False)


def step(state: ThreadSessionState, event: ThreadEvent) -> ThreadStep:
    """Apply one event. Raises `SessionBusyError` on a refused send,
    `PermissionNotPending` on an answer to a request that is not pending, and
    `InvariantError` on an impossible engine event."""
    match event:
        case Send(text=text):
            return _send(state, text)
        case Park():
            return _close_through(state, forget=False)
        case Stop():
            return _close_through(state, forget=True)
        case RunStarted():
            return _run_started(state)
        case RunStartFailed(reason=reason):
            return _run_start_failed(state, reason)
        case SdkMessageArrived(run=run, message=message):
            return _message_arrived(state, run, message)
        case RunClosed(run=run):
            return _run_closed(state, run)
        case TurnRefused(run=run):
            return _turn_refused(state, run)
        case PermissionAsked(run=run, request=request):
            # Rule 7: a run let go of (parked or stopped) is denied at once.
            let_go = _is_let_go(state, run)
            return _permissions(
                state, ask_permission(state.permissions, run, request, run_closing=let_go)
            )
        case PermissionWithdrawn() | AnswerPermission() | PermissionTimedOut():
            return _permissions(state, settle(state.permissions, event))
        case _:
            assert_never(event)


def _permissions(state: ThreadSessionState, changed: PermissionStep) -> ThreadStep:
    """Rule 7: the pending requests after a permission rule, and its effects in order."""
    return ThreadStep(replace(state, permissions=changed.pending), in_order(changed, Emit))


def _send(state: ThreadSessionState, text: str) -> ThreadStep:
    # Rule 1: no queue here — a busy session refuses outright.
    if is_busy(state.lifecycle.phase):
        raise SessionBusyError
    turn = compose_turn(text, state.session_id, state.view_base_url)
    run = lifecycle_run(state.lifecycle)
    # An open run that is not busy is `ready`: the turn goes onto it.
    if run is not None:
        streaming = next_lifecycle(state.lifecycle, Streaming(run))
        return ThreadStep(
            replace(
                state, lifecycle=streaming, turn_text="", response_buffer="", turn_pending=True
            ),
            (SendTurn(run, turn),),
        )
    run_number = state.runs_started + 1
    return ThreadStep(
        replace(
            state,
            lifecycle=next_lifecycle(state.lifecycle, Starting()),
            first_turn=turn,
            runs_started=run_number,
            turn_pending=True,
        ),
        (StartRun(run_number, state.session_id),),
    )


def _run_started(state: ThreadSessionState) -> ThreadStep:
    # The engine can only report a start the session asked for.
    if not isinstance(state.lifecycle, Starting):
        raise InvariantError(f"run started while {state.lifecycle.phase}: no start was asked for")
    run = state.runs_started
    ready = next_lifecycle(state.lifecycle, Ready(run))
    # Rule 4: parked or stopped while starting — close the run the moment it opens.
    if state.start_abandoned:
        idle: Lifecycle[int] = next_lifecycle(ready, IDLE)
        return ThreadStep(
            replace(state, lifecycle=idle, start_abandoned=False, first_turn=None),
            (CloseRun(run),),
        )
    if state.first_turn is None:
        raise InvariantError("a thread run started with no turn waiting for it")
    streaming = next_lifecycle(ready, Streaming(run))
    return ThreadStep(
        replace(state, lifecycle=streaming, first_turn=None, turn_text="", response_buffer=""),
        (SendTurn(run, state.first_turn),),
    )


def _run_start_failed(state: ThreadSessionState, reason: str) -> ThreadStep:
    # The engine can only fail a start the session asked for.
    if not isinstance(state.lifecycle, Starting):
        raise InvariantError(f"run start failed while {state.lifecycle.phase}")
    idle: Lifecycle[int] = next_lifecycle(state.lifecycle, IDLE)
    settled = replace(state, lifecycle=idle, first_turn=None, turn_pending=False)
    # An abandoned start already settled its turn when it was parked or stopped.
    if state.start_abandoned:
        return ThreadStep(replace(settled, start_abandoned=False))
    return ThreadStep(settled, (SettleTurn("start-failed", reason),))


def _is_let_go(state: ThreadSessionState, run: int) -> bool:
    """Whether ``run`` is one this session started and has since parked or stopped."""
    # A run number the session never asked for is a caller bug, not a late message.
    if not 1 <= run <= state.runs_started:
        raise InvariantError(f"run {run} was never started")
    return lifecycle_run(state.lifecycle) != run


def _message_arrived(state: ThreadSessionState, run: int, message: AdaptedMessage) -> ThreadStep:
    # Rule 3: a run the session let go of may still say something; nobody listens.
    if _is_let_go(state, run):
        return ThreadStep(state)
    effects: list[ThreadEffect] = []
    session_id = message.get("session_id")
    # Rule 5: the first session id the SDK reports is the session's.
    if state.session_id is None and isinstance(session_id, str) and session_id:
        state = replace(state, session_id=session_id)
        effects.append(Emit("session", session_id))

    match message["type"]:
        case "assistant":
            text = assistant_text(message)
            responses, rest = extract_chat_responses(state.response_buffer + text)
            state = replace(state, turn_text=state.turn_text + text, response_buffer=rest)
            effects += [Emit("chat-response", response) for response in responses]
        case "result":
            responses, rest = extract_chat_responses(state.response_buffer)
            effects += [Emit("chat-response", response) for response in responses]
            # Busy flips off before anyone hears the turn is over.
            state = replace(
                state,
                lifecycle=after_turn_result(state.lifecycle),
                response_buffer=rest,
                turn_pending=False,
            )
            effects += [Emit("turn-text", state.turn_text), Emit("done"), SettleTurn("done")]
        case "stream_event" | "task":
            # Partial deltas and background-task lifecycle are not delivered on this path.
            effects.append(LogSkip(message["type"]))
        case "system" | "user" | "unknown":
            effects.append(Emit("message", message))
        case _:
            assert_never(message["type"])
    return ThreadStep(state, tuple(effects))


def _run_closed(state: ThreadSessionState, run: int) -> ThreadStep:
    # Rule 3: the close of a run already let go of only tells listeners.
    if _is_let_go(state, run):
        return ThreadStep(state, (Emit("close"),))
    idle: Lifecycle[int] = next_lifecycle(state.lifecycle, IDLE)
    # Rule 7: what the run still asked ends with it, unanswered.
    dropped = _permissions(state, drop_run(state.permissions, run))
    effects: list[ThreadEffect] = [*dropped.effects, Emit("close")]
    if state.turn_pending:
        effects.append(SettleTurn("closed"))
    return ThreadStep(replace(dropped.state, lifecycle=idle, turn_pending=False), tuple(effects))


def _turn_refused(state: ThreadSessionState, run: int) -> ThreadStep:
    # Rule 6: a run let go of (parked or stopped since the send) is closed already.
    if _is_let_go(state, run):
        return ThreadStep(state)
    if not isinstance(state.lifecycle, Streaming):
        raise InvariantError(f"run {run} refused a turn while {state.lifecycle.phase}")
    # Rule 7: its pending requests are denied before it is closed.
    denied = _permissions(state, deny_run(state.permissions, run))
    return ThreadStep(denied.state, (*denied.effects, CloseRun(run)))


def _close_through(state: ThreadSessionState, *, forget: bool) -> ThreadStep:
    session_id = None if forget else state.session_id
    # A thread session never enters `stopping`.
    if isinstance(state.lifecycle, Stopping):
        raise InvariantError("a thread session never enters stopping")
    settle: tuple[ThreadEffect, ...] = (SettleTurn("closed"),) if state.turn_pending else ()
    # Rule 4: still starting — settle now, close the run when it opens.
    if isinstance(state.lifecycle, Starting):
        return ThreadStep(
            replace(state, start_abandoned=True, session_id=session_id, turn_pending=False), settle
        )
    run = lifecycle_run(state.lifecycle)
    # Nothing open to close: only the session id changes.
    if run is None:
        return ThreadStep(replace(state, session_id=session_id))
    # Rule 7: the run's pending requests are denied before it is closed.
    denied = _permissions(state, deny_run(state.permissions, run))
    return ThreadStep(
        replace(
            denied.state,
            lifecycle=next_lifecycle(state.lifecycle, IDLE),
            session_id=session_id,
            turn_pending=False,
        ),
        (*denied.effects, CloseRun(run), *settle),
    )


# --- The pool --------------------------------------------------------------------


class ThreadRecord(TypedDict):
    """One thread's saved session (`.beebox` thread-session records, §3.4)."""

    sessionId: str
    createdAt: str
    lastUsedAt: str
    messageCount: int


def should_rotate(record: ThreadRecord, now: datetime) -> bool:
    """Whether the thread must start a fresh SDK session instead of resuming this one."""
    # Rotation by volume: the session has carried MAX_MESSAGES messages.
    if record["messageCount"] >= MAX_MESSAGES:
        return True
    created = parse_iso_timestamp(record["createdAt"])
    # An unreadable creation time cannot prove the session is young: rotate.
    if created is None:
        return True
    # Rotation by age: created MAX_AGE ago or more.
    return now - created >= MAX_AGE


@dataclass(frozen=True)
class PoolPlan:
    """What the pool does before a send: which thread to park, and what to resume."""

    park_thread: str | None
    resume_session_id: str | None
    rotated: bool


def plan_send(
    active_thread: str | None,
    records: Mapping[str, ThreadRecord],
    thread_ref: str,
    now: datetime,
) -> PoolPlan:
    """Plan a send on ``thread_ref``: park another active thread; resume unless rotated."""
    park = active_thread if active_thread is not None and active_thread != thread_ref else None
    record = records.get(thread_ref)
    if record is None:
        return PoolPlan(park, None, rotated=False)
    if should_rotate(record, now):
        return PoolPlan(park, None, rotated=True)
    return PoolPlan(park, record["sessionId"], rotated=False)


def record_after_success(
    record: ThreadRecord | None, session_id: str, now: datetime
) -> ThreadRecord:
    """The thread's record after a successful turn on ``session_id``."""
    stamp = to_iso_timestamp(now)
    # A new (or rotated) session starts a new record.
    if record is None or record["sessionId"] != session_id:
        return ThreadRecord(sessionId=session_id, createdAt=stamp, lastUsedAt=stamp, messageCount=1)
    return ThreadRecord(
        sessionId=session_id,
        createdAt=record["createdAt"],
        lastUsedAt=stamp,
        messageCount=record["messageCount"] + 1,
    )


def record_after_failure(
    records: Mapping[str, ThreadRecord], thread_ref: str
) -> dict[str, ThreadRecord]:
    """A failed turn deletes the thread's record (the session is stopped)."""
    return {ref: record for ref, record in records.items() if ref != thread_ref}
