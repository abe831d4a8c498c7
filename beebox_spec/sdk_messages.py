"""The SDK message union, and the one adapter both chat sessions read the SDK through.

Spec sources, in `docs/sources.md` (a bare §N.M below is its anchor `facts-N-M`):
`docs/sources.md#lifecycle-shared-code` ("Shared code": the adapter is one shared
function; `assertNever` guards the union), `docs/sources.md#facts-3-5` (§3.5:
`pumpChatRun`, a message that adapts to nothing is skipped),
`docs/sources.md#facts-3-6` (§3.6: `adaptSdkMessage`, `accumulateAssistantText`),
`docs/sources.md#facts-3-3` (§3.3: `ChatThreadSession`'s `<chat-response>`
extraction) and `docs/sources.md#format-8` (§8 of the transcript format notes: the
CLI's stream-json messages the adapter reads).

A raw message is one line of the CLI's stream-json output, decoded: a JSON
object whose `type` (and, for `system`, `subtype`) says what it is. The adapter
maps it to one member of `AdaptedMessage`, or to `None` for a message no
session acts on:

- `system` / `init` → `SystemInitMessage` (its `session_id`);
- `system` / `task_started`, `task_progress`, `task_updated`, `task_notification`
  → `TaskMessage` with phase `started`, `progress`, `updated`, `settled`; but
  `None` for a `task_started` or `task_notification` with
  `skip_transcript: true` (a housekeeping task, kept out of the transcript);
- `system` / any other subtype → `None`;
- `assistant` → `AssistantMessage` (`stop_reason` left out when null);
- `user` → `UserMessage` (`content` is `[]` unless the SDK gave a block list);
- `stream_event` → `StreamEventMessage`;
  each of these three keeps `parent_tool_use_id`: null for the main conversation's
  (also when the SDK left it out), else the id of the call whose sub-agent said it;
- `result` → `ResultMessage` (`result`, the final text, only for subtype `success`;
  `errors`, the CLI's words for a turn a limit ended, when it gave any);
- a type in `DROPPED_SDK_TYPES` → `None` (known, and deliberately ignored);
- anything else → the sentinel `UnknownMessage` (`raw`: the message itself).

Nothing is trusted: every field is narrowed with `isinstance`. An optional
field of the wrong type is left out, as an absent one is. A message of a known
type that lacks a field its adapted shape requires (a `result` without
`num_turns`, an `assistant` whose content is not a list of objects) is not
what it claims to be, and adapts to the `UnknownMessage` sentinel like a type
we do not know: SDK drift degrades the stream visibly, never silently. (The
implementation logs and counts every sentinel; the spec does no I/O.)

The transport frames of the CLI's pipes (`control_request`,
`control_response`, `control_cancel_request`, `keep_alive`,
`transcript_mirror`) are not SDK messages: the engine answers or drops them
before anything is adapted.

**A failed turn** (`turn_error`) (ours, `docs/spec-decisions.md#failed-turn`). The
CLI reports an API call it gave up on (401, 529 after its retries, a stream it could
not use) as a message of its own making — an `assistant` message with an ``error``
field and its words as text — followed by a ``success`` result with
``is_error: true`` whose ``result`` repeats those words; a turn a limit ended
(``error_max_turns``, a budget) as a result of that subtype with ``is_error`` and
its ``errors``. So a turn failed when its result has ``is_error: true``, unless its
subtype is ``error_during_execution``: that is how a turn ends when it is
interrupted — a stop, a restart, a person's interrupt — which is not a failure to
report. Its words are the result's text, else its ``errors`` joined with ``"; "``,
else its subtype (observed on Claude Code 2.1.332).

**A sub-agent's messages** (`sub_agent_call`)
(ours, `docs/spec-decisions.md#sub-agent-messages`). A Task or Agent tool call
starts a sub-agent: a conversation of its own, whose every message the CLI says
in the same stream with ``parent_tool_use_id`` the call's tool use id (its
prompt as a ``user`` message, its complete messages as ``assistant`` messages,
its partial ones as ``stream_event`` messages). A sub-agent's messages are not
the turn's: the main conversation answers the person, and a sub-agent answers
the call that started it. So `assistant_text` reads only the main
conversation's assistant messages, and with it `accumulate_assistant_text` (the
turn's text) and the thread session's `<chat-response>` extraction
(`beebox_spec.thread_pool` rule 2); none of a sub-agent's messages moves the
live text (below). They are still messages: a session passes a sub-agent's on
as it passes the main conversation's (the chat session's ``message`` event), and
a reader may show them under their call.

**Live text** (`text_delta`, `live_text_after`)
(ours, `docs/spec-decisions.md#live-text`). Asked for partial
messages (the SDK's ``include_partial_messages``), the CLI also says each event
of the Messages API's stream as a ``stream_event`` while the message it streams
is in progress; the complete message follows as its ``assistant`` message (one
for each content block, said before that block's ``content_block_stop``). A
*partial message* is a piece of the text of the assistant message in progress:
a *text delta* is a ``stream_event`` of the main conversation (its
``parent_tool_use_id`` null: a sub-agent's text is not the turn's) whose event
is a ``content_block_delta`` with a ``text_delta`` of non-empty ``text``. The
*live text* is the text so far of the message in progress, None when no text is
streaming; each message that arrives changes it so:

=====================  ==============================================================
message                the live text after it
=====================  ==============================================================
a text delta           the live text so far (``""`` when None) with its text appended
``message_start``      None: a new message begins (a retry's, after a failed attempt)
``assistant``          None: the complete message replaces it
``result``             None: the turn ended
anything else          unchanged
=====================  ==============================================================

``message_start`` and ``assistant`` count only when they are the main
conversation's. Every other stream event (a block's start and stop,
``thinking_delta``, ``input_json_delta``, ``message_delta``, ``message_stop``)
and every message of a sub-agent (its stream events, its complete messages,
which say the sub-agent's text and not the turn's) leaves the live text as it
is. It is shown, never kept: it is no part of the turn's text
(`accumulate_assistant_text` reads complete messages), of the transcript, or of
any record. A run's end drops it too (`beebox_spec.chat_session`, rule 11).
(Observed on Claude Code 2.1.332 with ``--include-partial-messages``.)

`message_kind` shows the union handled exhaustively: it ends in
`typing.assert_never`, so a new member is a type error until every such
switch gives it a fate. `extract_chat_responses` is the thread session's
reading of accumulated assistant text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, NotRequired, TypeAlias, TypedDict, assert_never

from beebox_spec.entries import JsonObject, JsonValue
from beebox_spec.js_values import js_trim

__all__ = [
    "DROPPED_SDK_TYPES",
    "INTERRUPTED_SUBTYPE",
    "TASK_STATUSES",
    "TASK_SUBTYPES",
    "AdaptedMessage",
    "AssistantMessage",
    "AssistantMessageBody",
    "LiveTextDelta",
    "ResultMessage",
    "StreamEventMessage",
    "SystemInitMessage",
    "TaskEvent",
    "TaskMessage",
    "TaskProgressEvent",
    "TaskSettledEvent",
    "TaskStartedEvent",
    "TaskStatus",
    "TaskUpdatedEvent",
    "UnknownMessage",
    "UserMessage",
    "UserMessageBody",
    "accumulate_assistant_text",
    "adapt_sdk_message",
    "assistant_text",
    "extract_chat_responses",
    "live_text_after",
    "message_kind",
    "sub_agent_call",
    "text_delta",
    "turn_error",
]

# ---------------------------------------------------------------------------
# The adapted messages
# ---------------------------------------------------------------------------


class SystemInitMessage(TypedDict):
    """The run's first message: it carries the session id the SDK assigned."""

    type: Literal["system"]
    subtype: Literal["init"]
    session_id: str


