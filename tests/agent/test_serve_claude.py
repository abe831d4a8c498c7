"""`bbx serve --engine claude` as a process: the real CLI behind HTTP and the event stream.

Each test starts `bbx serve` on a fresh box with `OfflineClaude.env` in its
environment, so the CLI it runs talks to the Messages API double and writes its
transcripts under ``$CLAUDE_CONFIG_DIR/projects``, where the box reads them. A
test then does what a page does: it sends over ``POST /api/chat/send``, reads
``GET /api/events`` as a browser's ``EventSource`` would, and reads the chat back
with ``GET /api/chat/history`` / ``/api/chat/bootstrap`` and its photos with
``GET /api/session-media/<ref>``. Every serve is stopped with SIGTERM, and no CLI
may outlive it.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

import pytest

from beebox_impl.transcript.location import PROJECTS_DIR_ENV
from tests.agent.claude_cli import OfflineClaude, claude_processes, kill
from tests.agent.messages_api import Fail, MessagesApiDouble, Reply, Text, ToolUse
from tests.agent.photos import noise_png
from tests.impl.http.support import Client, Response, read_address

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and /proc")

# How long a test waits for any one thing: a turn of the real CLI takes a second or two.
WAIT_S = 15.0


# --- `bbx serve --engine claude` as a process -------------------------------------------


def start_claude_serve(
    box: Path, claude: OfflineClaude, log: TextIO, options: Sequence[str] = ()
) -> subprocess.Popen[bytes]:
    """`bbx serve --engine claude` on ``box``, any free port, its CLI on ``claude``'s double.

    The box finds the transcripts where the CLI writes them (``$CLAUDE_CONFIG_DIR``),
    so a ``BBX_CLAUDE_PROJECTS_DIR`` of the outer environment is left out. Its stderr
    goes to ``log`` (a file: a pipe nobody reads could fill and stall the server).
    """
    env = claude.process_env()
    env.pop(PROJECTS_DIR_ENV, None)
    command = [sys.executable, "-m", "beebox_impl", "serve", "--box", str(box), "--port", "0"]
    return subprocess.Popen(
        [*command, "--engine", "claude", *options],
        stdout=subprocess.PIPE,
        stderr=log,
        env=env,
    )


def stop_claude_serve(process: subprocess.Popen[bytes]) -> int:
    """SIGTERM and wait: the exit status (a serve that hangs is killed, and that fails)."""
    assert process.stdout is not None
    try:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            return process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
    finally:
        process.stdout.close()


def kill_leftover_clis(claude: OfflineClaude, timeout: float = 10) -> None:
    """Kill any CLI of ``claude``'s config still alive after ``timeout`` (a failed test's)."""
    deadline = time.monotonic() + timeout
    while (left := claude_processes(claude.config)) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in left:
        kill(pid)


@dataclass(frozen=True)
class Served:
    """One `bbx serve` of the box: the process and a client of it."""

    process: subprocess.Popen[bytes]
    client: Client
    log: Path


@contextlib.contextmanager
def serve_claude(box: Path, claude: OfflineClaude, options: Sequence[str] = ()) -> Iterator[Served]:
    """`bbx serve --engine claude` on ``box`` for the ``with`` block; then SIGTERM.

    After a clean block it checks that the serve exited 0 and that its CLI had gone
    by then (the box waits for its run to close); a CLI left over is killed either way.
    """
    log_path = box.parent / f"serve-{time.monotonic_ns()}.log"
    with log_path.open("w") as log:
        process = start_claude_serve(box, claude, log, options)
    try:
        url, token = read_address(process, box)
        address = urlsplit(url)
        assert address.hostname is not None
        assert address.port is not None
        yield Served(process, Client(address.hostname, address.port, token), log_path)
    finally:
        try:
            code = stop_claude_serve(process)
            left_at_exit = claude_processes(claude.config)
        finally:
            kill_leftover_clis(claude)
    errors = log_path.read_text(errors="replace")
    assert code == 0, errors
    assert "SIGTERM: shutting down" in errors
    assert left_at_exit == [], f"CLI processes outlived bbx serve: {errors}"


# --- The event stream, read as a browser reads it ------------------------------------------


@dataclass(frozen=True)
class SseEvent:
    seq: int
    name: str
    data: Any


class EventStream:
    """``GET /api/events`` read by a thread of its own; every event kept, in order."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._events: list[SseEvent] = []
        self._ended = False
        self._changed = threading.Condition()
        self._subscribed = threading.Event()
        self._connection: http.client.HTTPConnection | None = None
        self._socket: socket.socket | None = None
        self._thread = threading.Thread(target=self._read, name="sse reader", daemon=True)

    def __enter__(self) -> EventStream:
        # Long: a quiet stream sends a heartbeat only every 15 s.
        self._connection = http.client.HTTPConnection(
            self._client.host, self._client.port, timeout=120
        )
        # Kept: the connection lets go of its socket once the answer is read as one that
        # ends with the connection, and the reader is woken by shutting the socket down.
        self._connection.connect()
        self._socket = self._connection.sock
        self._connection.request(
            "GET", "/api/events", headers={"Authorization": f"Bearer {self._client.token}"}
        )
        self._response = self._connection.getresponse()
        assert self._response.status == 200
        assert self._response.getheader("Content-Type", "").startswith("text/event-stream")
        self._thread.start()
        # The stream says it has subscribed before any event can be missed.
        assert self._subscribed.wait(WAIT_S), "the event stream never said it subscribed"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._connection is not None
        if self._socket is not None:
            with contextlib.suppress(OSError):
                self._socket.shutdown(socket.SHUT_RDWR)
        self._thread.join(WAIT_S)
        assert not self._thread.is_alive()
        self._response.close()
        self._connection.close()

    def _read(self) -> None:
        fields: dict[str, str] = {}
        try:
            while line := self._response.fp.readline():
                text = line.decode("utf-8").rstrip("\n")
                if text == ": subscribed":
                    self._subscribed.set()
                elif text == "":
                    if "event" in fields:
                        event = SseEvent(
                            int(fields["id"]), fields["event"], json.loads(fields["data"])
                        )
                        with self._changed:
                            self._events.append(event)
                            self._changed.notify_all()
                    fields = {}
                elif not text.startswith(":"):
                    name, _, value = text.partition(": ")
                    fields[name] = value
        except (OSError, ValueError):
            pass
        finally:
            with self._changed:
                self._ended = True
                self._changed.notify_all()

    @property
    def events(self) -> list[SseEvent]:
        with self._changed:
            return list(self._events)

    def names(self) -> list[str]:
        return [event.name for event in self.events]

    def named(self, name: str) -> list[SseEvent]:
        return [event for event in self.events if event.name == name]

    def wait_for(
        self, predicate: Callable[[SseEvent], bool], *, count: int = 1, timeout: float = WAIT_S
    ) -> list[SseEvent]:
        """Until ``count`` events satisfy ``predicate``; those events."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(found := [e for e in self._events if predicate(e)]) < count:
                left = deadline - time.monotonic()
                assert not self._ended, f"the event stream ended; it carried {self.names()}"
                assert left > 0, f"{count} events not seen in {timeout} s: {self.names()}"
                self._changed.wait(left)
            return found

    def wait_for_name(self, name: str, *, count: int = 1) -> list[SseEvent]:
        return self.wait_for(lambda event: event.name == name, count=count)


# --- What a page reads ---------------------------------------------------------------------


def ok(response: Response) -> Any:
    assert response.status == 200, (response.status, response.body[:500])
    return response.json()


def send(client: Client, text: str, message_id: str, photos: Sequence[bytes] = ()) -> Any:
    body: dict[str, Any] = {"message": text, "messageId": message_id}
    if photos:
        body["images"] = [
            {"mediaType": "image/png", "data": base64.b64encode(photo).decode("ascii")}
            for photo in photos
        ]
    return ok(client.request("POST", "/api/chat/send", json_body=body))


def history(client: Client) -> Any:
    return ok(client.request("GET", "/api/chat/history?tail=50"))


def bootstrap(client: Client) -> Any:
    return ok(client.request("GET", "/api/chat/bootstrap?tail=50"))


def shown(history: Any) -> list[tuple[str, str]]:
    """Each entry's type and text, in order (photos as ``[photo]``)."""
    return [(entry["type"], text_of(entry)) for entry in history["entries"]]


