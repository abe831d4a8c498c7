"""Time, injected: what a session reads the time from and waits on.

The pool reads the wall clock to stamp and rotate thread records (`MAX_AGE`) and
waits up to `BUSY_TIMEOUT` for a busy session to go idle. Both come from a
`SessionClock`, so a test drives them without waiting: `ManualClock` stands still
until the test calls `ManualClock.advance`, and wakes exactly the sleepers whose
deadline has come. It needs nothing of the event loop but `anyio.Event`, so it
behaves the same on asyncio and trio (a loop's own mock clock exists on trio
only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

import anyio

from beebox_spec.errors import InvalidArgument

__all__ = ["ManualClock", "SessionClock", "SystemClock"]


class SessionClock(Protocol):
    """Where a session reads the time and sleeps."""

    def now(self) -> datetime:
        """The current time, zone-aware."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Return once ``seconds`` have passed on this clock."""
        ...


class SystemClock:
    """The real clock: UTC wall time, and the event loop's sleep."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)


@dataclass(eq=False)
class _Sleeper:
    deadline: datetime
    woken: anyio.Event = field(default_factory=anyio.Event)


class ManualClock:
    """A clock that moves only when told to. Call it from the event loop's thread."""

    def __init__(self, start: datetime) -> None:
        # Naive datetimes cannot be compared with the records' zone-aware stamps.
        if start.tzinfo is None:
            raise InvalidArgument("a ManualClock needs a zone-aware start time")
        self._now = start
        self._sleepers: list[_Sleeper] = []

    def now(self) -> datetime:
        return self._now

    @property
    def sleepers(self) -> int:
        """How many tasks are sleeping on this clock."""
        return len(self._sleepers)

    async def sleep(self, seconds: float) -> None:
        sleeper = _Sleeper(self._now + timedelta(seconds=seconds))
        if sleeper.deadline <= self._now:
            await anyio.lowlevel.checkpoint()
            return
        self._sleepers.append(sleeper)
        try:
            await sleeper.woken.wait()
        finally:
            if sleeper in self._sleepers:
                self._sleepers.remove(sleeper)

    def advance(self, delta: timedelta) -> None:
        """Move the time forward by ``delta`` and wake every sleeper now due."""
        if delta < timedelta(0):
            raise InvalidArgument("time only moves forward")
        self._now += delta
        due = [sleeper for sleeper in self._sleepers if sleeper.deadline <= self._now]
        for sleeper in due:
            self._sleepers.remove(sleeper)
            sleeper.woken.set()
