"""A sub-agent's messages are not the turn's (`beebox_spec.sdk_messages`, "A sub-agent's
messages"): the thread session's `<chat-response>` delivery (`beebox_spec.thread_pool`
rule 2) reads the main conversation alone."""

from __future__ import annotations

from beebox_spec.thread_pool import (
    Emit,
    RunStarted,
    SdkMessageArrived,
    Send,
    SettleTurn,
    ThreadSessionState,
    initial_thread_state,
    step,
)
from tests.spec.test_live_text import SESSION, assistant, result


def streaming() -> ThreadSessionState:
    """A thread session resuming its SDK session, a turn in flight on its open run."""
    return step(step(initial_thread_state(SESSION), Send("a")).state, RunStarted()).state


def test_a_sub_agents_chat_response_is_never_delivered_to_the_thread() -> None:
    state = streaming()
    # The sub-agent was asked to answer in the thread's format, and did: it answers
    # the call that started it, not the thread.
    theirs = step(
        state, SdkMessageArrived(1, assistant("<chat-response>x</chat-response>", "toolu_1"))
    )
    assert theirs.effects == ()
    ours = step(theirs.state, SdkMessageArrived(1, assistant("<chat-response>ok</chat-response>")))
    assert ours.effects == (Emit("chat-response", "ok"),)
    done = step(ours.state, SdkMessageArrived(1, result()))
    assert done.effects[-3:] == (
        Emit("turn-text", "<chat-response>ok</chat-response>"),
        Emit("done"),
        SettleTurn("done"),
    )


def test_a_sub_agents_open_tag_holds_back_none_of_the_main_conversations_reply() -> None:
    state = streaming()
    half = step(state, SdkMessageArrived(1, assistant("<chat-response>unfinished", "toolu_1")))
    whole = step(half.state, SdkMessageArrived(1, assistant("<chat-response>ok</chat-response>")))
    assert whole.effects == (Emit("chat-response", "ok"),)