def text_of(entry: Any) -> str:
    parts = []
    for block in entry["content"]:
        if block["type"] == "text":
            parts.append(block.get("text", ""))
        elif block["type"] == "image":
            parts.append("[photo]")
        else:
            parts.append(f"[{block['type']}]")
    return " ".join(parts)


def sent(api: MessagesApiDouble) -> list[list[str]]:
    """The user texts of every messages request the CLI made, in order.

    Stripped: the CLI joins user turns with nothing between them (an API error's,
    a stop's) into one message, and then ends each text but the last with a newline.
    """
    return [[text.strip() for text in request.user_texts()] for request in api.message_requests]


def assistant_texts(events: EventStream) -> list[str]:
    """The text blocks of the assistant messages the stream carried."""
    return [
        block["text"]
        for event in events.named("message")
        if event.data["message"]["type"] == "assistant"
        for block in event.data["message"]["message"]["content"]
        if block.get("type") == "text"
    ]


IDLE = {"phase": "idle", "busy": False, "running": False, "queued": 0}
READY = {"phase": "ready", "busy": False, "running": True, "queued": 0}


# --- The tests -------------------------------------------------------------------------------


def test_a_text_turn(tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble) -> None:
    api.script(Reply.text("Hello, person of the box"))
    box = tmp_path / "box"
    with serve_claude(box, claude) as served, EventStream(served.client) as events:
        answer = send(served.client, "hello there", "m-1")
        (text,) = events.wait_for_name("turn-text")
        replay = history(served.client)
        boot = bootstrap(served.client)
        names = events.names()
    assert set(answer) == {"turnId"}
    assert text.data == {"text": "Hello, person of the box"}
    assert names[:3] == ["chat-user-message", "chat-turn", "session-id"]
    assert names[-2:] == ["done", "turn-text"]
    assert "turn-error" not in names
    (user_message,) = events.named("chat-user-message")
    assert user_message.data["message"] == "hello there"
    (turn,) = events.named("chat-turn")
    assert turn.data == {"turnId": answer["turnId"], "id": user_message.data["id"]}
    (session,) = events.named("session-id")
    session_id = session.data["sessionId"]
    # One order, one sequence: the ids count up with no gap.
    assert [event.seq for event in events.events] == list(
        range(events.events[0].seq, events.events[0].seq + len(names))
    )
    assert assistant_texts(events) == ["Hello, person of the box"]
    # The replay is the CLI's transcript, read back over HTTP.
    assert replay["sessionId"] == session_id
    assert shown(replay) == [("user", "hello there"), ("assistant", "Hello, person of the box")]
    assert boot["kind"] == "resumable"
    assert boot["sessionId"] == session_id
    assert boot["history"] == replay
    assert boot["status"] == READY
    (transcript,) = claude.transcripts()
    assert transcript.stem == session_id
    (request,) = api.message_requests
    assert request.user_texts() == ["hello there"]
    assert api.unscripted == 0


