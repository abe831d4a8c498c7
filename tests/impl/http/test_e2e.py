"""End to end over a real socket: send, replay, photos, queue, bootstrap, events, dedup."""

from __future__ import annotations

import base64
import json
import threading
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from beebox_impl.engine.echo import EchoEngine
from beebox_impl.engine.scripted import ScriptedEngine
from beebox_impl.http import server as server_module
from beebox_impl.http.routes import MEDIA_HEADERS
from tests.impl.http.support import (
    PHOTO_BASE64,
    PHOTO_BYTES,
    Client,
    GatedEngine,
    fixed_clock,
    served_box,
    wait_idle,
    wait_until,
)

pytestmark = pytest.mark.anyio


async def test_text_and_photo_replay_with_the_photo_served_back(tmp_path: Path) -> None:
    async with served_box(tmp_path) as (box, client, _):
        sent = await client.call("POST", "/api/chat/send", json_body={"message": "hello box"})
        assert sent.status == 200
        assert set(sent.json()) == {"turnId"}
        await wait_idle(box)
        photo = {"mediaType": "image/png", "data": PHOTO_BASE64}
        sent = await client.call(
            "POST", "/api/chat/send", json_body={"message": "a photo", "images": [photo]}
        )
        assert sent.status == 200
        assert set(sent.json()) == {"turnId"}
        await wait_idle(box)

        history = await client.call("GET", "/api/chat/history?tail=10")
        assert history.status == 200
        entries = history.json()["entries"]
        assert [entry["type"] for entry in entries] == ["user", "assistant"] * 2
        photo_entry = entries[2]
        texts = [block["text"] for block in photo_entry["content"] if block["type"] == "text"]
        assert texts == ["a photo"]
        (image,) = [block for block in photo_entry["content"] if block["type"] == "image"]
        # Stripped from the read: a reference instead of the bytes.
        assert "dataBase64" not in image
        assert PHOTO_BASE64 not in history.body.decode()
        ref = image["imageRef"]
        assert ref == f"{box.session_id}/{photo_entry['uuid']}/0"

        media = await client.call("GET", f"/api/session-media/{ref}")
        assert media.status == 200
        assert media.body == PHOTO_BYTES
        assert media.headers["content-type"] == "image/png"
        for name, value in MEDIA_HEADERS:
            assert media.headers[name.lower()] == value
        assert media.headers["content-length"] == str(len(PHOTO_BYTES))
        head = await client.call("HEAD", f"/api/session-media/{ref}")
        assert head.status == 200
        assert head.body == b""
        assert head.headers["content-length"] == str(len(PHOTO_BYTES))

        missing = await client.call("GET", f"/api/session-media/{box.session_id}/nope/0")
        assert (missing.status, missing.json()) == (404, {"error": "Not found"})
        beyond = await client.call("GET", f"/api/session-media/{ref[:-1]}1")
        assert beyond.status == 404
        # The echo answered what it was sent: the photo reached the engine.
        answer = entries[3]["content"][0]["text"]
        assert "sent 1 image (image/png, 307.2 KB)" in answer


async def test_a_send_while_busy_is_queued_and_reaches_the_next_turn(tmp_path: Path) -> None:
    engine = GatedEngine(EchoEngine(tmp_path / "projects", fixed_clock()))
    async with served_box(tmp_path, engine=engine) as (box, client, _):
        first = await client.call("POST", "/api/chat/send", json_body={"message": "first"})
        assert set(first.json()) == {"turnId"}
        await wait_until(lambda: box._session.busy and len(engine.turns) == 1)
        second = await client.call("POST", "/api/chat/send", json_body={"message": "second"})
        third = await client.call("POST", "/api/chat/send", json_body={"message": "third"})
        assert second.json() == {"queued": True}
        assert third.json() == {"queued": True}
        assert box._session.queue == ("second", "third")
        engine.release()
        # The queue drains as the next turn, texts joined.
        await wait_until(lambda: len(engine.turns) == 2)
        assert engine.turns[1] == "second\n\nthird"
        engine.release()
        await wait_idle(box)
        history = (await client.call("GET", "/api/chat/history")).json()
        users = [e["content"][0]["text"] for e in history["entries"] if e["type"] == "user"]
        assert users == ["first", "second\n\nthird"]