# A background task's status. `pending`, `running`, `paused` are in flight;
# `completed`, `failed`, `stopped`, `killed` are terminal.
TaskStatus: TypeAlias = Literal[
    "pending", "running", "paused", "completed", "failed", "stopped", "killed"
]
TASK_STATUSES: tuple[TaskStatus, ...] = (
    "pending",
    "running",
    "paused",
    "completed",
    "failed",
    "stopped",
    "killed",
)


class TaskStartedEvent(TypedDict):
    """From `task_started`: a background task began."""

    phase: Literal["started"]
    taskId: str
    status: Literal["running"]
    toolUseId: NotRequired[str]
    description: NotRequired[str]


class TaskProgressEvent(TypedDict):
    """From `task_progress`: a tick of a running task."""

    phase: Literal["progress"]
    taskId: str
    status: Literal["running"]
    toolUseId: NotRequired[str]
    description: NotRequired[str]
    summary: NotRequired[str]
    lastToolName: NotRequired[str]
    elapsedMs: float


class TaskUpdatedEvent(TypedDict):
    """From `task_updated`: a patch to a task (a terminal state may arrive only this way)."""

    phase: Literal["updated"]
    taskId: str
    status: NotRequired[TaskStatus]
    description: NotRequired[str]


class TaskSettledEvent(TypedDict):
    """From `task_notification`: a task finished."""

    phase: Literal["settled"]
    taskId: str
    status: TaskStatus
    toolUseId: NotRequired[str]
    summary: NotRequired[str]
    outputFile: NotRequired[str]
    elapsedMs: NotRequired[float]


