"""The box's event stream: bus events and turn events, one order, one sequence.

What `GET /api/events` (Server-Sent Events) and embedding hosts listen to. Two
sources feed one `BoxEventHub`, each event numbered as it is published, so every
listener sees the same events in the same order:

- **bus events** — ``chat-user-message`` once a send is recorded (its bus row id
  and payload), ``chat-turn`` when a send started a turn (its ``turnId``);
- **turn events** — the whole-box chat's session events
  (`beebox_impl.session.chat_events`), relayed by `relay_chat_events`: ``session-id``,
  ``message`` (an adapted SDK message, complete), ``task``, ``turn-delta`` (a
  piece of the assistant message in progress, to append to its text so far:
  `beebox_spec.sdk_messages`, "Live text"; never recorded), ``done``,
  ``turn-text``, ``close``, ``start-failed``, ``permission-request`` and
  ``permission-ended`` (`beebox_spec.permissions`); and ``turn-error`` beside the
  ``message`` of a failed turn's result (`beebox_spec.sdk_messages.turn_error`:
  the CLI's words for an API call it gave up on, or a limit that ended the turn),
  so a client need not read result messages to tell a person their turn failed.

Delivery is `EventFanout`'s: publishing never waits, and a listener that falls
more than its buffer behind is cut off (its stream ends) rather than shown a
stream with a hole in it.

**Typed.** `BoxEvent` is the union of every event, each a `BoxEventOf[name, data]`
whose ``name`` is a literal and whose ``data`` is that event's `TypedDict`, so a
host that tests ``event.name == "turn-text"`` has ``event.data["text"]`` typed as a
string. `BOX_EVENT_NAMES` lists the names; the SSE route writes ``data`` as it is.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Final, Generic, Literal, TypeAlias, TypedDict, TypeVar, cast, get_args

from beebox_impl.session.chat import ChatSession
from beebox_impl.session.chat_events import (
    DEFAULT_EVENT_BUFFER,
    ChatEvent,
    Closed,
    Done,
    EventFanout,
    EventSubscription,
    Message,
    PermissionEnded,
    PermissionRequested,
    SessionIdAssigned,
    StartFailed,
    Task,
    TurnDelta,
    TurnText,
    follow_events,
)
from beebox_spec.chat_session import EmittedEvent
from beebox_spec.permissions import Decision, EndedHow, PermissionEnd, PermissionRequest
from beebox_spec.sdk_messages import AdaptedMessage, ResultMessage, turn_error

__all__ = [
    "BOX_EVENT_NAMES",
    "TURN_ERROR",
    "BoxEvent",
    "BoxEventData",
    "BoxEventHub",
    "BoxEventName",
    "BoxEventOf",
    "ChatTurnData",
    "ChatUserMessageData",
    "CloseData",
    "MessageData",
    "NoData",
    "PermissionEndedData",
    "PermissionRequestData",
    "SenderData",
    "SessionIdData",
    "StartFailedData",
    "TurnDeltaData",
    "TurnErrorData",
    "TurnTextData",
    "chat_event_data",
    "relay_chat_events",
    "turn_error_data",
]

_log = logging.getLogger(__name__)


# --- Each event's data ----------------------------------------------------------------


class SenderData(TypedDict):
    """Who sent a message, when the host said (`beebox_impl.services.send.Sender`)."""

    email: str
    name: str


class ChatUserMessageData(TypedDict):
    """``chat-user-message``: a send was recorded (``id``: its row in the record)."""

    id: int
    sessionId: str | None
    message: str
    user: SenderData | None
    timestamp: str


class ChatTurnData(TypedDict):
    """``chat-turn``: a send started a turn."""

    turnId: str
    id: int


class SessionIdData(TypedDict):
    """``session-id``: the chat's session id, once the engine names it."""

    sessionId: str


class MessageData(TypedDict):
    """``message`` and ``task``: an SDK message, adapted (`beebox_spec.sdk_messages`)."""

    message: AdaptedMessage


class NoData(TypedDict):
    """``done`` (a turn ended) and ``events-lost``: the name says it all."""


class TurnDeltaData(TypedDict):
    """``turn-delta``: a piece of the assistant message in progress, to append to its
    text so far, or, ``first``, to start it again with (what streamed before was a
    retried attempt's, or a message now complete); the ``message`` event that follows
    carries the message whole."""

    text: str
    first: bool


class TurnTextData(TypedDict):
    """``turn-text``: the text of the turn that ended."""

    text: str


class CloseData(TypedDict):
    """``close``: the run's stream ended; ``code`` 0 after a deliberate stop."""

    code: int | None


class StartFailedData(TypedDict):
    """``start-failed``: a run did not start; the text it was to carry, if any."""

    reason: str
    failedText: str | None


class PermissionRequestData(TypedDict):
    """``permission-request``: the agent asks before it acts (`beebox_spec.permissions`)."""

    request: PermissionRequest


class PermissionEndedData(TypedDict):
    """``permission-ended``: how a request ended, and what its run was told."""

    id: str
    how: EndedHow
    decision: Decision | None


class TurnErrorData(TypedDict):
    """``turn-error``: the agent's words for a failed turn, and its result's subtype."""

    error: str
    subtype: str


BoxEventData: TypeAlias = (
    ChatUserMessageData
    | ChatTurnData
    | SessionIdData
    | MessageData
    | NoData
    | TurnDeltaData
    | TurnTextData
    | CloseData
    | StartFailedData
    | PermissionRequestData
    | PermissionEndedData
    | TurnErrorData
)

