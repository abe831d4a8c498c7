"""The stateful machine that proves `ChatSessionPool` and `ChatThreadSession` equal to
`beebox_spec.thread_pool`.

The reference (`SpecPool`) is built from the spec alone: every thread session is
a `beebox_spec.thread_pool.ThreadSessionState` driven by its `step`, and the
pool's choices are the spec's pure decisions (`plan_send`, `compose_turn` inside
`step`, `record_after_success`, `record_after_failure`, `should_rotate` inside
`plan_send`). What the spec leaves to the implementation — waiting up to
`BUSY_TIMEOUT` for a busy session, and what park writes to the record — is
written out here in a few lines each, from `docs/sources.md#lifecycle-park-evict`
and `docs/sources.md#facts-3-4` (§3.4).

Each example opens one blocking portal, a pool on it (in-memory record store, a
`ManualClock`, a `HoldingEngine` over `ScriptedEngine`) and drives both with the
same commands: sends on a few threads (each pool send runs as a task, since it
waits for its turn), evictions, time passing, and the engine's answers (starts,
messages, runs ending, held closes released) on any run still open — the active
session's, or one a parked session let go of. After every step it compares the
active thread, the records (in memory and stored), the active session's phase,
busy, running, session id and pending permission requests, every run started
(its resumed id, its system prompt, the texts sent to it), the answer each ask of
a run was given, and every send: whether it has finished and what it returned.

Runs ask for permission too (rule 7), any run still open (a parked one's ask is
denied at once), and a person answers. Time passes in steps, one deadline at a
time (a permission request's timeout, a waiting send's `BUSY_TIMEOUT`), so the
implementation's timers fire in the order the reference takes them; the
permission timeout is a second off the half-minute grid every other moment is
on, so no two kinds of deadline ever fall together.
"""

from __future__ import annotations

import concurrent.futures
from collections import deque
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import ClassVar, TypeVar

from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from beebox_impl.session import ChatSessionPool, ManualClock, PoolSendResult
from beebox_impl.store import InMemoryThreadRecordStore
from beebox_spec import thread_pool as spec
from beebox_spec.js_values import to_iso_timestamp
from beebox_spec.lifecycle import has_open_run, lifecycle_run
from beebox_spec.permissions import (
    AnswerAsk,
    AnswerPermission,
    PermissionAsked,
    PermissionNotPending,
    PermissionReply,
    PermissionRequest,
    PermissionTimedOut,
    PermissionWithdrawn,
)
from beebox_spec.phases import is_busy
from beebox_spec.sdk_messages import adapt_sdk_message
from tests.stateful.harness import (
    SUB_AGENT_KINDS,
    HeldRun,
    HoldingEngine,
    MessageKind,
    call_and_settle,
    numbered_request,
    raw_message,
)

__all__ = ["PoolMachine", "SpecPool"]

T = TypeVar("T")

START = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
THREADS = st.sampled_from(["t1", "t2", "t3"])
TEXTS = st.sampled_from(["hi", "more", "<chat-response>ok</chat-response>"])
REPLIES = st.sampled_from(
    [
        "<chat-response> hello </chat-response>",
        "thinking <chat-resp",
        "onse>done</chat-response> tail",
        "plain",
        "<chat-response></chat-response>",
    ]
)
SESSION_IDS = st.sampled_from(["", "s-1", "s-2"])
THREAD_PROMPT = "You are a thread bot."
VIEW_BASE_URL = "https://box.example/chat"
START_FAILURE = "machine says no"
# Off the half-minute grid of every other moment here (see the module doc).
PERMISSION_TIMEOUT = timedelta(minutes=10, seconds=1)

# (responses, success, outcome, reason) — a PoolSendResult, comparable across the two.
SendOutcome = tuple[tuple[str, ...], bool, str | None, str | None]


def outcome_of(result: PoolSendResult) -> SendOutcome:
    settlement = result.settlement
    return (
        result.responses,
        result.success,
        None if settlement is None else settlement.outcome,
        None if settlement is None else settlement.reason,
    )


