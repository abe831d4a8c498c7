"""The Messages API double speaks the API: read back by Anthropic's own client library.

The real CLI is its main client (every other test in this folder); here the
official ``anthropic`` package checks the wire format on its own, so a fault in the
double shows up as one, not as a puzzling CLI failure.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import anthropic
import pytest
from anthropic.types import MessageParam

from tests.agent.messages_api import Drop, Fail, MessagesApiDouble, Reply, Text, Thinking, ToolUse

MESSAGES: list[MessageParam] = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


@pytest.fixture
def sdk(api: MessagesApiDouble) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=api.url, api_key="sk-test", max_retries=0) as client:
        yield client


def test_a_streamed_reply_is_read_back_block_by_block(
    api: MessagesApiDouble, sdk: anthropic.Anthropic
) -> None:
    tool = ToolUse("Bash", {"command": "ls -l"})
    api.script(Reply((Thinking("let me see"), Text("two small words"), tool)))
    with sdk.messages.stream(model="m", max_tokens=50, messages=MESSAGES) as stream:
        deltas = [event.text for event in stream if event.type == "text"]
        message = stream.get_final_message()
    assert deltas == ["two", " small", " words"]
    thinking, text, tool_use = message.content
    assert thinking.type == "thinking"
    assert thinking.thinking == "let me see"
    assert text.type == "text"
    assert text.text == "two small words"
    assert tool_use.type == "tool_use"
    assert (tool_use.id, tool_use.name, tool_use.input) == (tool.id, "Bash", {"command": "ls -l"})
    assert message.stop_reason == "tool_use"
    # Not streamed: the same message whole.
    api.script(Reply.text("whole"))
    whole = sdk.messages.create(model="m", max_tokens=5, messages=MESSAGES)
    assert [block.type for block in whole.content] == ["text"]
    assert api.unscripted == 0


def test_errors_carry_the_status_and_the_apis_error_body(
    api: MessagesApiDouble, sdk: anthropic.Anthropic
) -> None:
    api.script(
        Fail(429, "slow down", retry_after=2), Fail(529, "Overloaded"), Fail(401), Fail(500, "boom")
    )
    with pytest.raises(anthropic.RateLimitError) as limited:
        sdk.messages.create(model="m", max_tokens=5, messages=MESSAGES)
    assert limited.value.response.headers["retry-after"] == "2"
    assert limited.value.body == {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "slow down"},
    }
    with pytest.raises(anthropic.APIStatusError) as overloaded:
        sdk.messages.create(model="m", max_tokens=5, messages=MESSAGES)
    assert overloaded.value.status_code == 529
    with pytest.raises(anthropic.AuthenticationError):
        sdk.messages.create(model="m", max_tokens=5, messages=MESSAGES)
    with pytest.raises(anthropic.InternalServerError) as failed:
        sdk.messages.create(model="m", max_tokens=5, messages=MESSAGES)
    assert failed.value.body == {"type": "error", "error": {"type": "api_error", "message": "boom"}}


def test_a_dropped_stream_ends_without_its_end(
    api: MessagesApiDouble, sdk: anthropic.Anthropic
) -> None:
    api.script(Drop("half a sentence"))
    texts: list[str] = []
    with (
        pytest.raises(anthropic.APIConnectionError),
        sdk.messages.stream(model="m", max_tokens=5, messages=MESSAGES) as stream,
    ):
        texts.extend(event.text for event in stream if event.type == "text")
    assert "".join(texts) == "half a sentence"


def test_a_held_text_waits_half_way_for_its_release(
    api: MessagesApiDouble, sdk: anthropic.Anthropic
) -> None:
    hold = threading.Event()
    api.script(Reply((Text("one two three four", hold=hold),)))
    seen: list[str] = []
    with sdk.messages.stream(model="m", max_tokens=5, messages=MESSAGES) as stream:
        for event in stream:
            if event.type == "text":
                seen.append(event.text)
                if len(seen) == 2:
                    # Half-way: nothing more comes until the release.
                    released_at = time.monotonic() + 0.3
                    threading.Timer(0.3, hold.set).start()
        assert time.monotonic() >= released_at - 0.05
    assert "".join(seen) == "one two three four"


def test_every_request_is_recorded_and_the_unscripted_are_counted(
    api: MessagesApiDouble, sdk: anthropic.Anthropic
) -> None:
    photo = "aGVsbG8="  # b"hello"
    message: MessageParam = {
        "role": "user",
        "content": [
            {"type": "text", "text": "<system-reminder>\nnot the user's</system-reminder>"},
            {"type": "text", "text": "look"},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": photo},
            },
        ],
    }
    sdk.messages.create(
        model="m",
        max_tokens=5,
        system="be brief",
        messages=[message],
    )
    sdk.messages.count_tokens(model="m", messages=MESSAGES)
    assert api.unscripted == 1
    first, second = api.requests
    assert first.is_messages
    assert first.system_text() == "be brief"
    assert first.user_texts() == ["look"]
    assert first.images() == [b"hello"]
    assert first.api_key == "sk-test"
    assert not second.is_messages
    api.wait_for_messages(1, timeout=1)
    with pytest.raises(AssertionError, match="did not reach"):
        api.wait_for_messages(2, timeout=0.05)