def test_a_turn_with_two_photos(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble
) -> None:
    # Two 154 KB PNGs: their line is over the 256 KiB mark.
    photos = [noise_png(256, 200, seed) for seed in (1, 2)]
    api.script(Reply.text("Two photos, seen"))
    box = tmp_path / "box"
    with serve_claude(box, claude) as served, EventStream(served.client) as events:
        send(served.client, "look at these", "m-1", photos)
        events.wait_for_name("turn-text")
        replay = history(served.client)
        refs = [
            block["imageRef"]
            for entry in replay["entries"]
            for block in entry["content"]
            if "imageRef" in block
        ]
        fetched = [served.client.request("GET", f"/api/session-media/{ref}") for ref in refs]
        heads = [served.client.request("HEAD", f"/api/session-media/{ref}") for ref in refs]
    assert shown(replay) == [
        ("user", "[photo] [photo] look at these"),
        ("assistant", "Two photos, seen"),
    ]
    # One ref a photo, each its own; no photo bytes in the replay.
    assert len(set(refs)) == 2
    assert all(ref.startswith(f"{replay['sessionId']}/") for ref in refs)
    assert "base64" not in json.dumps(replay)
    # Each fetched back byte for byte, as a photo.
    assert [response.status for response in fetched] == [200, 200]
    assert [response.body for response in fetched] == photos
    for response in fetched:
        assert response.headers["content-type"] == "image/png"
        assert response.headers["x-content-type-options"] == "nosniff"
        assert "immutable" in response.headers["cache-control"]
    assert [response.status for response in heads] == [200, 200]
    assert [response.body for response in heads] == [b"", b""]
    # The CLI sent the photos to the API as they were sent to the box.
    (request,) = api.message_requests
    assert request.images() == photos


