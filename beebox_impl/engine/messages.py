"""Builders for the raw stream-json messages engines emit: one builder, one place.

Spec source: `docs/sources.md#format-8` (§8, the CLI's live messages: `system/init`
first, then one `assistant` message per completed content block, then one
`result` per turn in streaming-input mode).

Every engine that makes messages itself — `ScriptedEngine` for tests, `EchoEngine`
offline, the conformance runner's scripted steps (`raw_sdk_message`) — builds
them here, so they all have the shape the CLI gives and all go through the one
`beebox_spec.sdk_messages.adapt_sdk_message` the same way. Optional fields are
written only when given, so the minimal forms stay minimal.

These functions are pure: no clock, no ids of their own (the caller passes
uuids), no I/O.
"""

from __future__ import annotations

from typing import Protocol

from beebox_spec.entries import JsonObject, JsonValue
from beebox_spec.errors import InvariantError

__all__ = [
    "MessageStep",
    "assistant_message",
    "init_message",
    "raw_sdk_message",
    "result_message",
    "stream_event_message",
    "tool_result_message",
    "user_replay_message",
    "zero_usage",
]


def zero_usage() -> JsonObject:
    """A Messages-API ``usage`` object with every count at zero (an engine with no model),
    with the fields Claude Code 2.1.332 writes."""
    return {
        "input_tokens": 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 0,
        "output_tokens_details": {"thinking_tokens": 0},
        "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
        "service_tier": "standard",
        "cache_creation": {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": 0},
        "inference_geo": "",
        "iterations": [],
        "speed": "standard",
        "fallback_credit": None,
    }


def init_message(
    session_id: str,
    *,
    uuid: str | None = None,
    cwd: str | None = None,
    model: str | None = None,
    tools: list[str] | None = None,
    version: str | None = None,
) -> JsonObject:
    """``system/init``: the run's first message, announcing the session id.

    With ``cwd``/``model``/``tools``/``version`` it carries the fields the CLI's
    init carries (empty lists for the MCP servers, commands, agents, skills and
    plugins an engine without them has).
    """
    message: JsonObject = {"type": "system", "subtype": "init"}
    if cwd is not None:
        message["cwd"] = cwd
    message["session_id"] = session_id
    if tools is not None:
        tool_names: list[JsonValue] = list(tools)
        message.update(
            {
                "tools": tool_names,
                "mcp_servers": [],
                "model": model,
                "permissionMode": "default",
                "slash_commands": [],
                "apiKeySource": "none",
                "claude_code_version": version,
                "output_style": "default",
                "agents": [],
                "skills": [],
                "plugins": [],
            }
        )
    elif model is not None:
        message["model"] = model
    if uuid is not None:
        message["uuid"] = uuid
    return message


def assistant_message(
    text: str,
    *,
    session_id: str,
    uuid: str,
    message_id: str,
    model: str,
    stop_reason: str | None = None,
    usage: JsonObject | None = None,
    block: JsonObject | None = None,
    parent_tool_use_id: str | None = None,
) -> JsonObject:
    """``assistant``: one completed block of the model's message — a text block of
    ``text``, or ``block`` when given (a ``tool_use``).

    ``stop_reason`` is null on all but a message's last block, as the CLI sends it;
    ``parent_tool_use_id`` null but for a sub-agent's message, which names the call
    that started the sub-agent.
    """
    body: JsonObject = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [block if block is not None else {"type": "text", "text": text}],
        "stop_reason": stop_reason,
    }
    if usage is not None:
        body["stop_sequence"] = None
        body["usage"] = usage
    return {
        "type": "assistant",
        "uuid": uuid,
        "session_id": session_id,
        "parent_tool_use_id": parent_tool_use_id,
        "message": body,
    }


def stream_event_message(
    event: JsonObject,
    *,
    session_id: str,
    uuid: str,
    message_id: str,
    timing: JsonObject | None = None,
) -> JsonObject:
    """``stream_event``: one event of the Messages API's stream while a message streams
    (``--include-partial-messages``), in the keys and order Claude Code 2.1.332 says
    it; ``message_id`` is the streaming message's id, ``timing`` the keys the CLI adds
    to a ``message_start`` (``ttft_ms``, ``thinking_display``)."""
    message: JsonObject = {
        "type": "stream_event",
        "event": event,
        "session_id": session_id,
        "parent_tool_use_id": None,
        "uuid": uuid,
    }
    if timing is not None:
        message.update(timing)
    message["api_message_id"] = message_id
    return message


def user_replay_message(
    content: str | list[JsonValue], *, session_id: str, uuid: str
) -> JsonObject:
    """``user`` with ``isReplay``: the CLI's echo of a prompt it took in
    (``--replay-user-messages``); its uuid is the transcript line's."""
    return {
        "type": "user",
        "message": {"role": "user", "content": content},
        "parent_tool_use_id": None,
        "session_id": session_id,
        "uuid": uuid,
        "isReplay": True,
    }


def tool_result_message(
    block: JsonObject, *, session_id: str, uuid: str, tool_use_result: JsonValue
) -> JsonObject:
    """``user``: a tool's result, as the CLI hands it back to the model (``block`` is
    the ``tool_result`` content block; ``tool_use_result`` the tool's own record)."""
    return {
        "type": "user",
        "message": {"role": "user", "content": [block]},
        "parent_tool_use_id": None,
        "session_id": session_id,
        "uuid": uuid,
        "tool_use_result": tool_use_result,
    }


def result_message(
    *,
    session_id: str,
    uuid: str,
    subtype: str = "success",
    result: str = "",
    is_error: bool = False,
    num_turns: int = 1,
    duration_ms: int = 0,
    total_cost_usd: float = 0,
    stop_reason: str | None = None,
    usage: JsonObject | None = None,
    errors: list[str] | None = None,
) -> JsonObject:
    """``result``: the end of one turn (its text only matters on ``success``)."""
    message: JsonObject = {
        "type": "result",
        "subtype": subtype,
        "uuid": uuid,
        "session_id": session_id,
        "is_error": is_error,
        "duration_ms": duration_ms,
        "duration_api_ms": 0,
        "num_turns": num_turns,
        "total_cost_usd": total_cost_usd,
        "result": result,
    }
    if stop_reason is not None:
        message["stop_reason"] = stop_reason
    if usage is not None:
        message["usage"] = usage
        message["modelUsage"] = {}
        message["permission_denials"] = []
    if errors is not None:
        error_texts: list[JsonValue] = list(errors)
        message["errors"] = error_texts
    return message


class MessageStep(Protocol):
    """A scripted engine step (`conformance.scenario.EngineStep` is one)."""

    @property
    def engine(self) -> str: ...

    @property
    def text(self) -> str: ...

    @property
    def session_id(self) -> str: ...


def raw_sdk_message(step: MessageStep, session_id: str, ordinal: int) -> JsonObject:
    """The stream-json message a scripted engine emits for an ``init``/``assistant``/``result``
    step. ``session_id`` is the id the run announced (empty before ``init``); ``ordinal``
    numbers the message so its uuid is unique."""
    if step.engine == "init":
        return init_message(step.session_id)
    if step.engine == "assistant":
        return assistant_message(
            step.text,
            session_id=session_id,
            uuid=f"scripted-{ordinal}",
            message_id=f"msg_scripted_{ordinal}",
            model="scripted",
        )
    if step.engine == "result":
        return result_message(session_id=session_id, uuid=f"scripted-{ordinal}")
    raise InvariantError(f"engine step {step.engine!r} is not an SDK message")