TaskEvent: TypeAlias = TaskStartedEvent | TaskProgressEvent | TaskUpdatedEvent | TaskSettledEvent


class TaskMessage(TypedDict):
    """A background task's lifecycle event, normalized from the four `task_*` subtypes."""

    type: Literal["task"]
    session_id: str
    uuid: str
    task: TaskEvent


class AssistantMessageBody(TypedDict):
    """The model's message; `content` blocks are forwarded as the SDK gave them."""

    role: str
    content: list[JsonObject]
    stop_reason: NotRequired[str]


class AssistantMessage(TypedDict):
    """One completed assistant content block (the SDK sends one message per block);
    `parent_tool_use_id` is the call whose sub-agent said it, None for the main
    conversation's."""

    type: Literal["assistant"]
    session_id: str
    uuid: str
    message: AssistantMessageBody
    parent_tool_use_id: str | None


class UserMessageBody(TypedDict):
    """The user turn the model consumed (a prompt echo or tool results)."""

    role: Literal["user"]
    content: list[JsonObject]


class UserMessage(TypedDict):
    """A user message echoed by the SDK; `session_id` only when the SDK gave one;
    `parent_tool_use_id` as an assistant message's (a sub-agent's prompt, or the
    results of its tools, name its call)."""

    type: Literal["user"]
    message: UserMessageBody
    parent_tool_use_id: str | None
    session_id: NotRequired[str]


class StreamEventMessage(TypedDict):
    """A raw Messages-API stream event (partial output), forwarded as given;
    `parent_tool_use_id` as an assistant message's."""

    type: Literal["stream_event"]
    session_id: str
    uuid: str
    event: JsonObject
    parent_tool_use_id: str | None


class ResultMessage(TypedDict):
    """The end of a turn. An API failure may arrive as `success` with `is_error: true`."""

    type: Literal["result"]
    subtype: str
    session_id: str
    is_error: bool
    duration_ms: float
    num_turns: int
    total_cost_usd: float
    result: NotRequired[str]
    errors: NotRequired[list[str]]


class UnknownMessage(TypedDict):
    """The sentinel: a message of a type we do not know, or not of the shape its type promises."""

    type: Literal["unknown"]
    raw: JsonObject


AdaptedMessage: TypeAlias = (
    SystemInitMessage
    | TaskMessage
    | AssistantMessage
    | UserMessage
    | StreamEventMessage
    | ResultMessage
    | UnknownMessage
)

# ---------------------------------------------------------------------------
# The tables
# ---------------------------------------------------------------------------

# SDK message types every session ignores: they adapt to None (and the pump
# skips them). Known types, deliberately dropped: distinct from the sentinel,
# which is for types we do not know.
DROPPED_SDK_TYPES: Mapping[str, str] = {
    "tool_progress": "a tool's elapsed-time tick",
    "auth_status": "login state of the CLI",
    "tool_use_summary": "a summary of tool calls the assistant messages already carry",
    "rate_limit_event": "rate-limit state of the account",
    "prompt_suggestion": "a suggested next prompt",
    "conversation_reset": "a request to re-key the transcript; chat sessions do not act on it",
}

