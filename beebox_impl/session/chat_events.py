"""What a session tells its listeners, and how it tells them without waiting on them.

The events are the `Emit` effects of the spec models (`beebox_spec.chat_session`,
`beebox_spec.thread_pool`), one class each, with the name the spec gives it in
`name`, plus `StartFailed` for the chat's `ReportStartFailed`:

=====================  ==============  =======================================
event                  name            sent by
=====================  ==============  =======================================
`SessionIdAssigned`    session-id      `ChatSession` (the SDK assigned an id)
`SessionStarted`       session         `ChatThreadSession` (its first id)
`Message`              message         both (an adapted SDK message)
`Task`                 task            `ChatSession` (background-task lifecycle)
`TurnDelta`            turn-delta      `ChatSession` (a piece of the live text)
`Done`                 done            both (a turn's ``result`` arrived)
`TurnText`             turn-text       both (the finished turn's text)
`ChatResponse`         chat-response   `ChatThreadSession` (a complete block)
`Closed`               close           both (``0`` after a deliberate stop)
`StartFailed`          start-failed    `ChatSession` (a run could not start)
`PermissionRequested`  permission-     both (a run asks before a tool runs)
                       request
`PermissionEnded`      permission-     both (a request ended)
                       ended
=====================  ==============  =======================================

Delivery
--------

`EventFanout.publish` never waits: each subscriber has its own bounded queue (a
`Mailbox` the fan-out keeps to ``max_buffer`` events), and the session puts
events on it in the order it emits them. A slow listener therefore cannot wedge
a turn. A listener's receive is always a checkpoint, but one scheduling round,
not two: when nothing waits, the wait is the checkpoint.

Overflow policy: a subscriber whose buffer is full when an event arrives is *cut
off*. Its stream is closed at once; it still receives every event it already
holds, in order, then the stream ends and `EventSubscription.overflowed` reads
true. It never sees a stream with a hole in it; to recover it re-reads the
session's state and subscribes again. Events published while nobody listens are
gone (the session's state, not its event log, is the record).
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import ClassVar, Generic, Literal, TypeAlias, TypeVar

import anyio

from beebox_impl.engine.mailbox import Mailbox, PullIterator
from beebox_spec.errors import InvalidArgument
from beebox_spec.permissions import PermissionEnd, PermissionRequest
from beebox_spec.sdk_messages import AdaptedMessage, TaskMessage

__all__ = [
    "DEFAULT_EVENT_BUFFER",
    "ChatEvent",
    "ChatResponse",
    "Closed",
    "Done",
    "EventFanout",
    "EventSubscription",
    "Message",
    "PermissionEnded",
    "PermissionRequested",
    "SessionIdAssigned",
    "SessionStarted",
    "StartFailed",
    "Task",
    "ThreadSessionEvent",
    "TurnDelta",
    "TurnText",
    "follow_event_batches",
    "follow_events",
]

# Room for a few turns' worth of messages before a listener that stopped reading is cut off.
DEFAULT_EVENT_BUFFER = 1024


@dataclass(frozen=True, slots=True)
class SessionIdAssigned:
    """The SDK assigned the whole-box chat a session id.

    Its save is queued on the session's store writer before this is published, so
    it is on disk soon after, in order with the session's other writes.
    """

    session_id: str
    name: ClassVar[Literal["session-id"]] = "session-id"


@dataclass(frozen=True, slots=True)
class SessionStarted:
    """A thread session learnt its (first) SDK session id."""

    session_id: str
    name: ClassVar[Literal["session"]] = "session"


@dataclass(frozen=True, slots=True)
class Message:
    """An adapted SDK message of the current run."""

    message: AdaptedMessage
    name: ClassVar[Literal["message"]] = "message"


@dataclass(frozen=True, slots=True)
class Task:
    """A background task's lifecycle event."""

    message: TaskMessage
    name: ClassVar[Literal["task"]] = "task"


@dataclass(frozen=True, slots=True)
class TurnDelta:
    """A piece of the assistant message in progress, to append to the live text, or
    to start it again with when ``first`` (`beebox_spec.sdk_messages.LiveTextDelta`)."""

    text: str
    first: bool
    name: ClassVar[Literal["turn-delta"]] = "turn-delta"


@dataclass(frozen=True, slots=True)
class Done:
    """The turn's ``result`` arrived; the session already reads not busy."""

    name: ClassVar[Literal["done"]] = "done"


@dataclass(frozen=True, slots=True)
class TurnText:
    """The finished turn's assistant text."""

    text: str
    name: ClassVar[Literal["turn-text"]] = "turn-text"


@dataclass(frozen=True, slots=True)
class ChatResponse:
    """One complete ``<chat-response>`` block, trimmed."""

    text: str
    name: ClassVar[Literal["chat-response"]] = "chat-response"


@dataclass(frozen=True, slots=True)
class Closed:
    """A run's message stream ended: ``code`` is ``0`` after a deliberate stop, else None."""

    code: int | None
    name: ClassVar[Literal["close"]] = "close"


@dataclass(frozen=True, slots=True)
class StartFailed:
    """A run could not be started.

    ``failed_text`` is the caller's text that was to be its first turn (now
    undelivered); None when the first turn was drained from the queue, whose texts
    went back to the head of the queue.
    """

    reason: str
    failed_text: str | None
    name: ClassVar[Literal["start-failed"]] = "start-failed"


@dataclass(frozen=True, slots=True)
class PermissionRequested:
    """A run asks before a tool runs: the request, pending until it ends."""

    request: PermissionRequest
    name: ClassVar[Literal["permission-request"]] = "permission-request"


