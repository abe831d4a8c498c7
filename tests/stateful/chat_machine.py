"""The stateful machine that proves `beebox_impl.session.ChatSession` equal to
`beebox_spec.chat_session`.

Each example opens one blocking portal on the machine's backend, opens a
`ChatSession` on it (in-memory stores, a `HoldingEngine` over `ScriptedEngine`),
and drives it and the spec model with the same commands: the caller's (send,
enqueue, stop, restart, reset, interrupt, a box restart) and the engine's (a start
answered or failed, a message, a run ending, a held close released). Rules are
synchronous; each runs its command through the portal and settles. After every
step the machine compares what an observer sees:

- phase, busy, running and the queue (`beebox_spec.chat_session.observe`);
- the session id held, and the one persisted;
- the queue rows persisted (the queue, plus a drained first turn still starting);
- every run the engine started, with the texts sent to it, and the session id
  each start resumed;
- the events emitted, in order, and the feature-delta calls — each of which
  must see the session not busy (the busy-flip ordering);
- the interrupts each run received;
- the pending permission requests, and the answer each run's asks were given.

Interleavings that matter are ordinary steps: a send or an enqueue while the run
starts (the start waits for the machine), a result racing a stop and a send in
the close window (closes are held until the machine releases them, in examples
that hold closes), a run dying mid-turn with a queue (the engine ends the run), a
run asking while its close is held, an answer crossing a withdrawal or a stop.
Permission timeouts run on a `ManualClock`: each ask is a second after the last,
so every request has its own deadline and the machine times out one at a time.
"""

from __future__ import annotations

import concurrent.futures
from collections import deque
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import ClassVar, TypeVar

from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from beebox_impl.session import (
    ChatEvent,
    ChatSession,
    Closed,
    Done,
    EventSubscription,
    Message,
    PermissionEnded,
    PermissionRequested,
    SessionIdAssigned,
    StartFailed,
    Task,
    TurnDelta,
    TurnText,
)
from beebox_impl.session.clock import ManualClock
from beebox_impl.store import InMemoryQueueStore, InMemorySessionIdStore
from beebox_spec import chat_session as spec
from beebox_spec.lifecycle import Starting, lifecycle_run
from beebox_spec.permissions import (
    STOPPED_MESSAGE,
    AnswerAsk,
    AnswerPermission,
    PermissionAsked,
    PermissionNotPending,
    PermissionReply,
    PermissionTimedOut,
    PermissionWithdrawn,
)
from beebox_spec.phases import Phase
from beebox_spec.sdk_messages import LiveTextDelta, adapt_sdk_message
from tests.stateful.harness import (
    SUB_AGENT_KINDS,
    HeldRun,
    HoldingEngine,
    MessageKind,
    TurnRefusedByMachine,
    call_and_settle,
    numbered_request,
    raw_message,
)

__all__ = ["ChatSessionMachine", "SpecChat"]

T = TypeVar("T")

TEXTS = st.sampled_from(["a", "b", "c\n\nd", "é <chat-app x/>", "", "f"])
SESSION_IDS = st.sampled_from(["", "s-1", "s-2"])
OTHER_MESSAGE_KINDS = st.sampled_from(
    ["init", "error-result", "task", "stream-event", "ignored", "unknown", *SUB_AGENT_KINDS]
)
START_FAILURE = "machine says no"
PERMISSION_TIMEOUT = timedelta(minutes=10)
TOOLS = st.sampled_from(["Bash", "Write", "Read"])
DENY_MESSAGES = st.sampled_from(["", "not that file"])


