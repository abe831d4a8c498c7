"""`ChatSessionPool` on Claude Code itself: park and resume with real CLI processes.

Two chat threads share one pool, one active session at a time. The CLI that the
``claude`` extra bundles runs each thread's session against the Messages API
double, which answers in ``<chat-response>`` tags as the thread prompt asks. A
send on the other thread parks the active one (its CLI exits, its session id
stays in its record); a send back resumes that session in a fresh CLI, and the
API sees that thread's conversation and nothing of the other's.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from beebox_impl.session import (
    ChatSessionPool,
    ManualClock,
    PermissionEnded,
    PermissionRequested,
    PoolSendResult,
    TurnSettlement,
)
from beebox_impl.store import InMemoryThreadRecordStore
from beebox_spec.permissions import PermissionEnd, PermissionNotPending, PermissionReply
from beebox_spec.thread_pool import BUSY_TIMEOUT, REMINDER
from tests.agent.box_support import wait_until
from tests.agent.claude_cli import OfflineClaude, claude_processes
from tests.agent.messages_api import MessagesApiDouble, Reply, ToolUse
from tests.impl.engine.fake_claude import option_value

pytestmark = pytest.mark.anyio

THREAD_PROMPT = "You answer chat threads. Wrap every reply in <chat-response> tags."


def command_line(pid: int) -> list[str]:
    """The arguments the process ``pid`` was started with (Linux /proc)."""
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]


def answer(text: str) -> Reply:
    """The model's reply to a thread, with a note outside the tags (not delivered)."""
    return Reply.text(f"Thinking it over. <chat-response>{text}</chat-response>")


def done(*responses: str) -> PoolSendResult:
    return PoolSendResult(responses, True, TurnSettlement("done"))


async def test_two_threads_park_and_resume_their_own_sessions(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble
) -> None:
    api.script(answer("t1, first"), answer("t2, first"), answer("t1, again"))
    box_root = tmp_path / "box"
    box_root.mkdir()
    records = InMemoryThreadRecordStore()
    with anyio.fail_after(60):
        async with ChatSessionPool.open(
            engine=claude.engine(), box_root=box_root, records=records, thread_prompt=THREAD_PROMPT
        ) as pool:
            first = await pool.send("t1", "hello from t1")
            (t1_cli,) = claude_processes(claude.config)
            t1_args = command_line(t1_cli)
            t1_session = pool.records["t1"]["sessionId"]

            # t2 parks t1: its CLI is gone before t2's turn has ended, its id kept.
            second = await pool.send("t2", "hello from t2")
            (t2_cli,) = claude_processes(claude.config)
            assert pool.active_thread == "t2"
            assert pool.records["t1"]["sessionId"] == t1_session
            t2_session = pool.records["t2"]["sessionId"]

            # Back on t1: t2 parked in turn, t1's session resumed in a fresh CLI.
            third = await pool.send("t1", "t1 once more")
            (t1_again_cli,) = claude_processes(claude.config)
            resumed_args = command_line(t1_again_cli)
            assert pool.active_thread == "t1"
            active = pool.active_session
            assert active is not None
            assert active.session_id == t1_session
            in_memory = pool.records
        left = claude_processes(claude.config)
    assert first == done("t1, first")
    assert second == done("t2, first")
    assert third == done("t1, again")
    # Three CLIs, one after another; none outlives the pool.
    assert len({t1_cli, t2_cli, t1_again_cli}) == 3
    assert left == []
    # The records: both sessions, each counted, and what the store holds is the same.
    assert t2_session != t1_session
    assert {ref: record["sessionId"] for ref, record in in_memory.items()} == {
        "t1": t1_session,
        "t2": t2_session,
    }
    assert in_memory["t1"]["messageCount"] == 2
    assert in_memory["t2"]["messageCount"] == 1
    assert await records.load_all() == in_memory
    # The sessions are the CLI's own: one transcript each, named by its id.
    assert sorted(path.stem for path in claude.transcripts()) == sorted([t1_session, t2_session])

    requests = api.message_requests
    assert len(requests) == 3
    assert api.unscripted == 0
    # New sessions start with the bare text.
    assert [request.user_texts() for request in requests[:2]] == [
        ["hello from t1"],
        ["hello from t2"],
    ]
    # The box gives the thread prompt to a new session's CLI only; the resumed CLI
    # is told which session to resume, and no prompt.
    assert option_value(t1_args, "--system-prompt") == THREAD_PROMPT
    assert not any(arg.startswith("--resume") for arg in t1_args)
    assert f"--resume={t1_session}" in resumed_args
    assert not option_value(resumed_args, "--system-prompt")
    # The API sees the prompt in every request all the same: the CLI restores it
    # from the session, as `ClaudeEngine` counts on when it passes none for a resume.
    assert all(THREAD_PROMPT in request.system_text() for request in requests)
    # The resumed turn carries t1's conversation, the reminder, and nothing of t2's.
    resumed = requests[2]
    assert resumed.user_texts() == ["hello from t1", "t1 once more" + REMINDER]
    said = [
        block.get("text") for block in resumed.blocks("assistant") if block.get("type") == "text"
    ]
    assert said == ["Thinking it over. <chat-response>t1, first</chat-response>"]
    assert not any("from t2" in text or "t2, first" in text for text in resumed.user_texts())
    assert "t2, first" not in str(resumed.messages)


