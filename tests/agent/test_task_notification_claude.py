"""A background sub-agent's ``<task-notification>`` on Claude Code itself (issue 37).

The real CLI the ``claude`` extra bundles (2.1.337; 2.1.332 before) against the Messages
API double. The main agent calls the ``Agent`` tool as a model does by default, without
``run_in_background: false``, so the CLI runs the sub-agent in the background: the
call's result says it was launched, and the main agent answers at once. When the
sub-agent (its request told from the main agent's by its prompt,
`MessagesApiDouble.script_for`) has replied, the CLI adds a user turn of its own to
the session, its text opening ``<task-notification>`` with the sub-agent's whole
result (and, in 2.1.332, ``origin.kind: "task-notification"``), and the main agent
answers it.

The box's history shows the person's one message and the agent's answers, never the
notification as the person's (before: a second user entry holding the sub-agent's
result), and the review's walk counts one turn the person took (before: two).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from beebox_impl.box import Box
from beebox_impl.review.walk import TranscriptEntries, resolve_span_walk
from beebox_impl.services import Queued, SendRequest
from beebox_impl.transcript import TailSlice
from beebox_spec.entries import SessionHistory
from beebox_spec.review.turns import count_real_user_turns
from beebox_spec.transcript import TASK_NOTIFICATION_TAG
from tests.agent.box_support import claude_box
from tests.agent.claude_cli import OfflineClaude
from tests.agent.messages_api import MessagesApiDouble, Recorded, Reply, Text, ToolUse

pytestmark = pytest.mark.anyio

PROMPT = "Use a helper to count the curry adjectives."
SUB_PROMPT = "Count the adjectives people use for green curry."
SUB_REPLY = "SUBAGENT-SAYS: fragrant, creamy and hot."
STARTED = "MAIN-SAYS: a helper is on it."
ANSWER = "MAIN-SAYS: the helper found three adjectives."
# As a model calls it: nothing said of the background, so the CLI's default.
CALL = ToolUse(
    "Agent",
    {
        "description": "Count curry adjectives",
        "prompt": SUB_PROMPT,
        "subagent_type": "general-purpose",
    },
)


def is_sub_agents(request: Recorded) -> bool:
    """The sub-agent's request: its prompt is its user message (the main agent's
    requests carry it only inside the call)."""
    return any(SUB_PROMPT in text for text in request.user_texts())


def texts(history: SessionHistory) -> list[str]:
    return [
        block.get("text", "")
        for entry in history["entries"]
        for block in entry["content"]
        if block["type"] == "text"
    ]


async def history_with(box: Box, text: str) -> SessionHistory:
    """The history once an entry shows ``text`` (the CLI writes the turn it answers)."""
    with anyio.fail_after(60):
        while True:
            # The session is the CLI's: its id comes with the run's first message.
            session_id = box.session_id
            if session_id is not None:
                history = await box.history(session_id, TailSlice(50))
                if text in texts(history):
                    return history
            await anyio.sleep(0.05)


def transcript_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def the_notification(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The one user line the CLI wrote for the finished sub-agent."""
    found = [
        record
        for record in records
        if record.get("type") == "user"
        and TASK_NOTIFICATION_TAG in json.dumps(record.get("message"))
    ]
    assert len(found) == 1, found
    return found[0]


async def test_a_background_sub_agents_notification_is_not_the_persons_turn(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble
) -> None:
    api.script_for(is_sub_agents, Reply.text(SUB_REPLY))
    api.script(Reply((Text("Asking a helper."), CALL)), Reply.text(STARTED), Reply.text(ANSWER))
    async with claude_box(tmp_path / "box", claude) as (box, log):
        await box.send(SendRequest(PROMPT, message_id="m-1"))
        history = await history_with(box, ANSWER)
        await log.wait_for(lambda event: event.name == "turn-text", count=2)
        session_id = box.session_id
    # What the CLI did: the call ran in the background, and once the sub-agent had
    # replied the CLI wrote a notification turn, which the main agent answered.
    assert [is_sub_agents(request) for request in api.message_requests].count(True) == 1
    assert api.pending == 0
    assert api.unscripted == 0
    transcript = next(path for path in claude.transcripts() if path.stem == session_id)
    records = transcript_records(transcript)
    (launched,) = [r for r in records if isinstance(r.get("toolUseResult"), dict)]
    assert launched["toolUseResult"].get("isAsync") is True
    notification = the_notification(records)
    content = notification["message"]["content"]
    assert isinstance(content, str)
    assert content.startswith(TASK_NOTIFICATION_TAG)
    assert SUB_REPLY in content
    assert notification.get("origin", {}).get("kind") == "task-notification"

    # The history: the person's one message, and the agent's answers to both turns.
    users = [entry for entry in history["entries"] if entry["type"] == "user"]
    assert [texts({**history, "entries": [entry]}) for entry in users] == [[PROMPT]]
    assert notification["uuid"] not in [entry["uuid"] for entry in history["entries"]]
    assert texts(history)[-2:] == [STARTED, ANSWER]
    assert SUB_REPLY not in json.dumps(history)

    # Each turn's text is its own: the turn the CLI started for the notification
    # does not say the first turn's again (chat_session rule 5).
    turn_texts = [event.data["text"] for event in log.named("turn-text")]
    assert turn_texts[-1] == ANSWER

    # The review: one turn the person took, by the spec and by the box's walk.
    assert count_real_user_turns(records) == 1
    walked = TranscriptEntries(transcript, transcript.stem)
    await anyio.to_thread.run_sync(lambda: resolve_span_walk(walked.open, None, 50, drain=True))
    assert walked.user_turns == 1
    assert walked.first_user_snippet == PROMPT


async def test_the_turn_the_cli_starts_for_it_reads_busy_and_a_send_waits_its_turn(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble
) -> None:
    # chat_session rule 12: while the agent answers the notification (a turn no send
    # began), the box reads busy, and the person's send is queued and goes after it
    # (before: the box read Ready, and the send went straight onto the run).
    halfway = threading.Event()
    api.script_for(is_sub_agents, Reply.text(SUB_REPLY))
    api.script(
        Reply((Text("Asking a helper."), CALL)),
        Reply.text(STARTED),
        Reply((Text(ANSWER, hold=halfway),)),
        Reply.text("MAIN-SAYS: and that one too."),
    )
    async with claude_box(tmp_path / "box", claude) as (box, log):
        await box.send(SendRequest(PROMPT, message_id="m-1"))
        # The notification's answer has begun: the first turn's text, then its pieces.
        (first_turn,) = await log.wait_for(lambda event: event.name == "turn-text")
        await log.wait_for(lambda event: event.name == "turn-delta" and event.seq > first_turn.seq)
        busy_mid_answer = box.status()["busy"]
        outcome = await box.send(SendRequest("and another thing", message_id="m-2"))
        halfway.set()
        (last,) = (await log.wait_for(lambda event: event.name == "turn-text", count=3))[-1:]
    assert busy_mid_answer is True
    assert isinstance(outcome, Queued)
    assert last.data == {"text": "MAIN-SAYS: and that one too."}
    # The queued message reached the agent after the notification's answer.
    assert api.message_requests[-1].user_texts()[-1] == "and another thing"