@dataclass(eq=False)
class SpecThread:
    """One thread session of the reference: the spec's state and its runs."""

    ref: str
    state: spec.ThreadSessionState
    run_index: dict[int, int] = field(default_factory=dict)
    pending_send: int | None = None

    @property
    def busy(self) -> bool:
        return is_busy(self.state.lifecycle.phase)


@dataclass
class WaitingSend:
    """A send waiting for the active session to go idle (to park it, or because its own
    thread is mid-turn), until ``deadline``."""

    send_id: int
    thread_ref: str
    text: str
    session: SpecThread
    park: bool
    deadline: datetime


class SpecPool:
    """The pool, stated with the spec's thread-session model and pure decisions."""

    def __init__(self, *, hold_closes: bool) -> None:
        self.hold_closes = hold_closes
        self.now = START
        self.active: SpecThread | None = None
        self.records: dict[str, spec.ThreadRecord] = {}
        self.let_go: list[SpecThread] = []
        self.waiting: WaitingSend | None = None
        self.pending_starts: deque[tuple[SpecThread, int]] = deque()
        # By engine run index: the session and its spec run number, and the texts sent.
        self.engine_runs: list[tuple[SpecThread, int]] = []
        self.sent: list[list[str]] = []
        self.resumed: list[str | None] = []
        self.prompts: list[str | None] = []
        self.responses: dict[int, list[str]] = {}
        self.results: dict[int, SendOutcome] = {}
        # Engine run indexes whose next turn the run refuses (rule 6).
        self.refusing: set[int] = set()
        # Every session made; the answer each ask was given, by (engine run index,
        # request id); each request's timeout.
        self.sessions: list[SpecThread] = []
        self.answers: dict[tuple[int, str], PermissionReply] = {}
        self.permission_deadlines: dict[str, datetime] = {}
        self._work: deque[tuple[SpecThread, spec.ThreadEvent]] = deque()

    # --- Commands ------------------------------------------------------------------

    def send(self, send_id: int, thread_ref: str, text: str) -> None:
        self.responses[send_id] = []
        plan = spec.plan_send(self._active_ref, self.records, thread_ref, self.now)
        active = self.active
        if active is not None and (plan.park_thread is not None or active.busy):
            if active.busy:
                deadline = self.now + spec.BUSY_TIMEOUT
                park = plan.park_thread is not None
                self.waiting = WaitingSend(send_id, thread_ref, text, active, park, deadline)
                return
            if plan.park_thread is not None:
                self._park(active)
        self._begin_turn(send_id, thread_ref, text)

    def evict(self, thread_ref: str) -> None:
        session = self.active if self._active_ref == thread_ref else None
        if session is not None:
            self._let_go_of(session)
        self.records.pop(thread_ref, None)
        if session is not None:
            self._feed(session, spec.Stop())

    def deadlines_until(self, target: datetime) -> list[datetime]:
        """Every moment after now and up to ``target`` at which a timer is due: a
        pending request's timeout, the waiting send's."""
        moments = {
            self.permission_deadlines[held.id]
            for session in self.sessions
            for held in session.state.permissions
        }
        if self.waiting is not None:
            moments.add(self.waiting.deadline)
        return sorted(moment for moment in moments if self.now < moment <= target)

    def advance_to(self, moment: datetime) -> None:
        """The clock reaches ``moment``: what is due times out, a waiting send wakes."""
        self.now = moment
        for session in self.sessions:
            for held in session.state.permissions:
                if self.permission_deadlines[held.id] <= moment:
                    self._feed(session, PermissionTimedOut(held.id))
        self._resume_waiting()

    def ask(self, engine_index: int, request: PermissionRequest) -> None:
        session, run = self.engine_runs[engine_index]
        self.permission_deadlines[request["id"]] = self.now + PERMISSION_TIMEOUT
        self._feed(session, PermissionAsked(run, request))

    def answer(self, request_id: str, reply: PermissionReply) -> bool:
        """A person answers through the pool: only the active session's requests."""
        if self.active is None:
            return False
        try:
            self._feed(self.active, AnswerPermission(request_id, reply))
        except PermissionNotPending:
            return False
        return True

    def start_answered(self, succeeds: bool, *, refuses_first_turn: bool = False) -> None:
        session, run = self.pending_starts.popleft()
        if succeeds:
            if refuses_first_turn:
                self.refusing.add(len(self.engine_runs))
            session.run_index[run] = len(self.engine_runs)
            self.engine_runs.append((session, run))
            self.sent.append([])
            self._feed(session, spec.RunStarted())
        else:
            self._feed(session, spec.RunStartFailed(START_FAILURE))

    def run_event(self, engine_index: int, event: spec.ThreadEvent) -> None:
        session, _run = self.engine_runs[engine_index]
        self._feed(session, event)

    # --- The pool's rules ----------------------------------------------------------

    @property
    def _active_ref(self) -> str | None:
        return None if self.active is None else self.active.ref

    def _let_go_of(self, session: SpecThread) -> None:
        self.let_go.append(session)
        if self.active is session:
            self.active = None

    def _park(self, session: SpecThread) -> None:
        # Park keeps the id for resume: a record naming it stays; otherwise one is written.
        session_id = session.state.session_id
        record = self.records.get(session.ref)
        if session_id is not None and (record is None or record["sessionId"] != session_id):
            stamp = to_iso_timestamp(self.now)
            self.records[session.ref] = spec.ThreadRecord(
                sessionId=session_id, createdAt=stamp, lastUsedAt=stamp, messageCount=0
            )
        self._let_go_of(session)
        self._feed(session, spec.Park())

    def _begin_turn(self, send_id: int, thread_ref: str, text: str) -> None:
        plan = spec.plan_send(self._active_ref, self.records, thread_ref, self.now)
        session = self.active if self._active_ref == thread_ref else None
        if session is None:
            state = spec.initial_thread_state(plan.resume_session_id, VIEW_BASE_URL)
            session = SpecThread(thread_ref, state)
            self.sessions.append(session)
            self.active = session
        # The send is the session's before its turn goes out: a run refusing the turn
        # settles it within this very step (rule 6).
        previous, session.pending_send = session.pending_send, send_id
        try:
            self._feed(session, spec.Send(text))
        except spec.SessionBusyError:
            session.pending_send = previous
            self.results[send_id] = ((), False, None, None)
            self._fail(session)
            self._feed(session, spec.Stop())

    def _fail(self, session: SpecThread) -> None:
        self._let_go_of(session)
        self.records = spec.record_after_failure(self.records, session.ref)

    def _settled(self, session: SpecThread, outcome: str, reason: str | None) -> None:
        send_id, session.pending_send = session.pending_send, None
        if send_id is None:
            return
        self.results[send_id] = (tuple(self.responses[send_id]), outcome == "done", outcome, reason)
        if outcome == "done":
            session_id = session.state.session_id
            if session_id is not None:
                self.records[session.ref] = spec.record_after_success(
                    self.records.get(session.ref), session_id, self.now
                )
            return
        if any(gone is session for gone in self.let_go):
            return
        self._fail(session)
        self._work.append((session, spec.Stop()))

    def _resume_waiting(self) -> None:
        waiting = self.waiting
        if waiting is None or (waiting.session.busy and self.now < waiting.deadline):
            return
        self.waiting = None
        if waiting.park and self.active is waiting.session:
            self._park(waiting.session)
        self._begin_turn(waiting.send_id, waiting.thread_ref, waiting.text)

    # --- Driving the spec's thread sessions -----------------------------------------

    def _feed(self, session: SpecThread, event: spec.ThreadEvent) -> None:
        """Step ``session`` with ``event`` (a refused send raises before anything changes),
        then everything that follows from it."""
        self._step(session, event)
        while self._work:
            next_session, next_event = self._work.popleft()
            self._step(next_session, next_event)
        self._resume_waiting()

    def _step(self, session: SpecThread, event: spec.ThreadEvent) -> None:
        was_current = isinstance(event, spec.RunClosed) and lifecycle_run(
            session.state.lifecycle
        ) == (event.run)
        result = spec.step(session.state, event)
        session.state = result.state
        for effect in result.effects:
            self._record(session, effect)
        # A session whose current run ended is no longer the active one.
        if was_current and self.active is session:
            self.active = None

    def _record(self, session: SpecThread, effect: spec.ThreadEffect) -> None:
        """What the scripted engine and the observers do with one of the spec's effects."""
        match effect:
            case spec.StartRun(run=run, resume_session_id=resume):
                self.pending_starts.append((session, run))
                self.resumed.append(resume)
                # The prompt goes with every start; the engine keeps it for new sessions.
                self.prompts.append(THREAD_PROMPT)
            case spec.SendTurn(run=run, text=text):
                index = session.run_index[run]
                if index in self.refusing:
                    self.refusing.discard(index)
                    self._work.append((session, spec.TurnRefused(run)))
                else:
                    self.sent[index].append(text)
            case spec.CloseRun(run=run):
                if not self.hold_closes:
                    self._work.append((session, spec.RunClosed(run)))
            case spec.Emit(event="chat-response", detail=str() as text):
                if session.pending_send is not None:
                    self.responses[session.pending_send].append(text)
            case spec.SettleTurn(outcome=outcome, reason=reason):
                self._settled(session, outcome, reason)
            case AnswerAsk(run=run, request_id=request_id, reply=reply):
                self.answers[(session.run_index[run], request_id)] = reply
            case _:
                pass


