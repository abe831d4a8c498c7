"""The echo engine: deterministic answers and a real Claude-Code-format transcript."""

from __future__ import annotations

import base64
import json
import os
import stat
import threading
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Final

import anyio
import pytest

import beebox_impl.engine.echo as echo_module
from beebox_impl.engine import EchoEngine, EchoRun, EngineStartError, StartOptions
from beebox_impl.engine.echo import (
    ECHO_MODEL,
    ECHO_VERSION,
    INTERRUPTED_TEXT,
    describe_turn,
    ends_mid_line,
    iso_timestamp,
    last_chain_uuid,
)
from beebox_impl.transcript.location import transcript_path
from beebox_spec.entries import JsonObject
from beebox_spec.errors import InvariantError
from beebox_spec.media import extract_media
from beebox_spec.sdk_messages import adapt_sdk_message
from beebox_spec.transcript import (
    MAX_SESSION_LINE_BYTES,
    entries_from_lines,
    split_transcript_lines,
)

pytestmark = pytest.mark.anyio

START = datetime(2026, 3, 1, 12, 0, 0, 123_456, tzinfo=UTC)


class StepClock:
    """Each reading is 250 ms after the last: durations and timestamps are exact."""

    def __init__(self) -> None:
        self.readings = 0

    def __call__(self) -> datetime:
        moment = START + timedelta(milliseconds=250 * self.readings)
        self.readings += 1
        return moment


class Ids:
    """uuid-shaped ids in order: id 1, 2, 3, …"""

    def __init__(self) -> None:
        self.issued = 0

    def __call__(self) -> str:
        self.issued += 1
        return f"00000000-0000-4000-8000-{self.issued:012d}"


@pytest.fixture
def box(tmp_path: Path) -> Path:
    folder = tmp_path / "my box"
    folder.mkdir()
    return folder


@pytest.fixture
def projects(tmp_path: Path) -> Path:
    return tmp_path / "projects"


def engine_for(projects: Path, *, replay_user_messages: bool = False) -> EchoEngine:
    """An echo on the test's clock and ids whose answers arrive whole (the streamed ones
    are `test_echo_streaming.py`'s)."""
    return EchoEngine(
        projects,
        StepClock(),
        Ids(),
        offload_io=False,
        replay_user_messages=replay_user_messages,
        include_partial_messages=False,
    )


async def next_message(stream: AsyncIterator[JsonObject]) -> JsonObject:
    """The next message; a test that would wait forever fails instead."""
    with anyio.fail_after(5):
        return await stream.__anext__()


async def turn(
    run: EchoRun, stream: AsyncIterator[JsonObject], content: str | list[JsonObject]
) -> list[JsonObject]:
    """Send one turn and read the stream up to and including its result."""
    await run.send(content)
    received: list[JsonObject] = []
    while not received or received[-1]["type"] != "result":
        received.append(await next_message(stream))
    return received


