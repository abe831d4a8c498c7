"""`ChatThreadSession`: one external chat thread's SDK run, on anyio.

Checked against `beebox_spec.thread_pool`'s thread-session model (`step`) by the
stateful pool machine in ``tests/stateful/``. Every phase write goes through
`beebox_spec.lifecycle.next_lifecycle`; the busy reading is `is_busy`; the turn
text is `compose_turn` (the `REMINDER` on a resumed session); replies are read
with `extract_chat_responses`. Spec sources:
`docs/sources.md#lifecycle-park-evict` ("Park and evict"),
`docs/sources.md#lifecycle-shared-code` ("Shared code") and
`docs/sources.md#facts-3-3` (§3.3).

The rules (numbered as in `beebox_spec.thread_pool`)
----------------------------------------------------

1. **Send.** `start_turn` raises `SessionBusyError` while busy (a turn in flight or
   a run starting): there is no queue. With an open run the turn goes onto it;
   from ``idle`` a run is started and the turn waits to be its first. The turn
   carries `REMINDER` whenever the session id is known at send time.
2. **Messages.** The one adapter's output is handled by an exhaustive switch
   (`assert_never` over the union): assistant text is buffered and each complete
   ``<chat-response>`` block is delivered at once; ``result`` delivers what is
   left, flips busy off, then announces the turn's text and `Done` and settles
   the turn; ``stream_event`` and ``task`` are deliberate skips, logged;
   ``system``, ``user`` and ``unknown`` are passed on as `Message`.
3. **Close.** The current run's end returns the session to ``idle``, emits
   `Closed` and settles a turn still in flight as ``closed``. A run the session
   let go of (parked or stopped) may still talk: it is ignored, and its end only
   emits `Closed`.
4. **Park and stop** close the run and go straight to ``idle`` (a thread session
   never enters ``stopping``); `park` keeps the session id, `stop` forgets it.
   While the run is still starting they settle the waiting turn at once and close
   the run the moment it opens, sending nothing on it.
5. **Session id.** The first id the SDK reports is kept.
6. **A refused turn** (ours). A run whose ``send`` raises on the turn in flight is
   closed, and its close settles the turn as ``closed`` (rule 3): left open, it
   would keep the session busy and the pool waiting on it for good.
7. **Permission requests** (ours). The run's asks wait in a `PermissionDesk`
   until answered (`answer_permission`), timed out on the injected clock,
   withdrawn, or ended with the run; park, stop and a refused turn's close deny
   them first. A run the session let go of is denied at once.

A turn is a `PendingTurn`: `send` is `start_turn` followed by
`PendingTurn.wait`, which returns how the turn settled (`TurnSettlement`) and
the replies it delivered. Each call takes effect when it is made, before it first
yields; its I/O (the turn onto the engine, the close) follows.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import assert_never

import anyio
from anyio.abc import TaskGroup
from anyio.lowlevel import cancel_shielded_checkpoint, checkpoint_if_cancelled

from beebox_impl.engine.protocol import Engine, Run, StartOptions
from beebox_impl.session.chat_events import (
    DEFAULT_EVENT_BUFFER,
    ChatResponse,
    Closed,
    Done,
    EventFanout,
    EventSubscription,
    Message,
    SessionStarted,
    ThreadSessionEvent,
    TurnText,
)
from beebox_impl.session.clock import SessionClock, SystemClock
from beebox_impl.session.permissions import PermissionDesk, PermissionEvent
from beebox_impl.session.pump import PumpCounters, pump_chat_run
from beebox_spec.errors import InvariantError
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
from beebox_spec.permissions import DEFAULT_TIMEOUT, PermissionReply, PermissionRequest
from beebox_spec.phases import Phase, is_busy
from beebox_spec.sdk_messages import AdaptedMessage, assistant_text, extract_chat_responses
from beebox_spec.thread_pool import SessionBusyError, TurnOutcome, compose_turn

__all__ = [
    "ChatThreadSession",
    "PendingTurn",
    "ResponseCallback",
    "SessionBusyError",
    "SettledCallback",
    "ThreadRun",
    "TurnSettlement",
]

_log = logging.getLogger(__name__)


@dataclass(eq=False)
class ThreadRun:
    """One engine run as a thread session holds it; ``number`` counts runs asked for."""

    number: int
    run: Run


@dataclass(frozen=True)
class TurnSettlement:
    """How a turn ended: ``done`` (its result came), ``closed`` (its run closed first,
    or the session was parked or stopped) or ``start-failed`` (with the reason)."""

    outcome: TurnOutcome
    reason: str | None = None


# Called with each reply as soon as it is complete, and with the turn's settlement.
ResponseCallback = Callable[[str], None]
SettledCallback = Callable[[TurnSettlement], None]


@dataclass(eq=False)
class PendingTurn:
    """One send on a thread session, from `start_turn` until it settles.

    ``text`` is what was sent (with the reminder, when resuming); ``responses``
    collects the turn's ``<chat-response>`` replies. ``on_response`` and
    ``on_settled`` are called synchronously, inside the session's step, so whoever
    passes them sees the reply or the settlement before any other task runs.
    """

    text: str
    on_response: ResponseCallback | None = None
    on_settled: SettledCallback | None = None
    responses: list[str] = field(default_factory=list)
    settlement: TurnSettlement | None = None
    _settled: anyio.Event = field(default_factory=anyio.Event)

    @property
    def settled(self) -> bool:
        return self.settlement is not None

    async def wait(self) -> TurnSettlement:
        """Wait until the turn settles; how it did."""
        await self._settled.wait()
        assert self.settlement is not None
        return self.settlement

    def _respond(self, response: str) -> None:
        self.responses.append(response)
        if self.on_response is not None:
            try:
                self.on_response(response)
            except Exception as error:
                # A listener's failure must not stop the replies after this one.
                _log.warning("a chat-response callback failed: %r", error)

    def _settle(self, settlement: TurnSettlement) -> None:
        if self.settlement is not None:
            return
        self.settlement = settlement
        self._settled.set()
        if self.on_settled is not None:
            self.on_settled(settlement)


class ChatThreadSession:
    """A chat thread's session (see the module doc). Its tasks run in ``task_group``."""

    def __init__(
        self,
        *,
        engine: Engine,
        box_root: Path,
        task_group: TaskGroup,
        session_id: str | None = None,
        view_base_url: str | None = None,
        system_prompt: str | None = None,
        model: str | None = None,
        env: Mapping[str, str] | None = None,
        on_run_closed: Callable[[ChatThreadSession], None] | None = None,
        clock: SessionClock | None = None,
        permission_timeout: timedelta = DEFAULT_TIMEOUT,
        on_permission_event: Callable[[PermissionEvent], None] | None = None,
    ) -> None:
        self._engine = engine
        self._box_root = box_root
        self._task_group = task_group
        self._view_base_url = view_base_url
        self._system_prompt = system_prompt
        self._model = model
        self._env = dict(env or {})
        self._on_run_closed = on_run_closed
        self._lifecycle: Lifecycle[ThreadRun] = IDLE
        self._start_abandoned = False
        self._session_id = session_id
        self._first_turn: str | None = None
        self._response_buffer = ""
        self._turn_text = ""
        self._pending: PendingTurn | None = None
        self._runs_started = 0
        self._idle = anyio.Event()
        self._idle.set()
        self._events = EventFanout[ThreadSessionEvent]()
        # Rule 7: the run's pending permission requests.
        self._permissions = PermissionDesk(
            task_group=task_group,
            clock=clock if clock is not None else SystemClock(),
            timeout=permission_timeout,
            publish=self._events.publish,
            on_event=on_permission_event,
        )
        self._released = False
        self.counters = PumpCounters()

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        *,
        engine: Engine,
        box_root: Path,
        session_id: str | None = None,
        view_base_url: str | None = None,
        system_prompt: str | None = None,
        model: str | None = None,
        clock: SessionClock | None = None,
        permission_timeout: timedelta = DEFAULT_TIMEOUT,
    ) -> AsyncIterator[ChatThreadSession]:
        """A thread session with a task group of its own; on exit its run is closed."""
        session: ChatThreadSession | None = None
        try:
            async with anyio.create_task_group() as task_group:
                session = cls(
                    engine=engine,
                    box_root=box_root,
                    task_group=task_group,
                    session_id=session_id,
                    view_base_url=view_base_url,
                    system_prompt=system_prompt,
                    model=model,
                    clock=clock,
                    permission_timeout=permission_timeout,
                )
                try:
                    yield session
                finally:
                    task_group.cancel_scope.cancel()
        finally:
            if session is not None:
                with anyio.CancelScope(shield=True):
                    await session.release()

    # --- Readings ------------------------------------------------------------------

    @property
    def phase(self) -> Phase:
        return self._lifecycle.phase

    @property
    def busy(self) -> bool:
        """A turn in flight or a run starting (`beebox_spec.phases.is_busy`)."""
        return is_busy(self._lifecycle.phase)

    @property
    def running(self) -> bool:
        """The session holds a run (it closes runs straight through to ``idle``)."""
        return has_open_run(self._lifecycle, close_requested=False)

    @property
    def session_id(self) -> str | None:
        return self._session_id

    @property
    def runs_started(self) -> int:
        """How many runs the session has asked the engine for."""
        return self._runs_started

    @property
    def pending_turn(self) -> PendingTurn | None:
        """The turn in flight, if any."""
        return self._pending

    @property
    def pending_permissions(self) -> list[PermissionRequest]:
        """The run's pending permission requests, in the order asked (rule 7)."""
        return self._permissions.pending_requests

    def subscribe(
        self, max_buffer: int = DEFAULT_EVENT_BUFFER
    ) -> EventSubscription[ThreadSessionEvent]:
        """Listen to the session's events from now on (see `beebox_impl.session.chat_events`)."""
        return self._events.subscribe(max_buffer)

    async def wait_idle(self) -> None:
        """Return once the session is not busy (its turn's ``done`` or its run's close)."""
        while self.busy:
            await self._idle.wait()
        await checkpoint_if_cancelled()

    # --- Caller operations -----------------------------------------------------------

    async def start_turn(
        self,
        text: str,
        *,
        on_response: ResponseCallback | None = None,
        on_settled: SettledCallback | None = None,
    ) -> PendingTurn:
        """Start a turn with ``text``; raises `SessionBusyError` while busy."""
        await checkpoint_if_cancelled()
        turn = compose_turn(text, self._session_id, self._view_base_url)
        pending = PendingTurn(turn, on_response, on_settled)
        handle, start = self._begin_turn(pending)
        if handle is not None:
            try:
                await handle.run.send(turn)
            except Exception as error:
                self._close_refusing_run(handle, error)
        elif start is not None:
            self._task_group.start_soon(
                self._start_run, start, self._session_id, name="thread run start"
            )
        await cancel_shielded_checkpoint()
        return pending

    async def send(self, text: str) -> TurnSettlement:
        """`start_turn`, then wait for the turn to settle."""
        pending = await self.start_turn(text)
        return await pending.wait()

    async def park(self) -> str | None:
        """Close the run and keep the session id (returned) for a later resume."""
        await self._close_through(forget=False)
        return self._session_id

    async def stop(self) -> None:
        """Close the run and forget the session id."""
        await self._close_through(forget=True)

    async def answer_permission(self, request_id: str, reply: PermissionReply) -> None:
        """Rule 7: answer the pending request ``request_id``; its run goes on at once.
        Raises `PermissionNotPending` for a request that is not pending."""
        await checkpoint_if_cancelled()
        self._permissions.answer(request_id, reply)
        await cancel_shielded_checkpoint()

    async def release(self) -> None:
        """Close whatever run the session holds without changing its state (shutdown);
        what it waits on is denied first."""
        self._released = True
        handle = lifecycle_run(self._lifecycle)
        if handle is not None:
            self._permissions.deny_run(handle.number)
            await self._close_run(handle)

    async def _ask_permission(
        self, run_number: int, request: PermissionRequest
    ) -> PermissionReply | None:
        """Rule 7: run ``run_number`` asks ``request`` (its start's ``ask_permission``)."""
        handle = lifecycle_run(self._lifecycle)
        let_go = handle is None or handle.number != run_number or self._released
        return await self._permissions.ask(run_number, request, run_closing=let_go)

    def _deny_permissions_of(self, handle: ThreadRun) -> None:
        # Rule 7: a run the session closes is denied what it still waits on, first.
        self._permissions.deny_run(handle.number)

    # --- State halves ----------------------------------------------------------------

    def _set_lifecycle(self, target: Lifecycle[ThreadRun]) -> None:
        self._lifecycle = next_lifecycle(self._lifecycle, target)
        self._busy_changed()

    def _busy_changed(self) -> None:
        # `wait_idle` waits on this event: set exactly while the session is not busy.
        if not self.busy:
            self._idle.set()
        elif self._idle.is_set():
            self._idle = anyio.Event()

    def _begin_turn(self, pending: PendingTurn) -> tuple[ThreadRun | None, int | None]:
        """Rule 1: the run to send on, or the number of the run to start."""
        # No queue here: a busy session refuses outright.
        if self.busy:
            raise SessionBusyError
        handle = lifecycle_run(self._lifecycle)
        self._pending = pending
        if handle is not None:
            self._set_lifecycle(Streaming(handle))
            self._turn_text = ""
            self._response_buffer = ""
            return handle, None
        self._set_lifecycle(Starting())
        self._runs_started += 1
        self._first_turn = pending.text
        return None, self._runs_started

    def _settle(self, settlement: TurnSettlement) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending._settle(settlement)

    def _respond(self, responses: list[str]) -> None:
        for response in responses:
            if self._pending is not None:
                self._pending._respond(response)
            self._events.publish(ChatResponse(response))

    def _run_opened(self, handle: ThreadRun) -> str | None:
        """The first turn to send on the new run; None when the start was abandoned."""
        ready: Lifecycle[ThreadRun] = Ready(handle)
        self._set_lifecycle(ready)
        # Rule 4: parked or stopped while starting — close at once, send nothing.
        if self._start_abandoned:
            self._set_lifecycle(IDLE)
            self._start_abandoned = False
            self._first_turn = None
            return None
        if self._first_turn is None:
            raise InvariantError("a thread run started with no turn waiting for it")
        turn, self._first_turn = self._first_turn, None
        self._set_lifecycle(Streaming(handle))
        self._turn_text = ""
        self._response_buffer = ""
        return turn

    def _run_failed_to_open(self, reason: str) -> None:
        self._set_lifecycle(IDLE)
        self._first_turn = None
        # An abandoned start already settled its turn when it was parked or stopped.
        if self._start_abandoned:
            self._start_abandoned = False
            self._pending = None
            return
        self._settle(TurnSettlement("start-failed", reason))

    def _is_let_go(self, handle: ThreadRun) -> bool:
        return lifecycle_run(self._lifecycle) is not handle

    def _handle_message(self, handle: ThreadRun, message: AdaptedMessage) -> None:
        # Rule 3: a run the session let go of may still say something; nobody listens.
        if self._is_let_go(handle):
            return
        session_id = message.get("session_id")
        # Rule 5: the first session id the SDK reports is the session's.
        if self._session_id is None and isinstance(session_id, str) and session_id:
            self._session_id = session_id
            self._events.publish(SessionStarted(session_id))
        if message["type"] == "assistant":
            text = assistant_text(message)
            responses, rest = extract_chat_responses(self._response_buffer + text)
            self._turn_text += text
            self._response_buffer = rest
            self._respond(responses)
        elif message["type"] == "result":
            responses, rest = extract_chat_responses(self._response_buffer)
            self._respond(responses)
            # Busy flips off before anyone hears the turn is over.
            self._lifecycle = after_turn_result(self._lifecycle)
            self._busy_changed()
            self._response_buffer = rest
            pending, self._pending = self._pending, None
            self._events.publish(TurnText(self._turn_text))
            self._events.publish(Done())
            if pending is not None:
                pending._settle(TurnSettlement("done"))
        elif message["type"] == "stream_event" or message["type"] == "task":
            # Partial deltas and background-task lifecycle are not delivered on this path.
            _log.debug("thread session skips a %s message", message["type"])
        elif (
            message["type"] == "system" or message["type"] == "user" or message["type"] == "unknown"
        ):
            self._events.publish(Message(message))
        else:
            assert_never(message)

    def _run_ended(self, handle: ThreadRun) -> None:
        if self._is_let_go(handle):
            self._events.publish(Closed(None))
            return
        # Rule 7: what the run still asked ends with it, unanswered.
        self._permissions.drop_run(handle.number)
        self._set_lifecycle(IDLE)
        self._events.publish(Closed(None))
        self._settle(TurnSettlement("closed"))
        if self._on_run_closed is not None:
            self._on_run_closed(self)

    def _begin_close_through(self, *, forget: bool) -> ThreadRun | None:
        """Rule 4: straight to ``idle``; the run to close, if one is open."""
        # A thread session never enters `stopping`.
        if isinstance(self._lifecycle, Stopping):
            raise InvariantError("a thread session never enters stopping")
        if forget:
            self._session_id = None
        if isinstance(self._lifecycle, Starting):
            self._start_abandoned = True
            self._settle(TurnSettlement("closed"))
            return None
        handle = lifecycle_run(self._lifecycle)
        if handle is None:
            return None
        self._deny_permissions_of(handle)
        self._set_lifecycle(IDLE)
        # The turn in flight is let go with the run; `_close_through` settles it.
        self._pending = None
        return handle

    # --- I/O halves --------------------------------------------------------------

    async def _close_through(self, *, forget: bool) -> None:
        await checkpoint_if_cancelled()
        had_turn = self._pending
        handle = self._begin_close_through(forget=forget)
        if handle is not None:
            # Spec order: the run is closed, then the turn it carried settles.
            await self._close_run(handle)
            if had_turn is not None:
                had_turn._settle(TurnSettlement("closed"))
        await cancel_shielded_checkpoint()

    def _close_refusing_run(self, handle: ThreadRun, error: Exception) -> None:
        """Rule 6: a run that refused the turn in flight is closed; its close settles it."""
        _log.warning("thread run %d refused a turn: %r", handle.number, error)
        # Parked or stopped since (closed already), or the turn ended after all.
        if self._is_let_go(handle) or not isinstance(self._lifecycle, Streaming):
            return
        self._deny_permissions_of(handle)
        # In a task of the session's: a caller cancelled now must not leave it open.
        self._task_group.start_soon(
            self._close_run, handle, name=f"thread run {handle.number} close (turn refused)"
        )

    async def _close_run(self, handle: ThreadRun) -> None:
        try:
            await handle.run.close()
        except Exception as error:
            _log.warning("closing thread run %d failed: %r", handle.number, error)

    async def _start_run(self, number: int, resume_session_id: str | None) -> None:
        options = StartOptions(
            cwd=self._box_root,
            resume_session_id=resume_session_id,
            # Given every time; the engine gives it to a new session only (StartOptions).
            system_prompt=self._system_prompt,
            model=self._model,
            env=self._env,
            ask_permission=partial(self._ask_permission, number),
        )
        try:
            run = await self._engine.start(options)
        except Exception as error:
            _log.warning("starting thread run %d failed: %r", number, error)
            self._run_failed_to_open(str(error) or type(error).__name__)
            return
        handle = ThreadRun(number, run)
        first_turn = self._run_opened(handle)
        self._task_group.start_soon(self._pump, handle, name=f"thread run {number} pump")
        if first_turn is None:
            await self._close_run(handle)
            return
        try:
            await run.send(first_turn)
        except Exception as error:
            self._close_refusing_run(handle, error)

    async def _pump(self, handle: ThreadRun) -> None:
        await pump_chat_run(
            handle.run,
            on_message=partial(self._handle_message, handle),
            on_close=partial(self._on_close, handle),
            counters=self.counters,
        )

    async def _on_close(self, handle: ThreadRun) -> None:
        self._run_ended(handle)
