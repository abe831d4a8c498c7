"""The engines' plumbing: an unbounded single-consumer queue, and a pull-based iterator.

`Mailbox` is how the engines hand items to a run's reader, and how a session's
event fan-out hands events to each listener (`beebox_impl.session.chat_events`).

Why not an anyio memory object stream: a run is an object a test may create and
drop without closing, and an unclosed memory stream warns when it is collected
(the test suite turns warnings into errors). A queue the engine owns has no such
lifetime: it is a deque and a wake-up. It also lets `clear` drop what was put but
not taken, which is what "closing a run ends its stream at once" needs.

One consumer (the run's message stream) waits in `get`; any task may `put` and
`close` without waiting. The wake-up is made on each wait, of the kind the running
loop answers cheapest (asked once, on the first wait, so a mailbox can be built
outside an event loop): a bare future on asyncio, `anyio.Event` elsewhere.

`PullIterator` is what a run's ``messages()`` returns: an async iterator that asks
the run for each next message, and, from a source that can tell, hands over the
next one already waiting without a wait (`take_ready`: the session's pump handles
the messages that arrived together in one scheduling round). Not an async
generator, on purpose: a reader that
stops early (a cancelled pump) leaves no suspended generator behind to be
finalized by the garbage collector (trio warns about those, and a generator
cannot be closed from another task while it is being iterated).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Generic, Protocol, TypeVar

import anyio
import sniffio
from anyio.lowlevel import checkpoint

from beebox_spec.errors import InvariantError

__all__ = ["Mailbox", "PullIterator"]

T = TypeVar("T")


class _Wakeup(Protocol):
    """A one-shot wake-up: one task waits, any task sets it (setting twice is harmless)."""

    async def wait(self) -> None: ...

    def set(self) -> None: ...


class _FutureWakeup:
    """A `_Wakeup` on asyncio: a bare future of the running loop.

    What `anyio.Event` comes down to on asyncio, without its two layers (anyio's
    wrapper and `asyncio.Event`'s waiter list): a session's turn waits on two of
    these, and without the future a turn of `bench/sessions.py`'s loop took 33 µs
    instead of 27 (2.95× the bare loop against 2.5×, the target ≤ 3×: kept for the
    target's margin, 12-05). A cancelled waiter cancels the future; a later `set`
    sees it done.
    """

    __slots__ = ("_future",)

    def __init__(self) -> None:
        self._future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def wait(self) -> None:
        await self._future

    def set(self) -> None:
        if not self._future.done():
            self._future.set_result(None)


def _wakeup_factory() -> Callable[[], _Wakeup]:
    # Asked once per mailbox. On trio, `anyio.Event`: a task parked by hand with
    # trio's low-level API made a turn of `bench/sessions.py`'s loop 33 µs instead
    # of 37 (2.3× against 2.7× the bare loop, the target ≤ 3×), microseconds in a
    # turn that takes milliseconds at the least, so it went (12-05, issue 36).
    if sniffio.current_async_library() == "asyncio":
        return _FutureWakeup
    return anyio.Event


class Mailbox(Generic[T]):
    """Put without waiting; one reader gets items in order until the mailbox is closed.

    An item is never None: None is `take_ready`'s "nothing waits".
    """

    def __init__(self) -> None:
        self._items: deque[T] = deque()
        self._closed = False
        self._wakeup: _Wakeup | None = None
        self._new_wakeup: Callable[[], _Wakeup] | None = None

    @property
    def closed(self) -> bool:
        """True once `close` was called (items already put may still be taken)."""
        return self._closed

    def put(self, item: T) -> None:
        """Queue ``item``; `anyio.ClosedResourceError` once closed."""
        if self._closed:
            raise anyio.ClosedResourceError
        self._append(item)

    def offer(self, item: T, limit: int) -> bool:
        """Queue ``item`` unless the mailbox is closed or ``limit`` items already wait;
        True when it was queued. A publisher's bounded put, in one call (it runs once
        per event per listener)."""
        if self._closed or len(self._items) >= limit:
            return False
        self._append(item)
        return True

    def _append(self, item: T) -> None:
        if item is None:
            raise InvariantError("a mailbox item cannot be None")
        self._items.append(item)
        self._wake()

    def close(self) -> None:
        """No more items: the reader gets what is queued, then `anyio.EndOfStream`."""
        self._closed = True
        self._wake()

    def __len__(self) -> int:
        """How many items wait to be taken."""
        return len(self._items)

    def get_nowait(self) -> T:
        """The next item if one waits; `anyio.WouldBlock` if none, `anyio.EndOfStream`
        when closed and empty."""
        if self._items:
            return self._items.popleft()
        if self._closed:
            raise anyio.EndOfStream
        raise anyio.WouldBlock

    def take_ready(self) -> T | None:
        """The next item if one waits now, else None (never the end: `get` says that)."""
        return self._items.popleft() if self._items else None

    def take_all(self) -> list[T]:
        """Every item waiting now, in order (none: an empty list, never the end)."""
        items = list(self._items)
        self._items.clear()
        return items

    def clear(self) -> int:
        """Drop every queued item; how many there were."""
        count = len(self._items)
        self._items.clear()
        return count

    async def get(self) -> T:
        """The next item, waiting for one; `anyio.EndOfStream` when closed and empty.

        Always a checkpoint: an explicit one when an item is ready, or the wait
        itself (a blocking wait is a schedule point and a cancel point), not both:
        a reader that waits for each item pays one scheduling round per item.
        """
        if self._items or self._closed:
            await checkpoint()
        while not self._items:
            if self._closed:
                raise anyio.EndOfStream
            # No await between the check and the wait: a put cannot slip between.
            if self._new_wakeup is None:
                self._new_wakeup = _wakeup_factory()
            wakeup = self._wakeup = self._new_wakeup()
            await wakeup.wait()
        return self._items.popleft()

    def _wake(self) -> None:
        wakeup, self._wakeup = self._wakeup, None
        # Set once: later puts before the reader runs find nothing to set.
        if wakeup is not None:
            wakeup.set()


class PullIterator(AsyncIterator[T]):
    """Iterates by awaiting ``pull()``, which raises `StopAsyncIteration` at the end.

    ``ready``, when given, answers the next item if one is there now without
    waiting, else None (`take_ready`); a source that cannot tell answers None.
    """

    def __init__(
        self, pull: Callable[[], Awaitable[T]], ready: Callable[[], T | None] | None = None
    ) -> None:
        self._pull = pull
        self._ready = ready

    def __aiter__(self) -> PullIterator[T]:
        return self

    async def __anext__(self) -> T:
        return await self._pull()

    def take_ready(self) -> T | None:
        """The next item if it is there now, without waiting; else None."""
        return None if self._ready is None else self._ready()