# The `system` subtypes that are a background task's lifecycle, and the phase each becomes.
TASK_SUBTYPES: Mapping[str, str] = {
    "task_started": "started",
    "task_progress": "progress",
    "task_updated": "updated",
    "task_notification": "settled",
}

# ---------------------------------------------------------------------------
# Narrowing a field
# ---------------------------------------------------------------------------


def _string(value: JsonValue | None) -> str | None:
    """The value if it is a string."""
    return value if isinstance(value, str) else None


def _non_empty_string(value: JsonValue | None) -> str | None:
    """The value if it is a non-empty string (the original copies these only when truthy)."""
    return value if isinstance(value, str) and value != "" else None


def _number(value: JsonValue | None) -> float | None:
    """The value if it is a JSON number (a bool is not one)."""
    if isinstance(value, bool):
        return None
    # A tuple, not ``int | float``: that union would be built on every call.
    return value if isinstance(value, (int, float)) else None


def _integer(value: JsonValue | None) -> int | None:
    """The value if it is an integer (a bool is not one)."""
    if isinstance(value, bool):
        return None
    return value if isinstance(value, int) else None


def _object(value: JsonValue | None) -> JsonObject | None:
    """The value if it is a JSON object."""
    return value if isinstance(value, dict) else None


def _objects(value: JsonValue | None) -> list[JsonObject] | None:
    """The value if it is a list of JSON objects (a content block list)."""
    if not isinstance(value, list):
        return None
    blocks: list[JsonObject] = []
    for item in value:
        # Every content block is an object.
        if not isinstance(item, dict):
            return None
        blocks.append(item)
    return blocks


def _task_status(value: JsonValue | None) -> TaskStatus | None:
    """The value if it is one of the task statuses."""
    for status in TASK_STATUSES:
        if value == status:
            return status
    return None


# ---------------------------------------------------------------------------
# The adapter
# ---------------------------------------------------------------------------


def _unknown(raw: JsonObject) -> UnknownMessage:
    """The sentinel for `raw`."""
    return {"type": "unknown", "raw": raw}


def adapt_sdk_message(raw: JsonObject) -> AdaptedMessage | None:
    """The adapted form of one raw SDK message, or None for one no session acts on (§3.6)."""
    kind = raw.get("type")
    if kind == "system":
        return _adapt_system(raw)
    if kind == "assistant":
        return _adapt_assistant(raw)
    if kind == "user":
        return _adapt_user(raw)
    if kind == "stream_event":
        return _adapt_stream_event(raw)
    if kind == "result":
        return _adapt_result(raw)
    # A known type every session ignores.
    if isinstance(kind, str) and kind in DROPPED_SDK_TYPES:
        return None
    return _unknown(raw)


def _adapt_system(raw: JsonObject) -> AdaptedMessage | None:
    """`system`: `init` and the task lifecycle are surfaced; every other subtype is not."""
    subtype = raw.get("subtype")
    if subtype == "init":
        session_id = _string(raw.get("session_id"))
        # `init` exists to carry the session id.
        if session_id is None:
            return _unknown(raw)
        return {"type": "system", "subtype": "init", "session_id": session_id}
    if isinstance(subtype, str) and subtype in TASK_SUBTYPES:
        return _adapt_task(raw, subtype)
    return None


def _adapt_task(raw: JsonObject, subtype: str) -> TaskMessage | UnknownMessage | None:
    """The four `task_*` subtypes, normalized to one `TaskMessage`."""
    # A housekeeping task is kept out of the transcript: its start and its settling.
    if subtype in ("task_started", "task_notification") and raw.get("skip_transcript") is True:
        return None
    session_id = _string(raw.get("session_id"))
    uuid = _string(raw.get("uuid"))
    task_id = _string(raw.get("task_id"))
    # Every task message names its session, itself and its task.
    if session_id is None or uuid is None or task_id is None:
        return _unknown(raw)
    tool_use_id = _string(raw.get("tool_use_id"))
    task: TaskEvent | None
    if subtype == "task_started":
        task = _task_started(raw, task_id, tool_use_id)
    elif subtype == "task_progress":
        task = _task_progress(raw, task_id, tool_use_id)
    elif subtype == "task_updated":
        task = _task_updated(raw, task_id)
    else:
        task = _task_settled(raw, task_id, tool_use_id)
    if task is None:
        return _unknown(raw)
    return {"type": "task", "session_id": session_id, "uuid": uuid, "task": task}


