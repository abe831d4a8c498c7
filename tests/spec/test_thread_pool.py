"""The thread session model and the pool's pure decisions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from beebox_spec.errors import InvariantError
from beebox_spec.js_values import to_iso_timestamp
from beebox_spec.lifecycle import Idle
from beebox_spec.permissions import (
    STOPPED_MESSAGE,
    AnswerAsk,
    AnswerPermission,
    PendingPermission,
    PermissionAsked,
    PermissionEnd,
    PermissionNotPending,
    PermissionReply,
)
from beebox_spec.phases import Phase
from beebox_spec.sdk_messages import StreamEventMessage, TaskMessage
from beebox_spec.thread_pool import (
    MAX_AGE,
    MAX_MESSAGES,
    REMINDER,
    CloseRun,
    Emit,
    LogSkip,
    Park,
    RunClosed,
    RunStarted,
    RunStartFailed,
    SdkMessageArrived,
    Send,
    SendTurn,
    SessionBusyError,
    SettleTurn,
    StartRun,
    Stop,
    ThreadEvent,
    ThreadRecord,
    ThreadSessionState,
    ThreadStep,
    TurnRefused,
    compose_turn,
    initial_thread_state,
    plan_send,
    record_after_failure,
    record_after_success,
    should_rotate,
    step,
)
from conformance.scenario import EngineName, EngineStep, scripted_sdk_message
from tests.spec.test_permissions import request

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def sdk(run: int, engine: EngineName, text: str = "", session_id: str = "") -> SdkMessageArrived:
    return SdkMessageArrived(
        run, scripted_sdk_message(EngineStep(engine, text, session_id), session_id, 1)
    )


def run_events(*events: ThreadEvent, state: ThreadSessionState | None = None) -> list[ThreadStep]:
    current = state or initial_thread_state()
    steps = []
    for event in events:
        result = step(current, event)
        steps.append(result)
        current = result.state
    return steps


def test_a_send_while_busy_raises_session_busy_error() -> None:
    starting = run_events(Send("a"))[-1].state
    with pytest.raises(SessionBusyError, match="Session is busy"):
        step(starting, Send("b"))
    streaming = step(starting, RunStarted()).state
    with pytest.raises(SessionBusyError):
        step(streaming, Send("b"))


def test_park_or_stop_while_starting_settles_now_and_closes_the_run_when_it_opens() -> None:
    for call, kept in ((Park(), "old"), (Stop(), None)):
        steps = run_events(Send("a"), call, RunStarted(), state=initial_thread_state("old"))
        abandoned = steps[1]
        assert abandoned.effects == (SettleTurn("closed"),)
        assert abandoned.state.session_id == kept
        opened = steps[2]
        assert opened.effects == (CloseRun(1),), "nothing may be sent on an abandoned run"
        assert opened.state.lifecycle == Idle()
        # Its late messages are ignored, its close only tells listeners.
        assert step(opened.state, sdk(1, "init", session_id="old")).effects == ()
        assert step(opened.state, RunClosed(1)).effects == (Emit("close"),)


def test_an_abandoned_start_that_fails_settles_nothing_twice() -> None:
    steps = run_events(Send("a"), Park(), RunStartFailed("boom"))
    assert steps[-1].effects == ()
    assert steps[-1].state.lifecycle == Idle()


def test_a_refused_turn_closes_its_run_and_the_close_settles_it() -> None:
    streaming = run_events(Send("a"), RunStarted())[-1].state
    refused = step(streaming, TurnRefused(1))
    # Rule 6: the session asks for the close; the turn stays in flight until it comes.
    assert refused.effects == (CloseRun(1),)
    assert refused.state.lifecycle.phase is Phase.STREAMING
    closed = step(refused.state, RunClosed(1))
    assert closed.effects == (Emit("close"), SettleTurn("closed"))
    assert closed.state.lifecycle == Idle()


def test_a_refusal_from_a_run_let_go_of_does_nothing_and_one_out_of_turn_is_a_bug() -> None:
    streaming = run_events(Send("a"), RunStarted())[-1].state
    parked = step(streaming, Park()).state
    assert step(parked, TurnRefused(1)) == ThreadStep(parked)
    ready = step(streaming, sdk(1, "result")).state
    with pytest.raises(InvariantError, match="refused a turn while ready"):
        step(ready, TurnRefused(1))


def test_the_first_session_id_is_kept() -> None:
    steps = run_events(Send("a"), RunStarted(), sdk(1, "init", session_id="s-1"))
    assert Emit("session", "s-1") in steps[-1].effects
    again = step(steps[-1].state, sdk(1, "assistant", "x", session_id="s-2"))
    assert again.state.session_id == "s-1"
    assert not any(isinstance(e, Emit) and e.event == "session" for e in again.effects)


def test_a_fresh_session_sends_the_text_as_is_and_a_resumed_one_adds_the_reminder() -> None:
    assert run_events(Send("a"), RunStarted())[-1].effects == (SendTurn(1, "a"),)
    resumed = initial_thread_state(session_id="s-1")
    steps = run_events(Send("a"), RunStarted(), state=resumed)
    assert steps[0].effects == (StartRun(1, "s-1"),)
    assert steps[1].effects == (SendTurn(1, "a" + REMINDER),)


def test_the_session_link_follows_the_reminder_when_a_view_base_exists() -> None:
    turn = compose_turn("a", "s-1", "https://box.example/chat")
    assert turn == "a" + REMINDER + "\n[Session link: https://box.example/chat?session=s-1]"
    assert compose_turn("a", None, "https://box.example/chat") == "a"


def test_chat_responses_are_delivered_as_soon_as_they_are_complete() -> None:
    state = run_events(Send("a"), RunStarted())[-1].state
    first = step(state, sdk(1, "assistant", "<chat-response> hello </chat-response><chat-resp"))
    assert Emit("chat-response", "hello") in first.effects
    second = step(first.state, sdk(1, "assistant", "onse>more</chat-response>"))
    assert Emit("chat-response", "more") in second.effects
    done = step(second.state, sdk(1, "result"))
    assert done.effects[-3:] == (
        Emit(
            "turn-text", "<chat-response> hello </chat-response><chat-response>more</chat-response>"
        ),
        Emit("done"),
        SettleTurn("done"),
    )
    assert done.state.lifecycle.phase is Phase.READY


def test_stream_events_and_tasks_are_logged_skips() -> None:
    state = run_events(Send("a"), RunStarted())[-1].state
    stream_event: StreamEventMessage = {
        "type": "stream_event",
        "session_id": "s-1",
        "uuid": "u",
        "event": {},
        "parent_tool_use_id": None,
    }
    result = step(state, SdkMessageArrived(1, stream_event))
    # The session id is captured first, whatever the message; then the message is skipped.
    assert result.effects == (Emit("session", "s-1"), LogSkip("stream_event"))
    task: TaskMessage = {
        "type": "task", "session_id": "s-1", "uuid": "u",
        "task": {"phase": "started", "taskId": "t", "status": "running"},
    }  # fmt: skip
    assert step(result.state, SdkMessageArrived(1, task)).effects == (LogSkip("task"),)


def test_park_closes_straight_to_idle_and_keeps_the_session_id() -> None:
    steps = run_events(Send("a"), RunStarted(), sdk(1, "init", session_id="s-1"), Park())
    park = steps[-1]
    assert park.effects == (CloseRun(1), SettleTurn("closed"))
    assert park.state.lifecycle == Idle()
    assert park.state.session_id == "s-1"
    # The parked run's stream ends later; the session has moved on and only hears "close".
    assert step(park.state, RunClosed(1)).effects == (Emit("close"),)


def test_stop_forgets_the_session_id() -> None:
    steps = run_events(
        Send("a"), RunStarted(), sdk(1, "init", session_id="s-1"), sdk(1, "result"), Stop()
    )
    assert steps[-1].state.session_id is None
    assert steps[-1].effects == (CloseRun(1),)


def test_a_run_ending_on_its_own_settles_the_turn_as_closed() -> None:
    steps = run_events(Send("a"), RunStarted(), RunClosed(1))
    assert steps[-1].effects == (Emit("close"), SettleTurn("closed"))
    assert steps[-1].state.lifecycle == Idle()


def test_a_start_failure_settles_the_turn() -> None:
    steps = run_events(Send("a"), RunStartFailed("boom"))
    assert steps[-1].effects == (SettleTurn("start-failed", "boom"),)
    assert steps[-1].state.lifecycle == Idle()


@pytest.mark.parametrize("event", [RunStarted(), RunStartFailed("x"), RunClosed(1)])
def test_engine_events_nobody_asked_for_are_invariant_failures(event: ThreadEvent) -> None:
    with pytest.raises(InvariantError):
        step(initial_thread_state(), event)


def record(count: int = 1, created: datetime = NOW, session_id: str = "s-1") -> ThreadRecord:
    return ThreadRecord(
        sessionId=session_id,
        createdAt=to_iso_timestamp(created),
        lastUsedAt=to_iso_timestamp(created),
        messageCount=count,
    )


def test_rotation_happens_at_fifty_messages_or_a_day() -> None:
    assert not should_rotate(record(MAX_MESSAGES - 1), NOW)
    assert should_rotate(record(MAX_MESSAGES), NOW)
    assert not should_rotate(record(created=NOW - MAX_AGE + timedelta(seconds=1)), NOW)
    assert should_rotate(record(created=NOW - MAX_AGE), NOW)
    assert should_rotate(
        ThreadRecord(sessionId="s", createdAt="garbage", lastUsedAt="", messageCount=1), NOW
    )
    # A creation time with no zone is not an instant: rotate rather than raise.
    assert should_rotate(
        ThreadRecord(sessionId="s", createdAt="2026-12-02T11:00:00", lastUsedAt="", messageCount=1),
        NOW,
    )


def test_plan_send_parks_another_thread_and_resumes_unless_rotated() -> None:
    records = {"t1": record(session_id="s-1"), "t2": record(MAX_MESSAGES, session_id="s-2")}
    plan = plan_send("t1", records, "t2", NOW)
    assert (plan.park_thread, plan.resume_session_id, plan.rotated) == ("t1", None, True)
    plan = plan_send("t1", records, "t1", NOW)
    assert (plan.park_thread, plan.resume_session_id, plan.rotated) == (None, "s-1", False)
    plan = plan_send(None, records, "t3", NOW)
    assert (plan.park_thread, plan.resume_session_id, plan.rotated) == (None, None, False)


@given(st.integers(min_value=1, max_value=200), st.integers(min_value=0, max_value=10_000))
def test_a_success_counts_one_message_and_keeps_the_creation_time(count: int, minutes: int) -> None:
    later = NOW + timedelta(minutes=minutes)
    updated = record_after_success(record(count), "s-1", later)
    assert updated["messageCount"] == count + 1
    assert updated["createdAt"] == to_iso_timestamp(NOW)
    assert updated["lastUsedAt"] == to_iso_timestamp(later)
    fresh = record_after_success(record(count), "s-2", later)
    assert fresh["messageCount"] == 1
    assert fresh["createdAt"] == to_iso_timestamp(later)


def test_a_failure_deletes_the_thread_record() -> None:
    records = {"t1": record(), "t2": record()}
    assert record_after_failure(records, "t1") == {"t2": records["t2"]}


# --- Rule 7: permission requests ------------------------------------------------------


DENY_STOPPED = PermissionReply("deny", STOPPED_MESSAGE)


def asking(*ids: str) -> ThreadSessionState:
    """A thread session mid-turn on run 1, its run waiting on ``ids``."""
    asks = [PermissionAsked(1, request(request_id)) for request_id in ids]
    return run_events(Send("a"), RunStarted(), *asks)[-1].state


def test_an_ask_is_announced_and_the_session_stays_busy() -> None:
    result = step(asking(), PermissionAsked(1, request("p-1")))
    assert result.effects == (Emit("permission-request", request("p-1")),)
    assert result.state.permissions == (PendingPermission("p-1", 1),)
    # Waiting for an answer is a turn in flight: a thread session refuses a send.
    with pytest.raises(SessionBusyError):
        step(result.state, Send("more"))


@pytest.mark.parametrize("control", [Park(), Stop()])
def test_park_and_stop_deny_whats_pending_before_the_close(control: ThreadEvent) -> None:
    result = step(asking("p-1", "p-2"), control)
    assert result.effects == (
        AnswerAsk(1, "p-1", DENY_STOPPED),
        AnswerAsk(1, "p-2", DENY_STOPPED),
        Emit("permission-ended", PermissionEnd("p-1", "stopped", "deny")),
        Emit("permission-ended", PermissionEnd("p-2", "stopped", "deny")),
        CloseRun(1),
        SettleTurn("closed"),
    )
    assert result.state.permissions == ()


def test_a_refused_turn_denies_before_its_close() -> None:
    result = step(asking("p-1"), TurnRefused(1))
    assert result.effects[0] == AnswerAsk(1, "p-1", DENY_STOPPED)
    assert result.effects[-1] == CloseRun(1)


def test_a_parked_runs_ask_is_denied_at_once_and_not_announced() -> None:
    parked = step(asking(), Park()).state
    result = step(parked, PermissionAsked(1, request("late")))
    assert result.effects == (AnswerAsk(1, "late", DENY_STOPPED),)
    assert result.state.permissions == ()


def test_the_runs_close_ends_what_it_asked_unanswered() -> None:
    result = step(asking("p-1"), RunClosed(1))
    assert result.effects[0] == Emit("permission-ended", PermissionEnd("p-1", "run-ended", None))
    assert not any(isinstance(effect, AnswerAsk) for effect in result.effects)


def test_an_answer_reaches_the_run_and_a_second_is_refused() -> None:
    result = step(asking("p-1"), AnswerPermission("p-1", PermissionReply("allow")))
    assert result.effects[0] == AnswerAsk(1, "p-1", PermissionReply("allow"))
    with pytest.raises(PermissionNotPending):
        step(result.state, AnswerPermission("p-1", PermissionReply("allow")))
