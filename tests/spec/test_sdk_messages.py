"""The SDK message union and the one shared adapter (`beebox_spec.sdk_messages`)."""

from __future__ import annotations

import json
import re
import types
from pathlib import Path
from typing import (
    Any,
    Literal,
    NotRequired,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

import pytest
from hypothesis import given
from hypothesis import strategies as st

from beebox_spec.entries import JsonObject, JsonValue
from beebox_spec.js_values import js_trim
from beebox_spec.sdk_messages import (
    DROPPED_SDK_TYPES,
    TASK_STATUSES,
    TASK_SUBTYPES,
    AdaptedMessage,
    AssistantMessage,
    ResultMessage,
    StreamEventMessage,
    SystemInitMessage,
    TaskMessage,
    TaskStatus,
    UnknownMessage,
    UserMessage,
    accumulate_assistant_text,
    adapt_sdk_message,
    assistant_text,
    extract_chat_responses,
    message_kind,
    sub_agent_call,
    turn_error,
)

CORPUS = Path("/work/shared/corpus/claude-transcripts/sdk-stream-json")

SESSION = "40e7b02d-c0f9-4876-9010-f514d4eb0603"

# ---------------------------------------------------------------------------
# The recorded stream
# ---------------------------------------------------------------------------


def corpus_messages() -> list[tuple[str, JsonObject]]:
    messages: list[tuple[str, JsonObject]] = []
    for path in sorted(CORPUS.iterdir()):
        text = path.read_text(encoding="utf-8")
        values = (
            [json.loads(line) for line in text.splitlines() if line.strip()]
            if path.suffix == ".ndjson"
            else [json.loads(text)]
        )
        messages += [(f"{path.name}#{index}", value) for index, value in enumerate(values)]
    return messages


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"the recorded SDK stream is not at {CORPUS}")
def test_adapter_over_the_recorded_stream() -> None:
    seen: list[str] = []
    for where, raw in corpus_messages():
        adapted = adapt_sdk_message(raw)
        assert adapted is not None, where
        assert adapted["type"] != "unknown", where
        assert_shape(adapted)
        seen.append(message_kind(adapted))
        # Fields the adapter carries are the raw message's own.
        if adapted["type"] == "assistant":
            raw_message = raw["message"]
            assert isinstance(raw_message, dict)
            assert adapted["message"]["content"] == raw_message["content"]
            assert adapted["uuid"] == raw["uuid"]
            if raw_message["stop_reason"] is None:
                assert "stop_reason" not in adapted["message"]
            else:
                assert adapted["message"]["stop_reason"] == raw_message["stop_reason"]
        if adapted["type"] == "result":
            for key in ("subtype", "session_id", "is_error", "duration_ms", "num_turns"):
                assert adapted[key] == raw[key]
            assert adapted["total_cost_usd"] == raw["total_cost_usd"]
            assert adapted.get("result") == raw["result"]
        if adapted["type"] == "user":
            raw_message = raw["message"]
            assert isinstance(raw_message, dict)
            assert adapted["message"]["content"] == raw_message["content"]
            assert adapted.get("session_id") == raw["session_id"]
        if adapted["type"] == "system":
            assert adapted == {"type": "system", "subtype": "init", "session_id": raw["session_id"]}
    assert sorted(set(seen)) == ["assistant", "result:success", "system:init", "user"]


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"the recorded SDK stream is not at {CORPUS}")
def test_recorded_turn_text() -> None:
    text = ""
    for where, raw in corpus_messages():
        if where.startswith("basic_query.ndjson"):
            adapted = adapt_sdk_message(raw)
            assert adapted is not None
            text = accumulate_assistant_text(text, adapted)
    assert text == "4"


# ---------------------------------------------------------------------------
# Every member, by hand
# ---------------------------------------------------------------------------