class SpecChat:
    """The spec model, driven event by event, with its effects written down the way
    the machine observes the implementation."""

    def __init__(self, *, hold_closes: bool) -> None:
        self.hold_closes = hold_closes
        self.state = spec.initial_state()
        self.saved_session_id: str | None = None
        # Spec run number → index in the engine's list of started runs (this life only).
        self.run_index: dict[int, int] = {}
        # Across the box's lives, by engine run index: what reached each run.
        self.engine_runs = 0
        self.sent: dict[int, list[str]] = {}
        self.interrupts: dict[int, int] = {}
        self.resumed: list[str | None] = []
        # This life's events and feature-delta calls.
        self.events: list[tuple[str, object]] = []
        self.feature_calls: list[str] = []
        # Engine run indexes whose next turn the run refuses (rule 8).
        self.refusing: set[int] = set()
        # The answer each ask was given, by (engine run index, request id).
        self.answers: dict[tuple[int, str], PermissionReply] = {}

    def shut_down(self) -> None:
        """The box closing: the spec has no such event; the session denies what is
        pending, as a stop would (`ChatSession.open`; its events are not followed
        past the close)."""
        for held in self.state.permissions:
            self.answers[(self.run_index[held.run], held.id)] = PermissionReply(
                "deny", STOPPED_MESSAGE
            )

    def boot(self, session_id: str | None, rows: tuple[str, ...]) -> None:
        """The session opening on a box: its saved id, and a drain of the persisted rows."""
        self.saved_session_id = session_id
        self.run_index = {}
        self.events = []
        self.feature_calls = []
        self.state = spec.initial_state(session_id)
        if rows:
            # Persisted rows drain into a fresh run, as after an unexpected death
            # (`docs/design.md#design-5-persisted-queue`).
            self.state = spec.ChatSessionState(
                lifecycle=Starting(),
                session_id=session_id,
                first_turn=rows,
                first_turn_drained=True,
                runs_started=1,
            )
            self.resumed.append(session_id)

    def feed(self, first: spec.ChatSessionEvent) -> bool | None:
        """Apply ``first`` and every event its effects cause at once; the send's answer."""
        events: deque[spec.ChatSessionEvent] = deque([first])
        accepted: bool | None = None
        while events:
            event = events.popleft()
            result = spec.step(self.state, event)
            self.state = result.state
            if event is first:
                accepted = result.accepted
            if isinstance(event, spec.RunStarted):
                self.run_index[self.state.runs_started] = self.engine_runs
                self.sent[self.engine_runs] = []
                self.engine_runs += 1
            for effect in result.effects:
                self._record(effect, events)
        return accepted

    def _record(self, effect: spec.Effect, events: deque[spec.ChatSessionEvent]) -> None:  # noqa: PLR0912 — one case an effect kind: the table reads best whole
        match effect:
            case spec.StartRun(resume_session_id=resume):
                self.resumed.append(resume)
            case spec.SendTurn(run=run, text=text):
                index = self.run_index[run]
                if index in self.refusing:
                    self.refusing.discard(index)
                    events.append(spec.TurnRefused(run))
                else:
                    self.sent[index].append(text)
            case spec.CloseRun(run=run):
                # Unheld, the scripted engine ends the stream at once.
                if not self.hold_closes:
                    events.append(spec.RunClosed(run))
            case spec.InterruptRun(run=run):
                index = self.run_index[run]
                self.interrupts[index] = self.interrupts.get(index, 0) + 1
            case spec.SaveSessionId(session_id=session_id):
                self.saved_session_id = session_id
            case spec.ForgetSessionId():
                self.saved_session_id = None
            case spec.ApplyFeatureDeltas(turn_text=text):
                self.feature_calls.append(text)
            case spec.ReportStartFailed(reason=reason, failed_text=failed_text):
                self.events.append(("start-failed", (reason, failed_text)))
            case spec.Emit(event=name, detail=detail):
                self.events.append((name, detail))
            case AnswerAsk(run=run, request_id=request_id, reply=reply):
                self.answers[(self.run_index[run], request_id)] = reply

    @property
    def current_run(self) -> int | None:
        return lifecycle_run(self.state.lifecycle)

    @property
    def refusing_now(self) -> bool:
        """Whether the current run refuses the next turn sent to it."""
        run = self.current_run
        return run is not None and self.run_index.get(run) in self.refusing

    @property
    def persisted_rows(self) -> tuple[str, ...]:
        """The rows the box must hold: a drained first turn still starting, then the queue."""
        drained = self.state.first_turn if self.state.first_turn_drained else ()
        return (*drained, *self.state.queue)


