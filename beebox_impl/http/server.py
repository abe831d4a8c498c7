"""The stdlib HTTP adapter: a `ThreadingHTTPServer` in front of the box's anyio core.

`docs/design.md#design-4` (§4, "Interfaces"); the routes and their answers are
`beebox_impl.http.routes`.

How it runs
-----------

`serve_box` runs inside the host's event loop (asyncio or trio). It runs the
server's accept loop in a worker thread; each connection gets a thread of its own,
and a handler reaches the box through `anyio.from_thread.run` with the loop's token
(`_App.call`) — the box's methods run on its loop, as they would for any embedding
host. The two file reads are the exception: history slices and photos are read in
the handler's own thread (`Box.read_history`, `Box.read_media`; the history service
bounds how many run at once), with no hop through the loop. Leaving `serve_box`
shuts down cleanly: the accept loop stops, idle keep-alive connections are closed,
event streams end at their next poll, requests in flight finish (their threads are
joined), and only then is the box free to close.

What the transport guards (each limit is a field of `HttpLimits`)
-----------------------------------------------------------------

- **Auth.** Every ``/api`` path needs the box token: ``Authorization: Bearer``
  or the HttpOnly cookie ``bbx_token_<port>`` (the port is in the name because
  browsers share cookies across ports). Compared with `hmac.compare_digest`.
  A wrong or missing token is 401 with no detail, checked before the route is
  looked up, so a prober learns nothing of the API. ``GET /?token=…`` (the URL
  ``bbx serve`` prints) sets the cookie and redirects to ``/``. Outside ``/api``
  only the routes marked ``public`` are served (the chat page and its files),
  without the token.
- **Bodies.** A body is read only once its ``Content-Length`` is known to be
  within ``max_body_bytes`` (32 MiB by default, photos included): a bigger one
  is answered 413 before a byte of it is read, and the connection is closed
  after a short bounded drain (so the client can read the answer instead of a
  reset). Chunked bodies are refused (411); a non-JSON body is 415.
- **Headers.** The request line and each header line are at most
  ``max_line_bytes`` (414 / 431), and at most ``max_header_count`` headers (431).
  The request line is read by the standard library; the header fields by
  `parse_fields`, strictly (RFC 9112 §5): a line that is not ``token ":" value``
  (a folded continuation line, whitespace before the colon, a stray CR or NUL) is
  400, where the standard library's e-mail parser would stop at it and drop the
  fields after it. It is kept for what it refuses, not for speed: it costs a tenth
  of that parser's time (~5 against ~70 µs a request here), 2% of the quickest
  request a person makes (a history read, 3.3 ms p50 for one client alone,
  `docs/reliability.md`), too little to keep it for.
- **Slow clients.** A request's line and headers must arrive within
  ``header_timeout`` of the server starting to wait for it (this is also the
  keep-alive idle limit), and its body within ``body_timeout``: deadlines for
  the whole phase, not per read, so a client trickling one byte at a time
  (slowloris) is cut off all the same. Writes time out after ``write_timeout``.
- **Connections.** At most ``max_connections`` at once; more are answered 503.
- **Large bodies.** At most ``max_large_bodies`` requests whose body is over
  ``large_body_bytes`` (a send with photos) are handled at once, from their body
  read to their answer, and at most ``max_large_bodies_held`` such bodies are in
  memory at once, read and waiting for their turn or handled; the others wait
  unread, in their sockets. Each holds several copies of its photos while it is
  handled (the text, the JSON string, the decoded bytes, the transcript line), and
  a body waiting holds its text; the C allocator keeps the high-water mark of what
  requests held at once: bounded here, it cannot step up with the number of
  clients sending photos together (64 clients had ~60 bodies read and waiting,
  20 MiB, before the second bound). In a burst of them, a photo send waits for a
  slot; their throughput does not suffer, as each is handed over on the one loop
  anyway (the load run in `docs/reliability.md`). The body's deadline starts once
  its slot is taken; a client trickling its body holds a slot for at most
  ``body_timeout``.
- **Binding.** 127.0.0.1 by default; any non-loopback address needs
  ``allow_remote=True`` and logs a warning.
"""

from __future__ import annotations

