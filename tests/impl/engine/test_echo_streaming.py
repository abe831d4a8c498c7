"""The echo engine streams its answers as Claude Code streams a message (live text).

Its ``stream_event`` messages have the shapes of those the real CLI says with
``--include-partial-messages`` (`tests/corpus/claude-code/<version>/stream-partial.ndjson`,
recorded by `tests.agent.record_corpus`); the answer's line is written when its
complete message is said, so the transcript never holds text still streaming.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

import beebox_impl.engine.echo as echo_module
from beebox_impl.engine import EchoEngine, EchoRun, StartOptions
from beebox_impl.engine.echo import ECHO_MAX_PIECES, ECHO_PIECE_DELAY, answer_pieces
from beebox_spec.entries import JsonObject
from beebox_spec.sdk_messages import adapt_sdk_message, live_text_after, text_delta
from tests.impl.engine.test_echo import (
    Ids,
    StepClock,
    box,
    next_message,
    projects,
    read_lines,
    turn,
)
from tests.impl.engine.test_echo_shapes import CORPUS, shape

pytestmark = pytest.mark.anyio

# The echo tests' fixtures, used here by name.
__all__ = ["box", "projects"]

CLI_PARTIAL_STREAM = max(
    CORPUS.glob("*/stream-partial.ndjson"),
    key=lambda path: tuple(int(part) for part in path.parent.name.split(".")),
)


class Pauses:
    """An injected ``sleep``: records each wait; while ``held``, waits until released."""

    def __init__(self) -> None:
        self.waits: list[float] = []
        self.held = False
        self.waiting = anyio.Event()
        self._released = anyio.Event()

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        if self.held:
            self.waiting.set()
            await self._released.wait()

    def release(self) -> None:
        self.held = False
        self._released.set()


def streaming_engine(projects: Path, pauses: Pauses | None = None) -> EchoEngine:
    return EchoEngine(
        projects,
        StepClock(),
        Ids(),
        offload_io=False,
        sleep=pauses if pauses is not None else Pauses(),
    )


def event_of(message: JsonObject) -> JsonObject:
    """A stream event's Messages API event."""
    event = message["event"]
    assert isinstance(event, dict)
    return event


def kinds(messages: list[JsonObject]) -> list[str]:
    """Each message's type, a stream event's as its event's type."""
    return [
        str(event_of(message)["type"] if message["type"] == "stream_event" else message["type"])
        for message in messages
    ]


def test_an_answer_streams_in_words_at_most_so_many_pieces() -> None:
    assert answer_pieces('You said: "hello there"') == ["You", " said:", ' "hello', ' there"']
    for words in (95, 100, 1000):
        long = " ".join(f"w{index}" for index in range(words))
        pieces = answer_pieces(long)
        assert ECHO_MAX_PIECES - 1 <= len(pieces) <= ECHO_MAX_PIECES
        assert "".join(pieces) == long
    assert answer_pieces("") == []
    # A space is never lost: a piece of spaces alone is a piece.
    assert answer_pieces("  two  spaces ") == [" ", " two", " ", " spaces", " "]


async def test_a_turn_streams_its_answer_then_says_it_whole(box: Path, projects: Path) -> None:
    pauses = Pauses()
    run = await streaming_engine(projects, pauses).start(StartOptions(cwd=box))
    said = await turn(run, run.messages(), "hello there")
    pieces = answer_pieces('You said: "hello there"')
    assert kinds(said) == [
        "system",
        "message_start",
        "content_block_start",
        *["content_block_delta"] * len(pieces),
        "assistant",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "result",
    ]
    # A pause before each piece of text, of the engine's delay.
    assert pauses.waits == [ECHO_PIECE_DELAY] * len(pieces)
    live: str | None = None
    for message in said:
        adapted = adapt_sdk_message(message)
        assert adapted is not None
        assert adapted["type"] != "unknown"
        if adapted["type"] == "assistant":
            # Just before the whole message, the live text is all of it.
            assert live == 'You said: "hello there"'
        live = live_text_after(live, adapted)
    assert live is None
    # Every stream event names the message it streams and the session.
    events = [message for message in said if message["type"] == "stream_event"]
    (assistant,) = [message for message in said if message["type"] == "assistant"]
    body = assistant["message"]
    assert isinstance(body, dict)
    assert {event["api_message_id"] for event in events} == {body["id"]}
    assert {event["session_id"] for event in events} == {run.session_id}
    await run.close()


