"""A start that hangs is a start that failed: `BoundedStartEngine`.

An engine's start can hang — a CLI that never answers its ``initialize``
request, an MCP server that never comes up. The SDK gives up after its own
timeout (60 s, and more on some versions), and a session in ``starting`` is busy
all that while: every send queues behind a run that will never open. Wrapped in
`BoundedStartEngine`, an engine's start that has not opened a run within
``timeout`` seconds is cancelled (the engine's own cleanup runs: the Claude
engine stops the CLI it spawned — SIGTERM, then SIGKILL after 2 s,
`beebox_impl.engine.claude.STOP_GRACE_S` — so the failure comes at most that much
after the timeout; the timeout also covers its wait for the session's last CLI
to exit, `ClosingRuns`) and fails with `EngineStartError`, which the sessions
treat like any failed start: back to ``idle``, a drained queue put back at its
head, the caller's text reported in `StartFailed` (the lifecycle's rule 2).

The box wraps its engine in one (`Box.open(start_timeout=…)`, `bbx serve
--start-timeout`), `DEFAULT_START_TIMEOUT` seconds unless told otherwise.
"""

from __future__ import annotations

import math
from typing import Final

import anyio

from beebox_impl.engine.protocol import Engine, EngineStartError, Run, StartOptions
from beebox_spec.errors import InvalidArgument

__all__ = ["DEFAULT_START_TIMEOUT", "BoundedStartEngine", "check_start_timeout"]

# Claude Code starts in a few seconds, and in tens with slow MCP servers: this
# leaves room for those, and is shorter than the SDK's own limit.
DEFAULT_START_TIMEOUT: Final = 45.0


def check_start_timeout(seconds: float) -> float:
    """``seconds`` if it is a start timeout (positive, finite); `ValueError` otherwise."""
    if not (seconds > 0 and math.isfinite(seconds)):
        raise InvalidArgument(f"a start timeout is a positive number of seconds, got {seconds!r}")
    return seconds


class BoundedStartEngine:
    """``engine``, except that a start taking longer than ``timeout`` seconds fails."""

    def __init__(self, engine: Engine, timeout: float = DEFAULT_START_TIMEOUT) -> None:
        self._engine = engine
        self.timeout = check_start_timeout(timeout)

    @property
    def inner(self) -> Engine:
        """The wrapped engine."""
        return self._engine

    async def start(self, options: StartOptions) -> Run:
        """The wrapped engine's start, or `EngineStartError` once ``timeout`` has passed."""
        with anyio.move_on_after(self.timeout):
            return await self._engine.start(options)
        raise EngineStartError(f"the engine did not start a run within {self.timeout:g} s")