import contextlib
import hmac
import io
import ipaddress
import json
import logging
import math
import re
import select
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from http import HTTPStatus
from http.client import HTTPMessage
from http.cookies import CookieError, SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final, TypeVar
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from beebox_impl.box import Box
from beebox_impl.http.routes import (
    Exchange,
    JsonReply,
    Reply,
    Route,
    StreamReply,
    error_reply,
    find_route,
)
from beebox_spec.errors import BeeboxError, InvalidArgument, Rejection

__all__ = [
    "DEFAULT_HOST",
    "HttpLimits",
    "MalformedFields",
    "RemoteBindRefused",
    "RunningServer",
    "check_host",
    "cookie_name",
    "parse_fields",
    "serve_box",
]

_log = logging.getLogger(__name__)

# A field name is a token (RFC 9110 §5.1, §5.6.2); a value holds no CR, LF or NUL.
_FIELD_NAME: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_FIELD_VALUE_FORBIDDEN: Final = re.compile(r"[\r\n\x00]")

DEFAULT_HOST: Final = "127.0.0.1"
_JSON_TYPE: Final = "application/json"

T = TypeVar("T")


@dataclass(frozen=True)
class HttpLimits:
    """The transport's bounds (see the module doc)."""

    max_body_bytes: int = 32 * 1024 * 1024
    max_line_bytes: int = 8 * 1024
    max_header_count: int = 100
    header_timeout: float = 10.0
    body_timeout: float = 120.0
    write_timeout: float = 30.0
    max_connections: int = 256
    large_body_bytes: int = 64 * 1024
    max_large_bodies: int = 4
    max_large_bodies_held: int = 8
    sse_heartbeat_seconds: float = 15.0
    linger_seconds: float = 2.0

    def __post_init__(self) -> None:
        if self.max_large_bodies < 1:
            raise InvalidArgument("max_large_bodies must be at least 1")
        if self.max_large_bodies_held < self.max_large_bodies:
            raise InvalidArgument("max_large_bodies_held must be at least max_large_bodies")


class RemoteBindRefused(InvalidArgument):
    """A non-loopback address was asked for without ``allow_remote``."""


def cookie_name(port: int) -> str:
    """The auth cookie of the box served on ``port``."""
    return f"bbx_token_{port}"


def check_host(host: str, *, allow_remote: bool) -> None:
    """Raise `RemoteBindRefused` for a non-loopback ``host`` unless ``allow_remote``."""
    if not allow_remote and not _is_loopback(host):
        raise RemoteBindRefused(
            f"refusing to listen on {host}: not a loopback address (allow it explicitly)"
        )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# The login URL's token in a logged request line (``GET /?token=… HTTP/1.1``).
_TOKEN_IN_QUERY: Final = re.compile(r"([?&]token=)[^&\s\"]*")


def _redact_token(message: str) -> str:
    # The token must never reach a log, whatever level the host logs at.
    return _TOKEN_IN_QUERY.sub(r"\1<redacted>", message)


# The interim answer to ``Expect: 100-continue`` (RFC 9110 §10.1.1).
_CONTINUE: Final = b"HTTP/1.1 100 Continue\r\n\r\n"


class MalformedFields(Rejection):
    """A request's header block is not a list of ``name: value`` fields (the message says why)."""


def parse_fields(head: bytes) -> HTTPMessage:
    """The header fields of ``head`` (the lines after the request line, with the blank
    line that ends them), as the `HTTPMessage` the standard library would build.

    Strict where that library's e-mail parser is lenient: every line must be a field
    name (a token), a colon and a value without CR, LF or NUL, else `MalformedFields`.
    Surrounding spaces and tabs are not part of a value. Bytes are ISO-8859-1, as
    the standard library reads them.
    """
    fields = HTTPMessage()
    for raw in head.decode("iso-8859-1").split("\n"):
        line = raw[:-1] if raw.endswith("\r") else raw
        if not line:
            # The blank line that ends the block (or the end of the bytes).
            break
        if line[0] in " \t":
            # obs-fold (RFC 9112 §5.2): refused rather than joined.
            raise MalformedFields("Folded header lines are not accepted")
        name, colon, value = line.partition(":")
        if not colon or _FIELD_NAME.fullmatch(name) is None:
            raise MalformedFields("Malformed header line")
        if _FIELD_VALUE_FORBIDDEN.search(value) is not None:
            raise MalformedFields("Malformed header value")
        fields[name] = value.strip(" \t")
    return fields


