"""`ChatSession` against `beebox_spec.chat_session`, on asyncio and on trio."""

from __future__ import annotations

from hypothesis import settings

from tests.stateful.chat_machine import ChatSessionMachine

# The profile decides the examples (HYPOTHESIS_PROFILE=deep raises them).
MACHINE_SETTINGS = settings(settings.default, stateful_step_count=30)


class ChatSessionOnAsyncio(ChatSessionMachine):
    backend = "asyncio"


class ChatSessionOnTrio(ChatSessionMachine):
    backend = "trio"


ChatSessionOnAsyncio.TestCase.settings = MACHINE_SETTINGS
ChatSessionOnTrio.TestCase.settings = MACHINE_SETTINGS
TestChatSessionOnAsyncio = ChatSessionOnAsyncio.TestCase
TestChatSessionOnTrio = ChatSessionOnTrio.TestCase