MEMBER_EXAMPLES: list[tuple[str, JsonObject, AdaptedMessage]] = [
    (
        "system init",
        {
            "type": "system",
            "subtype": "init",
            "cwd": "/box",
            "session_id": SESSION,
            "tools": ["Bash"],
            "model": "claude-opus-4-5",
            "uuid": "u-init",
        },
        {"type": "system", "subtype": "init", "session_id": SESSION},
    ),
    (
        "task started",
        {
            "type": "system",
            "subtype": "task_started",
            "session_id": SESSION,
            "uuid": "u-1",
            "task_id": "t-1",
            "tool_use_id": "toolu_1",
            "description": "Run the tests",
            "task_type": "local_bash",
        },
        {
            "type": "task",
            "session_id": SESSION,
            "uuid": "u-1",
            "task": {
                "phase": "started",
                "taskId": "t-1",
                "status": "running",
                "toolUseId": "toolu_1",
                "description": "Run the tests",
            },
        },
    ),
    (
        "task started, bare",
        {
            "type": "system",
            "subtype": "task_started",
            "session_id": SESSION,
            "uuid": "u-1",
            "task_id": "t-1",
            "description": "",
            "skip_transcript": False,
        },
        {
            "type": "task",
            "session_id": SESSION,
            "uuid": "u-1",
            "task": {"phase": "started", "taskId": "t-1", "status": "running"},
        },
    ),
    (
        "task progress",
        {
            "type": "system",
            "subtype": "task_progress",
            "session_id": SESSION,
            "uuid": "u-2",
            "task_id": "t-1",
            "tool_use_id": "toolu_1",
            "description": "Run the tests",
            "usage": {"total_tokens": 10, "tool_uses": 2, "duration_ms": 1500},
            "last_tool_name": "Bash",
            "summary": "running pytest",
        },
        {
            "type": "task",
            "session_id": SESSION,
            "uuid": "u-2",
            "task": {
                "phase": "progress",
                "taskId": "t-1",
                "status": "running",
                "toolUseId": "toolu_1",
                "description": "Run the tests",
                "summary": "running pytest",
                "lastToolName": "Bash",
                "elapsedMs": 1500,
            },
        },
    ),
    (
        "task progress of a skipped task is still adapted",
        {
            "type": "system",
            "subtype": "task_progress",
            "session_id": SESSION,
            "uuid": "u-2",
            "task_id": "t-1",
            "usage": {"duration_ms": 0.5},
            "skip_transcript": True,
        },
        {
            "type": "task",
            "session_id": SESSION,
            "uuid": "u-2",
            "task": {"phase": "progress", "taskId": "t-1", "status": "running", "elapsedMs": 0.5},
        },
    ),
    (
        "task updated",
        {
            "type": "system",
            "subtype": "task_updated",
            "session_id": SESSION,
            "uuid": "u-3",
            "task_id": "t-1",
            "patch": {"status": "killed", "description": ""},
        },
        {
            "type": "task",
            "session_id": SESSION,
            "uuid": "u-3",
            "task": {"phase": "updated", "taskId": "t-1", "status": "killed", "description": ""},
        },
    ),
    (
        "task updated with an unknown status",
        {
            "type": "system",
            "subtype": "task_updated",
            "session_id": SESSION,
            "uuid": "u-3",
            "task_id": "t-1",
            "patch": {"status": "exploded"},
        },
        {
            "type": "task",
            "session_id": SESSION,
            "uuid": "u-3",
            "task": {"phase": "updated", "taskId": "t-1"},
        },
    ),
    (
        "task notification",
        {
            "type": "system",
            "subtype": "task_notification",
            "session_id": SESSION,
            "uuid": "u-4",
            "task_id": "t-1",
            "tool_use_id": "toolu_1",
            "status": "completed",
            "output_file": "/tmp/out.txt",
            "summary": "12 passed",
            "usage": {"duration_ms": 9000},
        },
        {
            "type": "task",
            "session_id": SESSION,
            "uuid": "u-4",
            "task": {
                "phase": "settled",
                "taskId": "t-1",
                "status": "completed",
                "toolUseId": "toolu_1",
                "summary": "12 passed",
                "outputFile": "/tmp/out.txt",
                "elapsedMs": 9000,
            },
        },
    ),
    (
        "task notification without usage",
        {
            "type": "system",
            "subtype": "task_notification",
            "session_id": SESSION,
            "uuid": "u-4",
            "task_id": "t-1",
            "status": "stopped",
            "output_file": "",
            "summary": "",
            "usage": {"total_tokens": 3},
        },
        {
            "type": "task",
            "session_id": SESSION,
            "uuid": "u-4",
            "task": {"phase": "settled", "taskId": "t-1", "status": "stopped"},
        },
    ),
    (
        "assistant",
        {
            "type": "assistant",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-opus-4-5",
                "content": [{"type": "text", "text": "Hello"}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 1},
            },
            "parent_tool_use_id": None,
            "session_id": SESSION,
            "uuid": "u-5",
        },
        {
            "type": "assistant",
            "session_id": SESSION,
            "uuid": "u-5",
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "Hello"}],
                "stop_reason": "end_turn",
            },
            "parent_tool_use_id": None,
        },
    ),
    (
        "a sub-agent's assistant message names its call",
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "Found 3 files"}],
                "stop_reason": None,
            },
            "parent_tool_use_id": "toolu_9",
            "session_id": SESSION,
            "uuid": "u-5b",
        },
        {
            "type": "assistant",
            "session_id": SESSION,
            "uuid": "u-5b",
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "Found 3 files"}],
            },
            "parent_tool_use_id": "toolu_9",
        },
    ),
    (
        "assistant with a null stop reason",
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [{"type": "thinking", "thinking": "", "signature": "x"}],
                "stop_reason": None,
            },
            "session_id": SESSION,
            "uuid": "u-6",
        },
        {
            "type": "assistant",
            "session_id": SESSION,
            "uuid": "u-6",
            "message": {
                "role": "assistant",
                "content": [{"type": "thinking", "thinking": "", "signature": "x"}],
            },
            "parent_tool_use_id": None,
        },
    ),
    (
        "user with blocks",
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}],
            },
            "parent_tool_use_id": None,
            "session_id": SESSION,
            "uuid": "u-7",
            "tool_use_result": {"stdout": "ok"},
        },
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}],
            },
            "parent_tool_use_id": None,
            "session_id": SESSION,
        },
    ),
    (
        "user with a plain-string prompt and no session",
        {"type": "user", "message": {"role": "user", "content": "<typed>hi</typed>"}},
        {"type": "user", "message": {"role": "user", "content": []}, "parent_tool_use_id": None},
    ),
    (
        "a sub-agent's prompt names its call",
        {
            "type": "user",
            "message": {"role": "user", "content": [{"type": "text", "text": "Find the tests"}]},
            "parent_tool_use_id": "toolu_9",
            "session_id": SESSION,
            "uuid": "u-7b",
        },
        {
            "type": "user",
            "message": {"role": "user", "content": [{"type": "text", "text": "Find the tests"}]},
            "parent_tool_use_id": "toolu_9",
            "session_id": SESSION,
        },
    ),
    (
        "stream event",
        {
            "type": "stream_event",
            "event": {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "He"},
            },
            "parent_tool_use_id": "toolu_9",
            "session_id": SESSION,
            "uuid": "u-8",
            "ttft_ms": 300,
        },
        {
            "type": "stream_event",
            "session_id": SESSION,
            "uuid": "u-8",
            "event": {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "He"},
            },
            "parent_tool_use_id": "toolu_9",
        },
    ),
    (
        "stream event without a parent",
        {
            "type": "stream_event",
            "event": {"type": "message_stop"},
            "session_id": SESSION,
            "uuid": "u-8",
        },
        {
            "type": "stream_event",
            "session_id": SESSION,
            "uuid": "u-8",
            "event": {"type": "message_stop"},
            "parent_tool_use_id": None,
        },
    ),
    (
        "result success",
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "duration_ms": 2360,
            "duration_api_ms": 2325,
            "num_turns": 1,
            "result": "4",
            "session_id": SESSION,
            "total_cost_usd": 0.1354875,
            "usage": {"input_tokens": 10},
            "uuid": "u-9",
        },
        {
            "type": "result",
            "subtype": "success",
            "session_id": SESSION,
            "is_error": False,
            "duration_ms": 2360,
            "num_turns": 1,
            "total_cost_usd": 0.1354875,
            "result": "4",
        },
    ),
    (
        "result success that is an API error",
        {
            "type": "result",
            "subtype": "success",
            "is_error": True,
            "duration_ms": 10,
            "num_turns": 0,
            "result": "API Error: 529",
            "session_id": SESSION,
            "total_cost_usd": 0,
        },
        {
            "type": "result",
            "subtype": "success",
            "session_id": SESSION,
            "is_error": True,
            "duration_ms": 10,
            "num_turns": 0,
            "total_cost_usd": 0,
            "result": "API Error: 529",
        },
    ),
    (
        "result error carries no result text, and its errors",
        {
            "type": "result",
            "subtype": "error_max_turns",
            "is_error": True,
            "duration_ms": 100,
            "num_turns": 3,
            "result": "should not be copied",
            "errors": ["max turns"],
            "session_id": SESSION,
            "total_cost_usd": 0.5,
        },
        {
            "type": "result",
            "subtype": "error_max_turns",
            "session_id": SESSION,
            "is_error": True,
            "duration_ms": 100,
            "num_turns": 3,
            "total_cost_usd": 0.5,
            "errors": ["max turns"],
        },
    ),
    (
        "unknown type",
        {"type": "brand_new_thing", "session_id": SESSION, "payload": [1, 2]},
        {
            "type": "unknown",
            "raw": {"type": "brand_new_thing", "session_id": SESSION, "payload": [1, 2]},
        },
    ),
    (
        "transport frame is not an SDK message",
        {"type": "keep_alive"},
        {"type": "unknown", "raw": {"type": "keep_alive"}},
    ),
    (
        "no type at all",
        {"session_id": SESSION},
        {"type": "unknown", "raw": {"session_id": SESSION}},
    ),
]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [pytest.param(raw, expected, id=name) for name, raw, expected in MEMBER_EXAMPLES],
)
def test_every_member(raw: JsonObject, expected: AdaptedMessage) -> None:
    adapted = adapt_sdk_message(raw)
    assert adapted == expected
    assert adapted is not None
    assert_shape(adapted)


