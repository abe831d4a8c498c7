"""Permission requests (`beebox_spec.permissions`), alone and in the chat session's model."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from beebox_spec.chat_session import (
    ChatSessionEvent,
    ChatSessionState,
    ChatSessionStep,
    CloseRun,
    Emit,
    ResetSession,
    Restart,
    RunClosed,
    RunStarted,
    Send,
    Stop,
    TurnRefused,
    initial_state,
    observe,
    step,
)
from beebox_spec.entries import JsonValue
from beebox_spec.errors import InvariantError
from beebox_spec.permissions import (
    DENIED_MESSAGE,
    MAX_DENY_MESSAGE_CHARS,
    STOPPED_MESSAGE,
    TIMED_OUT_MESSAGE,
    AnswerAsk,
    AnswerPermission,
    InvalidPermissionAnswer,
    PendingPermission,
    PermissionAsked,
    PermissionEnd,
    PermissionNotPending,
    PermissionReply,
    PermissionRequest,
    PermissionTimedOut,
    PermissionWithdrawn,
    answer,
    ask,
    can_always_allow,
    deny_run,
    drop_run,
    parse_permission_answer,
    time_out,
    withdraw,
)
from beebox_spec.phases import Phase
from tests.spec.test_chat_session import run_events, sdk


def request(request_id: str, tool: str = "Bash") -> PermissionRequest:
    return {
        "id": request_id,
        "toolName": tool,
        "input": {"command": "touch x"},
        "toolUseId": f"toolu_{request_id}",
        "canAlwaysAllow": True,
    }


ALLOW = PermissionReply("allow")
DENY_STOPPED = PermissionReply("deny", STOPPED_MESSAGE)

# --- The rules alone ---------------------------------------------------------------------


def test_an_ask_is_pending_and_announced() -> None:
    asked = ask((), 1, request("p-1"), run_closing=False)
    assert asked.pending == (PendingPermission("p-1", 1),)
    assert asked.announce == request("p-1")
    assert asked.answers == ()
    assert asked.ended == ()


def test_an_ask_of_a_closing_run_is_denied_at_once_and_not_announced() -> None:
    asked = ask((), 1, request("p-1"), run_closing=True)
    assert asked.pending == ()
    assert asked.announce is None
    assert asked.answers == (AnswerAsk(1, "p-1", DENY_STOPPED),)


def test_an_id_is_asked_once() -> None:
    with pytest.raises(InvariantError, match="asked twice"):
        ask((PendingPermission("p-1", 1),), 1, request("p-1"), run_closing=False)


def test_an_answer_ends_the_request_and_reaches_its_run() -> None:
    pending = (PendingPermission("p-1", 1), PendingPermission("p-2", 1))
    allowed = answer(pending, "p-2", PermissionReply("allow", always=True))
    assert allowed.pending == (PendingPermission("p-1", 1),)
    assert allowed.answers == (AnswerAsk(1, "p-2", PermissionReply("allow", always=True)),)
    assert allowed.ended == (PermissionEnd("p-2", "answered", "allow"),)
    # A denial without words gets the box's words; with words, the person's.
    bare = answer(pending, "p-1", PermissionReply("deny"))
    assert bare.answers == (AnswerAsk(1, "p-1", PermissionReply("deny", DENIED_MESSAGE)),)
    said = answer(pending, "p-1", PermissionReply("deny", "not that file"))
    assert said.answers == (AnswerAsk(1, "p-1", PermissionReply("deny", "not that file")),)
    assert said.ended == (PermissionEnd("p-1", "answered", "deny"),)


def test_only_a_pending_request_can_be_answered() -> None:
    with pytest.raises(PermissionNotPending, match="p-9"):
        answer((PendingPermission("p-1", 1),), "p-9", ALLOW)


def test_a_timeout_denies_a_pending_request_and_nothing_else() -> None:
    pending = (PendingPermission("p-1", 1),)
    expired = time_out(pending, "p-1")
    assert expired.pending == ()
    assert expired.answers == (AnswerAsk(1, "p-1", PermissionReply("deny", TIMED_OUT_MESSAGE)),)
    assert expired.ended == (PermissionEnd("p-1", "timed-out", "deny"),)
    # Answered already: the timer that fires after is nothing.
    assert time_out((), "p-1").answers == ()


def test_a_stop_denies_the_runs_requests_a_close_drops_them() -> None:
    pending = (PendingPermission("p-1", 1), PendingPermission("p-2", 1))
    stopped = deny_run(pending, 1)
    assert stopped.pending == ()
    assert [a.reply for a in stopped.answers] == [DENY_STOPPED, DENY_STOPPED]
    assert [end.how for end in stopped.ended] == ["stopped", "stopped"]
    dropped = drop_run(pending, 1)
    assert dropped.answers == ()
    assert dropped.ended == (
        PermissionEnd("p-1", "run-ended", None),
        PermissionEnd("p-2", "run-ended", None),
    )
    # Another run's requests are not this run's to end.
    assert deny_run(pending, 2).pending == pending


def test_a_withdrawal_ends_the_request_unanswered() -> None:
    pending = (PendingPermission("p-1", 1),)
    assert withdraw(pending, 1, "p-1").ended == (PermissionEnd("p-1", "withdrawn", None),)
    # An answer and a withdrawal crossed: the second finds nothing.
    assert withdraw((), 1, "p-1").ended == ()


@pytest.mark.parametrize(
    ("suggestions", "expected"),
    [
        ([{"type": "addRules", "behavior": "allow", "rules": []}], True),
        ([{"type": "setMode", "mode": "acceptEdits"}], False),
        ([{"type": "addRules", "behavior": "deny"}], False),
        ([], False),
        (None, False),
        ("addRules", False),
    ],
)
def test_always_is_offered_only_for_a_rule_that_allows(
    suggestions: JsonValue, expected: bool
) -> None:
    assert can_always_allow(suggestions) is expected


@pytest.mark.parametrize(
    ("body", "reply"),
    [
        ({"decision": "allow"}, PermissionReply("allow")),
        ({"decision": "allow", "always": True}, PermissionReply("allow", always=True)),
        ({"decision": "deny", "message": "no"}, PermissionReply("deny", "no")),
        ({"decision": "deny", "always": False}, PermissionReply("deny")),
    ],
)
def test_an_answer_as_a_person_sends_it(body: JsonValue, reply: PermissionReply) -> None:
    assert parse_permission_answer(body) == reply


@pytest.mark.parametrize(
    "body",
    [
        None,
        [],
        "allow",
        {},
        {"decision": "yes"},
        {"decision": "Allow"},
        {"decision": "allow", "extra": 1},
        {"decision": "deny", "message": 3},
        {"decision": "deny", "message": "x" * (MAX_DENY_MESSAGE_CHARS + 1)},
        {"decision": "allow", "always": "true"},
        {"decision": "deny", "always": True},
    ],
)
def test_what_is_not_an_answer_is_refused(body: JsonValue) -> None:
    with pytest.raises(InvalidPermissionAnswer):
        parse_permission_answer(body)


# --- In the chat session (rule 10) ----------------------------------------------------------


def streaming() -> ChatSessionState:
    """A session with run 1 open and a turn in flight."""
    return run_events(Send("go"), RunStarted())[-1].state


def asked(state: ChatSessionState, *ids: str) -> ChatSessionState:
    for request_id in ids:
        state = step(state, PermissionAsked(1, request(request_id))).state
    return state


def test_an_ask_is_announced_and_changes_no_phase() -> None:
    before = streaming()
    result = step(before, PermissionAsked(1, request("p-1")))
    assert result.effects == (Emit("permission-request", request("p-1")),)
    seen = observe(result.state)
    assert (seen.phase, seen.busy, seen.running, seen.permissions) == (
        Phase.STREAMING,
        True,
        True,
        ("p-1",),
    )
    assert observe(before).permissions == ()
    # A turn waiting for an answer is in flight: a send is refused (the caller queues).
    assert step(result.state, Send("more")).accepted is False


@pytest.mark.parametrize("control", [Stop(), ResetSession(), Restart()])
def test_stop_reset_and_restart_deny_whats_pending_before_the_close(
    control: ChatSessionEvent,
) -> None:
    result = step(asked(streaming(), "p-1", "p-2"), control)
    answers = [e for e in result.effects if isinstance(e, AnswerAsk)]
    assert answers == [AnswerAsk(1, "p-1", DENY_STOPPED), AnswerAsk(1, "p-2", DENY_STOPPED)]
    kinds = [type(e).__name__ for e in result.effects]
    assert kinds.index("CloseRun") > max(i for i, k in enumerate(kinds) if k == "AnswerAsk")
    ended = [e.detail for e in result.effects if isinstance(e, Emit)]
    assert ended == [
        PermissionEnd("p-1", "stopped", "deny"),
        PermissionEnd("p-2", "stopped", "deny"),
    ]
    assert result.state.permissions == ()


def test_a_refused_turn_denies_before_its_close() -> None:
    result = step(asked(streaming(), "p-1"), TurnRefused(1))
    assert result.effects[0] == AnswerAsk(1, "p-1", DENY_STOPPED)
    assert result.effects[-1] == CloseRun(1)


def test_an_ask_while_stopping_is_denied_at_once() -> None:
    stopping = step(streaming(), Stop()).state
    result = step(stopping, PermissionAsked(1, request("late")))
    assert result.effects == (AnswerAsk(1, "late", DENY_STOPPED),)
    assert result.state.permissions == ()


def test_a_runs_death_ends_its_requests_unanswered() -> None:
    result = step(asked(streaming(), "p-1"), RunClosed(1))
    assert not any(isinstance(e, AnswerAsk) for e in result.effects)
    assert Emit("permission-ended", PermissionEnd("p-1", "run-ended", None)) in result.effects
    assert result.state.permissions == ()


def test_only_the_current_run_asks() -> None:
    with pytest.raises(InvariantError, match="permission asked by run 2"):
        step(streaming(), PermissionAsked(2, request("p-1")))
    with pytest.raises(InvariantError, match="while idle"):
        step(initial_state(), PermissionAsked(1, request("p-1")))


def test_an_answer_reaches_the_run_and_the_turn_goes_on() -> None:
    state = asked(streaming(), "p-1", "p-2")
    # Answered in the reverse order of asking, each on its own.
    second = step(state, AnswerPermission("p-2", ALLOW))
    assert second.effects[0] == AnswerAsk(1, "p-2", ALLOW)
    first = step(second.state, AnswerPermission("p-1", PermissionReply("deny", "no")))
    assert first.effects[0] == AnswerAsk(1, "p-1", PermissionReply("deny", "no"))
    assert first.state.permissions == ()
    assert first.state.lifecycle.phase is Phase.STREAMING
    with pytest.raises(PermissionNotPending):
        step(first.state, AnswerPermission("p-1", ALLOW))
    done = step(first.state, sdk("result", run=1))
    assert done.state.lifecycle.phase is Phase.READY


class PermissionLedger(RuleBasedStateMachine):
    """Any interleaving of asks, answers, timeouts, withdrawals and lifecycle calls:
    every request asked is pending or ended exactly once, its run answered at most once,
    and only the current run's requests are pending."""

    def __init__(self) -> None:
        super().__init__()
        self.state = initial_state()
        self.asked: list[str] = []
        self.ended: Counter[str] = Counter()
        self.answered: Counter[str] = Counter()
        self.announced: Counter[str] = Counter()

    def apply(self, event: ChatSessionEvent) -> ChatSessionStep:
        result = step(self.state, event)
        for effect in result.effects:
            if isinstance(effect, AnswerAsk):
                self.answered[effect.request_id] += 1
            elif isinstance(effect, Emit) and effect.event == "permission-ended":
                assert isinstance(effect.detail, PermissionEnd)
                self.ended[effect.detail.id] += 1
            elif isinstance(effect, Emit) and effect.event == "permission-request":
                self.announced[str(effect.detail["id"])] += 1  # type: ignore[index]
        if isinstance(
            event, PermissionAsked | PermissionWithdrawn | AnswerPermission | PermissionTimedOut
        ):
            assert result.state.lifecycle == self.state.lifecycle, "requests change no phase"
        self.state = result.state
        return result

    @rule()
    def send(self) -> None:
        self.apply(Send("t"))

    @rule(event=st.sampled_from([Stop(), Restart(), ResetSession()]))
    def control(self, event: ChatSessionEvent) -> None:
        self.apply(event)

    @precondition(lambda self: self.state.lifecycle.phase is Phase.STARTING)
    @rule()
    def started(self) -> None:
        self.apply(RunStarted())

    @precondition(
        lambda self: self.state.lifecycle.phase in (Phase.READY, Phase.STREAMING, Phase.STOPPING)
    )
    @rule()
    def ask(self) -> None:
        request_id = f"p-{len(self.asked)}"
        self.asked.append(request_id)
        self.apply(PermissionAsked(self.state.runs_started, request(request_id)))

    @precondition(lambda self: bool(self.asked))
    @rule(data=st.data(), how=st.sampled_from(["allow", "deny", "time-out", "withdraw"]))
    def end(self, data: st.DataObject, how: str) -> None:
        request_id = data.draw(st.sampled_from(self.asked))
        pending = request_id in {held.id for held in self.state.permissions}
        if how in ("allow", "deny"):
            reply = PermissionReply("allow" if how == "allow" else "deny")
            if pending:
                self.apply(AnswerPermission(request_id, reply))
            else:
                with pytest.raises(PermissionNotPending):
                    step(self.state, AnswerPermission(request_id, reply))
        elif how == "time-out":
            self.apply(PermissionTimedOut(request_id))
        else:
            self.apply(PermissionWithdrawn(self.state.runs_started, request_id))

    @precondition(
        lambda self: self.state.lifecycle.phase in (Phase.READY, Phase.STREAMING, Phase.STOPPING)
    )
    @rule(closed=st.booleans())
    def run_outcome(self, closed: bool) -> None:
        run = self.state.runs_started
        self.apply(RunClosed(run) if closed else sdk("result", run=run))

    @invariant()
    def each_request_ends_once(self) -> None:
        pending = [held.id for held in self.state.permissions]
        assert len(set(pending)) == len(pending)
        for request_id in self.asked:
            assert self.ended[request_id] + pending.count(request_id) <= 1
            assert self.answered[request_id] <= 1
            assert self.announced[request_id] <= 1
        assert all(held.run == self.state.runs_started for held in self.state.permissions)
        if self.state.lifecycle.phase in (Phase.IDLE, Phase.STARTING):
            assert pending == [], "no run, nothing pending"


PermissionLedger.TestCase.settings = settings(
    max_examples=200, stateful_step_count=40, deadline=None
)
test_permission_ledger = PermissionLedger.TestCase
