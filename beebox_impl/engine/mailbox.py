"""The engines' plumbing: an unbounded single-consumer queue, and a pull-based iterator.

`Mailbox` is how the engines hand items to a run's reader, and how a session's
event fan-out hands events to each listener (`beebox_impl.session.events`).

Why not an anyio memory object stream: a run is an object a test may create and
drop without closing, and an unclosed memory stream warns when it is collected
(the test suite turns warnings into errors). A queue the engine owns has no such
lifetime: it is a deque and an event. It also lets `clear` drop what was put but
not taken, which is what "closing a run ends its stream at once" needs.

One consumer (the run's message stream) waits in `get`; any task may `put` and
`close` without waiting. The event is made on first wait, so a mailbox can be
built outside an event loop.

`PullIterator` is what a run's ``messages()`` returns: an async iterator that asks
the run for each next message. Not an async generator, on purpose: a reader that
stops early (a cancelled pump) leaves no suspended generator behind to be
finalized by the garbage collector (trio warns about those, and a generator
cannot be closed from another task while it is being iterated).
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Generic, TypeVar

import anyio
from anyio.lowlevel import checkpoint

__all__ = ["Mailbox", "PullIterator"]

T = TypeVar("T")


class Mailbox(Generic[T]):
    """Put without waiting; one reader gets items in order until the mailbox is closed."""

    def __init__(self) -> None:
        self._items: deque[T] = deque()
        self._closed = False
        self._wakeup: anyio.Event | None = None
        self._event_type: type[anyio.Event] | None = None

    @property
    def closed(self) -> bool:
        """True once `close` was called (items already put may still be taken)."""
        return self._closed

    def put(self, item: T) -> None:
        """Queue ``item``; `anyio.ClosedResourceError` once closed."""
        if self._closed:
            raise anyio.ClosedResourceError
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
            self._wakeup = self._new_event()
            await self._wakeup.wait()
        return self._items.popleft()

    def _new_event(self) -> anyio.Event:
        # `anyio.Event()` asks sniffio which loop runs on every call, a good part of
        # a turn's cost; the running backend's event class, asked once, is the same.
        if self._event_type is None:
            event = anyio.Event()
            self._event_type = type(event)
            return event
        return self._event_type()

    def _wake(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()


class PullIterator(AsyncIterator[T]):
    """Iterates by awaiting ``pull()``, which raises `StopAsyncIteration` at the end."""

    def __init__(self, pull: Callable[[], Awaitable[T]]) -> None:
        self._pull = pull

    def __aiter__(self) -> PullIterator[T]:
        return self

    async def __anext__(self) -> T:
        return await self._pull()