class PoolMachine(RuleBasedStateMachine):
    """Same commands to `ChatSessionPool` and `SpecPool`; same observations."""

    backend: ClassVar[str] = "asyncio"
    # Mutants (tests/mutants/) replace the class under test.
    pool_class: ClassVar[type[ChatSessionPool]] = ChatSessionPool

    def __init__(self) -> None:
        super().__init__()
        self._portal_context: AbstractContextManager[BlockingPortal] = start_blocking_portal(
            self.backend
        )
        self.portal = self._portal_context.__enter__()
        self.clock = ManualClock(START)
        self.store = InMemoryThreadRecordStore()
        self.engine = HoldingEngine(hold_closes=False)
        self.model = SpecPool(hold_closes=False)
        self.pool: ChatSessionPool | None = None
        self._pool_context: AbstractContextManager[ChatSessionPool] | None = None
        self.sends: dict[int, concurrent.futures.Future[PoolSendResult]] = {}
        self.ordinal = 0
        # Every ask made: request id → engine run index.
        self.asked: dict[str, int] = {}
        self.asks_waiting: list[concurrent.futures.Future[PermissionReply | None]] = []

    # --- Plumbing ----------------------------------------------------------------------

    def act(self, action: Callable[[], Awaitable[T]]) -> T:
        return call_and_settle(self.portal, action)

    @property
    def the_pool(self) -> ChatSessionPool:
        assert self.pool is not None
        return self.pool

    def teardown(self) -> None:
        # A send whose turn never settled would wait forever: cancel it.
        for future in self.sends.values():
            future.cancel()
        # So would an ask a broken session never ends.
        for waiting in self.asks_waiting:
            waiting.cancel()
        try:
            context, self._pool_context = self._pool_context, None
            if context is not None:
                context.__exit__(None, None, None)
        finally:
            self._portal_context.__exit__(None, None, None)

    def open_runs(self) -> list[int]:
        """Engine runs whose stream has not ended, by index."""
        return [index for index, run in enumerate(self.engine.runs) if not run.inner.ended]

    # --- Setup ---------------------------------------------------------------------

    @initialize(hold_closes=st.booleans(), old_record=st.booleans())
    def open_pool(self, hold_closes: bool, old_record: bool) -> None:
        """A box whose thread ``t1`` may have a session from before, due for rotation or not."""
        self.engine.hold_closes = hold_closes
        self.model = SpecPool(hold_closes=hold_closes)
        if old_record:
            stamp = to_iso_timestamp(START - timedelta(hours=23))
            record = spec.ThreadRecord(
                sessionId="s-old", createdAt=stamp, lastUsedAt=stamp, messageCount=48
            )
            self.store.records["t1"] = record
            self.model.records["t1"] = record
        context = self.portal.wrap_async_context_manager(
            self.pool_class.open(
                engine=self.engine,
                box_root=Path("/nonexistent/beebox-machine"),
                records=self.store,
                clock=self.clock,
                view_base_url=VIEW_BASE_URL,
                thread_prompt=THREAD_PROMPT,
                permission_timeout=PERMISSION_TIMEOUT,
            )
        )
        self.pool = context.__enter__()
        self._pool_context = context

    # --- The callers -----------------------------------------------------------------

    @precondition(lambda self: self.model.waiting is None)
    @rule(thread_ref=THREADS, text=TEXTS)
    def send(self, thread_ref: str, text: str) -> None:
        self.ordinal += 1
        send_id = self.ordinal

        # The pool send waits for its turn, so it runs as a task of its own.
        self.sends[send_id] = self.portal.start_task_soon(self.the_pool.send, thread_ref, text)
        self.act(self._noop)
        self.model.send(send_id, thread_ref, text)

    @precondition(
        lambda self: (
            self.model.waiting is None
            and (self.model.active is not None or bool(self.model.records))
        )
    )
    @rule(thread_ref=THREADS)
    def evict(self, thread_ref: str) -> None:
        self.act(lambda: self.the_pool.evict(thread_ref))
        self.model.evict(thread_ref)

    @rule(minutes=st.sampled_from([1, 61, 24 * 60]))
    def time_passes(self, minutes: int) -> None:
        delta = timedelta(minutes=minutes) if minutes != 1 else spec.BUSY_TIMEOUT / 2
        target = self.model.now + delta
        # One deadline at a time, settling between (see the module doc).
        for moment in [*self.model.deadlines_until(target), target]:

            async def advance(to: datetime = moment) -> None:
                self.clock.advance(to - self.clock.now())

            self.act(advance)
            self.model.advance_to(moment)

    @staticmethod
    async def _noop() -> None:
        return None

    # --- The engine ------------------------------------------------------------------

    @precondition(lambda self: bool(self.model.pending_starts))
    @rule(
        succeeds=st.sampled_from([True, True, False]), refuses=st.sampled_from([False] * 3 + [True])
    )
    def start_answered(self, succeeds: bool, refuses: bool) -> None:
        """A start answered; an accepted one's run may refuse its first turn (rule 6)."""
        scripted = self.engine.scripted

        async def answer() -> None:
            if succeeds:
                run = scripted.accept_start()
                if refuses:
                    run.refuse_next_send()
            else:
                scripted.fail_start(START_FAILURE)

        self.act(answer)
        self.model.start_answered(succeeds, refuses_first_turn=refuses)

    @precondition(lambda self: bool(self.open_runs()))
    @rule(which=st.integers(0, 3))
    def run_refuses_its_next_turn(self, which: int) -> None:
        """An open run's next send raises, the run staying open (rule 6)."""
        runs = self.open_runs()
        index = runs[which % len(runs)]
        self.engine.runs[index].inner.refuse_next_send()
        self.model.refusing.add(index)

    def say(self, which: int, kind: MessageKind, text: str, session_id: str) -> None:
        runs = self.open_runs()
        index = runs[which % len(runs)]
        run = self.engine.runs[index]
        self.ordinal += 1
        raw = raw_message(kind, text, session_id, self.ordinal)
        delivered = self.act(lambda: run.inner.emit(raw))
        assert delivered
        adapted = adapt_sdk_message(raw)
        if adapted is not None:
            _session, run_number = self.model.engine_runs[index]
            self.model.run_event(index, spec.SdkMessageArrived(run_number, adapted))

    @precondition(lambda self: bool(self.open_runs()))
    @rule(which=st.integers(0, 3), text=REPLIES, session_id=SESSION_IDS)
    def assistant_says(self, which: int, text: str, session_id: str) -> None:
        self.say(which, "assistant", text, session_id)

    @precondition(lambda self: bool(self.open_runs()))
    @rule(which=st.integers(0, 3), session_id=SESSION_IDS)
    def turn_result_arrives(self, which: int, session_id: str) -> None:
        self.say(which, "result", "", session_id)

    @precondition(lambda self: bool(self.open_runs()))
    @rule(
        which=st.integers(0, 3),
        kind=st.sampled_from(["init", "task", "stream-event", "unknown", "ignored"]),
        session_id=SESSION_IDS,
    )
    def run_says(self, which: int, kind: MessageKind, session_id: str) -> None:
        self.say(which, kind, "x", session_id)

    @precondition(lambda self: bool(self.open_runs()))
    @rule(
        which=st.integers(0, 3),
        kind=st.sampled_from(SUB_AGENT_KINDS),
        text=REPLIES,
        session_id=SESSION_IDS,
    )
    def sub_agent_says(self, which: int, kind: MessageKind, text: str, session_id: str) -> None:
        """A Task or Agent call's sub-agent says something, in the thread's format or
        not: none of it is the thread's reply."""
        self.say(which, kind, text, session_id)

    @precondition(lambda self: bool(self.open_runs()))
    @rule(which=st.integers(0, 3), text=REPLIES, session_id=SESSION_IDS)
    def whole_turn(self, which: int, text: str, session_id: str) -> None:
        self.say(which, "assistant", text, session_id)
        if self.open_runs():
            self.say(which, "result", "", session_id)

    @precondition(lambda self: bool(self.open_runs()))
    @rule(which=st.integers(0, 3))
    def run_ends(self, which: int) -> None:
        runs = self.open_runs()
        index = runs[which % len(runs)]
        run: HeldRun = self.engine.runs[index]

        async def end() -> None:
            if run.close_requested:
                run.release_close()
            else:
                run.inner.end_nowait()

        self.act(end)
        _session, run_number = self.model.engine_runs[index]
        self.model.run_event(index, spec.RunClosed(run_number))

    # --- Permission requests (rule 7) -------------------------------------------------

    @precondition(lambda self: bool(self.open_runs()))
    @rule(which=st.integers(0, 3), tool=st.sampled_from(["Bash", "Write"]))
    def run_asks(self, which: int, tool: str) -> None:
        """An open run asks before a tool runs, and waits (a parked run is denied at once)."""
        runs = self.open_runs()
        self.ask_on(runs[which % len(runs)], tool)

    def active_run_index(self) -> int | None:
        """The engine index of the active session's open run, if it has one."""
        active = self.model.active
        run = None if active is None else lifecycle_run(active.state.lifecycle)
        return None if active is None or run is None else active.run_index.get(run)

    @precondition(lambda self: self.active_run_index() is not None and self.model.waiting is None)
    @rule(then=st.sampled_from(["evict", "another thread", "an hour"]), thread_ref=THREADS)
    def active_run_asks_then_the_pool_lets_go(self, then: str, thread_ref: str) -> None:
        """The common way a pending request meets a park or a stop, in one rule: the
        active run asks, then its thread is evicted, or a message for another thread
        waits for it and an hour passes."""
        index = self.active_run_index()
        assert index is not None
        active = self.model.active
        assert active is not None
        self.ask_on(index, "Bash")
        if then == "evict":
            self.evict(active.ref)
            return
        others = [ref for ref in ("t1", "t2", "t3") if ref != active.ref]
        self.send(thread_ref if thread_ref != active.ref else others[0], "more")
        if then == "an hour":
            self.time_passes(61)

    def ask_on(self, index: int, tool: str) -> None:
        request = numbered_request(len(self.asked), tool, can_always_allow=True)
        request_id = request["id"]
        self.asked[request_id] = index
        # The ask waits on the portal's loop until it ends; the machine goes on.
        self.asks_waiting.append(
            self.portal.start_task_soon(self.engine.runs[index].inner.ask, request)
        )
        self.act(self._noop)
        self.model.ask(index, request)

    @precondition(lambda self: bool(self.asked))
    @rule(data=st.data(), decision=st.sampled_from(["allow", "deny"]), always=st.booleans())
    def person_answers(self, data: st.DataObject, decision: str, always: bool) -> None:
        """An answer through the pool, to a request asked (pending or not) or never asked."""
        pending = (
            [held.id for held in self.model.active.state.permissions] if self.model.active else []
        )
        request_id = data.draw(st.sampled_from([*pending, *pending, *self.asked, "never"]))
        reply = (
            PermissionReply("allow", always=always)
            if decision == "allow"
            else PermissionReply("deny", "no")
        )
        try:
            self.act(lambda: self.the_pool.answer_permission(request_id, reply))
            answered = True
        except PermissionNotPending:
            answered = False
        assert answered == self.model.answer(request_id, reply), f"answering {request_id}"

    @precondition(lambda self: bool(self.asked))
    @rule(data=st.data())
    def run_withdraws(self, data: st.DataObject) -> None:
        """A run takes an ask back, whether or not it still waits."""
        request_id = data.draw(st.sampled_from(list(self.asked)))
        index = self.asked[request_id]

        async def withdraw() -> None:
            self.engine.runs[index].inner.withdraw(request_id)

        self.act(withdraw)
        _session, run_number = self.model.engine_runs[index]
        self.model.run_event(index, PermissionWithdrawn(run_number, request_id))

    # --- The comparison --------------------------------------------------------------

    @invariant()
    def pool_agrees(self) -> None:
        if self.pool is None:
            return
        model = self.model
        assert self.pool.active_thread == (None if model.active is None else model.active.ref)
        assert self.pool.records == model.records, "records in memory"
        assert self.store.records == model.records, "records stored"
        session = self.pool.active_session
        if model.active is not None:
            assert session is not None
            state = model.active.state
            got = (session.phase, session.busy, session.running, session.session_id)
            expected = (
                state.lifecycle.phase,
                is_busy(state.lifecycle.phase),
                has_open_run(state.lifecycle, close_requested=False),
                state.session_id,
            )
            assert got == expected, f"active session: impl {got} != spec {expected}"
        pending = (
            [] if model.active is None else [held.id for held in model.active.state.permissions]
        )
        got_pending = [request["id"] for request in self.pool.pending_permissions]
        assert got_pending == pending, "pending permission requests"

    @invariant()
    def runs_agree(self) -> None:
        if self.pool is None:
            return
        assert len(self.engine.runs) == len(self.model.engine_runs), "runs started"
        assert [list(run.sent) for run in self.engine.runs] == self.model.sent, "texts sent"
        starts = self.engine.starts
        assert [options.resume_session_id for options in starts] == self.model.resumed
        assert [options.system_prompt for options in starts] == self.model.prompts
        answers = {
            (index, request_id): reply
            for index, run in enumerate(self.engine.runs)
            for request_id, reply in run.inner.answers.items()
            if reply is not None
        }
        assert answers == self.model.answers, "answers the runs' asks were given"

    @invariant()
    def sends_agree(self) -> None:
        for send_id, future in self.sends.items():
            expected = self.model.results.get(send_id)
            assert future.done() == (expected is not None), f"send {send_id} finished"
            if expected is not None:
                assert outcome_of(future.result()) == expected, f"send {send_id} result"
