"""The shapes history takes on the wire: `SessionEntry` and its content blocks.

Spec sources, in `docs/sources.md` (a bare §N.M below is its anchor `facts-N-M`):
`docs/sources.md#facts-1-3` (§1.3: `SessionContentBlock` fields),
`docs/sources.md#facts-2-2` (§2.2: `AcceptedMessage` = a `SessionEntry` plus
`reconcileKnownUuids`), `docs/sources.md#facts-2-4` (§2.4: `SessionEntry`,
`SessionHistory`, `MAX_SESSION_ENTRIES`) and `docs/sources.md#facts-2-5` (§2.5:
`entryText`).

These are JSON objects, typed as `TypedDict`s, because they cross the wire as they
are: the HTTP routes answer them, the page joins them, and the conformance vectors
spell them out. Keys are the wire's camelCase. A block carries only the keys its
type uses; absent keys are absent, never `null`.

Everything in this module is a shape or a reading of a shape; the rules that
produce entries live in `beebox_spec.transcript` (the read) and
`beebox_spec.media` (`transform_content`).
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypeAlias, TypedDict, TypeGuard

__all__ = [
    "IMAGE_NOT_DISPLAYED",
    "MAX_SESSION_ENTRIES",
    "EntryType",
    "JsonObject",
    "JsonValue",
    "PendingMessage",
    "SessionContentBlock",
    "SessionEntry",
    "SessionHistory",
    "entry_text",
    "is_json_object",
]

# A value as `json.loads` returns it. Transcript lines are read into this shape and
# narrowed with isinstance checks, never trusted.
JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"
JsonObject: TypeAlias = "dict[str, JsonValue]"

# §2.4: the most entries one history read returns, and one journal page.
MAX_SESSION_ENTRIES = 5000

# §1.3 (`src/shared/chat-content-blocks.ts`): what an image with nothing behind it
# reads as — a failed upload, or a stripped photo where no reference can be minted.
IMAGE_NOT_DISPLAYED = "[image not displayed]"

EntryType: TypeAlias = Literal["user", "assistant"]


class SessionContentBlock(TypedDict, total=False):
    """One block of a history entry (§1.3). `type` is always present."""

    type: Literal["text", "tool_use", "tool_result", "thinking", "image"]
    text: str
    toolName: str
    toolId: str
    inputSummary: str
    input: JsonObject
    toolUseId: str
    resultSummary: str
    # On a `tool_use` block whose result said `is_error: true` (transcript rule 5)
    # (ours, `docs/spec-decisions.md#tool-results-on-calls`).
    isError: bool
    # On a `tool_use` block whose result names the sub-agent the call started
    # (transcript rule 5) (ours, `docs/spec-decisions.md#sub-agent-work`).
    agentId: str
    mediaType: str
    dataBase64: str
    imageUrl: str
    imageRef: str


class SessionEntry(TypedDict):
    """One user or assistant turn as the history read returns it (§2.4)."""

    uuid: str
    type: EntryType
    timestamp: str
    content: list[SessionContentBlock]
    user: NotRequired[str]
    userEmail: NotRequired[str]
    # True on a sub-agent's turn, never false (transcript rule 4)
    # (ours, `docs/spec-decisions.md#sub-agent-work`).
    sidechain: NotRequired[bool]


class PendingMessage(SessionEntry):
    """A message the box accepted but the transcript may not hold yet (§2.2, §2.5).

    `reconcileKnownUuids` names the history entries that were already there when
    the message was accepted: they can never be its durable echo. `dropped` is
    true when a later stop or reset dropped the message undelivered
    (`beebox_spec.reconcile.read_accepted_messages`).
    """

    reconcileKnownUuids: NotRequired[list[str]]
    dropped: NotRequired[bool]


class SessionHistory(TypedDict):
    """A slice of a session's history and the session's entry count (§2.4)."""

    sessionId: str
    entries: list[SessionEntry]
    total: int


def entry_text(entry: SessionEntry) -> str:
    """The entry's text blocks concatenated with no separator (§2.5 `entryText`)."""
    return "".join(
        block.get("text", "") for block in entry["content"] if block.get("type") == "text"
    )


def is_json_object(value: JsonValue) -> TypeGuard[JsonObject]:
    """True when the value is a JSON object (the narrowing every reader of a line starts with)."""
    return isinstance(value, dict)
