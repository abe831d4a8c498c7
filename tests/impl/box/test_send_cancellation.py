"""What cancelling `Box.send` means (issue 35, and `docs/embedding.md`).

A send is acceptance: once its transaction commits, the message is the box's,
whatever happens to the caller. So a send cancelled before the commit records
nothing (a retry is a new send), and one cancelled while or after it commits is
kept — its retry, with the same message id, is answered `Deduplicated`.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import pytest

from beebox_impl import Box, Deduplicated, SendRequest, TailSlice, TurnStarted

pytestmark = pytest.mark.anyio

T = TypeVar("T")


async def pending_texts(box: Box) -> list[str]:
    """The texts the box shows pending (recorded, not yet in its transcript)."""
    bootstrap = await box.bootstrap(window=TailSlice(10))
    return [
        block.get("text", "")
        for message in bootstrap["pending"]
        for block in message["content"]
        if block["type"] == "text"
    ]


async def test_a_send_cancelled_before_its_commit_records_nothing(tmp_path: Path) -> None:
    async with Box.open(tmp_path / "box", projects_root=tmp_path / "projects") as box:
        with anyio.CancelScope() as scope:
            scope.cancel()
            await box.send(SendRequest("never recorded", message_id="m-1"))
        assert scope.cancelled_caught
        assert await pending_texts(box) == []
        # Nothing claimed the id: the retry is a send of its own.
        assert isinstance(await box.send(SendRequest("now", message_id="m-1")), TurnStarted)


async def test_a_send_cancelled_while_it_commits_is_kept_and_its_retry_deduplicated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with Box.open(tmp_path / "box", projects_root=tmp_path / "projects") as box:
        committing, may_commit = threading.Event(), threading.Event()
        write = box._database.write

        async def held_write(change: Callable[[sqlite3.Connection], T]) -> T:
            def held(connection: sqlite3.Connection) -> T:
                committing.set()
                may_commit.wait(10)
                return change(connection)

            return await write(held)

        monkeypatch.setattr(box._database, "write", held_write)
        outcome: list[Any] = []
        async with anyio.create_task_group() as tasks:

            async def send() -> None:
                outcome.append(await box.send(SendRequest("kept", message_id="m-2")))

            tasks.start_soon(send)
            # The caller goes away while the transaction is under way.
            await anyio.to_thread.run_sync(committing.wait, 10)
            tasks.cancel_scope.cancel()
            may_commit.set()
        monkeypatch.undo()
        assert outcome == []  # the caller heard nothing: it was cancelled
        assert await pending_texts(box) == ["kept"]
        # The retry a client makes when it heard nothing: the box has it already.
        assert isinstance(await box.send(SendRequest("kept", message_id="m-2")), Deduplicated)
