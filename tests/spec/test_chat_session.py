"""The `ChatSession` model: the lifecycle contract, example by example, then as a property."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from beebox_spec.chat_session import (
    QUEUE_SEPARATOR,
    ApplyFeatureDeltas,
    ChatSessionEvent,
    ChatSessionState,
    ChatSessionStep,
    CloseRun,
    Effect,
    Emit,
    Enqueue,
    ForgetSessionId,
    Interrupt,
    InterruptRun,
    ReportStartFailed,
    ResetSession,
    Restart,
    RunClosed,
    RunStarted,
    RunStartFailed,
    SaveSessionId,
    SdkMessageArrived,
    Send,
    SendTurn,
    StartRun,
    Stop,
    TurnRefused,
    can_accept_send,
    initial_state,
    session_busy,
    session_running,
    step,
)
from beebox_spec.errors import InvariantError
from beebox_spec.lifecycle import Idle, Starting, lifecycle_run
from beebox_spec.phases import Phase
from conformance.scenario import EngineName, EngineStep, scripted_sdk_message


def sdk(
    engine: EngineName, text: str = "", session_id: str = "", run: int = 1
) -> SdkMessageArrived:
    """An adapted SDK message from run ``run``, as the scripted engine emits it."""
    message = scripted_sdk_message(EngineStep(engine, text, session_id), session_id, 1)
    return SdkMessageArrived(run, message)


def run_events(
    *events: ChatSessionEvent, state: ChatSessionState | None = None
) -> list[ChatSessionStep]:
    """Apply events in order; return each step."""
    current = state or initial_state()
    steps = []
    for event in events:
        result = step(current, event)
        steps.append(result)
        current = result.state
    return steps


def sent_turns(steps: list[ChatSessionStep]) -> list[tuple[int, str]]:
    return [(e.run, e.text) for s in steps for e in s.effects if isinstance(e, SendTurn)]


def test_send_from_idle_starts_a_run_and_rides_its_first_turn() -> None:
    steps = run_events(Send("hi"), RunStarted())
    assert steps[0].accepted is True
    assert steps[0].effects == (StartRun(1, None),)
    assert steps[0].state.lifecycle == Starting()
    assert steps[1].effects == (SendTurn(1, "hi"),)
    assert steps[1].state.lifecycle.phase is Phase.STREAMING


def test_queue_during_starting_rides_the_first_turn() -> None:
    steps = run_events(Send("a"), Send("b"), Enqueue("b"), Enqueue("c"), RunStarted())
    assert steps[1].accepted is False, "starting reads busy: a second send must queue"
    assert sent_turns(steps) == [(1, "a\n\nb\n\nc")]
    assert steps[-1].state.queue == ()
    assert [e for s in steps for e in s.effects if isinstance(e, StartRun)] == [StartRun(1, None)]


def test_result_drains_the_queue_into_the_next_turn() -> None:
    steps = run_events(Send("a"), RunStarted(), Enqueue("b"), Enqueue("c"), sdk("result"))
    assert sent_turns(steps) == [(1, "a"), (1, "b" + QUEUE_SEPARATOR + "c")]
    assert steps[-1].state.lifecycle.phase is Phase.STREAMING


def test_run_death_with_a_queue_starts_a_fresh_run_and_drains_into_it() -> None:
    steps = run_events(Send("a"), RunStarted(), Enqueue("b"), RunClosed(1), RunStarted())
    death = steps[3]
    assert death.effects == (Emit("close", None), StartRun(2, None))
    assert sent_turns(steps) == [(1, "a"), (2, "b")]


def test_run_death_without_a_queue_goes_idle() -> None:
    steps = run_events(Send("a"), RunStarted(), RunClosed(1))
    assert steps[-1].state.lifecycle == Idle()
    assert steps[-1].effects == (Emit("close", None),)


def test_stop_clears_the_queue_and_does_not_drain() -> None:
    steps = run_events(Send("a"), RunStarted(), Enqueue("b"), Stop(), RunClosed(1))
    stop, closed = steps[3], steps[4]
    assert stop.effects == (CloseRun(1),)
    assert stop.state.queue == ()
    assert stop.state.lifecycle.phase is Phase.STOPPING
    assert closed.effects == (Emit("close", 0),), "an intentional stop closes with 0, no drain"
    assert closed.state.lifecycle == Idle()


def test_stop_remembers_whether_a_turn_was_in_flight() -> None:
    busy = run_events(Send("a"), RunStarted(), Stop())[-1].state
    assert session_busy(busy)
    idle_run = run_events(Send("a"), RunStarted(), sdk("result"), Stop())[-1].state
    assert not session_busy(idle_run)


def test_restart_drains_the_queue_into_a_fresh_run() -> None:
    steps = run_events(Send("a"), RunStarted(), Enqueue("b"), Restart(), RunClosed(1), RunStarted())
    assert steps[3].effects == (CloseRun(1),)
    assert steps[3].state.lifecycle.phase is Phase.STREAMING, "restart leaves the phase alone"
    assert steps[4].effects == (Emit("close", None), StartRun(2, None))
    assert sent_turns(steps) == [(1, "a"), (2, "b")]


def test_reset_session_stops_and_forgets_the_session_id() -> None:
    steps = run_events(Send("a"), RunStarted(), sdk("init", session_id="s-1"), ResetSession())
    assert steps[2].state.session_id == "s-1"
    reset = steps[3]
    assert reset.effects == (CloseRun(1), ForgetSessionId())
    assert reset.state.session_id is None
    assert reset.state.lifecycle.phase is Phase.STOPPING


def test_a_reset_takes_no_session_id_back_from_the_run_it_stopped() -> None:
    # Rule 9: messages the stopped run still delivers carry the forgotten id.
    steps = run_events(
        Send("a"),
        RunStarted(),
        sdk("init", session_id="s-1"),
        ResetSession(),
        sdk("assistant", "late", session_id="s-1"),
        sdk("result", session_id="s-1"),
        RunClosed(1),
        Send("b"),
    )
    reset, late, result, closed, fresh = steps[3:]
    assert reset.state.forgotten_run == 1
    assert late.state.session_id is None
    assert late.effects == (Emit("message", sdk("assistant", "late", session_id="s-1").message),)
    assert not any(isinstance(effect, SaveSessionId) for effect in result.effects)
    assert closed.state.forgotten_run is None
    # The next run starts a new session, as the reset asked.
    assert fresh.effects == (StartRun(2, None),)


def test_a_reset_in_the_close_window_forgets_the_closing_runs_id_too() -> None:
    state = run_events(Send("a"), RunStarted(), sdk("init", session_id="s-1"), Restart())[-1].state
    reset = step(state, ResetSession())
    assert reset.effects == (ForgetSessionId(),), "the run is closing already"
    late = step(reset.state, sdk("result", session_id="s-1"))
    assert late.state.session_id is None


def test_a_run_starting_at_a_reset_opens_in_the_session_it_was_asked_to_resume() -> None:
    # Rule 9's limit: nothing stops a start in flight (rule 6), so its id is the session's.
    state = run_events(Send("a"), RunStarted(), sdk("init", session_id="s-1"), sdk("result"))
    restarted = run_events(Restart(), RunClosed(1), Send("b"), state=state[-1].state)
    assert restarted[-1].effects == (StartRun(2, "s-1"),)
    reset = step(restarted[-1].state, ResetSession())
    assert reset.state.forgotten_run is None
    opened = run_events(RunStarted(), sdk("init", session_id="s-1", run=2), state=reset.state)
    assert opened[-1].state.session_id == "s-1"


def test_a_send_in_the_close_window_is_refused() -> None:
    after_restart = run_events(Send("a"), RunStarted(), sdk("result"), Restart())[-1].state
    assert not session_running(after_restart)
    refused = step(after_restart, Send("b"))
    assert refused.accepted is False
    assert refused.effects == (), "no second run may race onto the session"
    after_stop = run_events(Send("a"), RunStarted(), sdk("result"), Stop())[-1].state
    assert step(after_stop, Send("b")).accepted is False


def test_a_drain_in_the_close_window_keeps_the_queue() -> None:
    state = run_events(Send("a"), RunStarted(), Restart(), Enqueue("b"))[-1].state
    result = step(state, sdk("result"))
    assert result.state.queue == ("b",), "a drain that would be refused must not drop the queue"
    assert not any(isinstance(e, SendTurn) for e in result.effects)


def test_on_result_busy_flips_off_before_feature_deltas_apply() -> None:
    state = run_events(Send("a"), RunStarted(), sdk("assistant", "done <chat-app x/>"))[-1].state
    result = step(state, sdk("result"))
    kinds = [
        type(e).__name__ + (f":{e.event}" if isinstance(e, Emit) else "") for e in result.effects
    ]
    assert kinds == ["Emit:message", "Emit:done", "Emit:turn-text", "ApplyFeatureDeltas"]
    # Effects are performed against the state the step returned: not busy, so a listener
    # reacting to `done` or to the features may send.
    assert not session_busy(result.state)
    assert can_accept_send(result.state)


def test_drain_comes_after_the_feature_deltas() -> None:
    state = run_events(Send("a"), RunStarted(), sdk("assistant", "x"), Enqueue("b"))[-1].state
    effects = step(state, sdk("result")).effects
    deltas = next(i for i, e in enumerate(effects) if isinstance(e, ApplyFeatureDeltas))
    drain = next(i for i, e in enumerate(effects) if isinstance(e, SendTurn))
    assert deltas < drain


def test_the_sdk_assigned_session_id_is_saved_and_used_to_resume() -> None:
    steps = run_events(
        Send("a"),
        RunStarted(),
        sdk("init", session_id="s-1"),
        sdk("result"),
        Stop(),
        RunClosed(1),
        Send("b"),
    )
    assert SaveSessionId("s-1") in steps[2].effects
    assert steps[-1].effects == (StartRun(2, "s-1"),)
    assert step(initial_state("loaded"), Send("x")).effects == (StartRun(1, "loaded"),)


def test_a_start_failure_returns_to_idle_reports_the_turn_and_keeps_the_queue() -> None:
    steps = run_events(Send("a"), Enqueue("b"), RunStartFailed("boom"))
    assert steps[-1].effects == (ReportStartFailed("boom", "a"),)
    assert steps[-1].state.lifecycle == Idle()
    assert steps[-1].state.queue == ("b",)


def test_a_failed_start_of_a_drain_puts_the_texts_back_at_the_head_of_the_queue() -> None:
    steps = run_events(
        Send("a"), RunStarted(), Enqueue("b"), Enqueue("c\n\nd"), RunClosed(1), Enqueue("e")
    )
    assert steps[4].effects == (Emit("close", None), StartRun(2, None))
    failed = step(steps[-1].state, RunStartFailed("boom"))
    assert failed.effects == (ReportStartFailed("boom", None),)
    assert failed.state.queue == ("b", "c\n\nd", "e"), "drained texts are never dropped"


def test_a_refused_drained_turn_goes_back_to_the_head_and_rides_a_fresh_run() -> None:
    steps = run_events(
        Send("a"), RunStarted(), Enqueue("b"), Enqueue("c"), sdk("result"), Enqueue("d")
    )
    assert sent_turns(steps)[-1] == (1, "b" + QUEUE_SEPARATOR + "c")
    refused = step(steps[-1].state, TurnRefused(1))
    # Rule 8: closed as a restart is, not left streaming a turn nobody took.
    assert refused.effects == (CloseRun(1),)
    assert refused.state.queue == ("b", "c", "d")
    assert not session_running(refused.state), "the close window: sends queue"
    closed = run_events(RunClosed(1), RunStarted(), state=refused.state)
    assert closed[0].effects == (Emit("close", None), StartRun(2, None))
    assert sent_turns(closed) == [(2, "b" + QUEUE_SEPARATOR + "c" + QUEUE_SEPARATOR + "d")]


def test_a_refused_turn_of_a_caller_closes_the_run_and_puts_nothing_back() -> None:
    state = run_events(Send("a"), RunStarted(), sdk("result"), Send("b"), Enqueue("c"))[-1].state
    refused = step(state, TurnRefused(1))
    assert refused.effects == (CloseRun(1),)
    assert refused.state.queue == ("c",), "the caller's own text is the caller's to queue"


def test_a_refused_first_turn_is_not_put_back() -> None:
    # Drained into a fresh run after a death: a first turn refused again and again
    # would start runs without end.
    steps = run_events(Send("a"), RunStarted(), Enqueue("b"), RunClosed(1), RunStarted())
    refused = step(steps[-1].state, TurnRefused(2))
    assert refused.effects == (CloseRun(2),)
    assert refused.state.queue == ()


def test_a_turn_refused_after_a_restart_goes_back_with_no_second_close() -> None:
    steps = run_events(Send("a"), RunStarted(), Enqueue("b"), sdk("result"), Restart())
    refused = step(steps[-1].state, TurnRefused(1))
    assert refused.effects == (), "the restart asked for the close already"
    assert refused.state.queue == ("b",)


def test_a_turn_refused_while_stopping_puts_nothing_back() -> None:
    steps = run_events(Send("a"), RunStarted(), Enqueue("b"), sdk("result"), Stop())
    refused = step(steps[-1].state, TurnRefused(1))
    assert refused.effects == ()
    assert refused.state.queue == (), "the stop cleared the queue the turn would go back to"


def test_only_the_current_runs_turn_in_flight_can_be_refused() -> None:
    ready = run_events(Send("a"), RunStarted(), sdk("result"))[-1].state
    with pytest.raises(InvariantError, match="refused a turn while ready"):
        step(ready, TurnRefused(1))
    streaming = run_events(Send("b"), state=ready)[-1].state
    with pytest.raises(InvariantError):
        step(streaming, TurnRefused(2))


def test_interrupt_only_touches_an_open_run() -> None:
    assert step(initial_state(), Interrupt()).effects == ()
    state = run_events(Send("a"), RunStarted())[-1].state
    assert step(state, Interrupt()).effects == (InterruptRun(1),)


@pytest.mark.parametrize(
    "event",
    [
        RunStarted(),
        RunStartFailed("x"),
        RunClosed(1),
        sdk("result"),
        sdk("init", session_id="s"),
        TurnRefused(1),
    ],
)
def test_engine_events_without_a_run_are_invariant_failures(event: ChatSessionEvent) -> None:
    with pytest.raises(InvariantError):
        step(initial_state(), event)


def test_a_task_message_is_emitted_and_nothing_else() -> None:
    state = run_events(Send("a"), RunStarted())[-1].state
    task = {
        "type": "task",
        "session_id": "",
        "uuid": "u",
        "task": {"phase": "started", "taskId": "t", "status": "running"},
    }
    result = step(state, SdkMessageArrived(1, task))  # type: ignore[arg-type]
    assert result.effects == (Emit("task", task),)
    assert result.state == state


# --- The property: no accepted text is ever lost or duplicated ---------------------


def texts_of(turn: str) -> list[str]:
    return turn.split(QUEUE_SEPARATOR)


class ChatSessionLedger(RuleBasedStateMachine):
    """Random event sequences against the model. Every text the session accepted (a send
    it accepted, or an enqueue) is, at every moment, in exactly one place: sent in a turn,
    waiting in the queue or as a starting run's first turn, reported failed, discarded
    by a deliberate stop, or refused by the run and not put back (rule 8)."""

    def __init__(self) -> None:
        super().__init__()
        self.state = initial_state()
        self.accepted: Counter[str] = Counter()
        self.sent: Counter[str] = Counter()
        self.failed: Counter[str] = Counter()
        self.discarded: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()
        # The texts of the last turn sent onto the current run, until it ends.
        self.in_flight: list[str] = []
        self.counter = 0
        self.runs_asked = 0

    def fresh_text(self) -> str:
        self.counter += 1
        return f"m{self.counter}"

    def apply(self, event: ChatSessionEvent) -> ChatSessionStep:
        before = self.state
        result = step(before, event)
        self.state = result.state
        if (
            isinstance(event, Stop | ResetSession)
            and CloseRun(before.runs_started) in result.effects
        ):
            self.discarded.update(before.queue)
        if isinstance(event, TurnRefused):
            # What went back is waiting again, not sent; the rest the run lost.
            back = result.state.queue[: len(result.state.queue) - len(before.queue)]
            assert list(back) == self.in_flight[: len(back)], "a refused turn goes back whole"
            self.sent.subtract(self.in_flight)
            self.refused.update(self.in_flight[len(back) :])
            self.in_flight = []
        if isinstance(event, RunClosed) or (
            isinstance(event, SdkMessageArrived) and event.message["type"] == "result"
        ):
            self.in_flight = []
        for effect in result.effects:
            self.account(effect)
        return result

    def account(self, effect: Effect) -> None:
        match effect:
            case SendTurn(run=run, text=text):
                assert run == self.state.runs_started, "turns go onto the current run"
                self.sent.update(texts_of(text))
                self.in_flight = texts_of(text)
            case ReportStartFailed(failed_text=str() as text):
                self.failed[text] += 1
            case StartRun(run=run):
                self.runs_asked += 1
                assert run == self.runs_asked, "runs are numbered in order"
            case _:
                pass

    @rule()
    def send(self) -> None:
        text = self.fresh_text()
        could = can_accept_send(self.state)
        result = self.apply(Send(text))
        assert result.accepted is could
        if result.accepted:
            self.accepted[text] += 1

    @rule()
    def enqueue(self) -> None:
        text = self.fresh_text()
        self.apply(Enqueue(text))
        self.accepted[text] += 1

    @rule(event=st.sampled_from([Stop(), Restart(), ResetSession(), Interrupt()]))
    def caller(self, event: ChatSessionEvent) -> None:
        self.apply(event)

    @precondition(lambda self: isinstance(self.state.lifecycle, Starting))
    @rule(ok=st.booleans())
    def start_outcome(self, ok: bool) -> None:
        self.apply(RunStarted() if ok else RunStartFailed("no"))

    @precondition(
        lambda self: self.state.lifecycle.phase in (Phase.READY, Phase.STREAMING, Phase.STOPPING)
    )
    @rule(kind=st.sampled_from(["init", "assistant", "result"]))
    def message(self, kind: EngineName) -> None:
        self.apply(sdk(kind, "text", "s-1", run=self.state.runs_started))

    @precondition(
        lambda self: self.state.lifecycle.phase in (Phase.READY, Phase.STREAMING, Phase.STOPPING)
    )
    @rule()
    def run_ends(self) -> None:
        self.apply(RunClosed(self.state.runs_started))

    @precondition(lambda self: self.state.lifecycle.phase in (Phase.STREAMING, Phase.STOPPING))
    @rule()
    def turn_refused(self) -> None:
        self.apply(TurnRefused(self.state.runs_started))

    @invariant()
    def nothing_lost_or_duplicated(self) -> None:
        waiting = Counter(self.state.queue) + Counter(self.state.first_turn)
        accounted = self.sent + waiting + self.failed + self.discarded + self.refused
        assert accounted == self.accepted

    @invariant()
    def state_is_coherent(self) -> None:
        lifecycle = self.state.lifecycle
        assert bool(self.state.first_turn) == isinstance(lifecycle, Starting)
        assert not self.state.close_requested or lifecycle.phase in (
            Phase.READY,
            Phase.STREAMING,
            Phase.STOPPING,
        )
        if lifecycle.phase is Phase.STOPPING:
            assert self.state.close_requested, "stopping always closed its run"
        if self.state.turn_drained:
            assert lifecycle.phase in (Phase.STREAMING, Phase.STOPPING), "only a turn in flight"
        if self.state.forgotten_run is not None:
            assert lifecycle_run(lifecycle) == self.state.forgotten_run, "only until its close"


ChatSessionLedger.TestCase.settings = settings(
    max_examples=200, stateful_step_count=40, deadline=None
)
test_chat_session_ledger = ChatSessionLedger.TestCase