def test_a_serve_started_again_resumes_the_session(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble
) -> None:
    api.script(Reply.text("one"), Reply.text("two"))
    box = tmp_path / "box"
    with serve_claude(box, claude) as served, EventStream(served.client) as events:
        send(served.client, "first life", "m-1")
        events.wait_for_name("turn-text")
        (session,) = events.named("session-id")
        first = session.data["sessionId"]
    assert not claude_processes(claude.config)
    with serve_claude(box, claude) as served, EventStream(served.client) as events:
        # Before any send (no CLI yet): the chat is the saved session, read from disk.
        before = bootstrap(served.client)
        send(served.client, "second life", "m-2")
        (text,) = events.wait_for_name("turn-text")
        replay = history(served.client)
        after = bootstrap(served.client)
        names = events.names()
    assert before["kind"] == "resumable"
    assert before["sessionId"] == first
    assert before["status"] == IDLE
    assert shown(before["history"]) == [("user", "first life"), ("assistant", "one")]
    assert text.data == {"text": "two"}
    # The send was recorded in the saved session, and the resumed CLI kept it: no
    # new session was announced, and every message the CLI sent names the first one.
    (user_message,) = events.named("chat-user-message")
    assert user_message.data["sessionId"] == first
    assert events.named("session-id") == []
    assert {event.data["message"]["session_id"] for event in events.named("message")} == {first}
    assert "turn-error" not in names
    assert replay["sessionId"] == first
    assert after["sessionId"] == first
    assert shown(replay) == [
        ("user", "first life"),
        ("assistant", "one"),
        ("user", "second life"),
        ("assistant", "two"),
    ]
    assert after["history"] == replay
    # The second CLI carried the first life's messages to the API.
    assert sent(api) == [["first life"], ["first life", "second life"]]
    (transcript,) = claude.transcripts()
    assert transcript.stem == first


@pytest.mark.parametrize(
    ("failures", "words"),
    [
        pytest.param([Fail(401, "invalid x-api-key")], "Invalid API key", id="401"),
        # The CLI retries twice here (`CLAUDE_RETRIES`): three failures are final.
        pytest.param([Fail(529, "Overloaded")] * 3, "529", id="529"),
    ],
)
def test_an_api_error_is_a_turn_error_event_and_the_next_send_works(
    tmp_path: Path,
    claude: OfflineClaude,
    api: MessagesApiDouble,
    failures: list[Fail],
    words: str,
) -> None:
    api.script(*failures, Reply.text("working again"))
    box = tmp_path / "box"
    with serve_claude(box, claude) as served, EventStream(served.client) as events:
        send(served.client, "hello", "m-1")
        (error,) = events.wait_for_name("turn-error")
        events.wait_for_name("done")
        failed = bootstrap(served.client)
        send(served.client, "again", "m-2")
        texts = events.wait_for_name("turn-text", count=2)
        replay = history(served.client)
        names = events.names()
    said = error.data["error"]
    assert isinstance(said, str)
    assert words in said
    assert error.data["subtype"] == "success"
    # The error event comes beside the failed turn's result message, before its done.
    results = [
        event for event in events.named("message") if event.data["message"]["type"] == "result"
    ]
    assert results[0].seq == error.seq - 1
    assert results[0].data["message"]["is_error"] is True
    assert names.index("turn-error") < names.index("done")
    assert len(events.named("turn-error")) == 1
    # Not busy once the failed turn ended; the chat's CLI stays up for the next.
    assert failed["status"]["busy"] is False
    assert failed["status"]["phase"] == "ready"
    # The failed turn's text is the CLI's words too; the next turn is the model's.
    assert words in texts[0].data["text"]
    assert texts[-1].data == {"text": "working again"}
    assert len(api.message_requests) == len(failures) + 1
    # The failed text went again with the next (the CLI joins the two user turns).
    assert sent(api)[-1] == ["hello", "again"]
    # The replay leaves the CLI's words out (a synthetic turn, not the model's):
    # the live turn-error event is where a person learns of the failure.
    assert shown(replay) == [
        ("user", "hello"),
        ("user", "again"),
        ("assistant", "working again"),
    ]
    assert words not in json.dumps(replay)