async def test_one_clients_queued_sends_reach_the_next_turn_in_their_order(
    tmp_path: Path,
) -> None:
    # Each is answered before the loop has handed it over; the hand-overs still
    # reach the session in the order of the answers.
    engine = GatedEngine(EchoEngine(tmp_path / "projects", fixed_clock()))
    async with served_box(tmp_path, engine=engine) as (box, client, _):
        await client.call("POST", "/api/chat/send", json_body={"message": "first"})
        await wait_until(lambda: box._session.busy and len(engine.turns) == 1)
        texts = [f"queued {number}" for number in range(40)]

        def send_in_turn() -> list[Any]:
            return [
                client.request("POST", "/api/chat/send", json_body={"message": text}).json()
                for text in texts
            ]

        assert await anyio.to_thread.run_sync(send_in_turn) == [{"queued": True}] * 40
        engine.release()
        await wait_until(lambda: len(engine.turns) == 2)
        assert engine.turns[1] == "\n\n".join(texts)


async def test_bootstrap_right_after_a_send_to_a_new_chat_shows_it_pending(
    tmp_path: Path,
) -> None:
    # The engine never answers the start: the chat has no session id yet.
    engine = ScriptedEngine(start_mode="wait")
    async with served_box(tmp_path, engine=engine) as (box, client, _):
        sent = await client.call("POST", "/api/chat/send", json_body={"message": "new chat?"})
        assert set(sent.json()) == {"turnId"}
        boot = await client.call("GET", "/api/chat/bootstrap")
        assert boot.status == 200
        answer = boot.json()
        assert answer["kind"] == "empty"
        assert answer["sessionId"] is None
        assert answer["status"]["phase"] == "starting"
        (pending,) = answer["pending"]
        assert pending["uuid"].startswith("accepted-")
        assert pending["content"] == [{"type": "text", "text": "new chat?"}]
        assert pending["reconcileKnownUuids"] == []
        assert box.session_id is None


async def test_events_arrive_in_order(tmp_path: Path) -> None:
    async with served_box(tmp_path) as (box, client, _):
        subscribed = threading.Event()
        received: list[tuple[int, str, Any]] = []

        def listen() -> None:
            connection, response = client.open_events(timeout=20)
            try:
                event: dict[str, str] = {}
                while True:
                    line = response.fp.readline().decode().rstrip("\n")
                    if line == ": subscribed":
                        subscribed.set()
                    elif line.startswith(("id: ", "event: ", "data: ")):
                        key, _, value = line.partition(": ")
                        event[key] = value
                    elif line == "" and event:
                        received.append(
                            (int(event["id"]), event["event"], json.loads(event["data"]))
                        )
                        if (
                            event["event"] == "turn-text"
                            and len([r for r in received if r[1] == "turn-text"]) == 2
                        ):
                            return
                        event = {}
            finally:
                connection.close()

        async with anyio.create_task_group() as group:
            group.start_soon(anyio.to_thread.run_sync, listen)
            await anyio.to_thread.run_sync(subscribed.wait, 10)
            await client.call("POST", "/api/chat/send", json_body={"message": "one"})
            await wait_idle(box)
            await client.call("POST", "/api/chat/send", json_body={"message": "two"})
        ids = [seq for seq, _, _ in received]
        assert ids == sorted(ids)
        assert len(set(ids)) == len(ids)
        names = [name for _, name, _ in received]
        first_turn = names[: names.index("turn-text") + 1]
        assert first_turn[:2] == ["chat-user-message", "chat-turn"]
        assert "session-id" in first_turn
        assert first_turn[-2:] == ["done", "turn-text"]
        assert received[0][2]["message"] == "one"
        second_turn = names[len(first_turn) :]
        assert second_turn[:2] == ["chat-user-message", "chat-turn"]
        assert second_turn[-2:] == ["done", "turn-text"]
        turn_texts = [data["text"] for _, name, data in received if name == "turn-text"]
        assert turn_texts == ['You said: "one"', 'You said: "two"']


