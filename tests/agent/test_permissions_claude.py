"""Permission requests from Claude Code itself, answered through the box (issue 33).

The CLI the ``claude`` extra bundles runs in its ``default`` permission mode
against the Messages API double, which answers with ``tool_use`` blocks. The CLI
really asks (its ``can_use_tool`` control request), the box shows the request,
and a host's answer decides whether the tool really runs: a file appears in the
box, or the model's next request carries the denial. A stand-in for the CLI
would not ask, run a tool, keep an "always" rule, or send the denial on.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from beebox_impl.box import Box
from beebox_impl.services import Queued, SendRequest
from beebox_impl.services.permissions import PermissionAlreadyEnded, PermissionNotFound
from beebox_impl.transcript import TailSlice
from beebox_spec.permissions import (
    STOPPED_MESSAGE,
    TIMED_OUT_MESSAGE,
    PermissionReply,
)
from beebox_spec.phases import Phase
from tests.agent.box_support import EventLog, LoggedEvent, claude_box, wait_until
from tests.agent.claude_cli import OfflineClaude, claude_processes
from tests.agent.messages_api import MessagesApiDouble, Recorded, Reply, ToolUse

pytestmark = pytest.mark.anyio

# How long a test waits for the CLI to ask (it asks within a second or two here).
ASK_WAIT_S = 60


def touch(name: str) -> ToolUse:
    """A Bash call Claude Code asks about in its default mode (it writes a file)."""
    return ToolUse("Bash", {"command": f"touch {name}", "description": f"Create {name}"})


async def asked(log: EventLog, count: int = 1) -> list[dict[str, Any]]:
    """The first ``count`` requests announced."""
    events = await log.wait_for_name("permission-request", count=count, timeout=ASK_WAIT_S)
    return [event_request(event) for event in events[:count]]


def event_request(event: LoggedEvent) -> dict[str, Any]:
    request = event.data["request"]
    assert isinstance(request, dict)
    return request


def tool_results(api: MessagesApiDouble) -> list[dict[str, Any]]:
    """Every tool result the CLI sent the model so far, in order (its last request
    carries the whole conversation)."""
    requests: list[Recorded] = api.message_requests
    return requests[-1].tool_results() if requests else []


def result_text(result: dict[str, Any]) -> str:
    content = result.get("content")
    if isinstance(content, str):
        return content
    return " ".join(str(block.get("text", "")) for block in content or [])


async def test_allow_lets_the_tool_run(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble
) -> None:
    box_dir = tmp_path / "box"
    api.script(Reply((touch("made.txt"),)), Reply.text("made it"))
    async with claude_box(box_dir, claude) as (box, log):
        await box.send(SendRequest("make a file", message_id="m-1"))
        (request,) = await asked(log)
        # What a person is shown: the tool, its input, the CLI's own words.
        assert request["toolName"] == "Bash"
        assert request["input"]["command"] == "touch made.txt"
        assert request["toolUseId"].startswith("toolu_double_")
        assert request["id"].startswith("perm-")
        assert box.pending_permissions() == [request]
        # A turn waiting for an answer is in flight: busy, and a send is queued.
        assert box.status()["busy"] is True
        assert box.status()["phase"] == Phase.STREAMING.value
        queued = await box.send(SendRequest("and then?", message_id="m-2"))
        assert isinstance(queued, Queued)
        assert not (box_dir / "made.txt").exists()

        await box.answer_permission(request["id"], PermissionReply("allow"), by="page")
        await log.wait_for_name("turn-text", timeout=ASK_WAIT_S)
        assert (box_dir / "made.txt").exists()
        (ended,) = log.named("permission-ended")
        assert ended.data == {"id": request["id"], "how": "answered", "decision": "allow"}
        assert box.pending_permissions() == []
        # Answered once: a second answer is refused, an unknown id is not found.
        with pytest.raises(PermissionAlreadyEnded):
            await box.answer_permission(request["id"], PermissionReply("deny"))
        with pytest.raises(PermissionNotFound):
            await box.answer_permission("perm-never", PermissionReply("allow"))
        # The queued send drains into the next turn once this one is done.
        await log.wait_for_name("turn-text", count=2, timeout=ASK_WAIT_S)
        (decision,) = await box.permission_decisions()
    assert decision.request == request
    assert (decision.how, decision.decision, decision.answered_by) == ("answered", "allow", "page")
    assert decision.asked_at <= decision.ended_at
    assert any("and then?" in text for r in api.message_requests for text in r.user_texts())


async def test_deny_reaches_the_model(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble
) -> None:
    box_dir = tmp_path / "box"
    api.script(Reply((touch("never.txt"),)), Reply.text("understood"))
    async with claude_box(box_dir, claude) as (box, log):
        await box.send(SendRequest("make a file", message_id="m-1"))
        (request,) = await asked(log)
        await box.answer_permission(
            request["id"], PermissionReply("deny", "not in this folder, please")
        )
        await log.wait_for_name("turn-text", timeout=ASK_WAIT_S)
        (decision,) = await box.permission_decisions()
    assert not (box_dir / "never.txt").exists()
    (result,) = tool_results(api)
    assert result["is_error"] is True
    assert "not in this folder, please" in result_text(result)
    assert (decision.decision, decision.message, decision.answered_by) == (
        "deny",
        "not in this folder, please",
        "host",
    )


async def test_an_unanswered_request_times_out_denied(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble
) -> None:
    box_dir = tmp_path / "box"
    api.script(Reply((touch("late.txt"),)), Reply.text("nobody answered"))
    log = EventLog()
    async with (
        Box.open(
            box_dir,
            engine=claude.engine(),
            projects_root=claude.projects,
            permission_timeout=timedelta(seconds=1),
        ) as box,
        anyio.create_task_group() as tasks,
    ):
        await tasks.start(log.follow, box)
        await box.send(SendRequest("make a file", message_id="m-1"))
        (request,) = await asked(log)
        await log.wait_for_name("turn-text", timeout=ASK_WAIT_S)
        (ended,) = log.named("permission-ended")
        assert ended.data == {"id": request["id"], "how": "timed-out", "decision": "deny"}
        with pytest.raises(PermissionAlreadyEnded):
            await box.answer_permission(request["id"], PermissionReply("allow"))
        (decision,) = await box.permission_decisions()
        tasks.cancel_scope.cancel()
    assert not (box_dir / "late.txt").exists()
    (result,) = tool_results(api)
    assert TIMED_OUT_MESSAGE in result_text(result)
    assert decision.answered_by == "timeout"
    assert decision.ended_at - decision.asked_at >= timedelta(seconds=1)


async def test_a_reopened_page_sees_what_is_pending(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble
) -> None:
    box_dir = tmp_path / "box"
    api.script(Reply((touch("seen.txt"),)), Reply.text("done"))
    async with claude_box(box_dir, claude) as (box, log):
        await box.send(SendRequest("make a file", message_id="m-1"))
        (request,) = await asked(log)
        # A page opened (or reloaded) now reads the request from the bootstrap.
        for _reload in range(2):
            boot = await box.bootstrap(window=TailSlice(50))
            assert boot["permissions"] == [request]
        await box.answer_permission(request["id"], PermissionReply("allow"), by="page")
        await log.wait_for_name("turn-text", timeout=ASK_WAIT_S)
        boot = await box.bootstrap(window=TailSlice(50))
        assert boot["permissions"] == []
    assert (box_dir / "seen.txt").exists()


async def test_two_parallel_requests_answered_in_reverse_order(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble
) -> None:
    # Reads outside the box's folder are asked about, and in parallel.
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "first.txt").write_text("first secret\n")
    (outside / "second.txt").write_text("second words\n")
    api.script(
        Reply(
            (
                ToolUse("Read", {"file_path": str(outside / "first.txt")}),
                ToolUse("Read", {"file_path": str(outside / "second.txt")}),
            )
        ),
        Reply.text("read one of them"),
    )
    async with claude_box(tmp_path / "box", claude) as (box, log):
        await box.send(SendRequest("read both", message_id="m-1"))
        first, second = await asked(log, count=2)
        assert [request["input"]["file_path"] for request in (first, second)] == [
            str(outside / "first.txt"),
            str(outside / "second.txt"),
        ]
        assert box.pending_permissions() == [first, second]
        await box.answer_permission(second["id"], PermissionReply("allow"))
        assert box.pending_permissions() == [first]
        await box.answer_permission(first["id"], PermissionReply("deny", "keep out"))
        await log.wait_for_name("turn-text", timeout=ASK_WAIT_S)
        decisions = await box.permission_decisions()
    results = {result["tool_use_id"]: result for result in tool_results(api)}
    assert "second words" in result_text(results[second["toolUseId"]])
    assert "keep out" in result_text(results[first["toolUseId"]])
    assert results[first["toolUseId"]]["is_error"] is True
    # Newest first: the first request ended last.
    assert [(d.request["id"], d.decision) for d in decisions] == [
        (first["id"], "deny"),
        (second["id"], "allow"),
    ]


async def test_stop_while_pending_denies_and_ends_the_cli(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble
) -> None:
    box_dir = tmp_path / "box"
    api.script(Reply((touch("stopped.txt"),)))
    async with claude_box(box_dir, claude) as (box, log):
        await box.send(SendRequest("make a file", message_id="m-1"))
        (request,) = await asked(log)
        await box.stop()
        await log.wait_for_name("close", timeout=ASK_WAIT_S)
        (ended,) = log.named("permission-ended")
        assert ended.data == {"id": request["id"], "how": "stopped", "decision": "deny"}
        assert box.pending_permissions() == []
        assert box.status()["phase"] == Phase.IDLE.value
        with pytest.raises(PermissionAlreadyEnded):
            await box.answer_permission(request["id"], PermissionReply("allow"))
        (decision,) = await box.permission_decisions()
        await wait_until(lambda: not claude_processes(claude.config), timeout=30)
    assert not (box_dir / "stopped.txt").exists()
    assert (decision.how, decision.answered_by, decision.message) == ("stopped", "stop", "")
    # What the run was told is the box's own reason, not a person's.
    assert "stopped" in STOPPED_MESSAGE


async def test_always_allow_is_not_asked_again(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble
) -> None:
    box_dir = tmp_path / "box"
    api.script(
        Reply((touch("one.txt"),)),
        Reply((touch("one.txt"),)),
        Reply.text("touched it twice"),
    )
    async with claude_box(box_dir, claude) as (box, log):
        await box.send(SendRequest("touch it twice", message_id="m-1"))
        (request,) = await asked(log)
        assert request["canAlwaysAllow"] is True
        await box.answer_permission(request["id"], PermissionReply("allow", always=True))
        await log.wait_for_name("turn-text", timeout=ASK_WAIT_S)
        (decision,) = await box.permission_decisions()
    # Asked once; the second, identical call ran on the rule the CLI kept.
    assert len(log.named("permission-request")) == 1
    results = tool_results(api)
    assert len(results) == 2
    assert not any(result["is_error"] for result in results)
    assert decision.always is True
    kept = json.loads((box_dir / ".claude" / "settings.local.json").read_text())
    assert "Bash(touch one.txt)" in kept["permissions"]["allow"]


async def test_an_engine_in_a_mode_that_never_asks_runs_the_tool(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble
) -> None:
    box_dir = tmp_path / "box"
    api.script(Reply((touch("allowed.txt"),)), Reply.text("ran"))
    async with claude_box(box_dir, claude, allowed_tools=["Bash(touch allowed.txt)"]) as (
        box,
        log,
    ):
        await box.send(SendRequest("make a file", message_id="m-1"))
        await log.wait_for_name("turn-text", timeout=ASK_WAIT_S)
    assert (box_dir / "allowed.txt").exists()
    assert log.named("permission-request") == []


async def test_a_disallowed_tool_is_refused_without_asking(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble
) -> None:
    box_dir = tmp_path / "box"
    api.script(Reply((touch("refused.txt"),)), Reply.text("refused"))
    async with claude_box(box_dir, claude, disallowed_tools=["Bash(touch:*)"]) as (box, log):
        await box.send(SendRequest("make a file", message_id="m-1"))
        await log.wait_for_name("turn-text", timeout=ASK_WAIT_S)
    assert not (box_dir / "refused.txt").exists()
    assert log.named("permission-request") == []
    (result,) = tool_results(api)
    assert result["is_error"] is True
