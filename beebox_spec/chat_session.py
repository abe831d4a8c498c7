"""The whole-box `ChatSession` as a pure state machine: state + event → state + effects.

Spec sources, in `docs/sources.md` (a bare §N.M below is its anchor `facts-N-M`):
`docs/sources.md#lifecycle-contract` ("The contract": queue and drain, stop and
restart, the busy-flip ordering, the close-window race) and
`docs/sources.md#facts-3-2` (§3.2: `send`, `startRun`, the consume loop's close
handler, `handleMessage`, `enqueue`, `drainQueue`, `stop`, `restart`,
`resetSession`, `interrupt`). Going further than the original:
`docs/design.md#design-5-persisted-queue` (§5).

Theory of operation
-------------------

The session is driven by two kinds of event. The *caller* sends, enqueues, stops,
restarts, resets and interrupts. The *engine* reports on the run the session asked
for: it started (or failed to), an SDK message arrived, the run's message stream
ended. `step` takes the current `ChatSessionState` and one event and returns the
next state and the *effects* the session asks of the world, in order: start a run,
send a turn, close a run, save the session id, emit an event. Nothing here waits,
reads a clock or touches a file; the production session (`beebox_impl.session`)
performs the effects and is checked against this model, step by step, by stateful
tests.

The rules, in the order a reader meets them:

1. **Send.** A send while the session is busy (`phases.is_busy`: a turn in
   flight, or a run still starting) is refused; the caller enqueues instead. With
   an open run the session moves ``ready → streaming`` and sends the turn. With no
   run and the phase ``idle`` it moves to ``starting`` and asks for a run; the text
   is accepted and becomes the run's first turn. With no open run and any other
   phase the session is in the *close window* (the run's handle is closed but its
   close handler has not yet brought the phase back to ``idle``): the send is
   refused rather than racing a second run onto the session.
2. **Start.** When the run opens (``starting → ready``) its first turn is sent at
   once (``ready → streaming``): the text that started it, followed by everything
   enqueued while it was starting, joined with ``"\\n\\n"`` — a message that arrived
   mid-start rides the starting run's first turn instead of starting a second run.
   When the start fails the phase returns to ``idle`` and the queue is kept for
   the next run. A caller's text that was to be the first turn is reported failed
   (its sender hears it); texts that came from a drain go back to the head of the
   queue, since they were accepted long before and nobody waits on this start.
3. **Enqueue** appends to the queue whatever the phase. **Enqueue, then drain**
   (ours, `docs/spec-decisions.md#enqueue-then-drain`) appends, then drains as
   rule 4 does: a text its sender has already
   been told is queued (a send answered from another thread, on what it read of
   the session there) that reaches a session able to take a send (the turn
   ended meanwhile) rides a turn at once, behind what was queued before it,
   instead of waiting in an idle session's queue; should that turn's run fail
   to start, it goes back to the head of the queue with the rest (rule 2).
4. **Drain.** After a turn's ``result`` and after an unexpected run death, the
   queue drains: all queued texts joined with ``"\\n\\n"`` are sent as one turn —
   onto the open run after a result, onto a fresh run after a death. A drain that
   would be refused (the close window) leaves the queue as it is, so an accepted
   message is never dropped on the floor
   (ours, `docs/spec-decisions.md#drain-keeps-queue`).
5. **Result.** On a turn's ``result`` the lifecycle advances first
   (`lifecycle.after_turn_result`: the session stops reading busy), *then* ``done``
   is emitted, then the turn's text and its feature deltas are applied, then the
   queue drains — so a listener reacting to the turn's end can act on a session
   that is no longer busy (the busy-flip ordering). The turn's text then starts
   again empty (ours, `docs/spec-decisions.md#turn-text-per-result`): a turn Claude
   Code starts itself, with no send (a background sub-agent's notification), is a
   turn of its own, and its text and feature deltas are its alone.
6. **Stop vs restart.** ``stop()`` (only with an open run in ``ready`` or
   ``streaming``) moves to ``stopping``, remembers whether a turn was in flight,
   clears the queue and closes the run. ``restart()`` closes the open run and
   leaves the phase alone. The one close handler tells them apart by the phase:
   ``stopping`` is the intentional stop (no drain, close code ``0``); anything
   else is a run that died or was restarted, and a non-empty queue drains into a
   fresh run (close code ``None``). ``reset_session()`` is ``stop()`` plus
   forgetting the saved session id.
7. **Session id.** An SDK message carrying a session id other than the one the
   session holds is the SDK assigning one: it is saved and announced.
8. **A refused turn** (ours, `docs/spec-decisions.md#refused-turn-closes-run`). A
   run whose send raises has refused the turn (the engine reports it,
   `TurnRefused`): the session closes that run as ``restart()`` does (unless a
   close is already asked for), so it is never left ``streaming`` a turn no
   engine took, busy for good. A turn drained from the
   queue onto that open run goes back to the head of the queue, and the close
   handler drains it into a fresh run (rule 6). A fresh run's first turn does not
   go back (a start that keeps failing this way would start runs without end),
   nor does a caller's own turn (the caller hears the error and may enqueue the
   text itself); nor does anything in ``stopping``, whose stop cleared the queue.
   What does not go back is the engine's to have lost, as a turn in flight when
   its run dies is.
9. **A reset forgets for good** (ours, `docs/spec-decisions.md#reset-forgets`). The
   run a reset finds (the one it stops, or one already closing) may still deliver
   messages before its close arrives, each carrying the session id the reset
   forgot; rule 7 takes no id from that run (``forgotten_run``, until its close),
   so the next run starts a new session as the reset asked. A run still starting
   at the reset was asked to resume that session and is not stopped (rule 6): it
   opens in it, and its id is the session's again.
10. **Permission requests** (ours, `docs/spec-decisions.md#permission-requests`),
   by `beebox_spec.permissions`. A run the session holds may ask for a person's
   answer before a tool runs; the request is pending until answered, timed out,
   withdrawn, or ended with its run. Stop, reset and restart — and closing a run
   that refused a turn — deny the run's pending requests before the close
   (``permission-ended``, how ``stopped``); a run's close ends the rest
   unanswered. A request asked by a run the session is
   closing is denied at once. Requests change no phase: a turn waiting for an
   answer is still in flight, so the session reads busy and sends are queued.
11. **Live text** (ours, `docs/spec-decisions.md#live-text`), as
   `beebox_spec.sdk_messages` says under "Live text". A ``stream_event`` is a piece
   of a message, not a message: it is not emitted as ``message``. Each message moves
   the session's live text as `sdk_messages.live_text_after` says, and a text delta
   is emitted as ``turn-delta``, in order: its text, and whether it is the first of
   its message (`sdk_messages.LiveTextDelta`: the live text was None before it, so
   a listener drops what streamed before, a retried attempt's text included). The
   run's close drops the live text, and a run the session asked to close (stop,
   reset, restart, a refused turn) streams none: its text deltas are not emitted and
   the live text reads None (`session_live_text`) from the request on. The live
   text is the session's state only; it enters no effect but ``turn-delta``.
   A sub-agent's messages (`sdk_messages`, "A sub-agent's messages": a Task or
   Agent call's work, each naming its call) are the call's, not the turn's: its
   complete ones are emitted as ``message`` like the main conversation's, but none
   adds to the turn's text (``turn-text``, rule 5) or moves the live text, and its
   text deltas are not ``turn-delta``.
12. **A turn the agent starts itself**
   (ours, `docs/spec-decisions.md#self-started-turns`). Claude Code starts a turn no
   send began when a sub-agent it ran in the background finishes (its
   ``<task-notification>``). A message of that turn — an ``assistant`` message or a
   ``stream_event`` of the main conversation (`starts_a_turn`) — that arrives while
   the session is ``ready`` moves it to ``streaming`` first: the session reads busy,
   a send is queued, and the turn's ``result`` ends it as rule 5 ends any turn.

The engine events and run requests are `beebox_spec.run_protocol`'s, shared
with the thread session. Engine events only arrive about the current run; an
engine event in ``idle`` or ``starting`` (other than the start's own outcome), or
about another run, is a bug in whatever delivers them and raises
`InvariantError`, like any illegal lifecycle move.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal, TypeAlias, assert_never

from beebox_spec.errors import InvariantError
from beebox_spec.lifecycle import (
    IDLE,
    Lifecycle,
    Ready,
    Starting,
    Stopping,
    Streaming,
    accepts_send,
    after_turn_result,
    has_open_run,
    lifecycle_run,
    next_lifecycle,
    session_is_busy,
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
from beebox_spec.phases import Phase
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
from beebox_spec.sdk_messages import (
    AdaptedMessage,
    LiveTextDelta,
    accumulate_assistant_text,
    live_text_after,
    sub_agent_call,
    text_delta,
)

__all__ = [
    "QUEUE_SEPARATOR",
    "AnswerAsk",
    "AnswerPermission",
    "ApplyFeatureDeltas",
    "ChatSessionEvent",
    "ChatSessionState",
    "ChatSessionStep",
    "CloseRun",
    "Effect",
    "Emit",
    "EmittedEvent",
    "Enqueue",
    "EnqueueThenDrain",
    "ForgetSessionId",
    "Interrupt",
    "InterruptRun",
    "Observation",
    "PermissionAsked",
    "PermissionNotPending",
    "PermissionTimedOut",
    "PermissionWithdrawn",
    "ReportStartFailed",
    "ResetSession",
    "Restart",
    "RunClosed",
    "RunStartFailed",
    "RunStarted",
    "SaveSessionId",
    "SdkMessageArrived",
    "Send",
    "SendTurn",
    "StartRun",
    "Stop",
    "TurnRefused",
    "can_accept_send",
    "combine_queued_texts",
    "initial_state",
    "observe",
    "session_busy",
    "session_live_text",
    "session_running",
    "starts_a_turn",
    "step",
]

# §3.2 `combineQueuedInputs`: queued texts become one turn, joined by a blank line.
QUEUE_SEPARATOR = "\n\n"


# --- State -----------------------------------------------------------------------


@dataclass(frozen=True)
class ChatSessionState:
    """Everything the session's behaviour depends on.

    ``lifecycle`` carries the run as its ordinal (1 for the first run asked for).
    ``close_requested`` is true once the session asked to close the current run and
    the run's close has not arrived yet: the close window.
    ``first_turn`` holds the texts waiting for a starting run to open (non-empty
    exactly while ``starting``); ``first_turn_drained`` says they came from the queue
    rather than from a caller's send, so a failed start puts them back.
    ``turn_drained`` holds the texts of the turn in flight that a drain sent onto
    an open run, for a refused turn to put back (rule 8); empty otherwise.
    ``forgotten_run`` is the run a reset found, whose messages assign no session id,
    until its close (rule 9); None otherwise.
    ``permissions`` are the pending permission requests, in the order asked (rule 10).
    ``live_text`` is the text so far of the assistant message in progress (rule 11).
    """

    lifecycle: Lifecycle[int] = IDLE
    close_requested: bool = False
    session_id: str | None = None
    queue: tuple[str, ...] = ()
    first_turn: tuple[str, ...] = ()
    first_turn_drained: bool = False
    turn_text: str = ""
    runs_started: int = 0
    turn_drained: tuple[str, ...] = ()
    forgotten_run: int | None = None
    permissions: tuple[PendingPermission, ...] = ()
    live_text: str | None = None


def initial_state(session_id: str | None = None) -> ChatSessionState:
    """A session with no run, holding the session id it loaded (if any)."""
    return ChatSessionState(session_id=session_id)


def session_running(state: ChatSessionState) -> bool:
    """`isRunning()`: the session holds a run it has not asked to close."""
    return has_open_run(state.lifecycle, close_requested=state.close_requested)


def session_busy(state: ChatSessionState) -> bool:
    """`isBusy()`: the session-level reading (``starting`` counts as busy)."""
    return session_is_busy(state.lifecycle)


def session_live_text(state: ChatSessionState) -> str | None:
    """The live text a reader sees (rule 11): None once the run's close is asked for."""
    return None if state.close_requested else state.live_text


