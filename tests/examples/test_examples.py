"""The host examples in `examples/` run (issue 35, point 8).

The Starlette app is driven through httpx's ASGI transport, on both of anyio's loops,
every route of it: a send and its retry, the history, a photo by its reference, the
rejections its one handler answers, and the event stream. The trio program is run as
its reader would run it, in a process of its own, and what it prints is checked.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from beebox_impl import Box
from examples.starlette_host import create_app
from examples.trio_host import PHOTO

ROOT = Path(__file__).resolve().parents[2]
TRIO_HOST = ROOT / "examples" / "trio_host.py"


@asynccontextmanager
async def serving(folder: Path) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the Starlette example, its lifespan (the open box) around the requests."""
    app = create_app(folder)
    # httpx's transport sends requests only, no lifespan events: run the app's
    # lifespan as Starlette runs it for a server.
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://host") as client,
    ):
        yield client


def server_sent_events(text: str) -> list[tuple[int, str, Any]]:
    """A text/event-stream body's events: (id, name, data)."""
    events = []
    for block in text.split("\n\n"):
        if block:
            fields = dict(line.split(": ", 1) for line in block.split("\n"))
            events.append((int(fields["id"]), fields["event"], json.loads(fields["data"])))
    return events


async def send_watching(
    client: httpx.AsyncClient, body: dict[str, Any]
) -> tuple[httpx.Response, list[tuple[int, str, Any]]]:
    """POST /messages with GET /events?until=turn-text open: the answer, and the events
    from the send to its turn's text."""
    streamed: list[httpx.Response] = []

    async def watch() -> None:
        streamed.append(await client.get("/events", params={"until": "turn-text"}))

    async with anyio.create_task_group() as task_group:
        task_group.start_soon(watch)
        # Every task waits: the stream has subscribed (httpx hands over its body whole,
        # at the end, so the test cannot read a first line to know).
        await anyio.wait_all_tasks_blocked()
        answer = await client.post("/messages", json=body)
    (response,) = streamed
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    return answer, server_sent_events(response.text)


@pytest.mark.anyio
async def test_a_send_streams_its_turn_and_its_retry_is_deduplicated(tmp_path: Path) -> None:
    async with serving(tmp_path) as client:
        answer, events = await send_watching(client, {"text": "hello", "messageId": "m-1"})
        # The same message again, as a client whose answer was lost sends it.
        retry = await client.post("/messages", json={"text": "hello", "messageId": "m-1"})
    assert answer.status_code == 200
    assert answer.json()["messageId"] == "m-1"
    turn_id = answer.json()["turnId"]
    assert retry.status_code == 200
    assert retry.json() == {"messageId": "m-1", "deduplicated": True}

    names = [name for _, name, _ in events]
    assert names[:2] == ["chat-user-message", "chat-turn"]
    assert names[-2:] == ["done", "turn-text"]
    assert [seq for seq, _, _ in events] == list(range(1, len(events) + 1))
    data = {name: data for _, name, data in events}
    assert data["chat-user-message"]["message"] == "hello"
    assert data["chat-turn"]["turnId"] == turn_id
    assert data["turn-text"] == {"text": 'You said: "hello"'}


@pytest.mark.anyio
async def test_a_send_without_an_id_is_answered_one_to_retry_with(tmp_path: Path) -> None:
    async with serving(tmp_path) as client:
        first = await client.post("/messages", json={"text": "hello"})
        message_id = first.json()["messageId"]
        retry = await client.post("/messages", json={"text": "hello", "messageId": message_id})
    assert "turnId" in first.json()
    assert retry.json() == {"messageId": message_id, "deduplicated": True}