class _FieldsFollow(BeeboxError):
    """The standard library's `parse_request` has read the request line and now
    reads the fields: `_Handler._parse_request` parses them itself."""


class _FieldsReader(io.BufferedIOBase):
    """The ``rfile`` handed to the standard library's `parse_request`: it stops it
    where the fields begin (`_FieldsFollow`), so only its request-line rules run."""

    def readable(self) -> bool:
        return True

    def readline(self, size: int | None = -1, /) -> bytes:
        raise _FieldsFollow


_FIELDS_READER: Final = _FieldsReader()


class _DeadlineReader(io.RawIOBase):
    """Socket reads bounded by a deadline for the whole phase, not per read."""

    def __init__(self, connection: socket.socket) -> None:
        self._connection = connection
        self.deadline = math.inf

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        remaining = self.deadline - time.monotonic()
        # The phase's time is up: a slow client is cut off however it trickles.
        if remaining <= 0:
            raise TimeoutError("the client took too long to send its request")
        self._connection.settimeout(remaining)
        return self._connection.recv_into(buffer)


class _App:
    """What every handler thread shares: the box, its loop, the token, the limits."""

    def __init__(self, box: Box, loop: anyio.lowlevel.EventLoopToken, limits: HttpLimits) -> None:
        self.box = box
        self._loop = loop
        self.limits = limits
        self.port = 0
        self._token = box.token.encode("utf-8")
        self.stopping = threading.Event()
        self.large_bodies = threading.BoundedSemaphore(limits.max_large_bodies)
        self.large_bodies_held = threading.BoundedSemaphore(limits.max_large_bodies_held)

    def call(self, function: Callable[..., Coroutine[Any, Any, T]], *args: object) -> T:
        """Run ``function(*args)`` on the box's loop and return its result (from a handler
        thread). One crossing each way: a `BlockingPortal` call waits for the loop twice,
        once to spawn its task and once for the result, and every wake-up of a waiting
        thread is a wait for the interpreter lock (~0.1 ms of the loop's time a send)."""
        return anyio.from_thread.run(function, *args, token=self._loop)

    def call_sync(self, function: Callable[..., T], *args: object) -> T:
        """`call` for a plain function: run on the box's loop, its result returned."""
        return anyio.from_thread.run_sync(function, *args, token=self._loop)

    def token_matches(self, candidate: str) -> bool:
        # Constant time: the comparison must not say how much of a guess was right.
        return hmac.compare_digest(candidate.encode("utf-8"), self._token)

    def login_cookie(self, candidate: str) -> str | None:
        """The ``Set-Cookie`` value that logs a browser in, if ``candidate`` is the token."""
        if not self.token_matches(candidate):
            return None
        return f"{cookie_name(self.port)}={candidate}; HttpOnly; SameSite=Strict; Path=/"

    def authorized(self, authorization: str | None, cookie_header: str | None) -> bool:
        if authorization is not None:
            scheme, _, credentials = authorization.partition(" ")
            return scheme.lower() == "bearer" and self.token_matches(credentials.strip())
        if cookie_header is None:
            return False
        cookies: SimpleCookie = SimpleCookie()
        try:
            cookies.load(cookie_header)
        except CookieError:
            return False
        morsel = cookies.get(cookie_name(self.port))
        return morsel is not None and self.token_matches(morsel.value)


