"""The `http/exchange` target's browser-like behaviour, against a host of the test's own."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from conformance.targets.http import http_handlers


class _Host(BaseHTTPRequestHandler):
    """Sets two cookies at /login, echoes the Cookie header at /echo, and at /events
    answers an event stream that never ends (until the test is over)."""

    protocol_version = "HTTP/1.1"
    server: _HostServer

    def do_GET(self) -> None:
        if self.path == "/login":
            self.send_response(303)
            self.send_header("Set-Cookie", "first=1; HttpOnly; SameSite=Strict; Path=/")
            self.send_header("Set-Cookie", 'second="a b"; Path=/')
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/echo":
            body = json.dumps({"cookie": self.headers.get("Cookie")}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b": open\n\n")
            self.wfile.flush()
            self.server.done.wait(30)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _HostServer(ThreadingHTTPServer):
    daemon_threads = True
    done = threading.Event()


@pytest.fixture
def host() -> Iterator[str]:
    server = _HostServer(("127.0.0.1", 0), _Host)
    server.done = threading.Event()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.done.set()
        server.shutdown()
        server.server_close()


def test_every_cookie_an_answer_sets_is_sent_with_the_cases_later_requests(host: str) -> None:
    exchange = http_handlers(host, "t")["http/exchange"]
    answers = exchange(
        {"requests": [{"method": "GET", "path": "/echo"}, {"method": "GET", "path": "/login"},
                      {"method": "GET", "path": "/echo"}]}
    )  # fmt: skip
    assert [answer["status"] for answer in answers] == [200, 303, 200]
    assert answers[0]["json"] == {"cookie": None}
    assert answers[2]["json"] == {"cookie": 'first=1; second="a b"'}
    # A case's cookies are its own: the next case starts with none.
    (again,) = exchange({"requests": [{"method": "GET", "path": "/echo"}]})
    assert again["json"] == {"cookie": None}


def test_an_event_stream_is_compared_by_its_head_without_waiting_for_its_end(host: str) -> None:
    started = time.monotonic()
    (answer,) = http_handlers(host, "t")["http/exchange"](
        {"requests": [{"method": "GET", "path": "/events"}]}
    )
    assert answer["status"] == 200
    assert answer["headers"]["content-type"] == "text/event-stream"
    assert time.monotonic() - started < 10