def read_lines(path: Path) -> list[JsonObject]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def png(size: int, seed: int = 7) -> bytes:
    # Deterministic bytes of the given size (content does not matter, only its bytes).
    return bytes((index * seed + index // 251) % 256 for index in range(size))


def image_block(data: bytes, media_type: str = "image/png") -> JsonObject:
    return {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": media_type,
            "data": base64.b64encode(data).decode("ascii"),
        },
    }


# ---------------------------------------------------------------------------
# What it says
# ---------------------------------------------------------------------------


def test_the_echo_says_what_it_received() -> None:
    assert describe_turn("hello") == 'You said: "hello"'
    assert describe_turn([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]) == (
        'You said: "a\nb"'
    )
    two_images: list[JsonObject] = [
        {"type": "text", "text": "look"},
        image_block(png(12_345)),
        image_block(png(1_100_000), "image/jpeg"),
    ]
    assert describe_turn(two_images) == (
        'You said: "look" and sent 2 images (image/png, 12.3 KB; image/jpeg, 1.1 MB)'
    )
    assert describe_turn([image_block(png(999))]) == "You sent 1 image (image/png, 999 B)"
    url_image: JsonObject = {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}
    assert describe_turn([url_image]) == "You sent 1 image (unknown type, not inline)"
    assert describe_turn([]) == 'You said: ""'


def test_timestamps_read_like_javascript_to_iso_string() -> None:
    assert iso_timestamp(START) == "2026-03-01T12:00:00.123Z"
    east = datetime(2026, 3, 1, 14, 0, 0, 5_000, tzinfo=timezone(timedelta(hours=2)))
    assert iso_timestamp(east) == "2026-03-01T12:00:00.005Z"
    assert iso_timestamp(datetime(2026, 3, 1, 12, 0)) == "2026-03-01T12:00:00.000Z"


# ---------------------------------------------------------------------------
# A turn: the stream and the transcript
# ---------------------------------------------------------------------------


def said_texts(session_id: str, path: Path) -> list[object]:
    entries = entries_from_lines(session_id, split_transcript_lines(path.read_bytes()))
    return [entry["content"][0].get("text") for entry in entries]


# What a chat of "one", "two", "three" reads as, its echoes between.
ONE_TWO_THREE_ECHOED: Final = [
    "one",
    'You said: "one"',
    "two",
    'You said: "two"',
    "three",
    'You said: "three"',
]


async def test_a_text_turn_streams_init_assistant_result_and_writes_two_lines(
    box: Path, projects: Path
) -> None:
    run = await engine_for(projects).start(StartOptions(cwd=box))
    session = run.session_id
    assert session == "00000000-0000-4000-8000-000000000001"
    path = transcript_path(box, session, projects)
    assert run.transcript_path == path
    # Streaming input: nothing is said, and nothing written, before the first turn.
    assert not path.exists()
    stream = run.messages()
    init, assistant, result = await turn(run, stream, "hello")

    cwd = os.path.realpath(box)
    assert init["type"] == "system"
    assert init["subtype"] == "init"
    assert init["session_id"] == session
    assert init["cwd"] == cwd
    assert init["model"] == ECHO_MODEL
    assert init["tools"] == []
    assert adapt_sdk_message(init) == {"type": "system", "subtype": "init", "session_id": session}

    adapted = adapt_sdk_message(assistant)
    assert adapted == {
        "type": "assistant",
        "session_id": session,
        "uuid": assistant["uuid"],
        "message": {
            "role": "assistant",
            "content": [{"type": "text", "text": 'You said: "hello"'}],
            "stop_reason": "end_turn",
        },
        "parent_tool_use_id": None,
    }
    assert adapt_sdk_message(result) == {
        "type": "result",
        "subtype": "success",
        "session_id": session,
        "is_error": False,
        "duration_ms": 500,
        "num_turns": 1,
        "total_cost_usd": 0,
        "result": 'You said: "hello"',
    }
    assert isinstance(result["uuid"], str)

    raw_lines = path.read_text(encoding="utf-8").splitlines()
    user_line, assistant_line = (json.loads(line) for line in raw_lines)
    # Compact JSON, as Claude Code writes it.
    for line in raw_lines:
        assert line == json.dumps(json.loads(line), separators=(",", ":"), ensure_ascii=False)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # The keys, in the order, Claude Code 2.1.332 writes them (test_echo_shapes.py).
    assert list(user_line.items()) == [
        ("parentUuid", None),
        ("isSidechain", False),
        ("promptId", user_line["promptId"]),
        ("type", "user"),
        ("message", {"role": "user", "content": "hello"}),
        ("uuid", user_line["uuid"]),
        ("timestamp", "2026-03-01T12:00:00.123Z"),
        ("permissionMode", "default"),
        ("promptSource", "sdk"),
        ("sentAtMs", 1772366400123),
        ("rowSource", "local"),
        ("turnOrigin", "sdk"),
        ("turnPosition", {"promptIndex": 0, "turnIndex": 1}),
        ("userType", "external"),
        ("entrypoint", "echo"),
        ("cwd", cwd),
        ("sessionId", session),
        ("version", ECHO_VERSION),
        ("gitBranch", ""),
    ]
    # The live uuid is the transcript line's (`docs/sources.md#format-8`), chained.
    assert assistant_line["uuid"] == assistant["uuid"]
    assert assistant_line["parentUuid"] == user_line["uuid"]
    assert assistant_line["type"] == "assistant"
    assert assistant_line["sessionId"] == session
    assert assistant_line["timestamp"] == "2026-03-01T12:00:00.373Z"
    assert str(assistant_line["requestId"]).startswith("req_")
    message = assistant_line["message"]
    assert message == {
        "id": message["id"],
        "type": "message",
        "role": "assistant",
        "model": "echo",
        "content": [{"type": "text", "text": 'You said: "hello"'}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": message["usage"],
        "stop_details": None,
    }
    assert str(message["id"]).startswith("msg_")

    entries = entries_from_lines(session, split_transcript_lines(path.read_bytes()))
    assert entries == [
        {
            "uuid": user_line["uuid"],
            "type": "user",
            "timestamp": "2026-03-01T12:00:00.123Z",
            "content": [{"type": "text", "text": "hello"}],
        },
        {
            "uuid": assistant["uuid"],
            "type": "assistant",
            "timestamp": "2026-03-01T12:00:00.373Z",
            "content": [{"type": "text", "text": 'You said: "hello"'}],
        },
    ]
    await run.close()


async def test_a_photo_turn_is_stripped_by_the_reader_and_served_back_by_reference(
    box: Path, projects: Path
) -> None:
    photo = png(300_000)
    run = await engine_for(projects).start(StartOptions(cwd=box))
    stream = run.messages()
    # Key order as a client may send it: the transcript writes the CLI's.
    sent_image: JsonObject = {
        "source": {
            "data": base64.b64encode(photo).decode("ascii"),
            "media_type": "image/png",
            "type": "base64",
        },
        "type": "image",
    }
    messages = await turn(run, stream, [{"type": "text", "text": "my cat"}, sent_image])
    assert messages[-1]["result"] == 'You said: "my cat" and sent 1 image (image/png, 300.0 KB)'

    path = run.transcript_path
    raw = path.read_bytes()
    user_line = split_transcript_lines(raw)[0]
    assert len(user_line.encode("utf-8")) > MAX_SESSION_LINE_BYTES
    assert '{"type":"image","source":{"type":"base64","media_type":"image/png","data":"' in (
        user_line
    )
    user_uuid = json.loads(user_line)["uuid"]
    entries = entries_from_lines(run.session_id, split_transcript_lines(raw))
    assert entries[0] == {
        "uuid": user_uuid,
        "type": "user",
        "timestamp": "2026-03-01T12:00:00.123Z",
        # Its photo first, then its text, as Claude Code writes a prompt.
        "content": [
            {
                "type": "image",
                "imageRef": f"{run.session_id}/{user_uuid}/0",
                "mediaType": "image/png",
            },
            {"type": "text", "text": "my cat"},
        ],
    }
    assert extract_media(user_line, 0) == {"ok": True, "mediaType": "image/png", "data": photo}
    assert entries[1]["type"] == "assistant"
    await run.close()


async def test_replayed_user_messages_carry_the_transcript_uuid(box: Path, projects: Path) -> None:
    run = await engine_for(projects, replay_user_messages=True).start(StartOptions(cwd=box))
    stream = run.messages()
    init, user, assistant, result = await turn(run, stream, "hi")
    assert (init["subtype"], user["type"], assistant["type"], result["type"]) == (
        "init",
        "user",
        "assistant",
        "result",
    )
    user_line, assistant_line = read_lines(run.transcript_path)
    assert user["uuid"] == user_line["uuid"]
    assert assistant["uuid"] == assistant_line["uuid"]
    assert adapt_sdk_message(user) == {
        "type": "user",
        "message": {"role": "user", "content": []},
        "parent_tool_use_id": None,
        "session_id": run.session_id,
    }
    await run.close()


# ---------------------------------------------------------------------------
# Resume
# ---------------------------------------------------------------------------


async def test_resume_appends_to_the_same_file_and_continues_the_chain(
    box: Path, projects: Path
) -> None:
    engine = engine_for(projects)
    first = await engine.start(StartOptions(cwd=box, system_prompt="be brief"))
    stream = first.messages()
    await turn(first, stream, "one")
    await turn(first, stream, "two")
    await first.close()
    path = first.transcript_path
    before = read_lines(path)
    assert len(before) == 4
    # Lines after the chain that are not part of it: metadata, a sub-agent's line.
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"type": "custom-title", "customTitle": "t"}) + "\n")
        sidechain = {"type": "user", "uuid": "side-1", "isSidechain": True, "parentUuid": None}
        handle.write(json.dumps(sidechain) + "\n")
    assert last_chain_uuid(path) == before[-1]["uuid"]

    second = await engine.start(StartOptions(cwd=box, resume_session_id=first.session_id))
    assert second.session_id == first.session_id
    assert second.transcript_path == path
    stream = second.messages()
    init, _, result = await turn(second, stream, "three")
    assert init["session_id"] == first.session_id
    assert result["session_id"] == first.session_id
    after = read_lines(path)
    assert after[: len(before)] == before
    resumed = after[len(before) + 2 :]
    assert [line["type"] for line in resumed] == ["user", "assistant"]
    assert resumed[0]["parentUuid"] == before[-1]["uuid"]
    assert resumed[1]["parentUuid"] == resumed[0]["uuid"]
    # Every main-chain line hangs under the one before it.
    chain = [line for line in after if line.get("isSidechain") is False]
    assert [line["parentUuid"] for line in chain] == [None] + [line["uuid"] for line in chain[:-1]]
    assert said_texts(first.session_id, path) == ONE_TWO_THREE_ECHOED
    await second.close()


