"""Claude Code's permission prompts as the box's requests, and back
(`beebox_impl.engine.claude_permissions`), with the SDK's own types."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import claude_agent_sdk as sdk
import pytest
from claude_agent_sdk.types import PermissionRuleValue

from beebox_impl.engine import ClaudeEngine, StartOptions
from beebox_impl.engine.claude_permissions import (
    can_use_tool_for,
    permission_request_from_sdk,
    sdk_permission_result,
    split_allowed_tools,
    whole_tool,
)
from beebox_impl.engine.permission_modes import InvalidPermissionMode, permission_mode
from beebox_spec.permissions import STOPPED_MESSAGE, PermissionReply, PermissionRequest

pytestmark = pytest.mark.anyio

ALLOW_RULE = sdk.PermissionUpdate(
    type="addRules",
    rules=[PermissionRuleValue(tool_name="Bash", rule_content="touch one.txt")],
    behavior="allow",
    destination="localSettings",
)
ADD_DIRECTORY = sdk.PermissionUpdate(
    type="addDirectories", directories=["/elsewhere"], destination="session"
)


def context(**fields: Any) -> sdk.ToolPermissionContext:
    return sdk.ToolPermissionContext(tool_use_id="toolu_1", **fields)


def test_a_prompt_becomes_a_request_with_what_the_cli_said() -> None:
    request = permission_request_from_sdk(
        "perm-1",
        "Bash",
        {"command": "touch one.txt"},
        context(
            suggestions=[ALLOW_RULE],
            title="Claude wants to run touch one.txt",
            display_name="Run command",
            description="Create a file",
            blocked_path="/box/one.txt",
            decision_reason=None,
        ),
    )
    assert request == {
        "id": "perm-1",
        "toolName": "Bash",
        "input": {"command": "touch one.txt"},
        "toolUseId": "toolu_1",
        "canAlwaysAllow": True,
        "title": "Claude wants to run touch one.txt",
        "displayName": "Run command",
        "description": "Create a file",
        "blockedPath": "/box/one.txt",
    }


def test_always_is_offered_only_for_a_suggested_allow_rule() -> None:
    for suggestions, offered in (([], False), ([ADD_DIRECTORY], False), ([ALLOW_RULE], True)):
        request = permission_request_from_sdk("p", "Read", {}, context(suggestions=suggestions))
        assert request["canAlwaysAllow"] is offered


def test_answers_become_the_sdks_results() -> None:
    tool_input = {"command": "touch one.txt"}
    asked = context(suggestions=[ADD_DIRECTORY, ALLOW_RULE])
    allow = sdk_permission_result(sdk, PermissionReply("allow"), tool_input, asked)
    assert allow == sdk.PermissionResultAllow(updated_input=tool_input)
    always = sdk_permission_result(sdk, PermissionReply("allow", always=True), tool_input, asked)
    # Only the rule that allows is kept, not the other suggestion.
    assert always == sdk.PermissionResultAllow(
        updated_input=tool_input, updated_permissions=[ALLOW_RULE]
    )
    deny = sdk_permission_result(sdk, PermissionReply("deny", "no"), tool_input, asked)
    assert deny == sdk.PermissionResultDeny(message="no")
    # Ended unanswered: denied, and the turn interrupted (nobody is there).
    gone = sdk_permission_result(sdk, None, tool_input, asked)
    assert gone == sdk.PermissionResultDeny(message=STOPPED_MESSAGE, interrupt=True)


async def test_the_callback_asks_the_session_with_an_id_of_its_own() -> None:
    asked: list[PermissionRequest] = []

    async def ask(request: PermissionRequest) -> PermissionReply | None:
        asked.append(request)
        return PermissionReply("deny", "not today")

    callback = can_use_tool_for(sdk, ask, frozenset({"Read"}))
    first = await callback("Bash", {"command": "ls"}, context())
    second = await callback("Bash", {"command": "ls"}, context())
    assert first == second == sdk.PermissionResultDeny(message="not today")
    assert len({request["id"] for request in asked}) == 2
    assert all(request["id"].startswith("perm-") for request in asked)
    # A tool the host allowed whole goes at once, nobody asked.
    assert await callback("Read", {"file_path": "/x"}, context()) == sdk.PermissionResultAllow(
        updated_input={"file_path": "/x"}
    )
    assert len(asked) == 2


async def test_a_cancelled_callback_is_a_withdrawn_ask() -> None:
    cancelled = anyio.Event()

    async def ask(request: PermissionRequest) -> PermissionReply | None:
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()
        return None  # pragma: no cover - never reached

    callback = can_use_tool_for(sdk, ask)

    async def prompt() -> None:
        await callback("Bash", {}, context())

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(prompt)
        await anyio.wait_all_tasks_blocked()
        tasks.cancel_scope.cancel()
    assert cancelled.is_set()


@pytest.mark.parametrize(
    ("entry", "tool"),
    [
        ("Bash", "Bash"),
        ("Bash()", "Bash"),
        ("Bash(*)", "Bash"),
        (" Read ", "Read"),
        ("Bash(git status:*)", None),
        ("(Bash)", None),
        ("Bash(", None),
        ("", None),
    ],
)
def test_whole_tool_entries(entry: str, tool: str | None) -> None:
    assert whole_tool(entry) == tool


def test_the_cli_gets_only_narrow_entries_while_the_box_answers(tmp_path: Path) -> None:
    assert split_allowed_tools(["Bash", "Read(*)", "Bash(git status:*)"]) == (
        ["Bash(git status:*)"],
        frozenset({"Bash", "Read"}),
    )

    async def ask(request: PermissionRequest) -> PermissionReply | None:
        return None

    engine = ClaudeEngine(allowed_tools=["Read", "Bash(ls:*)"], disallowed_tools=["Bash(rm:*)"])
    asking = engine.agent_options(StartOptions(cwd=tmp_path, ask_permission=ask))
    assert asking["allowed_tools"] == ["Bash(ls:*)"]
    assert asking["disallowed_tools"] == ["Bash(rm:*)"]
    not_asking = engine.agent_options(StartOptions(cwd=tmp_path))
    assert not_asking["allowed_tools"] == ["Read", "Bash(ls:*)"]
    bypass = ClaudeEngine(permission_mode="bypassPermissions", allowed_tools=["Read"])
    assert bypass.agent_options(StartOptions(cwd=tmp_path, ask_permission=ask))[
        "allowed_tools"
    ] == ["Read"]


def test_modes_are_claude_codes() -> None:
    assert permission_mode("acceptEdits") == "acceptEdits"
    with pytest.raises(InvalidPermissionMode, match="unknown permission mode 'yolo': one of"):
        permission_mode("yolo")
    with pytest.raises(InvalidPermissionMode):
        ClaudeEngine(permission_mode="yolo")
    with pytest.raises(ValueError, match="allowed_tools as its own argument"):
        ClaudeEngine(extra_options={"allowed_tools": ["Read"]})
