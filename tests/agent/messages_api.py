"""A scriptable double of the Anthropic Messages API, for running the real Claude Code offline.

Claude Code (the CLI the ``claude`` extra ships) talks to whatever
``ANTHROPIC_BASE_URL`` names. Pointed at this server on 127.0.0.1 it runs for
real — it streams, runs tools, writes its transcript — with every model answer
decided by the test. Standard library only: a `ThreadingHTTPServer` in a
daemon thread.

Scripting. Each ``POST /v1/messages`` takes the next answer a test queued with
`MessagesApiDouble.script` (first in, first out):

- `Reply` — a streamed assistant message of `Text`, `Thinking` and `ToolUse`
  blocks, in the Messages API's Server-Sent Events (``message_start``,
  ``content_block_start`` / ``content_block_delta`` / ``content_block_stop``,
  ``message_delta``, ``message_stop``). A `Text` goes out as many small deltas,
  with a delay before each if asked, and can stop half-way until a test's
  ``threading.Event`` is set (`Text.hold`), so a turn can be stopped mid-stream.
- `Fail` — an error status with the API's error body (429 with ``retry-after``,
  500, 529 overloaded, 401, …).
- `Drop` — the stream starts, sends part of a text, and the connection is cut (a
  request that is not streamed gets the start of its body, then the cut).
- `Garbled` — a ``200`` whose body is not the API's (event lines that are not JSON).

`MessagesApiDouble.script_for` queues answers for the requests a predicate picks
out (a sub-agent's, told from the main agent's by the prompt it was given): such a
request takes the next of those before anything `script` queued, so a test scripts
two conversations that interleave however the CLI orders them.

A request with nothing scripted is answered by the double's ``fallback`` answer
(by default a short text) and counted in `MessagesApiDouble.unscripted`, so a
test can insist that the CLI asked exactly what it scripted. A request that is
not to ``/v1/messages`` (token counting, anything else) gets a small JSON answer.

Recording. Every request is kept (`Recorded`: path, headers, JSON body), in
order, so a test asserts what the CLI sent: the photo's bytes, how many messages
a resumed session carries, the system prompt. `wait_for` blocks until a
condition on the requests holds.
"""

from __future__ import annotations

import base64
import itertools
import json
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeAlias

__all__ = [
    "Answer",
    "Drop",
    "Fail",
    "Garbled",
    "MessagesApiDouble",
    "Recorded",
    "Reply",
    "Text",
    "Thinking",
    "ToolUse",
]