def test_every_member_and_phase_has_an_example() -> None:
    kinds = set()
    for _, raw, _ in MEMBER_EXAMPLES:
        adapted = adapt_sdk_message(raw)
        assert adapted is not None
        kinds.add(message_kind(adapted).split(":")[0])
        if adapted["type"] == "task":
            kinds.add(f"task:{adapted['task']['phase']}")
    assert kinds >= {
        "system",
        "task",
        "task:started",
        "task:progress",
        "task:updated",
        "task:settled",
        "assistant",
        "user",
        "stream_event",
        "result",
        "unknown",
    }


@pytest.mark.parametrize(
    "raw",
    [
        *({"type": kind, "session_id": SESSION, "uuid": "u"} for kind in DROPPED_SDK_TYPES),
        {
            "type": "tool_progress",
            "tool_use_id": "t",
            "tool_name": "Bash",
            "parent_tool_use_id": None,
            "elapsed_time_seconds": 3,
        },
        {"type": "rate_limit_event", "rate_limit_info": {"status": "allowed"}},
        {"type": "conversation_reset", "new_conversation_id": "n"},
        *(
            {"type": "system", "subtype": subtype, "session_id": SESSION, "uuid": "u"}
            for subtype in (
                "compact_boundary",
                "status",
                "api_retry",
                "hook_started",
                "hook_response",
                "local_command_output",
                "session_state_changed",
                "informational",
                "",
            )
        ),
        {"type": "system", "session_id": SESSION},
        {"type": "system", "subtype": 7},
        {
            "type": "system",
            "subtype": "task_started",
            "session_id": SESSION,
            "uuid": "u",
            "task_id": "t",
            "skip_transcript": True,
        },
        {
            "type": "system",
            "subtype": "task_notification",
            "session_id": SESSION,
            "uuid": "u",
            "task_id": "t",
            "status": "completed",
            "skip_transcript": True,
        },
        # A skipped task is dropped before its shape is looked at.
        {"type": "system", "subtype": "task_started", "skip_transcript": True},
    ],
    ids=lambda raw: f"{raw.get('type')}/{raw.get('subtype', '')}",
)
def test_adapts_to_none(raw: JsonObject) -> None:
    assert adapt_sdk_message(raw) is None