async def test_the_transcript_holds_the_answer_only_once_it_is_said_whole(
    box: Path, projects: Path
) -> None:
    pauses = Pauses()
    pauses.held = True
    run = await streaming_engine(projects, pauses).start(StartOptions(cwd=box))
    stream = run.messages()
    await run.send("hello")
    seen: list[JsonObject] = []
    async with anyio.create_task_group() as tasks:

        async def read() -> None:
            while not seen or seen[-1]["type"] != "result":
                seen.append(await next_message(stream))

        tasks.start_soon(read)
        await pauses.waiting.wait()
        # Mid-stream: the prompt is written, the answer is not, and no text streamed yet.
        assert [line["type"] for line in read_lines(run.transcript_path)] == ["user"]
        assert not [message for message in seen if text_delta_of(message)]
        pauses.release()
    (prompt, answer) = read_lines(run.transcript_path)
    assert answer["type"] == "assistant"
    assert answer["parentUuid"] == prompt["uuid"]
    (assistant,) = [message for message in seen if message["type"] == "assistant"]
    assert answer["uuid"] == assistant["uuid"]
    await run.close()


def text_delta_of(message: JsonObject) -> str | None:
    adapted = adapt_sdk_message(message)
    return None if adapted is None else text_delta(adapted)


async def test_a_close_mid_stream_ends_it_there_and_the_next_run_goes_on_from_the_prompt(
    box: Path, projects: Path
) -> None:
    pauses = Pauses()
    pauses.held = True
    engine = streaming_engine(projects, pauses)
    run = await engine.start(StartOptions(cwd=box))
    stream = run.messages()
    await run.send("cut me off")
    async with anyio.create_task_group() as tasks:
        seen: list[JsonObject] = []

        async def read() -> None:
            async for message in stream:
                seen.append(message)

        tasks.start_soon(read)
        await pauses.waiting.wait()
        await run.close()
        pauses.release()
    # The stream ended mid-answer: no complete message, no result, no answer line.
    assert kinds(seen) == ["system", "message_start", "content_block_start"]
    (prompt,) = read_lines(run.transcript_path)
    resumed = await engine.start(StartOptions(cwd=box, resume_session_id=run.session_id))
    await turn(resumed, resumed.messages(), "again")
    _, again, answer = read_lines(run.transcript_path)
    assert again["parentUuid"] == prompt["uuid"]
    assert answer["parentUuid"] == again["uuid"]
    await resumed.close()


async def test_an_answer_whose_line_was_not_written_leaves_the_chain_at_the_prompt(
    box: Path, projects: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_append = echo_module._append
    appends = 0

    def second_fails(path: Path, data: bytes) -> None:
        nonlocal appends
        appends += 1
        # The prompt is written; the answer's append, next, fails.
        if appends == 2:
            raise OSError("disk gone")
        real_append(path, data)

    monkeypatch.setattr(echo_module, "_append", second_fails)
    run = await streaming_engine(projects).start(StartOptions(cwd=box))
    stream = run.messages()
    await run.send("lost answer")
    # init, message_start, content_block_start, then every piece of the answer.
    streamed = 3 + len(answer_pieces('You said: "lost answer"'))
    said = [await next_message(stream) for _ in range(streamed)]
    assert kinds(said)[-1] == "content_block_delta"
    with pytest.raises(OSError, match="disk gone"):
        await next_message(stream)
    (prompt,) = read_lines(run.transcript_path)
    # The rest of that turn is not said; the next turn hangs under the prompt.
    said = await turn(run, stream, "kept")
    assert said[-1]["result"] == 'You said: "kept"'
    _, kept, answer = read_lines(run.transcript_path)
    assert kept["parentUuid"] == prompt["uuid"]
    assert answer["parentUuid"] == kept["uuid"]
    await run.close()


async def test_a_tool_turn_streams_its_answer_after_the_tool(box: Path, projects: Path) -> None:
    run: EchoRun = await streaming_engine(projects).start(StartOptions(cwd=box))
    said = await turn(run, run.messages(), "tool: look")
    kinds_said = kinds(said)
    assert kinds_said[:3] == ["system", "assistant", "user"]
    assert kinds_said[3] == "message_start"
    assert kinds_said[-1] == "result"
    assert [line["type"] for line in read_lines(run.transcript_path)] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    await run.close()


async def test_the_stream_events_have_the_clis_shapes(box: Path, projects: Path) -> None:
    run = await streaming_engine(projects).start(StartOptions(cwd=box))
    said = await turn(run, run.messages(), "hello")
    await run.close()
    cli = [json.loads(line) for line in CLI_PARTIAL_STREAM.read_text(encoding="utf-8").splitlines()]
    echo_events = [message for message in said if message["type"] == "stream_event"]
    assert len(echo_events) > 3
    for event in echo_events:
        like = next(
            message
            for message in cli
            if message["type"] == "stream_event"
            and kind_of(event_of(message)) == kind_of(event_of(event))
        )
        assert shape(event) == shape(like), f"echo {event} / cli {like}"


def kind_of(event: JsonObject) -> tuple[object, object]:
    """An event's type, and for a delta or a block's start the kind of it."""
    inner = event.get("delta") or event.get("content_block")
    return event["type"], inner.get("type") if isinstance(inner, dict) else None