# How long a held text waits for its release before it gives up and finishes.
HOLD_LIMIT_S = 60.0

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@dataclass(frozen=True)
class Text:
    """A text block, streamed as ``pieces`` deltas (default: about one a word).

    ``delay`` seconds pass before each delta. With ``hold`` the stream sends the
    first half of the deltas, then waits until the event is set (at most
    `HOLD_LIMIT_S`), then sends the rest: a test sees the turn mid-stream for as
    long as it likes.
    """

    text: str
    pieces: int | None = None
    delay: float = 0.0
    hold: threading.Event | None = None

    def deltas(self) -> list[str]:
        if self.pieces is None:
            words = self.text.split(" ")
            return [word if i == 0 else " " + word for i, word in enumerate(words)]
        count = max(1, min(self.pieces, len(self.text)))
        size = -(-len(self.text) // count)
        return [self.text[at : at + size] for at in range(0, len(self.text), size)]


@dataclass(frozen=True)
class Thinking:
    """A thinking block (streamed as one ``thinking_delta`` and a ``signature_delta``)."""

    thinking: str
    signature: str = "c2lnbmF0dXJl"


_tool_ids = itertools.count(1)


@dataclass(frozen=True)
class ToolUse:
    """A ``tool_use`` block: the model asks the CLI to run ``name`` with ``input``."""

    name: str
    input: dict[str, Any]
    id: str = field(default_factory=lambda: f"toolu_double_{next(_tool_ids):04d}")


Block: TypeAlias = Text | Thinking | ToolUse


@dataclass(frozen=True)
class Reply:
    """A streamed assistant message. ``stop_reason`` defaults to ``tool_use`` when a
    block is one, else ``end_turn``."""

    blocks: tuple[Block, ...]
    stop_reason: str | None = None

    @classmethod
    def text(cls, text: str, **options: Any) -> Reply:
        return cls((Text(text, **options),))

    @property
    def final_stop_reason(self) -> str:
        if self.stop_reason is not None:
            return self.stop_reason
        return "tool_use" if any(isinstance(b, ToolUse) for b in self.blocks) else "end_turn"


@dataclass(frozen=True)
class Fail:
    """An error status with the API's JSON error body (and ``retry-after`` if given)."""

    status: int
    message: str = "the double was told to fail"
    retry_after: float | None = None

    @property
    def error_type(self) -> str:
        return _ERROR_TYPES.get(self.status, "api_error")


@dataclass(frozen=True)
class Drop:
    """The stream starts, sends ``text`` as deltas, then the connection is cut."""

    text: str = "cut off"


@dataclass(frozen=True)
class Garbled:
    """A ``200`` whose body is not what the API sends: ``body`` as it is, under the
    content type a streamed answer has (default: event lines that are not JSON)."""

    body: bytes = b"event: message_start\ndata: {this is not json\n\n"


Answer: TypeAlias = Reply | Fail | Drop | Garbled


@dataclass(frozen=True)
class Recorded:
    """One request the double received."""

    method: str
    path: str
    headers: dict[str, str]
    """Names in lower case."""
    body: Any
    answer: Answer | None
    """What it was answered with (None: not a messages request)."""

    @property
    def api_key(self) -> str | None:
        """The key the client sent (``x-api-key``, or a bearer token)."""
        if "x-api-key" in self.headers:
            return self.headers["x-api-key"]
        scheme, _, token = self.headers.get("authorization", "").partition(" ")
        return token if scheme.lower() == "bearer" else None

    @property
    def is_messages(self) -> bool:
        return self.method == "POST" and self.path.split("?")[0] == "/v1/messages"

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages = self.body.get("messages", []) if isinstance(self.body, dict) else []
        return [m for m in messages if isinstance(m, dict)]

    def system_text(self) -> str:
        """The request's system prompt, its blocks joined."""
        system = self.body.get("system", "") if isinstance(self.body, dict) else ""
        if isinstance(system, str):
            return system
        return "\n".join(b.get("text", "") for b in system if isinstance(b, dict))

    def blocks(self, role: str = "user") -> Iterator[dict[str, Any]]:
        """Every content block of the messages of ``role``, in order."""
        for message in self.messages:
            if message.get("role") != role:
                continue
            content = message.get("content")
            if isinstance(content, str):
                yield {"type": "text", "text": content}
            elif isinstance(content, list):
                yield from (b for b in content if isinstance(b, dict))

    def user_texts(self) -> list[str]:
        """The text blocks of the user messages, without the CLI's system reminders."""
        return [
            str(block.get("text", ""))
            for block in self.blocks("user")
            if block.get("type") == "text"
            and not str(block.get("text", "")).lstrip().startswith("<system-reminder>")
        ]

    def images(self) -> list[bytes]:
        """The decoded bytes of every base64 image in the user messages (top level)."""
        return [
            base64.b64decode(block["source"]["data"])
            for block in self.blocks("user")
            if block.get("type") == "image" and block.get("source", {}).get("type") == "base64"
        ]

    def tool_results(self) -> list[dict[str, Any]]:
        return [block for block in self.blocks("user") if block.get("type") == "tool_result"]


class MessagesApiDouble:
    """The server; a context manager (``with MessagesApiDouble() as api: …``)."""

    def __init__(self, fallback: Answer | None = None) -> None:
        self.fallback: Answer = fallback if fallback is not None else Reply.text("(unscripted)")
        self._lock = threading.Condition()
        self._script: deque[Answer] = deque()
        # `script_for`'s queues, each with the predicate that picks its requests.
        self._picked: list[tuple[Callable[[Recorded], bool], deque[Answer]]] = []
        self._requests: list[Recorded] = []
        self.unscripted = 0
        # Called in the server's thread as each messages request arrives, before it is
        # answered: a test acts on the CLI at that very moment (it waits for the answer).
        self.on_message: Callable[[], None] | None = None
        self._message_ids = itertools.count(1)
        self._server = _QuietServer(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="messages-api-double", daemon=True
        )

    # --- life ---------------------------------------------------------------------

    def __enter__(self) -> MessagesApiDouble:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    # --- the script and the record ----------------------------------------------------

    def script(self, *answers: Answer) -> None:
        """Queue ``answers`` for the next messages requests, in order."""
        with self._lock:
            self._script.extend(answers)

    def script_for(self, picks: Callable[[Recorded], bool], *answers: Answer) -> None:
        """Queue ``answers`` for the messages requests ``picks`` accepts, in order;
        such a request takes them before the answers `script` queued."""
        with self._lock:
            self._picked.append((picks, deque(answers)))

    @property
    def pending(self) -> int:
        """Scripted answers not yet given (`script`'s and `script_for`'s)."""
        with self._lock:
            return len(self._script) + sum(len(queue) for _, queue in self._picked)

    @property
    def requests(self) -> list[Recorded]:
        """Every request so far (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def message_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.is_messages]

    def wait_for(self, condition: Callable[[list[Recorded]], bool], timeout: float = 30) -> None:
        """Block until ``condition(requests)`` holds (AssertionError after ``timeout``)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not condition(self._requests):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"the API double's requests did not reach the condition in {timeout} s "
                        f"({len(self._requests)} received)"
                    )
                self._lock.wait(left)

    def wait_for_messages(self, count: int, timeout: float = 30) -> None:
        """Block until ``count`` messages requests have arrived."""
        self.wait_for(lambda rs: sum(r.is_messages for r in rs) >= count, timeout)

    def _take(self, method: str, path: str, headers: dict[str, str], body: Any) -> Answer | None:
        with self._lock:
            answer: Answer | None = None
            if method == "POST" and path.split("?", maxsplit=1)[0] == "/v1/messages":
                asked = Recorded(method, path, headers, body, None)
                picked = next((q for picks, q in self._picked if q and picks(asked)), None)
                if picked is not None:
                    answer = picked.popleft()
                elif self._script:
                    answer = self._script.popleft()
                else:
                    answer = self.fallback
                    self.unscripted += 1
            self._requests.append(Recorded(method, path, headers, body, answer))
            self._lock.notify_all()
            on_message = self.on_message if answer is not None else None
        if on_message is not None:
            on_message()
        return answer

    # --- the HTTP side -----------------------------------------------------------

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        double = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                double._take("GET", self.path, self._headers(), None)
                self._json(HTTPStatus.NOT_FOUND, _error_body("not_found_error", "no such route"))

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                answer = double._take("POST", self.path, self._headers(), body)
                if answer is None:
                    # Token counting and anything else the CLI may ask on the side.
                    self._json(HTTPStatus.OK, {"input_tokens": 1})
                    return
                model = body.get("model", "claude-double") if isinstance(body, dict) else ""
                streaming = isinstance(body, dict) and body.get("stream") is True
                if isinstance(answer, Fail):
                    self._fail(answer)
                elif isinstance(answer, Garbled):
                    self._garbled(answer)
                elif streaming:
                    self._stream(answer, str(model))
                elif isinstance(answer, Drop):
                    self._cut_short()
                else:
                    self._json(HTTPStatus.OK, double._whole_message(answer, str(model)))

            def _headers(self) -> dict[str, str]:
                return {name.lower(): value for name, value in self.headers.items()}

            def _json(self, status: int, payload: Any, extra: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("request-id", f"req_double_{next(double._message_ids)}")
                for name, value in (extra or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def _fail(self, fail: Fail) -> None:
                extra = {}
                if fail.retry_after is not None:
                    extra["retry-after"] = f"{fail.retry_after:g}"
                    extra["retry-after-ms"] = f"{int(fail.retry_after * 1000)}"
                # x-should-retry is the API's own hint; the CLI reads it.
                extra["x-should-retry"] = "true" if fail.status in (429, 500, 529) else "false"
                self._json(fail.status, _error_body(fail.error_type, fail.message), extra)

            def _garbled(self, garbled: Garbled) -> None:
                self.send_response(HTTPStatus.OK)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(garbled.body)))
                self.end_headers()
                self.wfile.write(garbled.body)

            def _cut_short(self) -> None:
                # A whole-message answer whose body never arrives in full.
                self.send_response(HTTPStatus.OK)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "4096")
                self.end_headers()
                self.wfile.write(b'{"id": "msg_cut", "type": "mess')
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True

            def _stream(self, answer: Reply | Drop, model: str) -> None:
                self.send_response(HTTPStatus.OK)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("request-id", f"req_double_{next(double._message_ids)}")
                self.end_headers()
                events = double._events(answer, model)
                try:
                    for event in events:
                        if event is None:
                            # The Drop: cut the connection with no end to the stream.
                            self.connection.shutdown(socket.SHUT_RDWR)
                            self.close_connection = True
                            return
                        name, data = event
                        payload = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    # The CLI went away (interrupted, stopped, killed): nothing to finish.
                    self.close_connection = True

        return Handler

    # --- answers as events ---------------------------------------------------------

    def _whole_message(self, answer: Reply, model: str) -> dict[str, Any]:
        blocks = answer.blocks
        content: list[dict[str, Any]] = []
        for block in blocks:
            if isinstance(block, Text):
                content.append({"type": "text", "text": block.text})
            elif isinstance(block, Thinking):
                content.append(
                    {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
                )
            else:
                content.append(
                    {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
                )
        return {
            "id": f"msg_double_{next(self._message_ids):04d}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": answer.final_stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 10},
        }

    def _events(
        self, answer: Reply | Drop, model: str
    ) -> Iterator[tuple[str, dict[str, Any]] | None]:
        """The SSE events of a streamed answer; None where a Drop cuts the connection."""
        yield (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": f"msg_double_{next(self._message_ids):04d}",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 1},
                },
            },
        )
        if isinstance(answer, Drop):
            yield _block_start(0, {"type": "text", "text": ""})
            for piece in Text(answer.text).deltas():
                yield _delta(0, {"type": "text_delta", "text": piece})
            yield None
            return
        output_tokens = 0
        for index, block in enumerate(answer.blocks):
            if isinstance(block, Text):
                yield _block_start(index, {"type": "text", "text": ""})
                deltas = block.deltas()
                for at, piece in enumerate(deltas):
                    if block.hold is not None and at == max(1, len(deltas) // 2):
                        block.hold.wait(HOLD_LIMIT_S)
                    if block.delay:
                        time.sleep(block.delay)
                    yield _delta(index, {"type": "text_delta", "text": piece})
                    output_tokens += 1
            elif isinstance(block, Thinking):
                yield _block_start(index, {"type": "thinking", "thinking": "", "signature": ""})
                yield _delta(index, {"type": "thinking_delta", "thinking": block.thinking})
                yield _delta(index, {"type": "signature_delta", "signature": block.signature})
                output_tokens += 1
            else:
                yield _block_start(
                    index, {"type": "tool_use", "id": block.id, "name": block.name, "input": {}}
                )
                yield _delta(
                    index, {"type": "input_json_delta", "partial_json": json.dumps(block.input)}
                )
                output_tokens += 1
            yield "content_block_stop", {"type": "content_block_stop", "index": index}
        yield (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": answer.final_stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": max(1, output_tokens)},
            },
        )
        yield "message_stop", {"type": "message_stop"}


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A CLI killed, stopped or interrupted leaves its connection mid-request: expected.
        error = sys.exc_info()[1]
        if not isinstance(error, (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


def _block_start(index: int, block: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "content_block_start", {
        "type": "content_block_start",
        "index": index,
        "content_block": block,
    }


def _delta(index: int, delta: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}


def _error_body(error_type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}