async def test_a_thread_waiting_for_approval_is_answered_or_denied_as_it_parks(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble
) -> None:
    # After the second call is denied, whatever the CLI still asks, and t2, get the
    # double's fallback (a plain text): which comes first is the CLI's business.
    api.script(
        Reply((ToolUse("Bash", {"command": "touch first.txt", "description": "x"}),)),
        answer("t1 made it"),
        Reply((ToolUse("Bash", {"command": "touch second.txt", "description": "x"}),)),
    )
    box_root = tmp_path / "box"
    box_root.mkdir()
    clock = ManualClock(datetime(2026, 12, 5, 12, 0, tzinfo=UTC))
    results: dict[str, PoolSendResult] = {}

    async def send(thread: str, text: str) -> None:
        results[thread] = await pool.send(thread, text)

    with anyio.fail_after(90):
        async with (
            ChatSessionPool.open(
                engine=claude.engine(),
                box_root=box_root,
                records=InMemoryThreadRecordStore(),
                clock=clock,
                thread_prompt=THREAD_PROMPT,
            ) as pool,
            anyio.create_task_group() as sends,
        ):
            with pool.subscribe_permissions() as subscription:
                heard = aiter(subscription)
                # Answered through the pool: the tool runs, the turn finishes.
                sends.start_soon(send, "t1", "make the first file")
                first = await anext(heard)
                assert isinstance(first, PermissionRequested)
                assert pool.pending_permissions == [first.request]
                await pool.answer_permission(first.request["id"], PermissionReply("allow"))
                assert await anext(heard) == PermissionEnded(
                    PermissionEnd(first.request["id"], "answered", "allow")
                )
                await wait_until(lambda: "t1" in results)
                # t1 asks again; a message on t2 waits for t1's busy turn, then parks it.
                sends.start_soon(send, "t1", "make the second file")
                second = await anext(heard)
                assert isinstance(second, PermissionRequested)
                sends.start_soon(send, "t2", "hello from t2")
                # The request's timeout and the pool's wait for t1, both on the clock.
                await wait_until(lambda: clock.sleepers == 2)
                clock.advance(BUSY_TIMEOUT)
                assert await anext(heard) == PermissionEnded(
                    PermissionEnd(second.request["id"], "stopped", "deny")
                )
                await wait_until(lambda: "t2" in results)
            with pytest.raises(PermissionNotPending):
                await pool.answer_permission(second.request["id"], PermissionReply("allow"))
    assert (box_root / "first.txt").exists()
    assert not (box_root / "second.txt").exists()
    assert results["t1"].success is False
    assert results["t2"].success is True
