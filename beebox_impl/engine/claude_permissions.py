"""Claude Code's permission prompts, as the box's permission requests.

Claude Code asks its host before a tool call its permission mode and rules do
not settle (``can_use_tool``, `claude-agent-sdk`): it gives the tool's name and
input and a context — the prompt sentence (``title``), a display name, a
description, the path that made it ask, why it asked, and the rules it suggests
— and waits. `can_use_tool_for` turns that into a `PermissionRequest` asked of
the run's session (`beebox_spec.permissions`), and the session's answer back
into the SDK's result:

- **allow** — the call runs with its input unchanged; with ``always``, the rules
  the CLI suggested that allow (``addRules`` / ``allow``) go with it, so the CLI
  keeps them (where it proposed: usually the box's ``.claude/settings.local.json``)
  and does not ask for the same call again;
- **deny** — the model reads the message (the person's, or the box's own when
  the request timed out or the chat was stopped);
- **no answer** (the request ended with its run, or the session let it go) — a
  denial that also interrupts the turn: nobody is there to answer.

The CLI may take a prompt back (``control_cancel_request``, when its turn is
interrupted): the SDK cancels the callback, and the cancelled ask is the
request withdrawn.

A host's ``allowed_tools`` entry that allows a whole tool (``Bash``, ``Read(*)``)
would make the CLI approve that tool before it could ask, and the SDK warns that
the callback is shadowed (`CanUseToolShadowedWarning`) — deliberate here, but a
warning a host running with warnings as errors cannot start past. So such
entries are not passed to the CLI while the box answers its prompts
(`split_allowed_tools`): the callback allows those tools at once, without asking
anyone, which is what the entry meant. In ``bypassPermissions`` nothing is ever
asked, and no callback is given.

The modes themselves are Claude Code's own, in
`beebox_impl.engine.permission_modes`, which a light command can import alone.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from beebox_spec.entries import JsonObject
from beebox_spec.permissions import (
    STOPPED_MESSAGE,
    PermissionReply,
    PermissionRequest,
    can_always_allow,
)

if TYPE_CHECKING:
    # For type checkers only: the engine protocol imports anyio, which a light bbx skips.
    from beebox_impl.engine.protocol import AskPermission

__all__ = [
    "can_use_tool_for",
    "permission_request_from_sdk",
    "sdk_permission_result",
    "split_allowed_tools",
    "whole_tool",
]

# The SDK's callback: the tool's name, its input, the context; the result object.
CanUseTool: TypeAlias = Callable[[str, dict[str, Any], Any], Awaitable[Any]]


def whole_tool(entry: str) -> str | None:
    """The tool an ``allowed_tools`` entry allows whole (``Bash``, ``Bash()``,
    ``Bash(*)``), or None for a narrower rule (``Bash(git status:*)``)."""
    entry = entry.strip()
    if not entry:
        return None
    opening = entry.find("(")
    if opening == -1:
        return entry
    if opening == 0 or not entry.endswith(")"):
        return None
    return entry[:opening] if entry[opening + 1 : -1] in ("", "*") else None


def split_allowed_tools(entries: Sequence[str]) -> tuple[list[str], frozenset[str]]:
    """The entries to give the CLI, and the tools the callback allows whole (see the
    module doc)."""
    narrow = [entry for entry in entries if whole_tool(entry) is None]
    whole = frozenset(tool for entry in entries if (tool := whole_tool(entry)) is not None)
    return narrow, whole


def _suggestions(context: Any) -> list[Any]:
    return list(getattr(context, "suggestions", None) or [])


def permission_request_from_sdk(
    request_id: str, tool_name: str, tool_input: Mapping[str, Any], context: Any
) -> PermissionRequest:
    """What a person is shown for the CLI's prompt (the context's fields it gave)."""
    suggestions = [update.to_dict() for update in _suggestions(context)]
    request: PermissionRequest = {
        "id": request_id,
        "toolName": tool_name,
        # The CLI's input is JSON it parsed: a JSON object.
        "input": cast(JsonObject, dict(tool_input)),
        "toolUseId": getattr(context, "tool_use_id", None) or "",
        "canAlwaysAllow": can_always_allow(suggestions),
    }
    for key, attribute in (
        ("title", "title"),
        ("displayName", "display_name"),
        ("description", "description"),
        ("blockedPath", "blocked_path"),
        ("decisionReason", "decision_reason"),
    ):
        value = getattr(context, attribute, None)
        if isinstance(value, str) and value:
            request[key] = value  # type: ignore[literal-required]
    return request


def sdk_permission_result(
    sdk: Any, reply: PermissionReply | None, tool_input: dict[str, Any], context: Any
) -> Any:
    """The SDK's answer for the session's ``reply`` (see the module doc)."""
    if reply is None:
        return sdk.PermissionResultDeny(message=STOPPED_MESSAGE, interrupt=True)
    if reply.decision == "deny":
        return sdk.PermissionResultDeny(message=reply.message)
    kept = [
        update
        for update in _suggestions(context)
        if update.type == "addRules" and update.behavior == "allow"
    ]
    return sdk.PermissionResultAllow(
        updated_input=tool_input, updated_permissions=kept if reply.always and kept else None
    )


def can_use_tool_for(
    sdk: Any, ask_permission: AskPermission, allowed_whole: frozenset[str] = frozenset()
) -> CanUseTool:
    """The ``can_use_tool`` callback of a run whose session answers through
    ``ask_permission``; a tool in ``allowed_whole`` is allowed without asking."""

    async def can_use_tool(tool_name: str, tool_input: dict[str, Any], context: Any) -> Any:
        if tool_name in allowed_whole:
            return sdk.PermissionResultAllow(updated_input=tool_input)
        # An id of the box's own: the CLI's tool-use id names a call, not one prompt.
        import uuid  # noqa: PLC0415 - only a run that asks needs it (a light bbx imports this)

        request_id = f"perm-{uuid.uuid4().hex}"
        request = permission_request_from_sdk(request_id, tool_name, tool_input, context)
        reply = await ask_permission(request)
        return sdk_permission_result(sdk, reply, tool_input, context)

    return can_use_tool
