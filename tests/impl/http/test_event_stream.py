"""`GET /api/events`' writer (`stream_events`), driven without a socket."""

from __future__ import annotations

from functools import partial
from types import SimpleNamespace
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import pytest

from beebox_impl.http.events import encode_event, stream_events
from beebox_impl.http.routes import Exchange
from beebox_impl.services.events import BoxEvent, BoxEventHub
from beebox_impl.session.events import EventSubscription

pytestmark = pytest.mark.anyio

WAITING = 50


async def test_events_waiting_together_cross_and_leave_as_one_write() -> None:
    hub = BoxEventHub()
    published: list[BoxEvent] = []

    def subscribe() -> EventSubscription[BoxEvent]:
        # Events pile up behind the subscription before the stream first reads it.
        events = hub.subscribe()
        published.extend(hub.publish("chat-turn", {"n": n}) for n in range(WAITING))
        return events

    writes: list[bytes] = []
    crossings = 0
    token = anyio.lowlevel.current_token()

    def call(function: Any, *args: object) -> Any:
        nonlocal crossings
        crossings += 1
        return anyio.from_thread.run(function, *args, token=token)

    exchange = Exchange(
        method="GET",
        path="/api/events",
        query={},
        body=b"",
        box=SimpleNamespace(subscribe=subscribe),  # type: ignore[arg-type]
        call=call,
        call_sync=partial(anyio.from_thread.run_sync, token=token),
        write=writes.append,
        # Stop once every published event has been written.
        stopping=lambda: b"".join(writes).count(b"event: ") >= WAITING,
    )
    with anyio.fail_after(30):
        await anyio.to_thread.run_sync(stream_events, exchange)
    assert writes[0] == b"retry: 3000\n: subscribed\n\n"
    # Every event, in order, in one write after the opening; one crossing for them all.
    assert writes[1:] == [b"".join(encode_event(event) for event in published)]
    assert crossings == 1
