"""`GET /api/events`: its writer (`stream_events`) driven without a socket, and a
served stream's heartbeats."""

from __future__ import annotations

import contextlib
import socket
import time
from functools import partial
from itertools import pairwise
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import pytest

from beebox_impl.http.routes import Exchange
from beebox_impl.http.server import HttpLimits
from beebox_impl.http.sse import _writes, encode_event, stream_events
from beebox_impl.services.box_events import BoxEvent, BoxEventHub, NoData
from beebox_impl.session.chat_events import EventSubscription
from tests.impl.http.support import served_box

pytestmark = pytest.mark.anyio

WAITING = 50
# Short, for a quick test; longer than the half second the writer waits for events
# between looks, so a heartbeat written at every look (not every interval) shows.
HEARTBEAT_SECONDS = 0.9


async def test_events_waiting_together_cross_and_leave_as_one_write() -> None:
    hub = BoxEventHub()
    published: list[BoxEvent] = []

    def subscribe() -> EventSubscription[BoxEvent]:
        # Events pile up behind the subscription before the stream first reads it.
        events = hub.subscribe()
        published.extend(
            hub.publish("chat-turn", {"turnId": f"t-{n}", "id": n}) for n in range(WAITING)
        )
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


async def test_a_quiet_stream_sends_heartbeat_comments_an_interval_apart(tmp_path: Path) -> None:
    """So a client or proxy can tell a quiet box from a dead connection."""
    # Generous: the interval, the writer's half second between looks, and time to spare.
    longest_gap = HEARTBEAT_SECONDS + 0.5 + 2
    limits = HttpLimits(sse_heartbeat_seconds=HEARTBEAT_SECONDS)
    async with served_box(tmp_path, limits=limits) as (_, client, _):

        def read_writes(count: int) -> list[tuple[float, bytes]]:
            """The stream's first ``count`` writes (each up to a blank line) with when
            each began to arrive; fewer if nothing came for ``longest_gap``."""
            connection, response = client.open_events(timeout=longest_gap)
            writes = []
            try:
                with contextlib.suppress(TimeoutError):
                    for _ in range(count):
                        lines = [response.fp.readline()]
                        arrived = time.monotonic()
                        while lines[-1] not in (b"\n", b""):
                            lines.append(response.fp.readline())
                        writes.append((arrived, b"".join(lines)))
            finally:
                connection.close()
            return writes

        # No send: nothing happens in the box while the stream is read.
        writes = await anyio.to_thread.run_sync(read_writes, 3)
    assert [text for _, text in writes] == [
        b"retry: 3000\n: subscribed\n\n",
        b": heartbeat\n\n",
        b": heartbeat\n\n",
    ]
    gaps = [later - earlier for (earlier, _), (later, _) in pairwise(writes)]
    # The lower bound allows for the jitter of the client's clock reading each arrival.
    assert all(HEARTBEAT_SECONDS - 0.2 <= gap <= longest_gap for gap in gaps), gaps


async def test_streams_whose_clients_left_give_their_connections_back_before_any_write(
    tmp_path: Path,
) -> None:
    """A burst of reloads must not fill the server's connections until the heartbeats."""
    limits = HttpLimits(max_connections=8, sse_heartbeat_seconds=60)
    async with served_box(tmp_path, limits=limits) as (_, client, _):

        def reload_eight_times_then_ask() -> float:
            for _ in range(8):
                connection, _response = client.open_events(timeout=10)
                connection.close()
            # No event and no heartbeat comes to show the server they are gone.
            started = time.monotonic()
            while (answer := client.request("GET", "/api/chat/sessions")).status == 503:
                assert time.monotonic() - started < 10, "the connections were never given back"
                time.sleep(0.05)
            assert answer.status == 200
            return time.monotonic() - started

        waited = await anyio.to_thread.run_sync(reload_eight_times_then_ask)
    # The streams notice between two looks for events (half a second each).
    assert waited < 5


async def test_a_stream_blocked_on_a_client_that_does_not_read_does_not_hold_the_exit(
    tmp_path: Path,
) -> None:
    limits = HttpLimits(write_timeout=20)
    with contextlib.ExitStack() as sockets:
        async with served_box(tmp_path, limits=limits) as (box, client, _):
            stalled = sockets.enter_context(socket.create_connection((client.host, client.port)))
            stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            stalled.sendall(
                f"GET /api/events HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Bearer {box.token}\r\n\r\n".encode()
            )
            # Events far larger than the socket's buffers, which this client never reads.
            text = "x" * 300_000
            for number in range(30):
                answer = await client.call(
                    "POST", "/api/chat/send", json_body={"message": f"{number} {text}"}
                )
                assert answer.status == 200
            started = time.monotonic()
        stopped = time.monotonic() - started
    # Not the write timeout: the stream's socket is closed under its blocked write.
    assert stopped < 10, stopped


def test_an_event_is_encoded_once_for_every_stream_that_sends_it() -> None:
    # A large message goes to every stream: one copy of its bytes, not one a stream.
    hub = BoxEventHub()
    event = hub.publish("turn-text", {"text": "x" * 1_000_000})
    first, second = encode_event(event), encode_event(event)
    assert first is second
    assert first.startswith(b"id: 1\nevent: turn-text\ndata: {")


def test_a_large_event_is_written_alone_and_uncopied_between_joined_small_ones() -> None:
    hub = BoxEventHub()
    nothing: NoData = {}
    small = [hub.publish("done", nothing) for _ in range(3)]
    large = hub.publish("turn-text", {"text": "x" * 200_000})
    after = hub.publish("done", nothing)
    writes = list(_writes(encode_event(event) for event in [*small, large, after]))
    assert writes[0] == b"".join(encode_event(event) for event in small)
    assert writes[1] is encode_event(large), "the shared bytes, not a copy"
    assert writes[2] == encode_event(after)
