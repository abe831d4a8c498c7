"""Tools for testing code that drives beebox sessions: settling a loop, holding turns.

A test that drives a session step by step needs to know when the session has done
everything a step set off — without sleeping for a guessed time. `settle` returns
once every other task on the loop is blocked (`docs/design.md#design-2-stateful-tests`).

- trio: `trio.testing.wait_all_tasks_blocked` is exact and cheap.
- asyncio: anyio's `wait_all_tasks_blocked` sleeps 100 ms whenever a task is
  runnable, so `settle` instead yields with ``asyncio.sleep(0)`` until every other
  task is waiting on a future that is not done and no callback is ready to run —
  twice in a row, so a wake-up scheduled by the last step is seen. This reads two
  CPython implementation details (``loop._ready``, ``Task._fut_waiter``).

Both count a task waiting on a worker thread as blocked: code under test that
settles this way should use stores that stay on the loop
(`beebox_impl.store.memory`).

`HeldResultEngine` wraps any engine so that each turn's ``result`` (the message
that ends the turn and frees the chat) waits for the test: a turn that is busy,
answered on disk, not done — what a real engine looks like mid-turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import sniffio

from beebox_impl.engine.protocol import Engine, Run, StartOptions, TurnContent
from beebox_spec.entries import JsonObject

__all__ = ["HeldResultEngine", "settle"]

# Rounds of `asyncio.sleep(0)` before a loop that never settles is a failure.
_MAX_SETTLE_ROUNDS = 100_000


def _asyncio_all_blocked(loop: asyncio.AbstractEventLoop, me: asyncio.Task[Any] | None) -> bool:
    # A ready callback is work about to run (often a task's wake-up).
    if getattr(loop, "_ready", ()):
        return False
    for task in asyncio.all_tasks(loop):
        if task is me or task.done():
            continue
        # CPython's Task keeps the future it waits on in `_fut_waiter`: None means runnable.
        waiter = getattr(task, "_fut_waiter", None)
        if waiter is None or waiter.done():
            return False
    return True


async def _settle_asyncio() -> None:
    loop = asyncio.get_running_loop()
    me = asyncio.current_task()
    quiet_rounds = 0
    for _ in range(_MAX_SETTLE_ROUNDS):
        await asyncio.sleep(0)
        quiet_rounds = quiet_rounds + 1 if _asyncio_all_blocked(loop, me) else 0
        if quiet_rounds == 2:
            return
    raise AssertionError("the asyncio loop never settled: some task stays runnable")


async def settle() -> None:
    """Return once every other task on the loop is blocked."""
    if sniffio.current_async_library() == "trio":
        # trio is a test dependency; only a trio loop can be running here.
        import trio.testing  # noqa: PLC0415

        await trio.testing.wait_all_tasks_blocked()
    else:
        await _settle_asyncio()


class HeldResultEngine:
    """Wraps an engine: turn n's ``result`` is passed on once ``hold(n)`` returns.

    Turns are counted from 1 across the engine's runs; ``turns`` records what each
    turn sent, in order.
    """

    def __init__(self, inner: Engine, hold: Callable[[int], Awaitable[None]]) -> None:
        self._inner = inner
        self._hold = hold
        self.turns: list[TurnContent] = []
        self.results_held = 0

    async def start(self, options: StartOptions) -> Run:
        return _HeldRun(await self._inner.start(options), self)

    async def hold_result(self) -> None:
        self.results_held += 1
        await self._hold(self.results_held)


class _HeldRun:
    def __init__(self, inner: Run, engine: HeldResultEngine) -> None:
        self._inner = inner
        self._engine = engine

    @property
    def closed(self) -> bool:
        return self._inner.closed

    def messages(self) -> AsyncIterator[JsonObject]:
        return _HeldMessages(self._inner.messages(), self._engine)

    async def send(self, content: TurnContent) -> None:
        self._engine.turns.append(content)
        await self._inner.send(content)

    async def interrupt(self) -> None:
        await self._inner.interrupt()

    async def close(self) -> None:
        await self._inner.close()


class _HeldMessages:
    # A plain iterator, not a generator: nothing to finalize when the pump stops.
    def __init__(self, inner: AsyncIterator[JsonObject], engine: HeldResultEngine) -> None:
        self._inner = inner
        self._engine = engine

    def __aiter__(self) -> _HeldMessages:
        return self

    async def __anext__(self) -> JsonObject:
        message = await self._inner.__anext__()
        if message.get("type") == "result":
            await self._engine.hold_result()
        return message