async def test_an_event_stream_that_fails_is_logged_and_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async with served_box(tmp_path) as (box, client, _):
        subscribe = box.subscribe

        class FailingSubscription:
            def __init__(self) -> None:
                self.inner = subscribe()

            async def receive_batch(self) -> object:
                raise RuntimeError("the relay broke")

            def close(self) -> None:
                self.inner.close()

        monkeypatch.setattr(box, "subscribe", FailingSubscription)

        def listen() -> bytes:
            connection, response = client.open_events(timeout=10)
            try:
                # The head is out: the stream ends (the connection closes), no hang.
                return response.read()
            finally:
                connection.close()

        with caplog.at_level("ERROR", logger="beebox_impl.http.server"):
            body = await anyio.to_thread.run_sync(listen)
        assert body == b"retry: 3000\n: subscribed\n\n"
        failures = [r for r in caplog.records if "failed mid-stream" in r.getMessage()]
        assert [r.getMessage() for r in failures] == ["GET /api/events failed mid-stream"]
        assert failures[0].exc_info is not None
        assert "the relay broke" in str(failures[0].exc_info[1])


@pytest.mark.parametrize(
    "case", [(RuntimeError("a handler bug"), "ERROR"), (ConnectionResetError("gone"), "DEBUG")]
)
async def test_an_error_that_escapes_a_handler_is_logged_not_printed(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    case: tuple[Exception, str],
) -> None:
    raised, level = case

    # socketserver's own handler of such errors prints a traceback to stderr.
    def handle_one_request(self: object) -> None:
        raise raised

    async with served_box(tmp_path) as (_box, client, _):
        monkeypatch.setattr(server_module._Handler, "handle_one_request", handle_one_request)
        with caplog.at_level("DEBUG", logger="beebox_impl.http.server"):
            said = await anyio.to_thread.run_sync(
                client.raw, b"GET /api/chat/bootstrap HTTP/1.1\r\n\r\n"
            )
            await wait_until(
                lambda: any(r.exc_info or "ended" in r.getMessage() for r in caplog.records)
            )
    assert said == b""
    (record,) = [r for r in caplog.records if r.name == "beebox_impl.http.server"]
    assert record.levelname == level
    assert str(raised) in (str(record.exc_info[1]) if record.exc_info else record.getMessage())
    assert "Exception occurred" not in capsys.readouterr().err


async def test_fifty_concurrent_sends_of_one_message_id_make_one_row_and_one_turn(
    tmp_path: Path,
) -> None:
    engine = GatedEngine(EchoEngine(tmp_path / "projects", fixed_clock()), gated=False)
    async with served_box(tmp_path, engine=engine) as (box, client, _):
        body = {"message": "only once", "messageId": "same-id"}
        answers: list[Any] = []
        # The clients' threads must not take the box's own worker threads.
        clients = anyio.CapacityLimiter(50)

        async def send() -> None:
            response = await client.call("POST", "/api/chat/send", json_body=body, limiter=clients)
            assert response.status == 200
            answers.append(response.json())

        async with anyio.create_task_group() as group:
            for _ in range(50):
                group.start_soon(send)
        await wait_idle(box)
        rows = await box._database.read(
            lambda c: c.execute("SELECT payload FROM bus_events").fetchall()
        )
        assert len(rows) == 1
        assert json.loads(rows[0][0])["message"] == "only once"
        assert engine.turns == ["only once"]
        started = [a for a in answers if "turnId" in a]
        # The first answers with a turn; in-flight duplicates share its answer; later ones dedup.
        assert len({a["turnId"] for a in started}) == 1
        assert all(a == started[0] or a == {"deduplicated": True} for a in answers)
        assert len(answers) == 50


async def test_the_client_that_retries_an_answered_send_is_told_it_was_deduplicated(
    tmp_path: Path,
) -> None:
    async with served_box(tmp_path) as (_, client, _):
        body = {"message": "hi", "messageId": "retry-1"}
        first = await client.call("POST", "/api/chat/send", json_body=body)
        again = await client.call("POST", "/api/chat/send", json_body=body)
        assert set(first.json()) == {"turnId"}
        assert again.json() == {"deduplicated": True}


