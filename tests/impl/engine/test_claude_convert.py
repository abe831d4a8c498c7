"""`raw_message_from_sdk`: the SDK's typed messages back to the raw dicts the adapter reads.

Every message of the recorded CLI stream (and synthetic messages for the kinds the
recording lacks) is parsed by the SDK's own parser, converted back, and adapted;
the result must equal adapting the recorded dict directly. The conversion must
also never invent: everything it writes is in the recorded message.
"""

from __future__ import annotations

import importlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from beebox_impl.engine import raw_message_from_sdk
from beebox_spec.entries import JsonObject, JsonValue
from beebox_spec.sdk_messages import adapt_sdk_message, assistant_text, sub_agent_call

# The claude extra is installed wherever the tests run (nox's tests session): never skipped.
sdk: Any = importlib.import_module("claude_agent_sdk")
parse_message: Any = importlib.import_module(
    "claude_agent_sdk._internal.message_parser"
).parse_message

REPO = Path(__file__).resolve().parents[3]
STREAM_CANDIDATES = [
    Path(os.environ.get("BBX_CORPUS_DIR", REPO.parent / "shared" / "corpus" / "claude-transcripts"))
    / "sdk-stream-json",
    Path("/work/shared/corpus/claude-transcripts/sdk-stream-json"),
]
STREAM = next((path for path in STREAM_CANDIDATES if path.is_dir()), None)


# What the bundled CLI printed, kept in the repository (`tests.agent.record_corpus`):
# its messages, and with partial messages asked for, as the engine asks.
CLI_STREAMS = sorted((REPO / "tests" / "corpus" / "claude-code").glob("*/stream*.ndjson"))


def test_every_message_the_bundled_cli_printed_adapts_the_same_after_the_sdk_round_trip() -> None:
    assert CLI_STREAMS
    kinds = set()
    for path in CLI_STREAMS:
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, start=1):
            raw = json.loads(line)
            name = f"{path.parent.name}/{path.name}:{number}"
            if raw["type"] in TRANSPORT_FRAMES:
                continue
            adapted = adapt_sdk_message(raw)
            converted = round_trip(raw)
            assert adapt_sdk_message(converted) == adapted, name
            if adapted is not None:
                assert adapted["type"] != "unknown", name
            assert_within(converted, raw, name)
            kinds.add(str(raw["type"]))
    assert kinds == {"system", "assistant", "user", "result", "stream_event"}


# Frames of the CLI's pipes, not SDK messages (the engine answers or drops them).
TRANSPORT_FRAMES = ("control_request", "control_response", "control_cancel_request", "keep_alive")


def recorded_messages() -> list[tuple[str, JsonObject]]:
    assert STREAM is not None
    messages: list[tuple[str, JsonObject]] = []
    for path in sorted(STREAM.iterdir()):
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".ndjson":
            values = [json.loads(line) for line in text.splitlines() if line.strip()]
        elif path.suffix == ".json":
            values = [json.loads(text)]
        else:
            continue
        messages.extend((f"{path.name}#{index}", value) for index, value in enumerate(values))
    return messages


def assert_within(converted: JsonValue, recorded: JsonValue, where: str = "$") -> None:
    """Everything in ``converted`` is in ``recorded`` (objects may have fewer keys)."""
    if isinstance(converted, dict):
        assert isinstance(recorded, dict), where
        for key, value in converted.items():
            assert key in recorded, f"{where}.{key} was invented"
            assert_within(value, recorded[key], f"{where}.{key}")
    elif isinstance(converted, list):
        assert isinstance(recorded, list), where
        assert len(converted) == len(recorded), where
        for index, (left, right) in enumerate(zip(converted, recorded, strict=True)):
            assert_within(left, right, f"{where}[{index}]")
    else:
        assert converted == recorded, where


def round_trip(raw: JsonObject) -> JsonObject:
    typed = parse_message(raw)
    assert typed is not None, "the SDK's parser skipped the message"
    # The run knows its session id from `init`; every recorded message names the same one.
    known = raw.get("session_id")
    return raw_message_from_sdk(typed, session_id=known if isinstance(known, str) else None)


@pytest.mark.skipif(STREAM is None, reason="the recorded SDK stream (shared/corpus) is absent")
def test_every_recorded_message_adapts_the_same_after_the_sdk_round_trip() -> None:
    messages = recorded_messages()
    assert len(messages) >= 7
    kinds = set()
    for name, raw in messages:
        converted = round_trip(raw)
        adapted = adapt_sdk_message(raw)
        assert adapted is not None
        assert adapted["type"] != "unknown", name
        assert adapt_sdk_message(converted) == adapted, name
        assert_within(converted, raw, name)
        kinds.add(str(raw["type"]))
    assert kinds == {"system", "assistant", "user", "result"}


@pytest.mark.skipif(STREAM is None, reason="the recorded SDK stream (shared/corpus) is absent")
def test_the_recorded_init_and_result_come_back_whole() -> None:
    for name, raw in recorded_messages():
        # `SystemMessage.data` is the raw dict; a result keeps every field it has.
        if raw["type"] in ("system", "result"):
            assert round_trip(raw) == raw, name


