"""A box on the real CLI, and a record of its events, for the end-to-end tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from beebox_impl.box import Box
from tests.agent.claude_cli import OfflineClaude

__all__ = ["EventLog", "LoggedEvent", "claude_box", "wait_until"]


@dataclass(frozen=True)
class LoggedEvent:
    """A box event as the tests read it: its data as a plain dict, whatever its name
    (a host narrows `LoggedEvent` by its name; a test compares whole payloads)."""

    seq: int
    name: str
    data: dict[str, Any]


class EventLog:
    """Every event of a box since it was made, kept by a task of its own."""

    def __init__(self) -> None:
        self.events: list[LoggedEvent] = []
        self._changed = anyio.Event()

    async def follow(self, box: Box, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        with box.subscribe() as subscription:
            task_status.started()
            async for event in subscription:
                self.events.append(LoggedEvent(event.seq, event.name, dict(event.data)))
                self._changed.set()
                self._changed = anyio.Event()

    def named(self, name: str) -> list[LoggedEvent]:
        return [event for event in self.events if event.name == name]

    def names(self) -> list[str]:
        return [event.name for event in self.events]

    async def wait_for(
        self, predicate: Callable[[LoggedEvent], bool], *, count: int = 1, timeout: float = 60
    ) -> list[LoggedEvent]:
        """Until ``count`` events satisfy ``predicate``; those events."""
        with anyio.fail_after(timeout):
            while True:
                found = [event for event in self.events if predicate(event)]
                if len(found) >= count:
                    return found
                await self._changed.wait()

    async def wait_for_name(
        self, name: str, *, count: int = 1, timeout: float = 60
    ) -> list[LoggedEvent]:
        return await self.wait_for(lambda event: event.name == name, count=count, timeout=timeout)


async def wait_until(predicate: Callable[[], bool], timeout: float = 60) -> None:
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.01)


@asynccontextmanager
async def claude_box(
    folder: Path, claude: OfflineClaude, **engine_options: Any
) -> AsyncIterator[tuple[Box, EventLog]]:
    """The box at ``folder`` on the real CLI (`OfflineClaude.engine`), its events logged."""
    log = EventLog()
    async with (
        Box.open(
            folder, engine=claude.engine(**engine_options), projects_root=claude.projects
        ) as box,
        anyio.create_task_group() as tasks,
    ):
        await tasks.start(log.follow, box)
        try:
            yield box, log
        finally:
            tasks.cancel_scope.cancel()