def test_stop_mid_stream_over_http(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble
) -> None:
    hold = threading.Event()
    api.script(Reply((Text("an answer that is never finished", hold=hold),)), Reply.text("later"))
    box = tmp_path / "box"
    try:
        with serve_claude(box, claude) as served, EventStream(served.client) as events:
            send(served.client, "long", "m-1")
            api.wait_for_messages(1, timeout=WAIT_S)
            (session,) = events.wait_for_name("session-id")
            (pid,) = claude_processes(claude.config)
            busy = bootstrap(served.client)["status"]
            stopped = ok(served.client.request("POST", "/api/chat/stop", json_body={}))
            # Answered once the run is closed: its CLI has gone already.
            left = claude_processes(claude.config)
            hold.set()
            (close,) = events.wait_for_name("close")
            idle = bootstrap(served.client)
            send(served.client, "after the stop", "m-2")
            (text,) = events.wait_for_name("turn-text")
            (new_pid,) = claude_processes(claude.config)
            replay = history(served.client)
            names = events.names()
    finally:
        hold.set()
    assert busy["busy"] is True
    assert stopped == {"ok": True, "status": IDLE}
    assert left == []
    assert close.data == {"code": 0}
    assert idle["status"] == IDLE
    assert idle["sessionId"] == session.data["sessionId"]
    assert "turn-error" not in names
    assert text.data == {"text": "later"}
    assert new_pid != pid
    # The next turn resumed the same session in a fresh CLI: no new session announced.
    assert len(events.named("session-id")) == 1
    assert replay["sessionId"] == session.data["sessionId"]
    assert sent(api)[-1][0] == "long"
    assert sent(api)[-1][-1] == "after the stop"
    assert shown(replay)[0] == ("user", "long")
    assert shown(replay)[-2:] == [("user", "after the stop"), ("assistant", "later")]


def test_a_permission_request_answered_over_http(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble
) -> None:
    box = tmp_path / "box"
    note = box / "note.txt"
    api.script(
        # acceptEdits: a file written in the box goes without asking…
        Reply((ToolUse("Write", {"file_path": str(note), "content": "hi\n"}),)),
        # …a command that is not a file operation does not.
        Reply(
            (
                ToolUse(
                    "Bash",
                    {"command": "python3 -c \"open('asked.txt', 'w')\"", "description": "Create"},
                ),
            )
        ),
        Reply.text("both done"),
    )
    with (
        serve_claude(box, claude, ["--permission-mode", "acceptEdits"]) as served,
        EventStream(served.client) as events,
    ):
        send(served.client, "write, then touch", "m-1")
        (asked,) = events.wait_for_name("permission-request")
        request = asked.data["request"]
        assert request["toolName"] == "Bash"
        assert note.read_text() == "hi\n"
        assert bootstrap(served.client)["permissions"] == [request]
        answer = served.client.request(
            "POST", f"/api/chat/permissions/{request['id']}", json_body={"decision": "allow"}
        )
        assert ok(answer) == {"ok": True, "id": request["id"], "decision": "allow"}
        events.wait_for_name("turn-text")
        (ended,) = events.named("permission-ended")
        assert ended.data == {"id": request["id"], "how": "answered", "decision": "allow"}
        listed = ok(served.client.request("GET", "/api/chat/permissions"))
        assert [d["answeredBy"] for d in listed["decisions"]] == ["page"]
        errors = served.log.read_text()
    assert (box / "asked.txt").exists()
    assert len(events.named("permission-request")) == 1
    assert "bbx: permission mode acceptEdits: Claude Code edits files in the box" in errors


def test_bypass_permissions_needs_its_own_flag(tmp_path: Path) -> None:
    refused = subprocess.run(
        [
            *(sys.executable, "-m", "beebox_impl", "serve", "--box", str(tmp_path / "box")),
            *("--engine", "claude", "--permission-mode", "bypassPermissions", "--port", "0"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode == 2
    assert "--dangerously-bypass-permissions" in refused.stderr
