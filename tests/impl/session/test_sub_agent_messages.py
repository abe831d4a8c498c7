"""A sub-agent's messages in a turn (`beebox_spec.sdk_messages`, "A sub-agent's
messages"), through the real sessions on both loops: `ChatSession`'s turn-text and live
text are the main conversation's alone, and `ChatThreadSession` delivers no sub-agent's
``<chat-response>``."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from beebox_impl.engine import ScriptedEngine
from beebox_impl.engine.messages import assistant_message, result_message
from beebox_impl.session import (
    ChatResponse,
    ChatThreadSession,
    Message,
    TurnDelta,
    TurnSettlement,
    TurnText,
)
from beebox_impl.store import InMemoryQueueStore
from beebox_impl.testing import settle
from beebox_spec.entries import JsonObject
from tests.impl.session.test_chat import in_memory_session

pytestmark = pytest.mark.anyio

SESSION = "s-1"
# The Agent call whose sub-agent says the messages below.
CALL = "toolu_agent"


def say(text: str, ordinal: int, call: str | None = None) -> JsonObject:
    """An assistant message of the main conversation, or of ``call``'s sub-agent."""
    return assistant_message(
        text,
        session_id=SESSION,
        uuid=f"a-{ordinal}",
        message_id=f"msg-{ordinal}",
        model="m",
        parent_tool_use_id=call,
    )


def text_delta(text: str, ordinal: int, call: str | None = None) -> JsonObject:
    return {
        "type": "stream_event",
        "event": {"type": "content_block_delta", "delta": {"type": "text_delta", "text": text}},
        "session_id": SESSION,
        "parent_tool_use_id": call,
        "uuid": f"e-{ordinal}",
    }


def sub_agents_prompt() -> JsonObject:
    return {
        "type": "user",
        "message": {"role": "user", "content": [{"type": "text", "text": "Find the tests"}]},
        "parent_tool_use_id": CALL,
        "session_id": SESSION,
        "uuid": "u-sub",
    }


async def test_a_chat_turns_text_is_the_main_conversations_alone() -> None:
    engine = ScriptedEngine(start_mode="accept")
    async with in_memory_session(engine, InMemoryQueueStore()) as session:
        with session.subscribe() as events:
            await session.send("look around")
            await settle()
            run = engine.last_run
            await run.emit(text_delta("Let me ", 1))
            # A foreground Agent call: its sub-agent's prompt, its text as it streams, and
            # its complete replies, all in the session's stream.
            await run.emit(sub_agents_prompt())
            await run.emit(text_delta("Found", 2, CALL))
            await run.emit(say("Found 3 files", 3, CALL))
            await settle()
            assert session.live_text == "Let me "
            await run.emit(text_delta("look.", 4))
            await settle()
            assert session.live_text == "Let me look."
            await run.emit(say("Let me look.", 5))
            await run.emit(say("<chat-app x/>All read", 6, CALL))
            await run.emit(result_message(session_id=SESSION, uuid="r"))
            await settle()
            published = events.drain_nowait()
        turn_texts = [event for event in published if isinstance(event, TurnText)]
        assert turn_texts == [TurnText("Let me look.")]
        deltas = [event.text for event in published if isinstance(event, TurnDelta)]
        assert deltas == ["Let me ", "look."]
        # The sub-agent's messages are messages all the same, naming their call.
        calls = [
            event.message.get("parent_tool_use_id")
            for event in published
            if isinstance(event, Message)
        ]
        assert calls == [CALL, CALL, None, CALL, None]


async def test_a_thread_session_delivers_no_sub_agents_chat_response() -> None:
    engine = ScriptedEngine(start_mode="accept")
    async with anyio.create_task_group() as task_group:
        session = ChatThreadSession(engine=engine, box_root=Path("."), task_group=task_group)
        with session.subscribe() as events:
            turn = await session.start_turn("hi")
            await settle()
            run = engine.last_run
            # A sub-agent given the thread's instructions answers in its format, and
            # leaves a block open: neither is the thread's.
            await run.emit(say("<chat-response>not for the thread</chat-response>", 1, CALL))
            await run.emit(say("<chat-response>half", 2, CALL))
            await run.emit(say("<chat-response>ok</chat-response>", 3))
            await run.emit(result_message(session_id=SESSION, uuid="r"))
            with anyio.fail_after(5):
                assert await turn.wait() == TurnSettlement("done")
            published = events.drain_nowait()
        assert turn.responses == ["ok"]
        assert [event for event in published if isinstance(event, ChatResponse)] == [
            ChatResponse("ok")
        ]
        assert [event for event in published if isinstance(event, TurnText)] == [
            TurnText("<chat-response>ok</chat-response>")
        ]
        task_group.cancel_scope.cancel()
