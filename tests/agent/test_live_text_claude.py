"""Live text on Claude Code itself: the box shows a reply as the CLI streams it (issue 37).

The real CLI (asked for partial messages by `ClaudeEngine`) against the Messages API
double: a reply streamed in 20 pieces, a tenth of a second apart, and held half-way
(`Text.hold`) so the test reads the box mid-stream without waiting for a time.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from beebox_impl.services import SendRequest, TurnStarted
from beebox_impl.transcript import TailSlice
from tests.agent.box_support import LoggedEvent, claude_box
from tests.agent.claude_cli import OfflineClaude
from tests.agent.messages_api import Drop, MessagesApiDouble, Reply, Text

pytestmark = pytest.mark.anyio

# 100 characters: 20 pieces of 5.
REPLY = "".join(f"piece {index:02d}, " for index in range(10))


def is_whole_reply(event: LoggedEvent) -> bool:
    message = event.data.get("message", {})
    return event.name == "message" and message.get("type") == "assistant"


async def test_a_streamed_reply_shows_piece_by_piece_then_whole_once(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble
) -> None:
    halfway = threading.Event()
    streamed = Text(REPLY, pieces=20, delay=0.1, hold=halfway)
    assert len(REPLY) == 100
    assert len(streamed.deltas()) == 20
    api.script(Reply((streamed,)))
    async with claude_box(tmp_path / "box", claude) as (box, log):
        outcome = await box.send(SendRequest("tell me, slowly", message_id="m-1"))
        assert isinstance(outcome, TurnStarted)
        # The first half has streamed; the API holds the rest.
        await log.wait_for(lambda event: event.name == "turn-delta", count=10)
        mid_turn = await box.bootstrap(window=TailSlice(50))
        shown_mid_turn = [event.data["text"] for event in log.events if event.name == "turn-delta"]
        whole_mid_turn = [event for event in log.events if is_whole_reply(event)]
        halfway.set()
        await log.wait_for_name("done")
        after = await box.bootstrap(window=TailSlice(50))
    # Mid-turn: the page has the text so far, and a reload reads the same.
    assert "".join(shown_mid_turn) == REPLY[:50]
    assert mid_turn["liveText"] == REPLY[:50]
    assert not whole_mid_turn
    assert mid_turn["status"]["busy"] is True
    history = mid_turn["history"]
    assert history is not None
    assert [entry["type"] for entry in history["entries"]] == ["user"]
    # Then every piece, in order, and the whole message once, after the last piece.
    deltas = [event for event in log.events if event.name == "turn-delta"]
    assert "".join(event.data["text"] for event in deltas) == REPLY
    (whole,) = [event for event in log.events if is_whole_reply(event)]
    assert whole.data["message"]["message"]["content"] == [{"type": "text", "text": REPLY}]
    assert deltas[-1].seq < whole.seq
    # No stream event is a message; the live text is gone once the turn is done.
    assert not [
        event
        for event in log.events
        if event.name == "message" and event.data["message"]["type"] == "stream_event"
    ]
    assert after["liveText"] is None
    (text,) = log.named("turn-text")
    assert text.data == {"text": REPLY}


async def test_a_dropped_attempt_leaves_the_live_text_to_the_retry(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble
) -> None:
    # The API cuts the first attempt after some text; the CLI asks again. Whether the
    # CLI says the cut attempt's deltas depends on when the cut lands (a fresh-clone
    # run saw them, most runs here do not); either way the retry's first piece is
    # marked `first`, so the live text a page shows is the retry's alone.
    api.script(Drop("half an answer"), Reply.text("the whole answer, at last"))
    async with claude_box(tmp_path / "box", claude) as (box, log):
        await box.send(SendRequest("hello", message_id="m-1"))
        (text,) = await log.wait_for_name("turn-text")
    assert len(api.message_requests) == 2
    deltas = [event.data for event in log.events if event.name == "turn-delta"]
    starts = [index for index, data in enumerate(deltas) if data["first"]]
    assert starts[0] == 0
    assert len(starts) in (1, 2)
    attempts = ["".join(data["text"] for data in deltas[start:end]) for start, end in
                zip(starts, [*starts[1:], len(deltas)], strict=True)]  # fmt: skip
    assert attempts[-1] == "the whole answer, at last"
    if len(attempts) == 2:
        assert "half an answer".startswith(attempts[0])
    assert text.data == {"text": "the whole answer, at last"}