def test_the_dropped_table() -> None:
    assert set(DROPPED_SDK_TYPES) == {
        "tool_progress",
        "auth_status",
        "tool_use_summary",
        "rate_limit_event",
        "prompt_suggestion",
        "conversation_reset",
    }
    assert dict(TASK_SUBTYPES) == {
        "task_started": "started",
        "task_progress": "progress",
        "task_updated": "updated",
        "task_notification": "settled",
    }
    assert set(TASK_STATUSES) == set(get_args(TaskStatus))
    assert len(TASK_STATUSES) == len(get_args(TaskStatus))


def _without(raw: JsonObject, key: str) -> JsonObject:
    return {name: value for name, value in raw.items() if name != key}


def _with(raw: JsonObject, key: str, value: JsonValue) -> JsonObject:
    return {**raw, key: value}


def _example(name: str) -> JsonObject:
    return next(raw for example, raw, _ in MEMBER_EXAMPLES if example == name)


MALFORMED: list[tuple[str, JsonObject]] = [
    ("init without session id", _without(_example("system init"), "session_id")),
    ("init with a numeric session id", _with(_example("system init"), "session_id", 5)),
    ("task without task id", _without(_example("task started"), "task_id")),
    ("task without uuid", _without(_example("task notification"), "uuid")),
    ("task progress without usage", _without(_example("task progress"), "usage")),
    (
        "task progress with a boolean duration",
        _with(_example("task progress"), "usage", {"duration_ms": True}),
    ),
    ("task updated without patch", _without(_example("task updated"), "patch")),
    ("task notification without status", _without(_example("task notification"), "status")),
    (
        "task notification with an unknown status",
        _with(_example("task notification"), "status", "exploded"),
    ),
    ("assistant without uuid", _without(_example("assistant"), "uuid")),
    ("assistant without message", _without(_example("assistant"), "message")),
    (
        "assistant with string content",
        _with(_example("assistant"), "message", {"role": "assistant", "content": "hi"}),
    ),
    (
        "assistant with a non-object block",
        _with(_example("assistant"), "message", {"role": "assistant", "content": ["hi"]}),
    ),
    (
        "assistant without role",
        _with(_example("assistant"), "message", {"content": []}),
    ),
    ("user without message", {"type": "user", "session_id": SESSION}),
    (
        "user with a non-object block",
        {"type": "user", "message": {"role": "user", "content": [1]}},
    ),
    ("stream event without event", _without(_example("stream event"), "event")),
    ("stream event with a string event", _with(_example("stream event"), "event", "x")),
    ("result without num_turns", _without(_example("result success"), "num_turns")),
    ("result with fractional num_turns", _with(_example("result success"), "num_turns", 1.5)),
    ("result with a boolean num_turns", _with(_example("result success"), "num_turns", True)),
    ("result without cost", _without(_example("result success"), "total_cost_usd")),
    ("result with a string duration", _with(_example("result success"), "duration_ms", "2")),
    ("result with a numeric is_error", _with(_example("result success"), "is_error", 0)),
    ("result without subtype", _without(_example("result success"), "subtype")),
    ("result without session", _without(_example("result success"), "session_id")),
]