async def test_stop_restart_reset(tmp_path: Path) -> None:
    async with served_box(tmp_path) as (box, client, _):
        await client.call("POST", "/api/chat/send", json_body={"message": "hi"})
        await wait_idle(box)
        session_id = box.session_id
        restarted = await client.call("POST", "/api/chat/restart")
        assert restarted.status == 200
        assert restarted.json()["ok"] is True
        stopped = await client.call("POST", "/api/chat/stop", json_body={})
        assert stopped.status == 200
        assert stopped.json()["status"]["running"] is False
        reset = await client.call("POST", "/api/chat/reset")
        assert reset.status == 200
        assert box.session_id is None
        assert session_id is not None
        extra = await client.call("POST", "/api/chat/stop", json_body={"now": True})
        assert (extra.status, extra.json()) == (400, {"error": 'unexpected field "now"'})


def _unused(_: Client) -> None:
    """Keeps the import for type checkers of helpers above."""


async def test_half_a_surrogate_pair_is_refused_in_a_send_and_answered_from_a_transcript(
    tmp_path: Path,
) -> None:
    # JSON may escape half a surrogate pair ("\ud800"), and json.loads takes it. A
    # send holding one is refused (the box records, and the engine writes, Unicode
    # text); a transcript holding one (JSON.stringify escapes it so) is answered:
    # every reply is ASCII JSON, so any string can be encoded.
    async with served_box(tmp_path) as (box, client, _):
        sent = await client.call("POST", "/api/chat/send", json_body={"message": "half \ud800"})
        assert sent.status == 400
        assert "half a surrogate pair" in sent.json()["error"]
        hello = await client.call("POST", "/api/chat/send", json_body={"message": "hi"})
        assert hello.status == 200
        await wait_idle(box)
        session_id = box.session_id
        assert session_id is not None
        path = box._history_service.transcript_path(session_id)
        line = path.read_text(encoding="utf-8").splitlines()[0]
        with path.open("a", encoding="utf-8") as transcript:
            transcript.write(
                line.replace('"hi"', '"half \\ud800 a pair"').replace('"uuid":"', '"uuid":"x', 1)
                + "\n"
            )
        history = await client.call("GET", "/api/chat/history?tail=10")
        assert history.status == 200, history.body
        assert history.body.isascii()
        texts = [entry["content"] for entry in history.json()["entries"] if entry["type"] == "user"]
        assert texts[-1] == [{"type": "text", "text": "half \ud800 a pair"}]


async def test_a_photo_that_would_overfill_the_next_turn_is_429_with_retry_after(
    tmp_path: Path,
) -> None:
    engine = ScriptedEngine(start_mode="accept")
    six_mib = base64.b64encode(b"\xff" * 6 * 1024 * 1024).decode("ascii")
    async with served_box(tmp_path, engine=engine) as (_box, client, _):
        first = await client.call("POST", "/api/chat/send", json_body={"message": "first"})
        assert first.status == 200
        await wait_until(lambda: bool(engine.runs) and bool(engine.runs[0].sent))
        for name, status in (("a", 200), ("b", 429)):
            body = {
                "message": name,
                "messageId": f"m-{name}",
                "images": [{"mediaType": "image/jpeg", "data": six_mib}],
            }
            answer = await client.call("POST", "/api/chat/send", json_body=body)
            assert answer.status == status, answer.body
        assert answer.headers["retry-after"] == "5"
        assert "waiting for the chat's next turn" in answer.json()["error"]


async def test_a_send_recorded_but_not_handed_over_is_500_and_stays_pending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with served_box(tmp_path) as (box, client, _):

        async def closed(*_args: object, **_kwargs: object) -> bool:
            raise anyio.ClosedResourceError

        # The chat closing under the send: the record is made, the hand-over fails.
        monkeypatch.setattr(box._session, "send_or_enqueue", closed)
        answer = await client.call("POST", "/api/chat/send", json_body={"message": "kept"})
        assert answer.status == 500
        assert set(answer.json()) == {"error"}
        bootstrap = await client.call("GET", "/api/chat/bootstrap")
        (pending,) = bootstrap.json()["pending"]
        assert pending["content"] == [{"type": "text", "text": "kept"}]
