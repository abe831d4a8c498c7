"""The box's event stream: bus events and turn events, one order, one sequence.

What `GET /api/events` (Server-Sent Events) and embedding hosts listen to. Two
sources feed one `BoxEventHub`, each event numbered as it is published, so every
listener sees the same events in the same order:

- **bus events** — ``chat-user-message`` once a send is recorded (its bus row id
  and payload), ``chat-turn`` when a send started a turn (its ``turnId``);
- **turn events** — the whole-box chat's session events
  (`beebox_impl.session.events`), relayed by `relay_chat_events`: ``session-id``,
  ``message`` (an adapted SDK message), ``task``, ``done``, ``turn-text``,
  ``close``, ``start-failed``, ``permission-request`` and ``permission-ended``
  (`beebox_spec.permissions`); and ``turn-error`` beside the ``message`` of a
  failed turn's result (`beebox_spec.sdk_messages.turn_error`: the CLI's words
  for an API call it gave up on, or a limit that ended the turn), so a client
  need not read result messages to tell a person their turn failed.

Delivery is `EventFanout`'s: publishing never waits, and a listener that falls
more than its buffer behind is cut off (its stream ends) rather than shown a
stream with a hole in it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import cast

from beebox_impl.session.chat import ChatSession
from beebox_impl.session.events import (
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
    TurnText,
    follow_events,
)
from beebox_spec.entries import JsonObject
from beebox_spec.permissions import PermissionEnd
from beebox_spec.sdk_messages import ResultMessage, turn_error

__all__ = [
    "TURN_ERROR",
    "BoxEvent",
    "BoxEventHub",
    "chat_event_data",
    "relay_chat_events",
    "turn_error_data",
]

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BoxEvent:
    """One event: its place in the box's order (from 1), its name and its JSON data.

    ``wire`` holds the event's encoding once a transport has made it
    (`beebox_impl.http.events.encode_event`): every stream then sends the same bytes,
    where each used to encode its own copy of a message (30 MB a stream for a 10 MB
    message)."""

    seq: int
    name: str
    data: JsonObject
    wire: list[bytes] = field(default_factory=list, compare=False, repr=False)


class BoxEventHub:
    """Numbers events and hands each to every listener (see the module doc)."""

    def __init__(self) -> None:
        self._fanout = EventFanout[BoxEvent]()
        self._last_seq = 0

    def publish(self, name: str, data: JsonObject) -> BoxEvent:
        """Number ``data`` as event ``name`` and hand it to every listener now."""
        self._last_seq += 1
        event = BoxEvent(self._last_seq, name, data)
        self._fanout.publish(event)
        return event

    def subscribe(self, max_buffer: int = DEFAULT_EVENT_BUFFER) -> EventSubscription[BoxEvent]:
        """Listen from the next event on."""
        return self._fanout.subscribe(max_buffer)

    def close(self) -> None:
        """End every listener's stream (the box is closing)."""
        self._fanout.close()


def chat_event_data(event: ChatEvent) -> JsonObject:
    """A chat session event's data as the event stream carries it."""
    match event:
        case SessionIdAssigned(session_id=session_id):
            return {"sessionId": session_id}
        case Message(message=message) | Task(message=message):
            # The adapted messages are JSON objects typed as TypedDicts.
            return {"message": cast(JsonObject, message)}
        case Done():
            return {}
        case TurnText(text=text):
            return {"text": text}
        case Closed(code=code):
            return {"code": code}
        case StartFailed(reason=reason, failed_text=failed_text):
            return {"reason": reason, "failedText": failed_text}
        case PermissionRequested(request=request):
            return {"request": cast(JsonObject, request)}
        case PermissionEnded(end=end):
            return permission_end_data(end)


def permission_end_data(end: PermissionEnd) -> JsonObject:
    """``permission-ended``'s data: which request, how it ended, what its run was told."""
    return {"id": end.id, "how": end.how, "decision": end.decision}


# The event beside a failed turn's result.
TURN_ERROR = "turn-error"


def turn_error_data(result: ResultMessage, error: str) -> JsonObject:
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
        hub.publish("events-lost", {})

    await follow_events(session.subscribe, events, relay, on_overflow=say_lost)