def _task_started(raw: JsonObject, task_id: str, tool_use_id: str | None) -> TaskStartedEvent:
    """`task_started`: the task is running."""
    started: TaskStartedEvent = {"phase": "started", "taskId": task_id, "status": "running"}
    if tool_use_id is not None:
        started["toolUseId"] = tool_use_id
    description = _non_empty_string(raw.get("description"))
    if description is not None:
        started["description"] = description
    return started


def _task_progress(
    raw: JsonObject, task_id: str, tool_use_id: str | None
) -> TaskProgressEvent | None:
    """`task_progress`: a tick of a running task; None without its elapsed time."""
    usage = _object(raw.get("usage")) or {}
    elapsed = _number(usage.get("duration_ms"))
    # A progress tick reports the elapsed time.
    if elapsed is None:
        return None
    progress: TaskProgressEvent = {
        "phase": "progress",
        "taskId": task_id,
        "status": "running",
        "elapsedMs": elapsed,
    }
    if tool_use_id is not None:
        progress["toolUseId"] = tool_use_id
    description = _non_empty_string(raw.get("description"))
    if description is not None:
        progress["description"] = description
    summary = _non_empty_string(raw.get("summary"))
    if summary is not None:
        progress["summary"] = summary
    last_tool_name = _non_empty_string(raw.get("last_tool_name"))
    if last_tool_name is not None:
        progress["lastToolName"] = last_tool_name
    return progress


def _task_updated(raw: JsonObject, task_id: str) -> TaskUpdatedEvent | None:
    """`task_updated`: what its patch changed; None without a patch."""
    patch = _object(raw.get("patch"))
    # An update carries its patch.
    if patch is None:
        return None
    updated: TaskUpdatedEvent = {"phase": "updated", "taskId": task_id}
    status = _task_status(patch.get("status"))
    if status is not None:
        updated["status"] = status
    # Here an empty description is kept: the patch may be clearing it.
    patched_description = _string(patch.get("description"))
    if patched_description is not None:
        updated["description"] = patched_description
    return updated


def _task_settled(
    raw: JsonObject, task_id: str, tool_use_id: str | None
) -> TaskSettledEvent | None:
    """`task_notification`: how the task ended; None when it does not say."""
    settled_status = _task_status(raw.get("status"))
    # A settled task says how it ended.
    if settled_status is None:
        return None
    settled: TaskSettledEvent = {"phase": "settled", "taskId": task_id, "status": settled_status}
    if tool_use_id is not None:
        settled["toolUseId"] = tool_use_id
    summary = _non_empty_string(raw.get("summary"))
    if summary is not None:
        settled["summary"] = summary
    output_file = _non_empty_string(raw.get("output_file"))
    if output_file is not None:
        settled["outputFile"] = output_file
    usage = _object(raw.get("usage")) or {}
    elapsed = _number(usage.get("duration_ms"))
    if elapsed is not None:
        settled["elapsedMs"] = elapsed
    return settled


def _parent_call(raw: JsonObject) -> str | None:
    """The call whose sub-agent said ``raw`` (its ``parent_tool_use_id``); None for the
    main conversation's, whose field is null, absent, or not a string."""
    return _string(raw.get("parent_tool_use_id"))


def _adapt_assistant(raw: JsonObject) -> AssistantMessage | UnknownMessage:
    """`assistant`: the message's role, blocks and (when not null) stop reason."""
    session_id = _string(raw.get("session_id"))
    uuid = _string(raw.get("uuid"))
    message = _object(raw.get("message")) or {}
    role = _string(message.get("role"))
    content = _objects(message.get("content"))
    # An assistant message names its session and itself, and carries a role and a block list.
    if session_id is None or uuid is None or role is None or content is None:
        return _unknown(raw)
    body: AssistantMessageBody = {"role": role, "content": content}
    stop_reason = _string(message.get("stop_reason"))
    if stop_reason is not None:
        body["stop_reason"] = stop_reason
    return {
        "type": "assistant",
        "session_id": session_id,
        "uuid": uuid,
        "message": body,
        "parent_tool_use_id": _parent_call(raw),
    }


