"""The box on Claude Code itself: every lifecycle path through `Box.open`, on both loops.

Each test runs the CLI that the ``claude`` extra bundles (`claude_cli.cli_path`)
against the Messages API double, and asserts what a host sees: the box's events,
the history read back from the transcript the CLI wrote, and what the CLI sent
to the API.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from beebox_impl.services import SendRequest, TurnStarted
from beebox_impl.transcript import TailSlice
from tests.agent.box_support import claude_box
from tests.agent.claude_cli import OfflineClaude
from tests.agent.messages_api import MessagesApiDouble, Reply

pytestmark = pytest.mark.anyio


async def test_a_text_turn(tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble) -> None:
    api.script(Reply.text("Hello, person of the box"))
    async with claude_box(tmp_path / "box", claude) as (box, log):
        outcome = await box.send(SendRequest("hello there", message_id="m-1"))
        assert isinstance(outcome, TurnStarted)
        (text,) = await log.wait_for_name("turn-text")
        assert text.data == {"text": "Hello, person of the box"}
        session_id = box.session.session_id
        assert session_id is not None
        history = await box.history(session_id, TailSlice(10))
    print(log.names())
    print(history)
    (request,) = api.message_requests
    assert request.user_texts() == ["hello there"]