SESSION = "5f1e2c3a-0000-4000-8000-000000000001"

SYNTHETIC: list[JsonObject] = [
    {
        "type": "assistant",
        "message": {
            "model": "claude-x",
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "text", "text": "hello"},
                {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 1, "output_tokens": 2},
        },
        "parent_tool_use_id": None,
        "session_id": SESSION,
        "uuid": "a-1",
    },
    {
        "type": "user",
        "message": {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "ok",
                    "is_error": False,
                }
            ],
        },
        "parent_tool_use_id": "toolu_0",
        "session_id": SESSION,
        "uuid": "u-1",
        "tool_use_result": {"stdout": "ok"},
    },
    {
        "type": "user",
        "message": {"role": "user", "content": "plain prompt"},
        "parent_tool_use_id": None,
        "session_id": SESSION,
    },
    {
        "type": "result",
        "subtype": "error_during_execution",
        "is_error": True,
        "duration_ms": 12,
        "duration_api_ms": 3,
        "num_turns": 0,
        "session_id": SESSION,
        "total_cost_usd": 0.5,
        "errors": ["interrupted"],
        "uuid": "r-1",
    },
    {
        "type": "stream_event",
        "uuid": "e-1",
        "session_id": SESSION,
        "event": {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "he"}},
        "parent_tool_use_id": None,
    },
    {
        "type": "system",
        "subtype": "task_started",
        "task_id": "t-1",
        "description": "background",
        "uuid": "s-1",
        "session_id": SESSION,
        "tool_use_id": "toolu_2",
    },
    {
        "type": "system",
        "subtype": "task_notification",
        "task_id": "t-1",
        "status": "completed",
        "output_file": "/tmp/out",
        "summary": "done",
        "uuid": "s-2",
        "session_id": SESSION,
    },
    {
        "type": "system",
        "subtype": "compact_boundary",
        "session_id": SESSION,
        "uuid": "s-3",
        "compact_metadata": {"trigger": "auto", "pre_tokens": 100},
    },
    {
        "type": "system",
        "subtype": "hook_started",
        "hook_event": "Stop",
        "session_id": SESSION,
        "uuid": "s-4",
    },
    {
        "type": "rate_limit_event",
        "rate_limit_info": {"status": "allowed_warning", "resetsAt": 1700000000},
        "uuid": "l-1",
        "session_id": SESSION,
    },
    {
        "type": "conversation_reset",
        "new_conversation_id": "c-2",
        "uuid": "x-1",
        "session_id": SESSION,
    },
]


@pytest.mark.parametrize(
    "raw", SYNTHETIC, ids=lambda raw: f"{raw['type']}:{raw.get('subtype', '')}"
)
def test_other_message_kinds_survive_the_round_trip(raw: JsonObject) -> None:
    converted = round_trip(raw)
    assert adapt_sdk_message(converted) == adapt_sdk_message(raw)
    assert_within(converted, raw)


def sub_agents(kind: str, call: str | None) -> JsonObject:
    """A message of ``kind`` (``assistant`` or ``user``) of the sub-agent ``call``
    started (None: of the main conversation), as Claude Code says it."""
    message: JsonObject = {"role": kind, "content": [{"type": "text", "text": "Found 3 files"}]}
    if kind == "assistant":
        message.update({"model": "claude-x", "id": "msg_9", "type": "message", "stop_reason": None})
    return {
        "type": kind,
        "message": message,
        "parent_tool_use_id": call,
        "session_id": SESSION,
        "uuid": f"{kind}-9",
    }


@pytest.mark.parametrize("kind", ["assistant", "user"])
@pytest.mark.parametrize("call", ["toolu_7", None], ids=["a sub-agent's", "the main's"])
def test_a_message_names_the_call_whose_sub_agent_said_it_after_the_round_trip(
    kind: str, call: str | None
) -> None:
    adapted = adapt_sdk_message(round_trip(sub_agents(kind, call)))
    assert adapted is not None
    assert adapted["type"] == kind
    assert sub_agent_call(adapted) == call
    # So a sub-agent's text stays out of the turn's.
    assert assistant_text(adapted) == ("Found 3 files" if kind == "assistant" and not call else "")


def test_a_message_class_the_converter_does_not_know_reads_as_unknown() -> None:
    class Novel:
        pass

    raw = raw_message_from_sdk(Novel(), sdk=sdk)
    assert raw == {"type": "sdk:Novel"}
    assert adapt_sdk_message(raw) == {"type": "unknown", "raw": raw}


def test_an_assistant_block_the_converter_does_not_know_is_named_not_dropped() -> None:
    @dataclass
    class FutureBlock:
        payload: str

    message = sdk.AssistantMessage(content=[FutureBlock("p")], model="m", session_id="s", uuid="u")
    raw = raw_message_from_sdk(message, sdk=sdk)
    body = raw["message"]
    assert isinstance(body, dict)
    assert body["content"] == [{"type": "sdk:FutureBlock", "payload": "p"}]