def _adapt_user(raw: JsonObject) -> UserMessage | UnknownMessage:
    """`user`: the echoed turn's blocks (a plain-string prompt reads as no blocks)."""
    message = _object(raw.get("message"))
    # A user message carries a message object.
    if message is None:
        return _unknown(raw)
    raw_content = message.get("content")
    content = _objects(raw_content)
    # A list must be a list of blocks; anything else (a plain string) is no blocks.
    if isinstance(raw_content, list) and content is None:
        return _unknown(raw)
    adapted: UserMessage = {
        "type": "user",
        "message": {"role": "user", "content": content if content is not None else []},
        "parent_tool_use_id": _parent_call(raw),
    }
    session_id = _string(raw.get("session_id"))
    if session_id is not None:
        adapted["session_id"] = session_id
    return adapted


def _adapt_stream_event(raw: JsonObject) -> StreamEventMessage | UnknownMessage:
    """`stream_event`: the raw event, forwarded."""
    session_id = _string(raw.get("session_id"))
    uuid = _string(raw.get("uuid"))
    event = _object(raw.get("event"))
    # A stream event names its session and itself, and carries the event object.
    if session_id is None or uuid is None or event is None:
        return _unknown(raw)
    return {
        "type": "stream_event",
        "session_id": session_id,
        "uuid": uuid,
        "event": event,
        "parent_tool_use_id": _parent_call(raw),
    }


def _adapt_result(raw: JsonObject) -> ResultMessage | UnknownMessage:
    """`result`: the turn's outcome, timing and cost; the final text only on success."""
    subtype = _string(raw.get("subtype"))
    session_id = _string(raw.get("session_id"))
    is_error = raw.get("is_error")
    duration_ms = _number(raw.get("duration_ms"))
    num_turns = _integer(raw.get("num_turns"))
    total_cost_usd = _number(raw.get("total_cost_usd"))
    # A result carries every one of these.
    if (
        subtype is None
        or session_id is None
        or not isinstance(is_error, bool)
        or duration_ms is None
        or num_turns is None
        or total_cost_usd is None
    ):
        return _unknown(raw)
    adapted: ResultMessage = {
        "type": "result",
        "subtype": subtype,
        "session_id": session_id,
        "is_error": is_error,
        "duration_ms": duration_ms,
        "num_turns": num_turns,
        "total_cost_usd": total_cost_usd,
    }
    result_text = _string(raw.get("result"))
    # Only a success carries the final text.
    if subtype == "success" and result_text is not None:
        adapted["result"] = result_text
    errors = raw.get("errors")
    # The CLI's words for a failed turn ride along when they are a list of strings.
    if isinstance(errors, list) and errors and all(isinstance(e, str) for e in errors):
        adapted["errors"] = [str(error) for error in errors]
    return adapted


# ---------------------------------------------------------------------------
# Reading adapted messages
# ---------------------------------------------------------------------------


def sub_agent_call(message: AdaptedMessage) -> str | None:
    """The tool use id of the call whose sub-agent said ``message``; None for a
    message of the main conversation, and for a kind no sub-agent says."""
    if (
        message["type"] == "assistant"
        or message["type"] == "user"
        or message["type"] == "stream_event"
    ):
        return message["parent_tool_use_id"]
    return None


def assistant_text(message: AdaptedMessage) -> str:
    """The text blocks of an assistant message of the main conversation, concatenated;
    `""` for any other message, a sub-agent's included (the module doc)."""
    # A sub-agent's text answers its call, not the person: it is not the turn's.
    if message["type"] != "assistant" or message["parent_tool_use_id"] is not None:
        return ""
    texts: list[str] = []
    for block in message["message"]["content"]:
        text = block.get("text")
        if block.get("type") == "text" and isinstance(text, str):
            texts.append(text)
    # A loop, not a generator: this runs for every message of every turn.
    return "".join(texts)


def accumulate_assistant_text(prior: str, message: AdaptedMessage) -> str:
    """The turn's text so far with this message's assistant text appended (§3.6): the
    main conversation's alone."""
    return prior + assistant_text(message)