@dataclass(frozen=True, slots=True)
class PermissionEnded:
    """A pending request ended: how, and the decision its run was given."""

    end: PermissionEnd
    name: ClassVar[Literal["permission-ended"]] = "permission-ended"


ChatEvent: TypeAlias = (
    SessionIdAssigned
    | Message
    | Task
    | TurnDelta
    | Done
    | TurnText
    | Closed
    | StartFailed
    | PermissionRequested
    | PermissionEnded
)
ThreadSessionEvent: TypeAlias = (
    SessionStarted
    | Message
    | Done
    | TurnText
    | ChatResponse
    | Closed
    | PermissionRequested
    | PermissionEnded
)

EventT = TypeVar("EventT")


class EventSubscription(Generic[EventT]):
    """One listener's view of a session's events: iterate it, or `receive_nowait`.

    Use it as a context manager (``with session.subscribe() as events:``) so it
    is unsubscribed when the listener is done.
    """

    def __init__(self, max_buffer: int) -> None:
        self._mailbox: Mailbox[EventT] = Mailbox()
        self._max_buffer = max_buffer
        self.overflowed = False

    @property
    def listening(self) -> bool:
        """True until the subscription is closed, cut off, or its session ends."""
        return not self._mailbox.closed

    def __enter__(self) -> EventSubscription[EventT]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop listening; the session drops this subscriber at its next event."""
        self._mailbox.close()
        self._mailbox.clear()

    def __aiter__(self) -> AsyncIterator[EventT]:
        return PullIterator(self._next_or_stop)

    async def _next_or_stop(self) -> EventT:
        try:
            return await self._mailbox.get()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def receive(self) -> EventT:
        """The next event; raises `anyio.EndOfStream` once a cut-off stream is drained."""
        return await self._mailbox.get()

    async def receive_batch(self) -> list[EventT]:
        """The next event and every event already waiting behind it, in order.

        One checkpoint however many arrive: a listener that writes events out in
        batches (an SSE response) pays one scheduling round per batch, not per event.
        Raises `anyio.EndOfStream` as `receive` does.
        """
        first = await self._mailbox.get()
        return [first, *self.drain_nowait()]

    def receive_nowait(self) -> EventT:
        """The next event if one is waiting; raises `anyio.WouldBlock` otherwise."""
        return self._mailbox.get_nowait()

    def drain_nowait(self) -> list[EventT]:
        """Every event waiting now, in order."""
        return self._mailbox.take_all()

    def _refused(self) -> None:
        # An event did not fit: a full buffer ends the listener's stream rather than
        # skip an event (the overflow policy); a closed one has left already.
        if not self._mailbox.closed:
            self.overflowed = True
            self._mailbox.close()

    def _end(self) -> None:
        # The session is closing: what is held is still read, then the stream ends.
        self._mailbox.close()


class EventFanout(Generic[EventT]):
    """Publishes each event to every current subscriber without waiting (see the module doc)."""

    def __init__(self) -> None:
        self._subscribers: list[EventSubscription[EventT]] = []

    def subscribe(self, max_buffer: int = DEFAULT_EVENT_BUFFER) -> EventSubscription[EventT]:
        """A new subscription holding up to ``max_buffer`` unread events."""
        # A bounded buffer is the point: refuse the unbounded one.
        if not 0 < max_buffer < math.inf:
            raise InvalidArgument("max_buffer must be a positive, finite number of events")
        subscription = EventSubscription[EventT](int(max_buffer))
        self._subscribers.append(subscription)
        return subscription

    def publish(self, event: EventT) -> None:
        """Hand ``event`` to every subscriber now; cut off those that are full."""
        dropped = False
        for subscription in self._subscribers:
            if not subscription._mailbox.offer(event, subscription._max_buffer):
                subscription._refused()
                dropped = True
        # Rebuilt only when someone left: a publish runs several times a turn.
        if dropped:
            self._subscribers = [
                subscription for subscription in self._subscribers if subscription.listening
            ]

    def close(self) -> None:
        """End every subscriber's stream (the session is closing)."""
        for subscription in self._subscribers:
            subscription._end()
        self._subscribers = []


async def follow_events(
    subscribe: Callable[[], EventSubscription[EventT]],
    events: EventSubscription[EventT],
    on_event: Callable[[EventT], Awaitable[None]],
    *,
    on_overflow: Callable[[], None] | None = None,
) -> None:
    """Hand each event to ``on_event`` until the stream ends (`follow_event_batches`)."""

    async def each(batch: list[EventT]) -> None:
        for event in batch:
            await on_event(event)

    await follow_event_batches(subscribe, events, each, on_overflow=on_overflow)


async def follow_event_batches(
    subscribe: Callable[[], EventSubscription[EventT]],
    events: EventSubscription[EventT],
    on_batch: Callable[[list[EventT]], Awaitable[None]],
    *,
    on_overflow: Callable[[], None] | None = None,
) -> None:
    """Hand the events to ``on_batch`` until the stream ends (the session closed), a
    batch at a time: what waits when the listener wakes.

    ``events`` is a subscription taken before the caller's task started, so nothing
    said in between is missed. A slow ``on_batch`` holds up to one batch besides its
    subscription's buffer; a listener that falls a whole buffer behind that is cut
    off, told (``on_overflow``), and subscribes again: it carries on from the
    session's next event, the ones in between lost.
    """
    while True:
        with events:
            while True:
                # A batch a wake-up: the events of a turn arrive together, and each
                # read of one alone would be a scheduling round of its own.
                try:
                    batch = await events.receive_batch()
                except anyio.EndOfStream:
                    break
                await on_batch(batch)
            if not events.overflowed:
                return
        if on_overflow is not None:
            on_overflow()
        events = subscribe()