@pytest.mark.parametrize("raw", [pytest.param(raw, id=name) for name, raw in MALFORMED])
def test_a_malformed_message_is_the_sentinel(raw: JsonObject) -> None:
    assert adapt_sdk_message(raw) == {"type": "unknown", "raw": raw}


def test_optional_fields_of_the_wrong_type_are_left_out() -> None:
    raw = _with(_example("assistant"), "session_id", SESSION)
    raw["message"] = {"role": "assistant", "content": [], "stop_reason": 3}
    adapted = adapt_sdk_message(raw)
    assert adapted is not None
    assert adapted["type"] == "assistant"
    assert "stop_reason" not in adapted["message"]

    started = _with(_example("task started"), "tool_use_id", None)
    started["description"] = 12
    adapted = adapt_sdk_message(started)
    assert adapted is not None
    assert adapted["type"] == "task"
    assert adapted["task"] == {"phase": "started", "taskId": "t-1", "status": "running"}

    user_raw: JsonObject = {
        "type": "user",
        "message": {"role": "user", "content": []},
        "session_id": 4,
    }
    assert adapt_sdk_message(user_raw) == {
        "type": "user",
        "message": {"role": "user", "content": []},
        "parent_tool_use_id": None,
    }
    # A call id that is not a string names no call: the main conversation's.
    assert adapt_sdk_message(_with(_example("assistant"), "parent_tool_use_id", 9)) == (
        adapt_sdk_message(_example("assistant"))
    )

    success = _with(_example("result success"), "result", None)
    adapted = adapt_sdk_message(success)
    assert adapted is not None
    assert adapted["type"] == "result"
    assert "result" not in adapted


# ---------------------------------------------------------------------------
# Properties over arbitrary messages
# ---------------------------------------------------------------------------