async def test_resuming_an_id_with_no_transcript_starts_that_file(
    box: Path, projects: Path
) -> None:
    run = await engine_for(projects).start(StartOptions(cwd=box, resume_session_id="abc-123"))
    stream = run.messages()
    await turn(run, stream, "hi")
    lines = read_lines(run.transcript_path)
    assert run.transcript_path.name == "abc-123.jsonl"
    assert lines[0]["parentUuid"] is None
    assert lines[0]["sessionId"] == "abc-123"
    await run.close()


async def test_an_unsafe_session_id_is_a_start_error(box: Path, projects: Path) -> None:
    with pytest.raises(EngineStartError, match="not a session id"):
        await engine_for(projects).start(StartOptions(cwd=box, resume_session_id="../etc"))


def test_last_chain_uuid_reads_across_blocks(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    assert last_chain_uuid(path) is None
    big = {"type": "user", "uuid": "big", "message": {"content": "x" * 200_000}}
    lines = [
        {"type": "user", "uuid": "first"},
        big,
        {"type": "summary", "summary": "s", "leafUuid": "big"},
        {"type": "assistant", "uuid": "side", "isSidechain": True},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"type":"us')
    assert last_chain_uuid(path) == "big"
    path.write_text("not json\n\n")
    assert last_chain_uuid(path) is None


# ---------------------------------------------------------------------------
# Interrupt and close
# ---------------------------------------------------------------------------


async def test_a_tool_turn_calls_the_echo_tool_and_the_history_shows_its_result(
    box: Path, projects: Path
) -> None:
    run = await engine_for(projects).start(StartOptions(cwd=box))
    stream = run.messages()
    said: list[Any] = await turn(run, stream, "tool: look here")
    _, call, result, answer, done = said
    assert [m["type"] for m in (call, result, answer, done)] == [
        "assistant",
        "user",
        "assistant",
        "result",
    ]
    (use,) = call["message"]["content"]
    assert use == {
        "type": "tool_use",
        "id": use["id"],
        "name": "Echo",
        "input": {"text": "look here"},
    }
    assert result["message"]["content"][0]["tool_use_id"] == use["id"]
    assert result["tool_use_result"]["stdout"] == "look here"
    assert done["num_turns"] == 2
    entries = entries_from_lines(
        run.session_id, split_transcript_lines(run.transcript_path.read_bytes())
    )
    assert [entry["content"][0]["type"] for entry in entries] == ["text", "tool_use", "text"]
    shown_call = entries[1]["content"][0]
    assert shown_call.get("resultSummary") == "look here"
    assert shown_call.get("inputSummary") == '{"text":"look here"}'
    # Only a text that starts with the prefix asks for the tool.
    plain = await turn(run, stream, "no tool: here")
    assert [m["type"] for m in plain] == ["assistant", "result"]
    await run.close()


async def test_an_interrupted_turn_ends_with_an_error_result(box: Path, projects: Path) -> None:
    run = await engine_for(projects).start(StartOptions(cwd=box))
    # Nothing in flight: nothing to interrupt.
    await run.interrupt()
    stream = run.messages()
    await run.send("stop me")
    await run.interrupt()
    await run.interrupt()
    init = await next_message(stream)
    result = await next_message(stream)
    assert init["subtype"] == "init"
    adapted = adapt_sdk_message(result)
    assert adapted == {
        "type": "result",
        "subtype": "error_during_execution",
        "session_id": run.session_id,
        "is_error": True,
        "duration_ms": 500,
        "num_turns": 0,
        "total_cost_usd": 0,
        "errors": ["interrupted by the user"],
    }
    # The next turn is answered as usual, and hangs under the interrupt notice.
    assistant, after = await turn(run, stream, "again")
    assert after["subtype"] == "success"
    user, notice, user_again, reply = read_lines(run.transcript_path)
    assert notice["message"] == {
        "role": "user",
        "content": [{"type": "text", "text": INTERRUPTED_TEXT}],
    }
    assert notice["parentUuid"] == user["uuid"]
    assert user_again["parentUuid"] == notice["uuid"]
    assert reply["uuid"] == assistant["uuid"]
    await run.close()


async def test_an_interrupt_after_the_answer_began_does_not_change_it(
    box: Path, projects: Path
) -> None:
    run = await engine_for(projects).start(StartOptions(cwd=box))
    stream = run.messages()
    await run.send("hello")
    assert (await next_message(stream))["subtype"] == "init"
    assistant = await next_message(stream)
    await run.interrupt()
    result = await next_message(stream)
    assert assistant["type"] == "assistant"
    assert result["subtype"] == "success"
    # The interrupt did not stick to a later turn.
    _, later = await turn(run, stream, "later")
    assert later["subtype"] == "success"
    await run.close()


async def test_an_interrupt_reaches_the_turn_in_flight_not_an_answered_one(
    box: Path, projects: Path
) -> None:
    run = await engine_for(projects).start(StartOptions(cwd=box))
    stream = run.messages()
    _, _, first = await turn(run, stream, "one")
    assert first["subtype"] == "success"
    await run.send("two")
    await run.send("three")
    await run.interrupt()
    second = await next_message(stream)
    assert second["subtype"] == "error_during_execution"
    # Only the turn in flight: the one queued behind it is answered.
    _, third = [await next_message(stream) for _ in range(2)]
    assert third["result"] == 'You said: "three"'
    await run.close()


async def test_close_ends_the_stream_at_once(box: Path, projects: Path) -> None:
    run = await engine_for(projects).start(StartOptions(cwd=box))
    stream = run.messages()
    await run.send("one")
    await run.send("two")
    first = [await next_message(stream) for _ in range(3)]
    assert [message["type"] for message in first] == ["system", "assistant", "result"]
    await run.close()
    assert run.closed
    with pytest.raises(StopAsyncIteration):
        await next_message(stream)
    # The queued second turn was never taken in.
    assert len(read_lines(run.transcript_path)) == 2
    with pytest.raises(anyio.ClosedResourceError):
        await run.send("three")
    with pytest.raises(InvariantError, match="consumed once"):
        run.messages()


async def test_close_while_the_consumer_holds_a_message(box: Path, projects: Path) -> None:
    run = await engine_for(projects).start(StartOptions(cwd=box))
    stream = run.messages()
    await run.send("one")
    await next_message(stream)  # init; the assistant message and the result are next
    await run.close()
    with pytest.raises(StopAsyncIteration):
        await next_message(stream)
    # The answer was written when the turn was read; its messages were not delivered.
    assert [line["type"] for line in read_lines(run.transcript_path)] == ["user", "assistant"]


async def test_a_pump_task_sees_every_turn_answered_in_order(box: Path, projects: Path) -> None:
    # The default: file work in worker threads.
    engine = EchoEngine(projects, StepClock(), Ids())
    run = await engine.start(StartOptions(cwd=box))
    results: list[str] = []
    done = anyio.Event()

    async def pump() -> None:
        async for message in run.messages():
            if message["type"] == "result":
                results.append(str(message["result"]))
                if len(results) == 3:
                    done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(pump)
        for text in ("a", "b", "c"):
            await run.send(text)
        await done.wait()
        await run.close()
    assert results == ['You said: "a"', 'You said: "b"', 'You said: "c"']
    lines = read_lines(run.transcript_path)
    assert [line["type"] for line in lines] == ["user", "assistant"] * 3
    assert [line["parentUuid"] for line in lines[1:]] == [line["uuid"] for line in lines[:-1]]


def fail_the_next_append(
    monkeypatch: pytest.MonkeyPatch,
    error: OSError,
    written: Callable[[bytes], bytes] = lambda data: b"",
) -> None:
    """The engine's next append writes ``written(data)`` of its bytes, then raises ``error``."""
    real_append = echo_module._append
    failures = [error]

    def failing_once(path: Path, data: bytes) -> None:
        if failures:
            if part := written(data):
                real_append(path, part)
            raise failures.pop()
        real_append(path, data)

    monkeypatch.setattr(echo_module, "_append", failing_once)


async def test_a_turn_whose_lines_were_not_written_leaves_the_chain_where_it_was(
    box: Path, projects: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = await engine_for(projects).start(StartOptions(cwd=box))
    stream = run.messages()
    fail_the_next_append(monkeypatch, OSError("disk gone"))
    await run.send("lost")
    with pytest.raises(OSError, match="disk gone"):
        await next_message(stream)
    await run.send("kept")
    # The init message was never said: it comes with the first turn written.
    init, _, result = [await next_message(stream) for _ in range(3)]
    assert init["type"] == "system"
    assert result["result"] == 'You said: "kept"'
    user, _assistant = read_lines(run.transcript_path)
    # The first line written starts the chain: nothing hangs under a line never written.
    assert user["parentUuid"] is None
    await run.close()


@pytest.mark.parametrize("offload_io", [True, False])
async def test_a_text_turn_is_appended_on_the_loop_and_a_photo_turn_where_offload_says(
    box: Path, projects: Path, monkeypatch: pytest.MonkeyPatch, offload_io: bool
) -> None:
    real_append = echo_module._append
    appended_in: list[tuple[int, bool]] = []

    def recording(path: Path, data: bytes) -> None:
        appended_in.append((len(data), threading.get_ident() == loop_thread))
        real_append(path, data)

    loop_thread = threading.get_ident()
    monkeypatch.setattr(echo_module, "_append", recording)
    engine = EchoEngine(
        projects, StepClock(), Ids(), offload_io=offload_io, include_partial_messages=False
    )
    run = await engine.start(StartOptions(cwd=box))
    stream = run.messages()
    await turn(run, stream, "just text")
    await turn(run, stream, [image_block(png(300_000))])
    (text_size, text_on_loop), (photo_size, photo_on_loop) = appended_in
    assert text_size <= echo_module.INLINE_APPEND_BYTES < photo_size
    # A text turn's few KiB never cost a trip to a worker thread; photos go there
    # unless the caller keeps all file work on the loop.
    assert text_on_loop
    assert photo_on_loop is not offload_io
    await run.close()


async def test_a_turn_recreates_the_transcripts_folder_if_it_was_removed(
    box: Path, projects: Path
) -> None:
    run = await engine_for(projects).start(StartOptions(cwd=box))
    stream = run.messages()
    await turn(run, stream, "first")
    # Someone clears the projects folder between turns: the next turn's lines still land.
    run.transcript_path.unlink()
    run.transcript_path.parent.rmdir()
    await turn(run, stream, "second")
    user, assistant = read_lines(run.transcript_path)
    assert user["message"] == {"role": "user", "content": "second"}
    assert assistant["type"] == "assistant"
    assert stat.S_IMODE(run.transcript_path.stat().st_mode) == 0o600
    await run.close()


async def test_a_line_cut_short_by_a_kill_does_not_swallow_the_next_turn(
    box: Path, projects: Path
) -> None:
    # A process killed mid-write leaves part of a line; appended to directly, the
    # next turn's line would join it, and that turn would be lost from the chat.
    engine = engine_for(projects)
    first = await engine.start(StartOptions(cwd=box))
    await turn(first, first.messages(), "one")
    await first.close()
    path = first.transcript_path
    chain_end = read_lines(path)[-1]["uuid"]
    with path.open("ab") as handle:
        handle.write(b'{"type":"user","message":{"role":"user","content":"cut sh')
    assert ends_mid_line(path)
    second = await engine.start(StartOptions(cwd=box, resume_session_id=first.session_id))
    stream = second.messages()
    await turn(second, stream, "two")
    await turn(second, stream, "three")
    assert not ends_mid_line(path)
    assert said_texts(first.session_id, path) == ONE_TWO_THREE_ECHOED
    cut, user, *_ = path.read_bytes().splitlines()[2:]
    assert cut == b'{"type":"user","message":{"role":"user","content":"cut sh'
    assert json.loads(user)["parentUuid"] == chain_end
    await second.close()


async def test_an_append_that_failed_part_way_is_ended_before_the_next(
    box: Path, projects: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = await engine_for(projects).start(StartOptions(cwd=box))
    stream = run.messages()
    await turn(run, stream, "one")
    # Half of the turn's first line reaches the file.
    fail_the_next_append(
        monkeypatch, OSError("disk full"), written=lambda data: data[: data.index(b"\n") // 2]
    )
    await run.send("lost")
    with pytest.raises(OSError, match="disk full"):
        await next_message(stream)
    await run.send("kept")
    _, result = [await next_message(stream) for _ in range(2)]
    assert result["result"] == 'You said: "kept"'
    assert said_texts(run.session_id, run.transcript_path) == [
        "one",
        'You said: "one"',
        "kept",
        'You said: "kept"',
    ]
    await run.close()


def test_ends_mid_line_reads_only_the_files_end(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    assert not ends_mid_line(path)
    path.write_bytes(b"")
    assert not ends_mid_line(path)
    path.write_bytes(b'{"a":1}\n')
    assert not ends_mid_line(path)
    path.write_bytes(b'{"a":1}\n{"b"')
    assert ends_mid_line(path)
