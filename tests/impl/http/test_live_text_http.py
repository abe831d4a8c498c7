"""Live text over HTTP: ``turn-delta`` on ``GET /api/events``, ``liveText`` in
``GET /api/chat/bootstrap`` (issue 37; the box's side is `tests/impl/box/test_live_text.py`)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from beebox_impl.engine import EchoEngine
from tests.impl.box.test_live_text import ANSWER, PIECES, TEXT, Pieces
from tests.impl.http.support import Client, fixed_clock, served_box

pytestmark = pytest.mark.anyio


def events_until_done(client: Client, listening: threading.Event) -> list[tuple[str, Any]]:
    """Each event's name and data from ``GET /api/events``, up to the turn's ``done``."""
    connection, response = client.open_events(timeout=20)
    received: list[tuple[str, Any]] = []
    fields: dict[str, str] = {}
    try:
        for raw in response.fp:
            line = raw.decode().rstrip("\n")
            listening.set()
            if line == "" and "event" in fields:
                received.append((fields["event"], json.loads(fields["data"])))
                if fields["event"] == "done":
                    return received
                fields = {}
            elif line.startswith(("event: ", "data: ")):
                name, _, value = line.partition(": ")
                fields[name] = value
    finally:
        connection.close()
    raise AssertionError("the event stream ended before the turn was done")


async def test_the_text_streams_as_turn_deltas_and_a_reload_reads_it_so_far(
    tmp_path: Path,
) -> None:
    pieces = Pieces(hold_before=3)
    engine = EchoEngine(tmp_path / "projects", fixed_clock(), sleep=pieces)
    async with served_box(tmp_path, engine=engine) as (_, client, _):
        listening = threading.Event()
        received: list[tuple[str, Any]] = []

        async def listen() -> None:
            received.extend(await anyio.to_thread.run_sync(events_until_done, client, listening))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(listen)
            await anyio.to_thread.run_sync(listening.wait, 10)
            await client.call("POST", "/api/chat/send", json_body={"message": TEXT})
            await pieces.held.wait()
            mid_turn = (await client.call("GET", "/api/chat/bootstrap")).json()
            pieces.release()
        after = (await client.call("GET", "/api/chat/bootstrap")).json()
    assert mid_turn["liveText"] == "".join(PIECES[:2])
    assert after["liveText"] is None
    deltas = [data for name, data in received if name == "turn-delta"]
    # The first piece starts the message's live text; the others add to it.
    assert deltas == [{"text": piece, "first": index == 0} for index, piece in enumerate(PIECES)]
    names = [name for name, _ in received]
    whole = [
        index
        for index, (name, data) in enumerate(received)
        if name == "message" and data["message"]["type"] == "assistant"
    ]
    assert len(whole) == 1
    assert max(index for index, name in enumerate(names) if name == "turn-delta") < whole[0]
    assert received[whole[0]][1]["message"]["message"]["content"][0]["text"] == ANSWER