def conforms(value: Any, hint: Any) -> bool:
    """Does a JSON value have the type a TypedDict field declares? (JSON payloads: any object.)"""
    origin = get_origin(hint)
    if origin is NotRequired:
        return conforms(value, get_args(hint)[0])
    if origin is Literal:
        return any(value == option and type(value) is type(option) for option in get_args(hint))
    if origin is Union or isinstance(hint, types.UnionType):
        return any(conforms(value, option) for option in get_args(hint))
    if origin is list:
        return isinstance(value, list) and all(conforms(item, get_args(hint)[0]) for item in value)
    if origin is dict:
        return isinstance(value, dict) and all(isinstance(key, str) for key in value)
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if is_typeddict(hint):
        return has_shape(value, hint)
    raise AssertionError(f"no check for {hint!r}")


def has_shape(value: Any, shape: Any) -> bool:
    """Exactly the keys the TypedDict declares (required ones present), each of its type.

    Read from the resolved hints: under `from __future__ import annotations`,
    `__required_keys__` cannot see `NotRequired` on Python 3.11.
    """
    if not isinstance(value, dict):
        return False
    hints = get_type_hints(shape, include_extras=True)
    required = {key for key, hint in hints.items() if get_origin(hint) is not NotRequired}
    return (
        required <= value.keys()
        and value.keys() <= hints.keys()
        and all(conforms(value[key], hints[key]) for key in value)
    )


SHAPES: dict[str, Any] = {
    "system": SystemInitMessage,
    "task": TaskMessage,
    "assistant": AssistantMessage,
    "user": UserMessage,
    "stream_event": StreamEventMessage,
    "result": ResultMessage,
    "unknown": UnknownMessage,
}


def assert_shape(message: AdaptedMessage) -> None:
    """The message is exactly the member its `type` names, and it is JSON."""
    assert has_shape(message, SHAPES[message["type"]]), message
    # The union as a whole also admits it (the check is not vacuous for other members).
    assert sum(has_shape(message, shape) for shape in SHAPES.values()) == 1, message
    json.dumps(message)


def test_shape_check_has_teeth() -> None:
    assert not has_shape({"type": "system", "subtype": "init"}, SystemInitMessage)
    assert not has_shape(
        {"type": "system", "subtype": "init", "session_id": "s", "extra": 1}, SystemInitMessage
    )
    assert not has_shape({"type": "system", "subtype": "init", "session_id": 5}, SystemInitMessage)
    bad_task = {"type": "task", "session_id": "s", "uuid": "u", "task": {"phase": "started"}}
    assert not has_shape(bad_task, TaskMessage)
    good_task = {
        "type": "task",
        "session_id": "s",
        "uuid": "u",
        "task": {"phase": "updated", "taskId": "t"},
    }
    assert has_shape(good_task, TaskMessage)
    assert not has_shape(
        {**good_task, "task": {"phase": "updated", "taskId": "t", "status": "x"}}, TaskMessage
    )


json_leaves = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5)
)
json_values: st.SearchStrategy[JsonValue] = st.recursive(
    json_leaves,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=10,
)
KNOWN_KEYS = (
    "session_id",
    "uuid",
    "task_id",
    "tool_use_id",
    "description",
    "summary",
    "usage",
    "patch",
    "status",
    "skip_transcript",
    "message",
    "event",
    "parent_tool_use_id",
    "subtype",
    "is_error",
    "duration_ms",
    "num_turns",
    "total_cost_usd",
    "result",
    "output_file",
    "last_tool_name",
)
field_values: st.SearchStrategy[JsonValue] = st.one_of(
    json_values,
    st.sampled_from(("init", "success", *TASK_SUBTYPES, *TASK_STATUSES, "text", "assistant")),
    st.fixed_dictionaries(
        {"role": st.sampled_from(("assistant", "user")), "content": json_values}
    ).map(dict),
    st.fixed_dictionaries({"duration_ms": json_leaves}).map(dict),
)


@st.composite
def raw_messages(draw: st.DrawFn) -> JsonObject:
    kind = draw(
        st.sampled_from(
            ("system", "assistant", "user", "stream_event", "result", *DROPPED_SDK_TYPES)
        )
        | st.text(max_size=6)
        | json_leaves
    )
    raw: JsonObject = {"type": kind}
    for key in draw(st.lists(st.sampled_from(KNOWN_KEYS), unique=True)):
        raw[key] = draw(field_values)
    return raw