def text_delta(message: AdaptedMessage) -> str | None:
    """The text a partial message adds to the live text (the module doc); None for
    any other message, a sub-agent's, and a delta of no text."""
    # Only the main conversation's stream events carry the turn's partial text.
    if message["type"] != "stream_event" or sub_agent_call(message) is not None:
        return None
    event = message["event"]
    delta = _object(event.get("delta"))
    # A content block's text delta: any other event streams no text.
    if (
        event.get("type") != "content_block_delta"
        or delta is None
        or delta.get("type") != "text_delta"
    ):
        return None
    return _non_empty_string(delta.get("text"))


@dataclass(frozen=True)
class LiveTextDelta:
    """A text delta as a listener of the live text receives it: its ``text``, and
    whether it is the ``first`` of its message (the live text was None before it),
    so that the listener drops what streamed before (a failed attempt's text, which a
    retry's ``message_start`` dropped, or a message already complete)."""

    text: str
    first: bool


def live_text_after(live: str | None, message: AdaptedMessage) -> str | None:
    """The live text once ``message`` has arrived (the module doc's table)."""
    delta = text_delta(message)
    if delta is not None:
        return (live or "") + delta
    # A result ends the turn.
    if message["type"] == "result":
        return None
    # A sub-agent's message is no part of the turn's text, streamed or complete.
    if sub_agent_call(message) is not None:
        return live
    # A complete message replaces the live text; a new one begins (whatever streamed
    # before is not its).
    if message["type"] == "assistant" or (
        message["type"] == "stream_event" and message["event"].get("type") == "message_start"
    ):
        return None
    return live


# How an interrupted turn ends (a stop, a restart or a person's interrupt): not a failure.
INTERRUPTED_SUBTYPE = "error_during_execution"


def turn_error(message: AdaptedMessage) -> str | None:
    """The words of a failed turn's result (see the module doc); None for any other message."""
    # Only a turn's result says how the turn ended.
    if message["type"] != "result":
        return None
    # A result that is not an error, or an interrupt's, reports no failure.
    if not message["is_error"] or message["subtype"] == INTERRUPTED_SUBTYPE:
        return None
    text = message.get("result", "")
    if text:
        return text
    errors = message.get("errors", [])
    if errors:
        return "; ".join(errors)
    return message["subtype"]


def message_kind(message: AdaptedMessage) -> str:
    """A short label for a message (`system:init`, `task:settled`, `result:success`, …).

    Exhaustive over the union: a member this does not handle is a type error
    at `assert_never`.
    """
    if message["type"] == "system":
        return "system:init"
    if message["type"] == "task":
        return f"task:{message['task']['phase']}"
    if message["type"] == "assistant":
        return "assistant"
    if message["type"] == "user":
        return "user"
    if message["type"] == "stream_event":
        return "stream_event"
    if message["type"] == "result":
        return f"result:{message['subtype']}"
    if message["type"] == "unknown":
        return "unknown"
    assert_never(message)


# ---------------------------------------------------------------------------
# The thread session's reading: complete <chat-response> blocks
# ---------------------------------------------------------------------------

# §3.3: one complete block, shortest match (the original's
# /<chat-response>([\S\s]*?)<\/chat-response>/g).
_CHAT_RESPONSE = re.compile(r"<chat-response>(.*?)</chat-response>", re.DOTALL)


def extract_chat_responses(buffer: str) -> tuple[list[str], str]:
    """The complete `<chat-response>` blocks in `buffer`, and the text left after them (§3.3).

    Each complete block, in order, yields its inner text trimmed as JavaScript
    trims (`js_trim`); a block that trims to nothing yields nothing. Everything
    up to the end of the last complete block is consumed; the rest (an
    unterminated block, text after the last block) is returned to wait for more
    text. With no complete block the buffer is returned whole.
    """
    responses: list[str] = []
    consumed_to = 0
    for match in _CHAT_RESPONSE.finditer(buffer):
        text = js_trim(match[1])
        # An empty reply is not delivered.
        if text != "":
            responses.append(text)
        consumed_to = match.end()
    return responses, buffer[consumed_to:]
