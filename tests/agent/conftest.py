"""Fixtures for the tests that run Claude Code itself: the API double and the CLI's home."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agent.claude_cli import OfflineClaude
from tests.agent.messages_api import MessagesApiDouble


@pytest.fixture
def api() -> Iterator[MessagesApiDouble]:
    """A Messages API double on 127.0.0.1 for this test."""
    with MessagesApiDouble() as double:
        yield double


@pytest.fixture
def claude(tmp_path: Path, api: MessagesApiDouble) -> OfflineClaude:
    """A private home for the real CLI, talking to ``api``."""
    return OfflineClaude(tmp_path / "claude", api)