def event_as_spec(event: ChatEvent) -> tuple[str, object]:
    """An implementation event as the spec's (name, detail)."""
    match event:
        case SessionIdAssigned(session_id=session_id):
            return (event.name, session_id)
        case Message(message=message):
            return (event.name, message)
        case Task(message=task):
            return (event.name, task)
        case Done():
            return (event.name, None)
        case TurnDelta(text=text, first=first):
            return (event.name, LiveTextDelta(text, first))
        case TurnText(text=text):
            return (event.name, text)
        case Closed(code=code):
            return (event.name, code)
        case StartFailed(reason=reason, failed_text=failed_text):
            return (event.name, (reason, failed_text))
        case PermissionRequested(request=request):
            return (event.name, request)
        case PermissionEnded(end=end):
            return (event.name, end)


class ChatSessionMachine(RuleBasedStateMachine):
    """Same commands to `ChatSession` and `beebox_spec.chat_session`; same observations."""

    backend: ClassVar[str] = "asyncio"
    # Mutants (tests/mutants/) replace the class under test.
    session_class: ClassVar[type[ChatSession]] = ChatSession

    def __init__(self) -> None:
        super().__init__()
        self._portal_context: AbstractContextManager[BlockingPortal] = start_blocking_portal(
            self.backend
        )
        self.portal = self._portal_context.__enter__()
        self.queue_store = InMemoryQueueStore()
        self.id_store = InMemorySessionIdStore()
        self.engine = HoldingEngine(hold_closes=False)
        self.model = SpecChat(hold_closes=False)
        self.session: ChatSession | None = None
        self._session_context: AbstractContextManager[ChatSession] | None = None
        self.events: EventSubscription[ChatEvent] | None = None
        self.seen_events: list[tuple[str, object]] = []
        self.feature_calls: list[tuple[str, bool]] = []
        self.ordinal = 0
        # The start (by number) whose first turn is a caller's text with its row written,
        # and how many rows were before that row.
        self.start_with_its_row: tuple[int, int] | None = None
        self.clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
        # Every ask made, by request id: the spec's run number, the engine run, and
        # when the request times out.
        self.asked: dict[str, tuple[int, HeldRun, datetime]] = {}
        self.asks_waiting: list[concurrent.futures.Future[PermissionReply | None]] = []

    # --- Plumbing --------------------------------------------------------------------

    def act(self, action: Callable[[], Awaitable[T]]) -> T:
        return call_and_settle(self.portal, action)

    @property
    def chat(self) -> ChatSession:
        assert self.session is not None, "the session is open from the first step"
        return self.session

    def _features(self, turn_text: str) -> None:
        # The busy-flip ordering: this must see the session no longer busy.
        self.feature_calls.append((turn_text, self.chat.busy))

    def _open(self) -> None:
        context = self.portal.wrap_async_context_manager(
            self.session_class.open(
                engine=self.engine,
                box_root=Path("/nonexistent/beebox-machine"),
                queue_store=self.queue_store,
                session_id_store=self.id_store,
                apply_feature_deltas=self._features,
                clock=self.clock,
                permission_timeout=PERMISSION_TIMEOUT,
            )
        )
        self.session = context.__enter__()
        self._session_context = context
        self.events = self.session.subscribe(max_buffer=100_000)
        self.act(self._noop)

    def _close(self) -> None:
        context, self._session_context = self._session_context, None
        if self.events is not None:
            self.events.close()
        if context is not None:
            context.__exit__(None, None, None)

    @staticmethod
    async def _noop() -> None:
        return None

    def teardown(self) -> None:
        try:
            self._close()
        finally:
            # An ask a broken session never ends would hold the portal open: cancel it.
            for future in self.asks_waiting:
                future.cancel()
            self._portal_context.__exit__(None, None, None)

    def current_engine_run(self) -> HeldRun:
        run = self.model.current_run
        assert run is not None
        return self.engine.runs[self.model.run_index[run]]

    # --- Setup -----------------------------------------------------------------------

    @initialize(
        hold_closes=st.booleans(),
        saved_session_id=st.sampled_from([None, "s-0"]),
        leftover_rows=st.lists(TEXTS, max_size=2).map(tuple),
    )
    def open_session(
        self, hold_closes: bool, saved_session_id: str | None, leftover_rows: tuple[str, ...]
    ) -> None:
        """A box with a saved session id and rows a previous life left queued."""
        self.engine.hold_closes = hold_closes
        self.model = SpecChat(hold_closes=hold_closes)
        self.id_store.session_id = saved_session_id
        self.queue_store = InMemoryQueueStore(leftover_rows)
        self.model.boot(saved_session_id, leftover_rows)
        self._open()

    # --- The caller ------------------------------------------------------------------

    def refused_or(self, action: Callable[[], Awaitable[bool]]) -> bool:
        """``action``'s answer; True when it raised because the run refused its turn,
        which the spec must then have seen too."""
        refusing = self.model.refusing_now
        try:
            return self.act(action)
        except TurnRefusedByMachine:
            assert refusing, "a send raised where the spec had no refusal"
            return True

    @rule(text=TEXTS)
    def send(self, text: str) -> None:
        accepted = self.refused_or(lambda: self.chat.send(text))
        assert accepted == self.model.feed(spec.Send(text)), "send accepted differs"

    @rule(text=TEXTS)
    def enqueue(self, text: str) -> None:
        self.act(lambda: self.chat.enqueue(text))
        self.model.feed(spec.Enqueue(text))

    @rule(text=TEXTS)
    def send_or_enqueue(self, text: str) -> None:
        """The HTTP route's one step: the spec's Send, and its Enqueue when refused,
        with no engine event between them."""
        sent = self.refused_or(lambda: self.chat.send_or_enqueue(text))
        accepted = self.model.feed(spec.Send(text))
        if not accepted:
            self.model.feed(spec.Enqueue(text))
        assert sent == accepted, "send_or_enqueue took it as a turn where the spec did not"

    # Not while the run refuses: a refused caller's turn keeps the row its caller wrote
    # (the box's send queues the text again), which the machine's rows do not follow.
    @precondition(lambda self: not self.model.refusing_now)
    @rule(text=TEXTS)
    def send_or_enqueue_with_its_row_written(self, text: str) -> None:
        """The box's send from a handler thread, when the session said it would queue:
        the row is written with the send's record, then handed over with its id. The
        reading may be stale (here, whenever the session would take the text), so the
        row may belong to a turn: it goes once the turn is sent, or with a start
        that fails."""
        rows_before = len(self.model.persisted_rows)
        row_id = self.act(lambda: self.queue_store.append(text))
        sent = self.act(lambda: self.chat.send_or_enqueue(text, queued_row=row_id))
        accepted = self.model.feed(spec.Send(text))
        if not accepted:
            self.model.feed(spec.Enqueue(text))
        elif isinstance(self.model.state.lifecycle, Starting):
            self.start_with_its_row = (self.model.state.runs_started, rows_before)
        assert sent == accepted, "send_or_enqueue took it as a turn where the spec did not"

    @rule(text=TEXTS)
    def enqueue_then_drain_with_its_row_written(self, text: str) -> None:
        """The box's send from a handler thread that answered it queued: the row is
        written with the send's record, and a callback on the loop hands it over
        with no await. The session may have gone idle meanwhile (here, whenever the
        spec's session can take a send): the queue then drains at once."""
        row_id = self.act(lambda: self.queue_store.append(text))

        async def hand_over() -> None:
            self.chat.enqueue_then_drain(text, queued_row=row_id)

        self.act(hand_over)
        self.model.feed(spec.EnqueueThenDrain(text))

    def stop(self) -> None:
        self.act(self.chat.stop)
        self.model.feed(spec.Stop())

    def restart(self) -> None:
        self.act(self.chat.restart)
        self.model.feed(spec.Restart())

    def reset_session(self) -> None:
        self.act(self.chat.reset_session)
        self.model.feed(spec.ResetSession())

    def interrupt(self) -> None:
        self.act(self.chat.interrupt)
        self.model.feed(spec.Interrupt())

    def box_restarts(self) -> None:
        """The box goes down and comes back: same stores, a new session."""
        self.model.shut_down()
        self._close()
        self.model.boot(self.id_store.session_id, self.queue_store.texts)
        self.start_with_its_row = None
        self.seen_events = []
        self.feature_calls = []
        self._open()

    @rule(action=st.sampled_from(["stop", "restart", "reset_session", "interrupt", "box_restarts"]))
    def caller_acts(self, action: str) -> None:
        """One rule for the rarer calls, so sends, enqueues and the engine get more turns."""
        getattr(self, action)()

    @precondition(lambda self: spec.session_running(self.model.state))
    @rule(text=TEXTS)
    def enqueue_onto_an_open_run(self, text: str) -> None:
        """Enqueue again, given more weight while a run is open (a queue for stop,
        restart and a death to act on)."""
        self.enqueue(text)

    @precondition(lambda self: spec.session_running(self.model.state))
    @rule(action=st.sampled_from(["stop", "restart", "reset_session", "interrupt"]))
    def caller_acts_on_an_open_run(self, action: str) -> None:
        """The same calls, given more weight while there is a run for them to act on."""
        getattr(self, action)()

    # --- The engine ------------------------------------------------------------------

    @precondition(lambda self: isinstance(self.model.state.lifecycle, Starting))
    @rule(succeeds=st.sampled_from([True, True, False]))
    def start_answered(self, succeeds: bool) -> None:
        if succeeds:
            self.start_succeeds()
        else:
            self.start_fails()

    def start_succeeds(self) -> None:
        self.act(self._accept_start)
        self.model.feed(spec.RunStarted())

    async def _accept_start(self) -> None:
        self.engine.scripted.accept_start()

    def start_fails(self) -> None:
        self.act(self._fail_start)
        self.model.feed(spec.RunStartFailed(START_FAILURE))

    async def _fail_start(self) -> None:
        self.engine.scripted.fail_start(START_FAILURE)

    def say(self, kind: MessageKind, text: str, session_id: str) -> None:
        """The current run says one message; the spec hears it adapted, if it adapts."""
        self.ordinal += 1
        raw = raw_message(kind, text, session_id, self.ordinal)
        run = self.current_engine_run()
        delivered = self.act(lambda: run.inner.emit(raw))
        assert delivered, "the current run's stream is open"
        adapted = adapt_sdk_message(raw)
        if adapted is not None:
            run_number = self.model.current_run
            assert run_number is not None
            self.model.feed(spec.SdkMessageArrived(run_number, adapted))

    @precondition(lambda self: self.model.current_run is not None)
    @rule(text=TEXTS, session_id=SESSION_IDS)
    def assistant_says(self, text: str, session_id: str) -> None:
        self.say("assistant", text, session_id)

    @precondition(lambda self: self.model.current_run is not None)
    @rule(session_id=SESSION_IDS)
    def turn_result_arrives(self, session_id: str) -> None:
        self.say("result", "", session_id)

    @precondition(lambda self: self.model.current_run is not None)
    @rule(kind=OTHER_MESSAGE_KINDS, text=TEXTS, session_id=SESSION_IDS)
    def run_says(self, kind: MessageKind, text: str, session_id: str) -> None:
        self.say(kind, text, session_id)

    @precondition(lambda self: self.model.current_run is not None)
    @rule(text=TEXTS)
    def text_streams(self, text: str) -> None:
        """A piece of the answer (rule 11), given more weight than `run_says`' other
        kinds (the sub-agent's three made it one in nine): a run the session asked to
        close must stream none, and the hunt must meet that often enough."""
        self.say("stream-event", text, "")

    # Compound steps: the common progressions in one rule, so examples get deep enough
    # to reach the rare interleavings. Every part is also a rule of its own.

    @precondition(lambda self: self.model.state.lifecycle.phase is Phase.IDLE)
    @rule(text=TEXTS)
    def send_and_start(self, text: str) -> None:
        self.send(text)
        self.start_succeeds()
        # The answer begins to stream (rule 11), when the start took the turn.
        if self.model.current_run is not None:
            self.say("stream-event", text, "")

    @precondition(lambda self: self.model.current_run is not None)
    @rule(text=TEXTS, session_id=SESSION_IDS)
    def whole_turn(self, text: str, session_id: str) -> None:
        self.assistant_says(text, session_id)
        self.turn_result_arrives(session_id)

    @precondition(lambda self: self.model.current_run is not None)
    @rule()
    def run_refuses_its_next_turn(self) -> None:
        """The run's next send raises, the run staying open (rule 8): say, the turn's
        photos could not be read."""
        run = self.model.current_run
        assert run is not None
        self.current_engine_run().inner.refuse_next_send(
            TurnRefusedByMachine("the machine refuses this turn")
        )
        self.model.refusing.add(self.model.run_index[run])

    @precondition(lambda self: self.model.current_run is not None)
    @rule()
    def run_ends(self) -> None:
        """The run's stream ends: a held close completes, or the run dies on its own."""
        run = self.current_engine_run()
        if run.close_requested:
            self.act(self._release(run))
        else:
            self.act(self._end(run))
        run_number = self.model.current_run
        assert run_number is not None
        self.model.feed(spec.RunClosed(run_number))

    @staticmethod
    def _release(run: HeldRun) -> Callable[[], Awaitable[None]]:
        async def release() -> None:
            run.release_close()

        return release

    @staticmethod
    def _end(run: HeldRun) -> Callable[[], Awaitable[None]]:
        return run.inner.end

    # --- Permission requests (rule 10) -----------------------------------------------

    @precondition(lambda self: self.model.current_run is not None)
    @rule(tool=TOOLS, can_always_allow=st.booleans())
    def run_asks(self, tool: str, can_always_allow: bool) -> None:
        """The current run asks before a tool runs, and waits for the answer; a
        second passes."""
        run_number = self.model.current_run
        assert run_number is not None
        request = numbered_request(len(self.asked), tool, can_always_allow=can_always_allow)
        request_id = request["id"]
        run = self.current_engine_run()
        self.asked[request_id] = (run_number, run, self.clock.now() + PERMISSION_TIMEOUT)

        # The ask waits on the portal's loop until it ends; the machine goes on.
        self.asks_waiting.append(self.portal.start_task_soon(run.inner.ask, request))
        self.act(self._noop)
        self.model.feed(PermissionAsked(run_number, request))
        self.pass_time(timedelta(seconds=1))

    def pass_time(self, delta: timedelta) -> None:
        """Move the clock on; the spec hears every pending request now due time out
        (one at most: pending deadlines are at least a second apart)."""

        async def advance() -> None:
            self.clock.advance(delta)

        self.act(advance)
        for held in self.model.state.permissions:
            if self.asked[held.id][2] <= self.clock.now():
                self.model.feed(PermissionTimedOut(held.id))

    def answer(self, request_id: str, reply: PermissionReply) -> None:
        try:
            self.act(lambda: self.chat.answer_permission(request_id, reply))
            answered = True
        except PermissionNotPending:
            answered = False
        try:
            self.model.feed(AnswerPermission(request_id, reply))
            expected = True
        except PermissionNotPending:
            expected = False
        assert answered == expected, f"answering {request_id}: impl {answered}, spec {expected}"

    @precondition(lambda self: self.model.state.permissions)
    @rule(
        data=st.data(),
        decision=st.sampled_from(["allow", "deny"]),
        message=DENY_MESSAGES,
        always=st.booleans(),
    )
    def person_answers(
        self, data: st.DataObject, decision: str, message: str, always: bool
    ) -> None:
        """A person answers a pending request."""
        held = data.draw(st.sampled_from(self.model.state.permissions))
        allow = decision == "allow"
        reply = PermissionReply(
            "allow" if allow else "deny", "" if allow else message, always and allow
        )
        self.answer(held.id, reply)

    @precondition(lambda self: self.asked)
    @rule(data=st.data())
    def person_answers_a_request_not_pending(self, data: st.DataObject) -> None:
        """An answer to any request ever asked (most have ended), or to one never asked."""
        request_id = data.draw(st.sampled_from([*self.asked, "permission-never"]))
        self.answer(request_id, PermissionReply("allow"))

    @precondition(lambda self: self.model.state.permissions)
    @rule()
    def oldest_request_times_out(self) -> None:
        """Time passes to the oldest pending request's deadline (only its own: each
        ask was a second after the last)."""
        deadline = self.asked[self.model.state.permissions[0].id][2]
        self.pass_time(deadline - self.clock.now())

    @precondition(lambda self: self.asked)
    @rule(data=st.data())
    def run_withdraws(self, data: st.DataObject) -> None:
        """A run takes an ask back (a CLI does when its turn is interrupted), whether
        or not it is still waiting."""
        request_id = data.draw(st.sampled_from(list(self.asked)))
        run_number, run, _deadline = self.asked[request_id]

        async def withdraw() -> None:
            run.inner.withdraw(request_id)

        self.act(withdraw)
        self.model.feed(PermissionWithdrawn(run_number, request_id))

    # --- The comparison --------------------------------------------------------------

    def expected_rows(self) -> tuple[str, ...]:
        """The spec's persisted rows, and before them the row a caller wrote for the
        first turn of a run still starting, where it was written among them (the spec
        does not model who writes rows; only enqueues come after it while starting)."""
        state, rows = self.model.state, self.model.persisted_rows
        if self.start_with_its_row is None:
            return rows
        start, before = self.start_with_its_row
        if (
            isinstance(state.lifecycle, Starting)
            and not state.first_turn_drained
            and state.runs_started == start
        ):
            return (*rows[:before], *state.first_turn, *rows[before:])
        return rows

    @invariant()
    def observations_agree(self) -> None:
        if self.session is None:
            return
        chat, model = self.chat, self.model
        expected = spec.observe(model.state)
        got = spec.Observation(
            chat.phase,
            chat.busy,
            chat.running,
            chat.queue,
            tuple(request["id"] for request in chat.pending_permissions),
            chat.live_text,
        )
        assert got == expected, f"observation: impl {got} != spec {expected}"
        assert chat.session_id == model.state.session_id, "session id held"
        assert self.id_store.session_id == model.saved_session_id, "session id persisted"
        assert self.queue_store.texts == self.expected_rows(), "persisted queue rows"

    @invariant()
    def runs_agree(self) -> None:
        if self.session is None:
            return
        assert len(self.engine.runs) == self.model.engine_runs, "runs started"
        sent = {index: list(run.sent) for index, run in enumerate(self.engine.runs)}
        assert sent == self.model.sent, "texts sent per run"
        resumed = [options.resume_session_id for options in self.engine.starts]
        assert resumed == self.model.resumed, "session ids the starts resumed"
        interrupts = {
            index: run.interrupts for index, run in enumerate(self.engine.runs) if run.interrupts
        }
        assert interrupts == self.model.interrupts, "interrupts per run"
        answers = {
            (index, request_id): reply
            for index, run in enumerate(self.engine.runs)
            for request_id, reply in run.inner.answers.items()
            if reply is not None
        }
        assert answers == self.model.answers, "answers the runs' asks were given"

    @invariant()
    def events_agree(self) -> None:
        if self.events is None:
            return
        self.seen_events += [event_as_spec(event) for event in self.events.drain_nowait()]
        assert self.seen_events == self.model.events, "events emitted"
        assert [text for text, _busy in self.feature_calls] == self.model.feature_calls
        assert not any(busy for _text, busy in self.feature_calls), (
            "feature deltas applied while the session still read busy"
        )