NameT = TypeVar("NameT", bound=str)
DataT = TypeVar("DataT", bound=BoxEventData)


@dataclass(frozen=True, slots=True)
class BoxEventOf(Generic[NameT, DataT]):
    """One event: its place in the box's order (from 1), its name and its data.

    ``wire`` holds the event's encoding once a transport has made it
    (`beebox_impl.http.sse.encode_event`): every stream then sends the same bytes,
    where each used to encode its own copy of a message (30 MB a stream for a 10 MB
    message)."""

    seq: int
    name: NameT
    data: DataT
    wire: list[bytes] = field(default_factory=list, compare=False, repr=False)


# Every event the box publishes, its name paired with its data.
BoxEvent: TypeAlias = (
    BoxEventOf[Literal["chat-user-message"], ChatUserMessageData]
    | BoxEventOf[Literal["chat-turn"], ChatTurnData]
    | BoxEventOf[Literal["session-id"], SessionIdData]
    | BoxEventOf[Literal["message"], MessageData]
    | BoxEventOf[Literal["task"], MessageData]
    | BoxEventOf[Literal["turn-delta"], TurnDeltaData]
    | BoxEventOf[Literal["done"], NoData]
    | BoxEventOf[Literal["turn-text"], TurnTextData]
    | BoxEventOf[Literal["close"], CloseData]
    | BoxEventOf[Literal["permission-request"], PermissionRequestData]
    | BoxEventOf[Literal["permission-ended"], PermissionEndedData]
    | BoxEventOf[Literal["start-failed"], StartFailedData]
    | BoxEventOf[Literal["turn-error"], TurnErrorData]
    | BoxEventOf[Literal["events-lost"], NoData]
)

# The bus's two, the chat session's own (`beebox_spec.chat_session.EmittedEvent`), and
# the box's: a start that failed, a failed turn's words, a relay fallen behind.
BoxEventName: TypeAlias = Literal[
    "chat-user-message",
    "chat-turn",
    EmittedEvent,
    "start-failed",
    "turn-error",
    "events-lost",
]

# The names, in the order above (a test holds them to `BoxEvent`'s pairs).
BOX_EVENT_NAMES: Final[tuple[BoxEventName, ...]] = get_args(BoxEventName)


class BoxEventHub:
    """Numbers events and hands each to every listener (see the module doc)."""

    def __init__(self) -> None:
        self._fanout = EventFanout[BoxEvent]()
        self._last_seq = 0

    def publish(self, name: BoxEventName, data: BoxEventData) -> BoxEvent:
        """Number ``data`` as event ``name`` and hand it to every listener now
        (``data`` the `TypedDict` `BoxEvent` pairs with ``name``)."""
        self._last_seq += 1
        # The pairing of a name with its data is `BoxEvent`'s; the publishers keep to
        # it, and `tests/impl/services/test_typed_events.py` checks what they publish.
        event = cast(BoxEvent, BoxEventOf(self._last_seq, name, data))
        self._fanout.publish(event)
        return event

    def subscribe(self, max_buffer: int = DEFAULT_EVENT_BUFFER) -> EventSubscription[BoxEvent]:
        """Listen from the next event on."""
        return self._fanout.subscribe(max_buffer)

    def close(self) -> None:
        """End every listener's stream (the box is closing)."""
        self._fanout.close()


def chat_event_data(event: ChatEvent) -> BoxEventData:
    """A chat session event's data as the event stream carries it."""
    match event:
        case SessionIdAssigned(session_id=session_id):
            return {"sessionId": session_id}
        case Message(message=message) | Task(message=message):
            return {"message": message}
        case Done():
            return {}
        case TurnDelta(text=text, first=first):
            return {"text": text, "first": first}
        case TurnText(text=text):
            return {"text": text}
        case Closed(code=code):
            return {"code": code}
        case StartFailed(reason=reason, failed_text=failed_text):
            return {"reason": reason, "failedText": failed_text}
        case PermissionRequested(request=request):
            return {"request": request}
        case PermissionEnded(end=end):
            return permission_end_data(end)


def permission_end_data(end: PermissionEnd) -> PermissionEndedData:
    """``permission-ended``'s data: which request, how it ended, what its run was told."""
    return {"id": end.id, "how": end.how, "decision": end.decision}


# The event beside a failed turn's result.
TURN_ERROR: Final = "turn-error"


def turn_error_data(result: ResultMessage, error: str) -> TurnErrorData:
    """``turn-error``'s data: the CLI's words and the failed turn's result subtype
    (``success`` for an API call the CLI gave up on, Claude Code's own naming;
    ``error_max_turns`` and the like for a limit)."""
    return {"error": error, "subtype": result["subtype"]}


async def relay_chat_events(
    session: ChatSession, hub: BoxEventHub, events: EventSubscription[ChatEvent]
) -> None:
    """Publish the session's events on ``hub`` until the session closes.

    ``events`` is a subscription taken before the relay task started (so nothing
    the session says in between is missed). Should the relay itself fall a whole
    buffer behind, it says so with an ``events-lost`` event and listens again.
    """

    async def relay(event: ChatEvent) -> None:
        hub.publish(event.name, chat_event_data(event))
        if isinstance(event, Message) and event.message["type"] == "result":
            error = turn_error(event.message)
            if error is not None:
                hub.publish(TURN_ERROR, turn_error_data(event.message, error))

    def say_lost() -> None:
        _log.warning("the event relay fell behind; some turn events were lost")
        no_data: NoData = {}
        hub.publish("events-lost", no_data)

    await follow_events(session.subscribe, events, relay, on_overflow=say_lost)
