"""`ClaudeEngine` and `ClaudeRun` on Claude Code itself, below the box.

What the box's tests reach only by chance: a close that races the CLI's last line,
and resumes the CLI cannot serve (a transcript with no conversation in it).
"""

from __future__ import annotations

import gc
import json
import time
import uuid
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from beebox_impl.engine.claude import ClaudeEngine, ClaudeRun
from beebox_impl.engine.protocol import StartOptions
from beebox_spec.entries import JsonObject
from tests.agent.claude_cli import OfflineClaude, claude_processes
from tests.agent.messages_api import MessagesApiDouble, Reply

pytestmark = pytest.mark.anyio


async def one_turn(run: ClaudeRun, text: str) -> list[JsonObject]:
    """Send ``text`` and read the run's messages up to its result."""
    received: list[JsonObject] = []
    stream = run.messages()
    await run.send(text)
    with anyio.fail_after(30):
        async for message in stream:
            received.append(message)
            if message.get("type") == "result":
                break
    return received


async def test_a_close_right_after_a_result_leaves_nothing_to_the_collector(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble
) -> None:
    # After a turn's result the CLI writes one more line (`session_state_changed`).
    # A close while it is on its way stopped the SDK's reader mid-read, which left its
    # line reader to the collector: a ResourceWarning on trio (an error here, under
    # `filterwarnings = error`), in about half of such closes before the fix.
    api.fallback = Reply.text("hi")
    box = tmp_path / "box"
    box.mkdir()
    engine = claude.engine()
    for _ in range(5):
        run = await engine.start(StartOptions(cwd=box))
        async with anyio.create_task_group() as tasks:
            turn_over = anyio.Event()

            async def pump(run: ClaudeRun = run, turn_over: anyio.Event = turn_over) -> None:
                async for message in run.messages():
                    if message.get("type") == "result":
                        turn_over.set()

            tasks.start_soon(pump)
            await run.send("hello")
            await turn_over.wait()
            # The loop held up a moment (a GC pass, a scan): the CLI's line waits unread.
            time.sleep(0.1)
            await anyio.lowlevel.checkpoint()
            await run.close()
        gc.collect()
        assert run.closed
    assert not claude_processes(claude.config)


def write_transcript(
    engine: ClaudeEngine, options: StartOptions, session_id: str, lines: list[JsonObject]
) -> None:
    path = engine.cli_transcript(options, session_id)
    assert path is not None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines), encoding="utf-8"
    )


@pytest.mark.parametrize(
    "lines",
    [
        # Killed after the CLI wrote its queue's lines, before the prompt's.
        pytest.param([{"type": "queue-operation", "operation": "enqueue"}], id="no-turn"),
        # A conversation of the session's sub-agent only: the CLI refuses to resume it.
        pytest.param(
            [{"type": "user", "isSidechain": True, "message": {"role": "user", "content": "x"}}],
            id="refused",
        ),
    ],
)
async def test_a_session_the_cli_cannot_resume_is_started_anew(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble, lines: list[JsonObject]
) -> None:
    api.script(Reply.text("a new session"))
    box = tmp_path / "box"
    box.mkdir()
    engine = claude.engine()
    gone = str(uuid.uuid4())
    options = StartOptions(cwd=box, resume_session_id=gone, system_prompt="be brief")
    write_transcript(engine, options, gone, [{**line, "sessionId": gone} for line in lines])
    run = await engine.start(options)
    messages = await one_turn(run, "hello")
    await run.close()
    init = messages[0]
    assert init["subtype"] == "init"
    assert init["session_id"] not in (None, gone)
    # A new session: the request carries this text alone, and the new session's prompt.
    (request,) = api.message_requests
    assert request.user_texts() == ["hello"]
    assert "be brief" in request.system_text()