class _Server(ThreadingHTTPServer):
    """The threading server with a connection cap and a registry for a clean shutdown."""

    daemon_threads = False
    block_on_close = True
    allow_reuse_address = True
    # socketserver's default backlog of 5 resets a burst of clients.
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], app: _App) -> None:
        self.app = app
        self._lock = threading.Lock()
        self._active = 0
        self.handlers: set[_Handler] = set()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._lock:
            full = self._active >= self.app.limits.max_connections
            if not full:
                self._active += 1
        if full:
            with contextlib.suppress(OSError):
                request.sendall(
                    b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                    b"Connection: close\r\n\r\n"
                )
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._lock:
                self._active -= 1

    def handle_error(self, request: Any, client_address: Any) -> None:
        # socketserver prints the traceback to stderr; a box logs it. A client that
        # went away or stalled mid-request is routine, not an error of the box's.
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError | TimeoutError):
            _log.debug("connection from %s ended: %r", client_address, error)
            return
        _log.error("a request from %s failed", client_address, exc_info=error)

    def close_idle_connections(self) -> None:
        """Shutting down: close connections waiting for their next request, and event
        streams (a stream blocked writing to a client that does not read would hold
        the exit for the write timeout; closed, its write fails and the stream ends)."""
        with self._lock:
            handlers = list(self.handlers)
        for handler in handlers:
            if handler.idle or handler.streaming:
                with contextlib.suppress(OSError):
                    handler.connection.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    server_version = "beebox"
    sys_version = ""
    # Replies are written through a buffer and flushed once they are whole: the
    # head and a small body leave in one send, where two cost a second trip through
    # the socket and the GIL (~0.25 ms a request under load). A larger body is
    # written past the buffer; streams flush each event. Every connection holds
    # one, an event stream's included: kept small.
    wbufsize = 16 * 1024

    def setup(self) -> None:
        super().setup()
        # A reply larger than the write buffer goes out in several writes: without this,
        # Nagle would hold the last ~40 ms.
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.idle = True
        self.streaming = False
        self._linger = False
        # The connection failed or timed out (a write, or a read of the head): what
        # is still buffered for it is owed to no one.
        self._peer_gone = False
        self._reader = _DeadlineReader(self.connection)
        self.rfile = io.BufferedReader(self._reader, 64 * 1024)
        with self.server._lock:
            self.server.handlers.add(self)

    def finish(self) -> None:
        with self.server._lock:
            self.server.handlers.discard(self)
        try:
            if self._peer_gone:
                # Fail the standard library's flushes at once rather than wait
                # `write_timeout` for each on a client that stopped reading.
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)
            elif self._linger:
                self._drain_and_close()
        finally:
            try:
                super().finish()
            except OSError:
                # The client left with part of a reply still buffered: the standard
                # library's `finish` swallows the failed flush, but closing the buffer
                # flushes it again. Nothing is owed to a closed connection.
                self.rfile.close()

    def version_string(self) -> str:
        return self.server_version

    def log_message(self, format: str, *args: Any) -> None:
        # Every reply logs its request line: formatted (and redacted) only when kept.
        if _log.isEnabledFor(logging.DEBUG):
            _log.debug("%s %s", self.address_string(), _redact_token(format % args))

    def log_error(self, format: str, *args: Any) -> None:
        _log.info("%s %s", self.address_string(), _redact_token(format % args))

    # --- Reading the request ---------------------------------------------------------

    def handle_one_request(self) -> None:
        limits = self.server.app.limits
        self._reader.deadline = time.monotonic() + limits.header_timeout
        self.idle = True
        self._body_unread = False
        self._expect_continue = False
        try:
            line = self.rfile.readline(limits.max_line_bytes + 1)
            self.idle = False
            if not line:
                self.close_connection = True
                return
            self.raw_requestline = line
            self.requestline = line[:200].decode("latin-1").rstrip("\r\n")
            if len(line) > limits.max_line_bytes:
                self.requestline = self.request_version = self.command = ""
                self.send_error(HTTPStatus.REQUEST_URI_TOO_LONG)
                return
            if not line.endswith(b"\n"):
                # The connection ended mid-line: a request cut short is not run.
                self.close_connection = True
                return
            head = self._read_head(limits)
            if head is None:
                return
            if not self._parse_request(head):
                return
            self._dispatch()
            self.wfile.flush()
        except TimeoutError as error:
            self.log_error("request timed out: %r", error)
            self.close_connection = self._peer_gone = True
        except (ConnectionError, BrokenPipeError):
            self.close_connection = self._peer_gone = True

    def _read_head(self, limits: HttpLimits) -> bytes | None:
        lines: list[bytes] = []
        while True:
            line = self.rfile.readline(limits.max_line_bytes + 1)
            if len(line) > limits.max_line_bytes:
                self._early_error(431, "Header line too long")
                return None
            if not line.endswith(b"\n"):
                # The connection ended before the blank line that ends the head: a
                # request cut short is not run (RFC 9112 §8), whatever it asked.
                self.close_connection = True
                return None
            lines.append(line)
            if line in (b"\r\n", b"\n"):
                return b"".join(lines)
            if len(lines) > limits.max_header_count:
                self._early_error(431, "Too many headers")
                return None

    def _parse_request(self, head: bytes) -> bool:
        """`parse_request` with the fields of ``head`` parsed by `parse_fields`; False
        when the request was refused (its answer sent)."""
        real, self.rfile = self.rfile, _FIELDS_READER
        try:
            # The request line: the standard library's rules, its answers to a bad one.
            # It returns only when it refused the line; a good one goes on to the fields.
            self.parse_request()
            return False
        except _FieldsFollow:
            pass
        finally:
            self.rfile = real
        try:
            self.headers = parse_fields(head)
        except MalformedFields as error:
            self.close_connection = True
            self._send_reply(error_reply(400, str(error)))
            return False
        # What the standard library does with the fields once it has them (this
        # server speaks HTTP/1.1, so its protocol-version conditions always hold).
        connection = self.headers.get("Connection", "").lower()
        if connection == "close":
            self.close_connection = True
        elif connection == "keep-alive":
            self.close_connection = False
        # Whatever the request declares a body by, every length it gives included:
        # `_send_reply` closes the connection when it answers without having read it.
        self._body_unread = self.headers.get("Transfer-Encoding") is not None or any(
            length.strip() != "0" for length in self.headers.get_all("Content-Length") or ()
        )
        # Said (and flushed) once the body will be read (`_read_body`): a request
        # refused on its head gets its answer instead, and never sends the body. An
        # HTTP/1.0 client cannot read an interim answer (RFC 9110 §10.1.1).
        self._expect_continue = (
            self.headers.get("Expect", "").lower() == "100-continue"
            and self.request_version >= "HTTP/1.1"
        )
        return True

    def _early_error(self, status: int, message: str) -> None:
        # Before parse_request the version is unknown: answer as HTTP/1.1 and close.
        self.request_version = "HTTP/1.1"
        self.command = ""
        self.close_connection = True
        self._send_reply(error_reply(status, message))

    def _body_length(self) -> int | JsonReply:
        """The body's length from the request's head, or the refusal (the body unread)."""
        app = self.server.app
        if self.headers.get("Transfer-Encoding") is not None:
            return error_reply(411, "Length Required: send the body with a Content-Length")
        lengths = self.headers.get_all("Content-Length") or []
        if not lengths:
            return 0
        raw = lengths[0].strip()
        if len(set(lengths)) != 1 or not raw.isascii() or not raw.isdigit():
            return error_reply(400, "Invalid Content-Length")
        length = int(raw)
        if length > app.limits.max_body_bytes:
            # Refused on the header alone; the body is never read (only drained on close).
            return error_reply(
                413, f"Request body too large (limit {app.limits.max_body_bytes} bytes)"
            )
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if length and content_type != _JSON_TYPE:
            return error_reply(415, "Content-Type must be application/json")
        return length

    def _read_body(self, length: int) -> bytes:
        self._body_unread = False
        if not length:
            return b""
        if self._expect_continue:
            # The client waits for this before it sends the body: out now, not buffered.
            self._expect_continue = False
            self.wfile.write(_CONTINUE)
            self.wfile.flush()
        self._reader.deadline = time.monotonic() + self.server.app.limits.body_timeout
        body = self.rfile.read(length)
        if len(body) < length:
            raise ConnectionError("the client closed the connection mid-body")
        return body

    def _drain_and_close(self) -> None:
        # A lingering close: say FIN, then swallow what the client still sends, briefly.
        with contextlib.suppress(OSError):
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + self.server.app.limits.linger_seconds
            while (remaining := deadline - time.monotonic()) > 0:
                self.connection.settimeout(remaining)
                if not self.connection.recv(64 * 1024):
                    break

    # --- Routing -------------------------------------------------------------------

    # Every method the routes might name comes to the one dispatcher (405 if not allowed).
    def do_GET(self) -> None:
        self._dispatch_parsed()

    def do_HEAD(self) -> None:
        self._dispatch_parsed()

    def do_POST(self) -> None:
        self._dispatch_parsed()

    def do_PUT(self) -> None:
        self._dispatch_parsed()

    def do_PATCH(self) -> None:
        self._dispatch_parsed()

    def do_DELETE(self) -> None:
        self._dispatch_parsed()

    def do_OPTIONS(self) -> None:
        self._dispatch_parsed()

    def _dispatch(self) -> None:
        method = f"do_{self.command}"
        if not hasattr(self, method):
            self.close_connection = True
            self._send_reply(error_reply(501, f"Unsupported method {self.command}"))
            return
        getattr(self, method)()

    def _dispatch_parsed(self) -> None:
        app = self.server.app
        if app.stopping.is_set():
            self.close_connection = True
        try:
            url = urlsplit(self.path)
        except ValueError:
            # urlsplit drops leading control characters and may then read "//x]"
            # as a host with half an IPv6 bracket (found by the http fuzz target).
            self.close_connection = True
            self._send_reply(error_reply(400, "Malformed request target"))
            return
        path = url.path
        if path != "/api" and not path.startswith("/api/"):
            public = find_route(path)
            # Outside /api only the page is served, and it needs no token.
            if public is None or not public.public:
                self._send_reply(error_reply(404, "Not found"))
                return
            self._serve_route(public, path, url.query)
            return
        if not app.authorized(self.headers.get("Authorization"), self.headers.get("Cookie")):
            self._send_reply(
                JsonReply(401, {"error": "Unauthorized"}, (("WWW-Authenticate", "Bearer"),))
            )
            return
        route = find_route(path)
        if route is None or route.public:
            self._send_reply(error_reply(404, "Not found"))
            return
        self._serve_route(route, path, url.query)

    def _serve_route(self, route: Route, path: str, query: str) -> None:
        if self.command not in route.methods:
            allow = (("Allow", ", ".join(route.methods)),)
            self._send_reply(JsonReply(405, {"error": "Method not allowed"}, allow))
            return
        length = self._body_length()
        if isinstance(length, JsonReply):
            self._send_reply(length)
            return
        app = self.server.app
        if length <= app.limits.large_body_bytes:
            self._send_reply(self._run(route, path, query, self._read_body(length)))
            return
        # Both given back before the answer is written. The handling slot is taken
        # once the body is read: a slow client cannot hold it while it trickles its
        # body in or its answer out.
        with app.large_bodies_held:
            body = self._read_body(length)
            with app.large_bodies:
                reply = self._run(route, path, query, body)
                del body
        self._send_reply(reply)

    def _run(self, route: Route, path: str, query: str, body: bytes) -> Reply:
        app = self.server.app
        exchange = Exchange(
            method=self.command,
            path=path,
            query=parse_qs(query, keep_blank_values=True),
            body=body,
            box=app.box,
            call=app.call,
            call_sync=app.call_sync,
            write=self._write_stream,
            stopping=app.stopping.is_set,
            sse_heartbeat_seconds=app.limits.sse_heartbeat_seconds,
            login_cookie=app.login_cookie,
            accept=self.headers.get("Accept", ""),
        )
        try:
            return route.handler(exchange)
        except Rejection as error:
            # The one place a refusal becomes an answer: its own status and words.
            return error_reply(error.status_hint, error.public_message)
        except Exception:
            _log.exception("%s %s failed", self.command, path)
            return error_reply(500, "Internal error")

    # --- Writing -------------------------------------------------------------------

    def _write_stream(self, data: bytes) -> None:
        self.wfile.write(data)
        self.wfile.flush()

    def _send_reply(self, reply: Reply) -> None:
        if self._body_unread:
            # Answered without reading the body the request declared: on this
            # connection its bytes would be read as the next request. Close, after a
            # lingering drain, so the answer is not lost to a reset.
            self.close_connection = True
            self._linger = True
        self.connection.settimeout(self.server.app.limits.write_timeout)
        if isinstance(reply, StreamReply):
            self._send_stream(reply)
            return
        if isinstance(reply, JsonReply):
            # ASCII JSON (non-ASCII escaped, as `JSON.stringify` escapes half a surrogate
            # pair): a transcript's "\ud800" is answered, not an encoding error.
            data = json.dumps(reply.body, separators=(",", ":")).encode("ascii")
            headers: tuple[tuple[str, str], ...] = (
                ("Content-Type", "application/json; charset=utf-8"),
                ("Cache-Control", "no-store"),
                ("X-Content-Type-Options", "nosniff"),
                *reply.headers,
            )
        else:
            data = reply.data
            headers = (("Content-Type", reply.content_type), *reply.headers)
        self.send_response(reply.status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self.wfile.flush()

    def _peer_closed(self) -> bool:
        """Has the client closed its end? (Read without taking anything: a stream's
        client sends nothing, so a readable socket that gives no byte is its end.)"""
        # `poll`, not `select`: a process of many connections has descriptors past
        # `select`'s 1024. Only a readable socket is read: the connection's timeout
        # would make `recv` wait for bytes that do not come.
        poller = select.poll()
        poller.register(self.connection, select.POLLIN)
        try:
            if not poller.poll(0):
                return False
            return not self.connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            return True

    def _send_stream(self, reply: StreamReply) -> None:
        self.close_connection = True
        self.streaming = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Accel-Buffering", "no")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.flush()
        app = self.server.app
        exchange = Exchange(
            method=self.command,
            path=urlsplit(self.path).path,
            query={},
            body=b"",
            box=app.box,
            call=app.call,
            call_sync=app.call_sync,
            write=self._write_stream,
            stopping=app.stopping.is_set,
            sse_heartbeat_seconds=app.limits.sse_heartbeat_seconds,
            login_cookie=app.login_cookie,
            peer_closed=self._peer_closed,
        )
        try:
            reply.stream(exchange)
        except (ConnectionError, TimeoutError, OSError):
            # The client went away or stopped reading: the stream is over.
            self._peer_gone = True
            return
        except Exception:
            # The head is out, so no error answer can follow: logged, and the
            # connection closes (the client reconnects).
            _log.exception("%s %s failed mid-stream", self.command, exchange.path)


@dataclass(frozen=True)
class RunningServer:
    """A server `serve_box` started: where it listens, and the URL that logs a browser in."""

    host: str
    port: int
    token: str

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def login_url(self) -> str:
        """The URL ``bbx serve`` prints: opening it sets the auth cookie."""
        return f"{self.base_url}/?token={self.token}"


@asynccontextmanager
async def serve_box(
    box: Box,
    *,
    host: str = DEFAULT_HOST,
    port: int = 0,
    limits: HttpLimits | None = None,
    allow_remote: bool = False,
    on_stop: Callable[[], None] | None = None,
) -> AsyncIterator[RunningServer]:
    """Serve ``box`` over HTTP on ``host:port`` (0: any free port) until the block exits.

    Refuses a non-loopback ``host`` unless ``allow_remote`` (then warns: the token
    is the only guard, and it travels in clear text without TLS in front).
    """
    check_host(host, allow_remote=allow_remote)
    if not _is_loopback(host):
        _log.warning(
            "listening on %s: anyone who can reach it and has the token can use this box;"
            " put TLS in front of it",
            host,
        )
    limits = limits if limits is not None else HttpLimits()
    app = _App(box, anyio.lowlevel.current_token(), limits)
    server = await anyio.to_thread.run_sync(_Server, (host, port), app)
    app.port = int(server.server_address[1])
    running = RunningServer(host, app.port, box.token)
    async with anyio.create_task_group() as task_group:
        # Its own limiter: the accept loop must not hold one of the box's worker tokens.
        task_group.start_soon(
            partial(
                anyio.to_thread.run_sync,
                server.serve_forever,
                0.1,
                limiter=anyio.CapacityLimiter(1),
            )
        )
        try:
            yield running
        finally:
            with anyio.CancelScope(shield=True):
                app.stopping.set()
                if on_stop is not None:
                    on_stop()
                await anyio.to_thread.run_sync(server.shutdown)
                server.close_idle_connections()
                # Joins every handler thread: requests in flight finish first.
                await anyio.to_thread.run_sync(server.server_close)