@given(raw_messages())
def test_adapter_is_total_and_keeps_the_shapes(raw: JsonObject) -> None:
    snapshot = json.dumps(raw, sort_keys=True)
    adapted = adapt_sdk_message(raw)
    # The raw message is not changed.
    assert json.dumps(raw, sort_keys=True) == snapshot
    if adapted is None:
        kind = raw.get("type")
        assert kind in DROPPED_SDK_TYPES or kind == "system"
        return
    assert_shape(adapted)
    assert message_kind(adapted)
    if adapted["type"] == "unknown":
        assert adapted["raw"] is raw
    elif adapted["type"] == "task":
        assert raw.get("type") == "system"
        assert TASK_SUBTYPES[str(raw.get("subtype"))] == adapted["task"]["phase"]
    else:
        assert raw.get("type") == adapted["type"]


# ---------------------------------------------------------------------------
# Reading adapted messages
# ---------------------------------------------------------------------------


def assistant_with(*blocks: JsonObject, parent: str | None = None) -> AssistantMessage:
    return {
        "type": "assistant",
        "session_id": SESSION,
        "uuid": "u",
        "message": {"role": "assistant", "content": list(blocks)},
        "parent_tool_use_id": parent,
    }


def test_assistant_text_concatenates_text_blocks_only() -> None:
    message = assistant_with(
        {"type": "text", "text": "Hello, "},
        {"type": "tool_use", "id": "t", "name": "Bash", "input": {}},
        {"type": "thinking", "thinking": "hmm", "text": "not this"},
        {"type": "text", "text": ""},
        {"type": "text"},
        {"type": "text", "text": 5},
        {"type": "text", "text": "world"},
    )
    assert assistant_text(message) == "Hello, world"
    assert accumulate_assistant_text("So: ", message) == "So: Hello, world"


def test_a_sub_agents_assistant_text_is_not_the_turns() -> None:
    theirs = assistant_with({"type": "text", "text": "Found 3 files"}, parent="toolu_9")
    assert sub_agent_call(theirs) == "toolu_9"
    assert assistant_text(theirs) == ""
    assert accumulate_assistant_text("So: ", theirs) == "So: "
    # The main conversation's, around it, is.
    ours = assistant_with({"type": "text", "text": "Done."})
    assert sub_agent_call(ours) is None
    text = ""
    for message in (ours, theirs, ours):
        text = accumulate_assistant_text(text, message)
    assert text == "Done.Done."


@pytest.mark.parametrize(
    ("name", "call"),
    [
        ("assistant", None),
        ("a sub-agent's assistant message names its call", "toolu_9"),
        ("user with blocks", None),
        ("a sub-agent's prompt names its call", "toolu_9"),
        ("stream event", "toolu_9"),
        ("stream event without a parent", None),
        ("system init", None),
        ("task started", None),
        ("result success", None),
        ("unknown type", None),
    ],
)
def test_the_call_a_message_is_a_sub_agents_of(name: str, call: str | None) -> None:
    adapted = adapt_sdk_message(_example(name))
    assert adapted is not None
    assert sub_agent_call(adapted) == call


@pytest.mark.parametrize(
    "raw", [raw for name, raw, _ in MEMBER_EXAMPLES if not name.startswith("assistant")]
)
def test_other_messages_add_no_text(raw: JsonObject) -> None:
    adapted = adapt_sdk_message(raw)
    assert adapted is not None
    assert accumulate_assistant_text("prior", adapted) == "prior"


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("system init", "system:init"),
        ("task started", "task:started"),
        ("task progress", "task:progress"),
        ("task updated", "task:updated"),
        ("task notification", "task:settled"),
        ("assistant", "assistant"),
        ("user with blocks", "user"),
        ("stream event", "stream_event"),
        ("result success", "result:success"),
        ("result error carries no result text, and its errors", "result:error_max_turns"),
        ("unknown type", "unknown"),
    ],
)
def test_message_kind(name: str, kind: str) -> None:
    adapted = adapt_sdk_message(_example(name))
    assert adapted is not None
    assert message_kind(adapted) == kind


