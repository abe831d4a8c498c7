"""`GET /api/events`: the box's event stream as Server-Sent Events.

Each `beebox_impl.services.box_events.BoxEvent` is written as::

    id: <seq>
    event: <name>
    data: <JSON, one line>

in the box's order. Events waiting together cross from the loop and leave in one
write: a stream pays one crossing a batch, not one an event (64 streams behind a
busy chat otherwise cost the loop 64 crossings for each of its events, and fell
behind). The stream opens with a ``retry`` hint and a comment once the
subscription is taken (so a client that has read it misses nothing sent after),
and writes a ``: heartbeat`` comment whenever nothing was sent for
``sse_heartbeat_seconds``, so proxies and clients can tell a quiet box from a
dead connection. It ends when the client goes away, when the listener falls a
whole buffer behind (the client reconnects and re-reads the state), or when the
server shuts down.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import anyio

from beebox_impl.http.routes import Exchange
from beebox_impl.services.box_events import BoxEvent
from beebox_impl.session.chat_events import EventSubscription

__all__ = ["encode_event", "stream_events"]

# How long one wait for an event lasts before the shutdown flag is looked at again.
_POLL_SECONDS = 0.5
# Events up to this size that wait together leave in one write; a larger one is
# written alone, its shared bytes (`encode_event`) never copied into a joined buffer
# a stream.
_JOINED_WRITE_BYTES = 64 * 1024


@dataclass(frozen=True)
class _Ended:
    """The subscription's stream ended."""


def encode_event(event: BoxEvent) -> bytes:
    """One event in the SSE wire format, made once for every stream that sends it."""
    if event.wire:
        return event.wire[0]
    # ASCII JSON, as the replies (`server._send_reply`): any string can be sent.
    data = json.dumps(event.data, separators=(",", ":"))
    wire = f"id: {event.seq}\nevent: {event.name}\ndata: {data}\n\n".encode()
    # Two streams encoding it at once both make the same bytes; the first kept is used.
    event.wire.append(wire)
    return event.wire[0]


async def _next_events(
    events: EventSubscription[BoxEvent], timeout: float
) -> list[BoxEvent] | _Ended | None:
    """The next event and those waiting behind it; None when none came in ``timeout``."""
    with anyio.move_on_after(timeout):
        try:
            return await events.receive_batch()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            return _Ended()
    return None


def _writes(wires: Iterable[bytes]) -> Iterator[bytes]:
    """``wires`` as few writes: small ones joined, each large one alone and uncopied."""
    joined: list[bytes] = []
    size = 0
    for wire in wires:
        if len(wire) > _JOINED_WRITE_BYTES:
            if joined:
                yield b"".join(joined)
                joined, size = [], 0
            yield wire
            continue
        if size + len(wire) > _JOINED_WRITE_BYTES:
            yield b"".join(joined)
            joined, size = [], 0
        joined.append(wire)
        size += len(wire)
    if joined:
        yield b"".join(joined)


def stream_events(exchange: Exchange) -> None:
    """Write the box's events to the client until one side stops (see the module doc)."""
    box = exchange.box
    events: EventSubscription[BoxEvent] = exchange.call_sync(box.subscribe)
    try:
        exchange.write(b"retry: 3000\n: subscribed\n\n")
        last_write = time.monotonic()
        # Wait in short slices so a shutting-down server is noticed promptly.
        while not exchange.stopping():
            batch = exchange.run(_next_events, events, _POLL_SECONDS)
            if isinstance(batch, _Ended):
                return
            if batch is not None:
                for data in _writes(encode_event(event) for event in batch):
                    exchange.write(data)
                last_write = time.monotonic()
            elif exchange.peer_closed():
                # Gone: its thread and its connection slot are given back now, not
                # at the next write (a heartbeat away), or a burst of reloads would
                # fill the server's connections.
                return
            elif time.monotonic() - last_write >= exchange.sse_heartbeat_seconds:
                exchange.write(b": heartbeat\n\n")
                last_write = time.monotonic()
    finally:
        exchange.call_sync(events.close)
