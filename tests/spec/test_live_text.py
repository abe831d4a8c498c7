"""Live text: the partial-message rule (`beebox_spec.sdk_messages`, "Live text") and the
chat session's rule 11 (`beebox_spec.chat_session`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from beebox_spec.chat_session import (
    ApplyFeatureDeltas,
    ChatSessionState,
    ChatSessionStep,
    CloseRun,
    Emit,
    Restart,
    RunClosed,
    RunStarted,
    SaveSessionId,
    SdkMessageArrived,
    Send,
    Stop,
    initial_state,
    observe,
    session_live_text,
    step,
)
from beebox_spec.entries import JsonObject
from beebox_spec.phases import Phase
from beebox_spec.sdk_messages import (
    AdaptedMessage,
    LiveTextDelta,
    accumulate_assistant_text,
    adapt_sdk_message,
    assistant_text,
    live_text_after,
    text_delta,
)

SESSION = "s-1"
CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "claude-code"
# The CLI asked for partial messages, as the Claude engine asks (`tests.agent.record_corpus`).
PARTIAL_STREAMS = sorted(CORPUS.glob("*/stream-partial.ndjson"))


def adapted(raw: JsonObject) -> AdaptedMessage:
    message = adapt_sdk_message(raw)
    assert message is not None
    return message


def stream_event(event: JsonObject, parent: str | None = None) -> AdaptedMessage:
    return adapted(
        {
            "type": "stream_event",
            "event": event,
            "session_id": SESSION,
            "parent_tool_use_id": parent,
            "uuid": "u-event",
        }
    )


def delta(text: str, kind: str = "text_delta", parent: str | None = None) -> AdaptedMessage:
    field = {"text_delta": "text", "thinking_delta": "thinking"}.get(kind, "partial_json")
    return stream_event(
        {"type": "content_block_delta", "index": 0, "delta": {"type": kind, field: text}}, parent
    )


def assistant(text: str, parent: str | None = None) -> AdaptedMessage:
    return adapted(
        {
            "type": "assistant",
            "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
            "session_id": SESSION,
            "parent_tool_use_id": parent,
            "uuid": "u-assistant",
        }
    )


def result(text: str = "") -> AdaptedMessage:
    return adapted(
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "duration_ms": 1,
            "num_turns": 1,
            "total_cost_usd": 0,
            "session_id": SESSION,
            "result": text,
        }
    )


MESSAGE_START = stream_event({"type": "message_start", "message": {"content": []}})


# --- The partial-message rule -------------------------------------------------------


def test_a_text_delta_appends_to_the_live_text() -> None:
    assert text_delta(delta("Hel")) == "Hel"
    assert live_text_after(None, delta("Hel")) == "Hel"
    assert live_text_after("Hel", delta("lo")) == "Hello"


@pytest.mark.parametrize(
    "message",
    [
        pytest.param(MESSAGE_START, id="message_start"),
        pytest.param(assistant("Hello"), id="the complete message"),
        pytest.param(result("Hello"), id="the turn's result"),
    ],
)
def test_what_drops_the_live_text(message: AdaptedMessage) -> None:
    assert live_text_after("Hel", message) is None
    assert text_delta(message) is None


@pytest.mark.parametrize(
    "message",
    [
        pytest.param(delta("hmm", "thinking_delta"), id="thinking"),
        pytest.param(delta('{"a":', "input_json_delta"), id="tool input"),
        pytest.param(delta(""), id="a delta of no text"),
        pytest.param(delta("theirs", parent="toolu_1"), id="a sub-agent's text"),
        pytest.param(
            stream_event({"type": "message_start", "message": {}}, parent="toolu_1"),
            id="a sub-agent's message_start",
        ),
        pytest.param(
            stream_event({"type": "content_block_start", "index": 1, "content_block": {}}),
            id="a block's start",
        ),
        pytest.param(stream_event({"type": "content_block_stop", "index": 0}), id="block stop"),
        pytest.param(stream_event({"type": "message_delta", "delta": {}}), id="message_delta"),
        pytest.param(stream_event({"type": "message_stop"}), id="message_stop"),
        pytest.param(
            stream_event({"type": "content_block_delta", "delta": "not an object"}),
            id="a delta that is not an object",
        ),
        pytest.param(
            adapted({"type": "system", "subtype": "init", "session_id": SESSION}), id="init"
        ),
        pytest.param(
            adapted({"type": "user", "message": {"role": "user", "content": []}}), id="user"
        ),
        pytest.param(assistant("Found 3 files", parent="toolu_1"), id="a sub-agent's message"),
        pytest.param(adapted({"type": "mystery"}), id="unknown"),
    ],
)
def test_what_leaves_the_live_text_alone(message: AdaptedMessage) -> None:
    assert text_delta(message) is None
    assert live_text_after("Hel", message) == "Hel"
    assert live_text_after(None, message) is None


@given(st.lists(st.text(min_size=1), max_size=20))
def test_the_live_text_is_its_deltas_joined_and_never_the_turns_text(pieces: list[str]) -> None:
    live: str | None = None
    turn_text = ""
    for piece in pieces:
        message = delta(piece)
        live = live_text_after(live, message)
        turn_text = accumulate_assistant_text(turn_text, message)
    assert live == ("".join(pieces) or None)
    # The turn's text is read from complete messages only.
    assert turn_text == ""


@pytest.mark.parametrize("path", PARTIAL_STREAMS, ids=lambda path: path.parent.name)
def test_over_the_cli_stream_the_live_text_is_each_messages_text_so_far(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    live: str | None = None
    deltas: list[str] = []
    texts: list[str] = []
    for number, line in enumerate(lines, start=1):
        message = adapt_sdk_message(json.loads(line))
        if message is None:
            continue
        assert message["type"] != "unknown", number
        if message["type"] == "assistant" and assistant_text(message):
            # Just before its complete message, the live text is that message's text.
            assert live == assistant_text(message), number
            texts.append(assistant_text(message))
        piece = text_delta(message)
        if piece is not None:
            deltas.append(piece)
        live = live_text_after(live, message)
        if message["type"] in ("assistant", "result"):
            assert live is None, number
    assert texts == ["Hi from the stream, in words.", "Let me write.", "Written."]
    assert "".join(deltas) == "".join(texts)


# --- The chat session's rule 11 -----------------------------------------------------


def streaming() -> ChatSessionState:
    """A session whose run is open, a turn in flight, its id known."""
    state = initial_state(SESSION)
    for event in (Send("hi"), RunStarted()):
        state = step(state, event).state
    return state


def arrive(state: ChatSessionState, *messages: AdaptedMessage) -> list[ChatSessionStep]:
    steps = []
    for message in messages:
        steps.append(step(state, SdkMessageArrived(1, message)))
        state = steps[-1].state
    return steps


def test_text_deltas_are_turn_deltas_in_order_and_not_messages() -> None:
    steps = arrive(streaming(), MESSAGE_START, delta("Hel"), delta("hmm", "thinking_delta"))
    steps += arrive(steps[-1].state, delta("lo"), stream_event({"type": "content_block_stop"}))
    assert [step.effects for step in steps] == [
        (),
        (Emit("turn-delta", LiveTextDelta("Hel", first=True)),),
        (),
        (Emit("turn-delta", LiveTextDelta("lo", first=False)),),
        (),
    ]
    assert observe(steps[-1].state).live_text == "Hello"


def test_a_retrys_first_delta_tells_the_listener_to_start_again() -> None:
    # The CLI retries a stream the API cut: a new message_start, and the text again
    # from its start. A listener that only appended would show "HelHello".
    cut = arrive(streaming(), MESSAGE_START, delta("Hel"))
    retried = arrive(cut[-1].state, MESSAGE_START, delta("Hello"), delta("!"))
    assert [step.effects for step in retried] == [
        (),
        (Emit("turn-delta", LiveTextDelta("Hello", first=True)),),
        (Emit("turn-delta", LiveTextDelta("!", first=False)),),
    ]
    assert observe(retried[-1].state).live_text == "Hello!"


def test_the_complete_message_replaces_the_live_text_and_the_result_ends_it() -> None:
    state = arrive(streaming(), delta("Hel"), delta("lo"))[-1].state
    done, ended = arrive(state, assistant("Hello"), delta("More"), result("HelloMore"))[::2]
    assert done.effects == (Emit("message", assistant("Hello")),)
    assert session_live_text(done.state) is None
    # The turn's text is the complete messages', not the deltas'.
    assert Emit("turn-text", "Hello") in ended.effects
    assert session_live_text(ended.state) is None
    assert Emit("done") in ended.effects


def test_a_sub_agents_messages_are_no_part_of_the_turns_text() -> None:
    # A foreground Agent call: the main conversation streams, the sub-agent says its
    # work (complete, and in pieces), then the main conversation goes on.
    sub_agents = (
        assistant("Found 3 files", parent="toolu_1"),
        delta("theirs", parent="toolu_1"),
        assistant("All read", parent="toolu_1"),
    )
    steps = arrive(streaming(), delta("Let me "), *sub_agents, delta("look."))
    # Each of the sub-agent's complete messages is a message all the same.
    assert [step.effects for step in steps[1:4]] == [
        (Emit("message", sub_agents[0]),),
        (),
        (Emit("message", sub_agents[2]),),
    ]
    assert steps[-1].effects == (Emit("turn-delta", LiveTextDelta("look.", first=False)),)
    assert session_live_text(steps[-1].state) == "Let me look."
    ended = arrive(steps[-1].state, assistant("Let me look."), result())[-1]
    assert Emit("turn-text", "Let me look.") in ended.effects


def test_a_new_message_starts_its_own_live_text() -> None:
    state = arrive(streaming(), delta("a failed attempt"), MESSAGE_START, delta("Hi"))[-1].state
    assert session_live_text(state) == "Hi"


def test_the_runs_close_drops_the_live_text() -> None:
    state = arrive(streaming(), delta("Hel"))[-1].state
    closed = step(state, RunClosed(1))
    assert closed.effects == (Emit("close", None),)
    assert closed.state.live_text is None


@pytest.mark.parametrize("ask", [Stop(), Restart()], ids=["stop", "restart"])
def test_a_run_asked_to_close_streams_no_live_text(ask: Stop | Restart) -> None:
    state = arrive(streaming(), delta("Hel"))[-1].state
    asked = step(state, ask)
    assert asked.effects == (CloseRun(1),)
    assert observe(asked.state).live_text is None
    (later,) = arrive(asked.state, delta("lo"))
    assert later.effects == ()
    assert session_live_text(later.state) is None
    assert step(later.state, RunClosed(1)).state.live_text is None


def test_a_stream_event_still_carries_the_session_id() -> None:
    state = initial_state()
    for event in (Send("hi"), RunStarted()):
        state = step(state, event).state
    first = stream_event({"type": "message_start", "message": {}})
    (arrived,) = arrive(state, first)
    assert arrived.effects == (SaveSessionId(SESSION), Emit("session-id", SESSION))


def test_a_turn_the_cli_starts_itself_has_its_own_text_and_features() -> None:
    # Rule 5 (`docs/spec-decisions.md#turn-text-per-result`): Claude Code answers a
    # background sub-agent's notification in a turn no send began; its text must not
    # hold the last turn's again, nor apply the last turn's feature deltas twice.
    first = arrive(streaming(), assistant("Asking a helper."), result("Asking a helper."))
    assert Emit("turn-text", "Asking a helper.") in first[-1].effects
    said, ended = arrive(first[-1].state, assistant("Found three."), result("Found three."))
    assert said.effects == (Emit("message", assistant("Found three.")),)
    assert Emit("turn-text", "Found three.") in ended.effects
    assert ApplyFeatureDeltas("Found three.") in ended.effects
    assert ApplyFeatureDeltas("Asking a helper.") not in ended.effects


def test_a_turn_the_agent_starts_itself_reads_busy_until_its_result() -> None:
    # Rule 12 (`docs/spec-decisions.md#self-started-turns`): after a turn's result the
    # session is ready; the agent's own next turn (a background sub-agent finished)
    # makes it busy, so a send waits; its result ends it. A sub-agent's message or a
    # task event does not.
    ready = arrive(streaming(), assistant("Asking a helper."), result("Asking a helper."))[-1]
    assert observe(ready.state).phase is Phase.READY
    for not_a_turn in (assistant("theirs", parent="toolu_1"), delta("x", parent="toolu_1")):
        assert observe(arrive(ready.state, not_a_turn)[-1].state).phase is Phase.READY
    for begins in (MESSAGE_START, assistant("Found three.")):
        own = arrive(ready.state, begins)[-1].state
        assert (observe(own).phase, observe(own).busy) == (Phase.STREAMING, True)
        assert step(own, Send("and another")).accepted is False
        ended = arrive(own, result())[-1].state
        assert (observe(ended).phase, observe(ended).busy) == (Phase.READY, False)