def can_accept_send(state: ChatSessionState) -> bool:
    """Whether `Send` would be accepted now (rule 1)."""
    return accepts_send(state.lifecycle, close_requested=state.close_requested)


def combine_queued_texts(texts: tuple[str, ...]) -> str:
    """The one turn a list of queued texts becomes (§3.2 `combineQueuedInputs`)."""
    return QUEUE_SEPARATOR.join(texts)


# --- Events ----------------------------------------------------------------------


@dataclass(frozen=True)
class Enqueue:
    """The caller queues a message for the next turn (`enqueue`)."""

    text: str


@dataclass(frozen=True)
class EnqueueThenDrain:
    """A message its sender was told is queued reaches the session (rule 3)."""

    text: str


@dataclass(frozen=True)
class Restart:
    """The caller restarts a wedged run: close it; the close handler drains."""


@dataclass(frozen=True)
class ResetSession:
    """`stop()` plus forgetting the saved session id."""


@dataclass(frozen=True)
class Interrupt:
    """The caller interrupts the turn in flight (the run stays open)."""


ChatSessionEvent: TypeAlias = (
    Send
    | Enqueue
    | EnqueueThenDrain
    | Stop
    | Restart
    | ResetSession
    | Interrupt
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


# --- Effects ---------------------------------------------------------------------


@dataclass(frozen=True)
class InterruptRun:
    """Interrupt the turn in flight on run ``run``."""

    run: int


@dataclass(frozen=True)
class SaveSessionId:
    """Persist the session id (``.beebox/chat-session-id.json``)."""

    session_id: str


@dataclass(frozen=True)
class ForgetSessionId:
    """Delete the persisted session id."""


@dataclass(frozen=True)
class ApplyFeatureDeltas:
    """Apply the ``<chat-app>`` feature deltas of a finished turn's text."""

    turn_text: str


@dataclass(frozen=True)
class ReportStartFailed:
    """The run asked for could not be opened.

    ``failed_text`` is the caller's send that was to be its first turn and is now
    undeliverable; ``None`` when the first turn was a drain, whose texts went back
    to the head of the queue.
    """

    reason: str
    failed_text: str | None


EmittedEvent: TypeAlias = Literal[
    "session-id",
    "message",
    "task",
    "turn-delta",
    "done",
    "turn-text",
    "close",
    "permission-request",
    "permission-ended",
]


Effect: TypeAlias = (
    StartRun
    | SendTurn
    | CloseRun
    | AnswerAsk
    | InterruptRun
    | SaveSessionId
    | ForgetSessionId
    | ApplyFeatureDeltas
    | ReportStartFailed
    | Emit[EmittedEvent]
)


@dataclass(frozen=True)
class ChatSessionStep:
    """The outcome of one event: the next state, the effects in order, and for a
    `Send` whether it was accepted (``None`` for every other event)."""

    state: ChatSessionState
    effects: tuple[Effect, ...] = field(default=())
    accepted: bool | None = None


# --- The transition function -----------------------------------------------------


def step(state: ChatSessionState, event: ChatSessionEvent) -> ChatSessionStep:  # noqa: PLR0912 — one case an event kind: the table reads best whole
    """Apply one event to the session. Raises `InvariantError` on an impossible engine event."""
    match event:
        case Send(text=text):
            return _send(state, (text,), drained=False)
        case Enqueue(text=text):
            return ChatSessionStep(replace(state, queue=(*state.queue, text)))
        case EnqueueThenDrain(text=text):
            return _drain(replace(state, queue=(*state.queue, text)))
        case Stop():
            return _stop(state)
        case Restart():
            return _restart(state)
        case ResetSession():
            stopped = _stop(state)
            # Rule 9: the run it finds (stopped, or closing already) gives no id back.
            forgotten = replace(
                stopped.state, session_id=None, forgotten_run=lifecycle_run(state.lifecycle)
            )
            return ChatSessionStep(forgotten, (*stopped.effects, ForgetSessionId()))
        case Interrupt():
            run = lifecycle_run(state.lifecycle)
            # Only an open run has a turn to interrupt; otherwise there is nothing to do.
            if run is None or state.close_requested:
                return ChatSessionStep(state)
            return ChatSessionStep(state, (InterruptRun(run),))
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
            # Asks come from the current run only, while the session holds it.
            if lifecycle_run(state.lifecycle) != run:
                raise InvariantError(f"permission asked by run {run} while {state.lifecycle.phase}")
            closing = state.close_requested or isinstance(state.lifecycle, Stopping)
            return _permissions(
                state, ask_permission(state.permissions, run, request, run_closing=closing)
            )
        case PermissionWithdrawn() | AnswerPermission() | PermissionTimedOut():
            return _permissions(state, settle(state.permissions, event))
        case _:
            assert_never(event)


def _permissions(state: ChatSessionState, changed: PermissionStep) -> ChatSessionStep:
    """Rule 10: the pending requests after a permission rule, its answers, then its
    reports (the ends, then a new request)."""
    return ChatSessionStep(replace(state, permissions=changed.pending), in_order(changed, Emit))


def _send(state: ChatSessionState, texts: tuple[str, ...], *, drained: bool) -> ChatSessionStep:
    """Send ``texts`` as one turn: a caller's one text, or the drained queue."""
    # Rule 1: a busy session, or one in the close window, refuses; the caller enqueues.
    if not can_accept_send(state):
        return ChatSessionStep(state, accepted=False)
    run = lifecycle_run(state.lifecycle)
    # An open run that is not busy is `ready`: the turn goes onto it.
    if run is not None:
        streaming = next_lifecycle(state.lifecycle, Streaming(run))
        turn = SendTurn(run, combine_queued_texts(texts))
        sending = replace(
            state, lifecycle=streaming, turn_text="", turn_drained=texts if drained else ()
        )
        return ChatSessionStep(sending, (turn,), True)
    # No run and idle: ask for one; the texts become its first turn.
    starting: Lifecycle[int] = next_lifecycle(state.lifecycle, Starting())
    run_number = state.runs_started + 1
    return ChatSessionStep(
        replace(
            state,
            lifecycle=starting,
            first_turn=texts,
            first_turn_drained=drained,
            runs_started=run_number,
        ),
        (StartRun(run_number, state.session_id),),
        True,
    )


def _run_started(state: ChatSessionState) -> ChatSessionStep:
    # The engine can only report a start the session asked for.
    if not isinstance(state.lifecycle, Starting):
        raise InvariantError(f"run started while {state.lifecycle.phase}: no start was asked for")
    run = state.runs_started
    ready = next_lifecycle(state.lifecycle, Ready(run))
    # Rule 2: the first turn carries the starting texts and whatever queued meanwhile.
    text = combine_queued_texts((*state.first_turn, *state.queue))
    streaming = next_lifecycle(ready, Streaming(run))
    return ChatSessionStep(
        replace(
            state,
            lifecycle=streaming,
            close_requested=False,
            first_turn=(),
            first_turn_drained=False,
            queue=(),
            turn_text="",
        ),
        (SendTurn(run, text),),
    )


def _run_start_failed(state: ChatSessionState, reason: str) -> ChatSessionStep:
    # The engine can only fail a start the session asked for.
    if not isinstance(state.lifecycle, Starting):
        raise InvariantError(
            f"run start failed while {state.lifecycle.phase}: no start was asked for"
        )
    idle: Lifecycle[int] = next_lifecycle(state.lifecycle, IDLE)
    cleared = replace(state, lifecycle=idle, first_turn=(), first_turn_drained=False)
    # Rule 2: drained texts were accepted long ago; they go back to the head of the queue.
    if state.first_turn_drained:
        requeued = replace(cleared, queue=(*state.first_turn, *state.queue))
        return ChatSessionStep(requeued, (ReportStartFailed(reason, None),))
    (text,) = state.first_turn
    return ChatSessionStep(cleared, (ReportStartFailed(reason, text),))


def starts_a_turn(message: AdaptedMessage) -> bool:
    """Rule 12: whether ``message``, arriving while the session is ``ready``, is the
    agent's own turn beginning: an ``assistant`` message or a ``stream_event`` of the
    main conversation (a sub-agent's belong to the call that started it)."""
    if message["type"] != "assistant" and message["type"] != "stream_event":
        return False
    return sub_agent_call(message) is None


def _message_arrived(state: ChatSessionState, run: int, message: AdaptedMessage) -> ChatSessionStep:
    # Messages come only from the current run, while it exists.
    if lifecycle_run(state.lifecycle) != run:
        raise InvariantError(f"SDK message from run {run} while {state.lifecycle.phase}")
    effects: list[Effect] = []
    session_id = message.get("session_id")
    # Rule 7: an id other than the one held is the SDK assigning (or re-assigning) one;
    # rule 9: not from the run a reset found.
    if (
        isinstance(session_id, str)
        and session_id
        and session_id != state.session_id
        and run != state.forgotten_run
    ):
        state = replace(state, session_id=session_id)
        effects += [SaveSessionId(session_id), Emit("session-id", session_id)]

    if message["type"] == "task":
        return ChatSessionStep(state, (*effects, Emit("task", message)))
    # Rule 12: the agent began a turn of its own.
    if isinstance(state.lifecycle, Ready) and starts_a_turn(message):
        state = replace(state, lifecycle=next_lifecycle(state.lifecycle, Streaming(run)))
    if message["type"] == "stream_event":
        return _partial_message(state, message, effects)
    state = replace(
        state,
        turn_text=accumulate_assistant_text(state.turn_text, message),
        live_text=live_text_after(state.live_text, message),
    )
    effects.append(Emit("message", message))
    if message["type"] != "result":
        return ChatSessionStep(state, tuple(effects))

    # Rule 5: busy flips off first, then `done`, then the turn's text and features, then drain.
    turn_text = state.turn_text
    state = replace(
        state, lifecycle=after_turn_result(state.lifecycle), turn_drained=(), turn_text=""
    )
    effects.append(Emit("done"))
    if turn_text:
        effects += [Emit("turn-text", turn_text), ApplyFeatureDeltas(turn_text)]
    drained = _drain(state)
    return ChatSessionStep(drained.state, (*effects, *drained.effects))


def _partial_message(
    state: ChatSessionState, message: AdaptedMessage, effects: list[Effect]
) -> ChatSessionStep:
    """Rule 11: a stream event moves the live text, and a text delta is emitted
    (after ``effects``, the session id's)."""
    # A run the session asked to close streams no live text.
    if state.close_requested:
        return ChatSessionStep(state, tuple(effects))
    first = state.live_text is None
    state = replace(state, live_text=live_text_after(state.live_text, message))
    delta = text_delta(message)
    if delta is not None:
        effects.append(Emit("turn-delta", LiveTextDelta(delta, first)))
    return ChatSessionStep(state, tuple(effects))


def _run_closed(state: ChatSessionState, run: int) -> ChatSessionStep:
    # Only the current run can end: the session never lets go of a run before its close.
    if lifecycle_run(state.lifecycle) != run:
        raise InvariantError(f"run {run} closed while {state.lifecycle.phase}")
    # Rule 6: `stopping` is the intentional-stop signal; anything else is a death or restart.
    intentional = isinstance(state.lifecycle, Stopping)
    idle: Lifecycle[int] = next_lifecycle(state.lifecycle, IDLE)
    # Rule 10: what the run still asked ends with it, unanswered.
    dropped = _permissions(state, drop_run(state.permissions, run))
    # Rule 11: the run's live text goes with it.
    state = replace(
        dropped.state,
        lifecycle=idle,
        close_requested=False,
        turn_drained=(),
        forgotten_run=None,
        live_text=None,
    )
    closed: Effect = Emit("close", 0 if intentional else None)
    close = (*dropped.effects, closed)
    if intentional:
        return ChatSessionStep(state, close)
    drained = _drain(state)
    return ChatSessionStep(drained.state, (*close, *drained.effects))


def _turn_refused(state: ChatSessionState, run: int) -> ChatSessionStep:
    # Only the current run's turn in flight can be refused: a send is made in `streaming`
    # (and a stop may have come since).
    if lifecycle_run(state.lifecycle) != run or not isinstance(
        state.lifecycle, Streaming | Stopping
    ):
        raise InvariantError(f"run {run} refused a turn while {state.lifecycle.phase}")
    # Rule 8: a drained turn goes back to the head of the queue, unless a stop cleared it.
    back = () if isinstance(state.lifecycle, Stopping) else state.turn_drained
    state = replace(state, queue=(*back, *state.queue), turn_drained=())
    if state.close_requested:
        return ChatSessionStep(state)
    # Rule 10: closed as restart() closes it, its pending requests denied first.
    denied = _permissions(state, deny_run(state.permissions, run))
    return ChatSessionStep(
        replace(denied.state, close_requested=True), (*denied.effects, CloseRun(run))
    )


def _stop(state: ChatSessionState) -> ChatSessionStep:
    # Stop acts only on an open run that is ready or mid-turn.
    if not session_running(state) or not isinstance(state.lifecycle, Ready | Streaming):
        return ChatSessionStep(state)
    run = state.lifecycle.run
    stopping = next_lifecycle(
        state.lifecycle, Stopping(run, was_busy=isinstance(state.lifecycle, Streaming))
    )
    # Rule 10: the run's pending requests are denied before it is closed.
    denied = _permissions(state, deny_run(state.permissions, run))
    return ChatSessionStep(
        replace(denied.state, lifecycle=stopping, queue=(), close_requested=True),
        (*denied.effects, CloseRun(run)),
    )


def _restart(state: ChatSessionState) -> ChatSessionStep:
    run = lifecycle_run(state.lifecycle)
    # Restart acts only on an open run; the phase stays, so the close handler drains.
    if run is None or state.close_requested:
        return ChatSessionStep(state)
    # Rule 10: the run's pending requests are denied before it is closed.
    denied = _permissions(state, deny_run(state.permissions, run))
    return ChatSessionStep(
        replace(denied.state, close_requested=True), (*denied.effects, CloseRun(run))
    )


def _drain(state: ChatSessionState) -> ChatSessionStep:
    # Rule 4: nothing queued, or a send that would be refused, leaves the queue alone.
    if not state.queue or not can_accept_send(state):
        return ChatSessionStep(state)
    sent = _send(replace(state, queue=()), state.queue, drained=True)
    return ChatSessionStep(sent.state, sent.effects)


# --- What an observer sees -------------------------------------------------------


@dataclass(frozen=True)
class Observation:
    """The observable reading of a session: what the stateful tests compare."""

    phase: Phase
    busy: bool
    running: bool
    queue: tuple[str, ...]
    permissions: tuple[str, ...]
    live_text: str | None


def observe(state: ChatSessionState) -> Observation:
    """The session's phase, busy and running readings, its queue, the ids of its
    pending permission requests and its live text."""
    return Observation(
        phase=state.lifecycle.phase,
        busy=session_busy(state),
        running=session_running(state),
        queue=state.queue,
        permissions=tuple(held.id for held in state.permissions),
        live_text=session_live_text(state),
    )