@pytest.mark.anyio
async def test_the_history_holds_the_turn_and_a_photo_comes_back_by_its_ref(
    tmp_path: Path,
) -> None:
    photo = {"mediaType": "image/png", "data": base64.b64encode(PHOTO).decode()}
    async with serving(tmp_path) as client:
        before = await client.get("/history/10")
        await send_watching(client, {"text": "look", "messageId": "m-1", "photos": [photo]})
        history = await client.get("/history/10")
        entries = history.json()["entries"]
        (ref,) = (block["imageRef"] for block in entries[0]["content"] if "imageRef" in block)
        fetched = await client.get(f"/photos/{ref}")
        session_id = history.json()["sessionId"]
        missing = await client.get(f"/photos/{session_id}/no-such-entry/0")
    assert before.status_code == 404
    assert before.json() == {"error": "no conversation yet"}
    assert history.status_code == 200
    assert [entry["type"] for entry in entries] == ["user", "assistant"]
    assert [block["type"] for block in entries[0]["content"]] == ["image", "text"]
    assert entries[1]["content"][0]["text"].startswith('You said: "look" and sent 1 image')
    assert fetched.status_code == 200
    assert fetched.headers["content-type"] == "image/png"
    assert fetched.content == PHOTO
    assert missing.status_code == 404
    assert missing.json() == {"error": "no photo: not-found"}


@pytest.mark.anyio
async def test_every_rejection_is_answered_with_its_status_hint(tmp_path: Path) -> None:
    async with serving(tmp_path) as client:
        malformed_ref = await client.get("/photos/not-a-ref")
        out_of_range = await client.get("/history/0")
        not_json = await client.post("/messages", content=b"{")
        not_a_string = await client.post("/messages", json={"text": 5})
        empty = await client.post("/messages", json={"text": ""})
        bad_type = await client.post(
            "/messages", json={"text": "x", "photos": [{"mediaType": "image/bmp", "data": "AA=="}]}
        )
    # One 400 for a malformed reference, saying nothing of which rule it broke.
    assert (malformed_ref.status_code, malformed_ref.json()) == (
        400,
        {"error": "malformed media reference"},
    )
    # The host's own rejections (BadRequest) and the box's (InvalidHistorySlice,
    # InvalidRequest) go through the same handler.
    assert out_of_range.status_code == 400
    assert "tail must be an integer" in out_of_range.json()["error"]
    assert not_json.status_code == 400
    assert not_json.json()["error"].startswith("not a message")
    assert not_a_string.status_code == 400
    assert not_a_string.json() == {"error": '"text", "messageId" and "mediaType" must be strings'}
    assert empty.status_code == 400
    assert empty.json() == {"error": '"message" must not be empty'}
    assert bad_type.status_code == 400
    assert '"images[0].mediaType" must be one of' in bad_type.json()["error"]


def run_trio_host(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TRIO_HOST), str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_trio_host_sends_retries_reads_and_fetches_its_photo(tmp_path: Path) -> None:
    done = run_trio_host(tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == [
        "send m-1: turn started",
        'the agent said: You said: "hello"',
        "send m-1: already recorded, not sent twice",
        "send m-2: turn started",
        'the agent said: You said: "a photo" and sent 1 image (image/png, 2.1 KB)',
        "history: 4 entries",
        "  user: hello",
        '  assistant: You said: "hello"',
        "  user: a photo, image/png",
        "  user: a photo",
        '  assistant: You said: "a photo" and sent 1 image (image/png, 2.1 KB)',
        f"photo by ref: image/png, {len(PHOTO)} bytes, same: True",
        "photo by ref: missing (not-found)",
        "a malformed ref: refused (400)",
    ]
    # Nothing written outside the folder it was given (transcripts included).
    assert sorted(path.name for path in tmp_path.iterdir()) == ["box", "projects"]


@pytest.mark.anyio
async def test_the_trio_host_says_so_in_one_line_when_the_box_is_open_elsewhere(
    tmp_path: Path,
) -> None:
    async with Box.open(tmp_path / "box", projects_root=tmp_path / "projects"):
        done = await anyio.to_thread.run_sync(run_trio_host, tmp_path)
    assert done.returncode == 1
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("trio_host: ")
    assert "is open in another Box" in line