# ---------------------------------------------------------------------------
# extract_chat_responses
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("buffer", "responses", "rest"),
    [
        ("", [], ""),
        ("no tags at all", [], "no tags at all"),
        ("<chat-response>hi</chat-response>", ["hi"], ""),
        ("before <chat-response>  hi \n</chat-response> after", ["hi"], " after"),
        (
            "<chat-response>one</chat-response>x<chat-response>two</chat-response>y",
            ["one", "two"],
            "y",
        ),
        ("<chat-response>partial", [], "<chat-response>partial"),
        ("<chat-response>done</chat-response><chat-resp", ["done"], "<chat-resp"),
        ("<chat-response>a</chat-response><chat-response>b", ["a"], "<chat-response>b"),
        ("<chat-response> \n\t </chat-response>rest", [], "rest"),
        ("<chat-response>line 1\nline 2</chat-response>", ["line 1\nline 2"], ""),
        ("<chat-response>a<chat-response>b</chat-response>", ["a<chat-response>b"], ""),
        ("<chat-response>a</chat-response></chat-response>", ["a"], "</chat-response>"),
        ("</chat-response><chat-response>x</chat-response>", ["x"], ""),
        ("<CHAT-RESPONSE>x</CHAT-RESPONSE>", [], "<CHAT-RESPONSE>x</CHAT-RESPONSE>"),
        ('<chat-response id="1">x</chat-response>', [], '<chat-response id="1">x</chat-response>'),
        ("<chat-response>\ufeffx\u00a0</chat-response>", ["x"], ""),
        ("<chat-response>\u0085x\u0085</chat-response>", ["\u0085x\u0085"], ""),
    ],
)
def test_extract_chat_responses(buffer: str, responses: list[str], rest: str) -> None:
    assert extract_chat_responses(buffer) == (responses, rest)


PIECES = st.sampled_from(
    ("<chat-response>", "</chat-response>", "<chat-", "response>", "</chat", "a", " ", "\n", "<")
)


@given(pieces=st.lists(PIECES, max_size=12), cuts=st.lists(st.integers(min_value=0), max_size=4))
def test_extracting_as_text_arrives_equals_extracting_once(
    pieces: list[str], cuts: list[int]
) -> None:
    """The thread session extracts after every text block; the split must not matter."""
    whole = "".join(pieces)
    points = sorted({cut % (len(whole) + 1) for cut in cuts})
    chunks = [
        whole[start:end] for start, end in zip([0, *points], [*points, len(whole)], strict=True)
    ]
    delivered: list[str] = []
    buffer = ""
    for chunk in chunks:
        responses, buffer = extract_chat_responses(buffer + chunk)
        delivered += responses
    once, rest = extract_chat_responses(whole)
    assert delivered == once
    assert buffer == rest
    # The reference reading: every complete block, shortest match, trimmed, non-empty.
    expected = [
        js_trim(inner)
        for inner in re.findall(r"<chat-response>(.*?)</chat-response>", whole, re.DOTALL)
        if js_trim(inner)
    ]
    assert once == expected


def result(subtype: str, *, is_error: bool, **fields: JsonValue) -> AdaptedMessage:
    raw: JsonObject = {
        "type": "result",
        "subtype": subtype,
        "is_error": is_error,
        "duration_ms": 1,
        "num_turns": 1,
        "session_id": SESSION,
        "total_cost_usd": 0,
        **fields,
    }
    adapted = adapt_sdk_message(raw)
    assert adapted is not None
    return adapted


@pytest.mark.parametrize(
    ("message", "words"),
    [
        # The CLI gave up on an API call: its words are the result's text.
        (
            result("success", is_error=True, result="API Error: 529 Overloaded"),
            "API Error: 529 Overloaded",
        ),
        # A limit ended the turn: the CLI's errors.
        (
            result(
                "error_max_turns", is_error=True, errors=["Reached maximum number of turns (1)"]
            ),
            "Reached maximum number of turns (1)",
        ),
        (result("error_max_budget_usd", is_error=True, errors=["a", "b"]), "a; b"),
        # No words at all: the subtype says what happened.
        (result("error_max_budget_usd", is_error=True), "error_max_budget_usd"),
        # An interrupt (a stop, a restart) ends a turn so: not a failure.
        (result("error_during_execution", is_error=True, errors=["aborted"]), None),
        (result("success", is_error=False, result="fine"), None),
        # Errors not made of strings are not words.
        (result("error_max_turns", is_error=True, errors=[1, 2]), "error_max_turns"),
    ],
)
def test_a_failed_turn_is_its_results_words(message: AdaptedMessage, words: str | None) -> None:
    assert turn_error(message) == words


def test_only_a_result_says_a_turn_failed() -> None:
    for _, raw, _ in MEMBER_EXAMPLES:
        adapted = adapt_sdk_message(raw)
        if adapted is not None and adapted["type"] != "result":
            assert turn_error(adapted) is None
