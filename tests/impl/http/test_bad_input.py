"""Bad input gets a clear error and loses nothing; auth; bounds; the OpenAPI document."""

from __future__ import annotations

import contextlib
import http.client
import io
import socket
import threading
import time
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from openapi_spec_validator import validate

from beebox_impl.box import Box
from beebox_impl.http.openapi import openapi_document
from beebox_impl.http.routes import ROUTES
from beebox_impl.http.server import (
    HttpLimits,
    MalformedFields,
    RemoteBindRefused,
    cookie_name,
    parse_fields,
    serve_box,
)
from beebox_impl.services.send import LoopRunner, Sender, SendOutcome, SendRequest
from tests.impl.http.support import served_box, wait_until

pytestmark = pytest.mark.anyio

SEND = "/api/chat/send"


async def _bus_rows(box: Box) -> int:
    row = await box._database.read(
        lambda c: c.execute("SELECT count(*) FROM bus_events").fetchone()
    )
    return int(row[0])


async def test_malformed_json_and_fields_are_400_naming_the_problem(tmp_path: Path) -> None:
    async with served_box(tmp_path) as (box, client, _):
        cases = [
            (b"{not json", "malformed JSON"),
            (b'{"message": NaN}', "malformed JSON"),
            (b"[1]", "the request body must be a JSON object"),
            (b"{}", 'missing field "message"'),
            (b'{"message": "x", "mood": 1}', 'unexpected field "mood"'),
            (b'{"message": 3}', '"message" must be a string'),
            (b'{"message": ""}', '"message" must not be empty'),
            (b'{"message": "x", "messageId": ""}', '"messageId" must be a string'),
            (b'{"message": "x", "images": [{"mediaType": "image/png"}]}', '"images[0].data"'),
            (
                b'{"message": "x", "images": [{"mediaType": "text/html", "data": "QQ=="}]}',
                '"images[0].mediaType" must be one of',
            ),
            (
                b'{"message": "x", "images": [{"mediaType": "image/png", "data": "!!"}]}',
                '"images[0].data" is not valid base64',
            ),
        ]
        for body, message in cases:
            answer = await client.call(
                "POST", SEND, body=body, headers={"Content-Type": "application/json"}
            )
            assert answer.status == 400, body
            assert message in answer.json()["error"], (body, answer.json())
        # Nothing was recorded by any of them.
        assert await _bus_rows(box) == 0
        query = await client.call("GET", "/api/chat/history?tail=1&offset=2")
        assert query.status == 400
        assert "tail" in query.json()["error"]
        unknown = await client.call("GET", "/api/chat/bootstrap?colour=red")
        assert (unknown.status, unknown.json()) == (
            400,
            {"error": 'unexpected query parameter "colour"'},
        )
        too_many = await client.call("GET", "/api/chat/bootstrap?tail=0")
        assert too_many.status == 400


async def test_auth_status_codes(tmp_path: Path) -> None:
    async with served_box(tmp_path) as (box, client, running):
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic x"}):
            answer = await client.call("GET", "/api/chat/bootstrap", headers=headers, auth=False)
            assert (answer.status, answer.json()) == (401, {"error": "Unauthorized"})
        # Unknown /api paths are 401 too without a token: nothing about the API leaks.
        hidden = await client.call("GET", "/api/nowhere", auth=False)
        assert hidden.status == 401
        sent = await client.call("POST", SEND, json_body={"message": "x"}, auth=False)
        assert sent.status == 401
        assert await _bus_rows(box) == 0
        # The printed URL logs a browser in with an HttpOnly cookie, then redirects.
        login = await client.call("GET", f"/?token={box.token}", auth=False)
        assert login.status == 303
        assert login.headers["location"] == "/"
        cookie = login.headers["set-cookie"]
        assert cookie.startswith(f"{cookie_name(running.port)}={box.token};")
        assert "HttpOnly" in cookie
        assert "SameSite=Strict" in cookie
        with_cookie = await client.call(
            "GET",
            "/api/chat/bootstrap",
            auth=False,
            headers={"Cookie": f"{cookie_name(running.port)}={box.token}"},
        )
        assert with_cookie.status == 200
        other_port = await client.call(
            "GET", "/api/chat/bootstrap", auth=False, headers={"Cookie": f"bbx_token_1={box.token}"}
        )
        assert other_port.status == 401
        wrong_login = await client.call("GET", "/?token=nope", auth=False)
        assert wrong_login.status == 401
        page = await client.call("GET", "/", auth=False)
        assert page.status == 200
        assert page.headers["content-type"].startswith("text/html")


async def test_unknown_route_404_and_wrong_method_405(tmp_path: Path) -> None:
    async with served_box(tmp_path) as (_, client, _):
        missing = await client.call("GET", "/api/chat/nothing")
        assert (missing.status, missing.json()) == (404, {"error": "Not found"})
        outside = await client.call("GET", "/favicon.ico")
        assert outside.status == 404
        wrong = await client.call("GET", SEND)
        assert (wrong.status, wrong.json()) == (405, {"error": "Method not allowed"})
        assert wrong.headers["allow"] == "POST"
        media = await client.call("POST", "/api/session-media/a/b/0", json_body={})
        assert media.status == 405
        assert media.headers["allow"] == "GET, HEAD"
        delete = await client.call("DELETE", "/api/chat/history")
        assert delete.status == 405


@pytest.mark.parametrize(
    "ref",
    [
        "..%2F..%2Fetc/u/0",
        "s/../0",
        "s/u/0/1",
        "s/u",
        "s.1/u/0",
        "s/u/1000",
        "s/u/-1",
        "s/u/01x",
        "",
        "s//0",
        "%2e%2e/u/0",
        "s/u/0%2F",
    ],
)
async def test_malformed_media_refs_are_one_400(tmp_path: Path, ref: str) -> None:
    async with served_box(tmp_path) as (_, client, _):
        answer = await client.call("GET", f"/api/session-media/{ref}")
        assert (answer.status, answer.json()) == (400, {"error": "Malformed media reference"})


async def test_an_oversized_body_is_413_before_it_is_read(tmp_path: Path) -> None:
    limits = HttpLimits(max_body_bytes=1024)
    async with served_box(tmp_path, limits=limits) as (box, client, _):
        # Claim 1 GiB and send none of it: the answer comes on the header alone.
        head = (
            f"POST {SEND} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {box.token}\r\n"
            "Content-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n"
        ).encode()
        started = time.monotonic()
        answer = await anyio.to_thread.run_sync(client.raw, head)
        assert answer.startswith(b"HTTP/1.1 413 ")
        assert b"Request body too large" in answer
        assert time.monotonic() - started < 5
        # A client that sends the whole big body still reads the 413.
        big = await client.call(
            "POST",
            SEND,
            body=b'{"message":"' + b"x" * 5000 + b'"}',
            headers={"Content-Type": "application/json"},
        )
        assert big.status == 413
        assert await _bus_rows(box) == 0
        chunked = (
            f"POST {SEND} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {box.token}\r\n"
            "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        ).encode()
        assert (await anyio.to_thread.run_sync(client.raw, chunked)).startswith(b"HTTP/1.1 411 ")
        form = await client.call(
            "POST", SEND, body=b"message=x", headers={"Content-Type": "text/plain"}
        )
        assert form.status == 415


async def test_header_bounds(tmp_path: Path) -> None:
    limits = HttpLimits(max_line_bytes=256, max_header_count=10)
    async with served_box(tmp_path, limits=limits) as (_, client, _):
        long_line = b"GET /api/" + b"a" * 300 + b" HTTP/1.1\r\n\r\n"
        assert (await anyio.to_thread.run_sync(client.raw, long_line)).startswith(b"HTTP/1.1 414 ")
        long_header = b"GET / HTTP/1.1\r\nX-Big: " + b"a" * 300 + b"\r\n\r\n"
        assert (await anyio.to_thread.run_sync(client.raw, long_header)).startswith(
            b"HTTP/1.1 431 "
        )
        many = b"GET / HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(20)) + b"\r\n"
        assert (await anyio.to_thread.run_sync(client.raw, many)).startswith(b"HTTP/1.1 431 ")


@pytest.mark.parametrize(
    ("head", "why"),
    [
        (b"X-Folded: one\r\n two\r\n\r\n", "Folded header lines are not accepted"),
        (b"\tX-Leading: tab\r\n\r\n", "Folded header lines are not accepted"),
        (b"No colon here\r\n\r\n", "Malformed header line"),
        (b"X-Space : before the colon\r\n\r\n", "Malformed header line"),
        (b": no name\r\n\r\n", "Malformed header line"),
        (b"X-(Paren): not a token\r\n\r\n", "Malformed header line"),
        (b"X-Bare: carriage\rreturn\r\n\r\n", "Malformed header value"),
        (b"X-Nul: a\x00b\r\n\r\n", "Malformed header value"),
    ],
)
def test_malformed_header_fields_are_refused(head: bytes, why: str) -> None:
    with pytest.raises(MalformedFields, match=f"^{why}$"):
        parse_fields(head)


def test_header_fields_read_as_the_standard_library_reads_them() -> None:
    head = (
        b"Host: 127.0.0.1\r\nContent-Length:  12 \r\nX-Twice: a\n"
        b"x-twice: b\r\nX-Latin: caf\xe9\r\nX-Empty:\r\n\r\nnot: a field\r\n"
    )
    fields = parse_fields(head)
    standard = http.client.parse_headers(io.BufferedReader(io.BytesIO(head)))
    assert type(fields) is type(standard)
    # Values without their surrounding spaces; names matched without regard to case.
    assert fields.items() == [(k, v.strip()) for k, v in standard.items()]
    assert fields.get_all("X-TWICE") == ["a", "b"]
    assert fields.get("content-length") == "12"
    assert fields.get("X-Latin") == "café"
    assert fields.get("X-Empty") == ""
    assert fields.get("not") is None


async def test_a_malformed_header_is_400_and_hides_nothing_behind_it(tmp_path: Path) -> None:
    async with served_box(tmp_path) as (box, client, _):
        # The e-mail parser of the standard library stopped at the bad line and read
        # the fields after it as a body: this send would have been refused 401.
        body = b'{"message": "after a bad line"}'
        request = (
            b"POST /api/chat/send HTTP/1.1\r\nX-Bad header\r\n"
            + f"Authorization: Bearer {client.token}\r\n".encode()
            + b"Content-Type: application/json\r\n"
            + b"Content-Length: %d\r\n\r\n" % len(body)
            + body
        )
        answer = await anyio.to_thread.run_sync(client.raw, request)
        assert answer.startswith(b"HTTP/1.1 400 ")
        assert answer.endswith(b'{"error":"Malformed header line"}')
        assert await _bus_rows(box) == 0
        # The same request with a good line there is served (and closed, for `raw`).
        good = request.replace(b"X-Bad header", b"Connection: close")
        answer = await anyio.to_thread.run_sync(client.raw, good)
        assert answer.startswith(b"HTTP/1.1 200 ")
        assert await _bus_rows(box) == 1


async def test_a_request_target_urlsplit_refuses_is_400(tmp_path: Path) -> None:
    # Found by the http fuzz target: urlsplit drops the leading control character,
    # reads "//x]" as a host and raises; the handler raised and answered nothing.
    async with served_box(tmp_path) as (_, client, _):
        for target in (b"\x01//x]y", b"\x00\x00//\xbb]TP"):
            answer = await anyio.to_thread.run_sync(
                client.raw, b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n"
            )
            assert answer.startswith(b"HTTP/1.1 400 "), answer
            assert answer.endswith(b'{"error":"Malformed request target"}')


async def test_a_slow_client_cannot_hold_a_worker(tmp_path: Path) -> None:
    limits = HttpLimits(header_timeout=0.5)
    async with served_box(tmp_path, limits=limits) as (_, client, _):

        def trickle() -> float:
            started = time.monotonic()
            with socket.create_connection((client.host, client.port), timeout=5) as sock:
                # One byte every 0.1 s never trips a per-read timeout, only the deadline.
                for byte in b"GET /api/chat/bootstrap HTTP/1.1\r\nX-Slow: " + b"a" * 100:
                    try:
                        sock.sendall(bytes([byte]))
                    except OSError:
                        break
                    time.sleep(0.1)
                    sock.setblocking(False)
                    try:
                        if sock.recv(1) == b"":
                            break
                    except BlockingIOError:
                        pass
                    except OSError:
                        break
                    finally:
                        sock.setblocking(True)
            return time.monotonic() - started

        elapsed = await anyio.to_thread.run_sync(trickle)
        assert elapsed < 3


async def test_large_bodies_are_handled_a_few_at_a_time(tmp_path: Path) -> None:
    # Each send holds the hand-over a while; the bound shows as how many overlap.
    limits = HttpLimits(large_body_bytes=1024, max_large_bodies=2)
    async with served_box(tmp_path, limits=limits) as (box, client, _):
        overlap = {"now": 0, "large": 0, "small": 0}
        lock = threading.Lock()
        send = box.send_from_thread

        def slow_send(
            request: SendRequest, run_on_loop: LoopRunner, sender: Sender | None = None
        ) -> SendOutcome:
            kind = "large" if len(request.message) > 1024 else "small"
            with lock:
                overlap["now"] += 1
                overlap[kind] = max(overlap[kind], overlap["now"])
            time.sleep(0.2)
            with lock:
                overlap["now"] -= 1
            return send(request, run_on_loop, sender)

        box.send_from_thread = slow_send  # type: ignore[method-assign]
        limiter = anyio.CapacityLimiter(8)

        async def post(text: str) -> None:
            answer = await client.call(
                "POST", SEND, limiter, json_body={"message": text}, timeout=30
            )
            assert answer.status == 200

        for text in ("x" * 4096, "x"):
            async with anyio.create_task_group() as senders:
                for _ in range(6):
                    senders.start_soon(post, text)
        # Six large sends never overlapped more than two at once; six small ones did.
        assert overlap["large"] == 2
        assert overlap["small"] > 2
        assert await _bus_rows(box) == 12


def test_the_large_body_bound_must_admit_one() -> None:
    with pytest.raises(ValueError, match="max_large_bodies"):
        HttpLimits(max_large_bodies=0)
    with pytest.raises(ValueError, match="max_large_bodies_held"):
        HttpLimits(max_large_bodies=4, max_large_bodies_held=3)


@pytest.mark.parametrize("held", [1, 2])
async def test_large_bodies_wait_unread_once_the_held_bound_is_reached(
    tmp_path: Path, held: int
) -> None:
    # A client that stops halfway through a large body holds one slot until its body's
    # deadline. With one slot, the next large send is not read (nor answered) until
    # then; with two, it is answered at once. A small send never waits for either.
    limits = HttpLimits(
        large_body_bytes=1024, max_large_bodies=1, max_large_bodies_held=held, body_timeout=2.0
    )
    async with served_box(tmp_path, limits=limits) as (box, client, _):
        order: list[str] = []
        stalled = threading.Event()

        def stall_halfway() -> None:
            with socket.create_connection((client.host, client.port), timeout=10) as sock:
                sock.sendall(
                    f"POST {SEND} HTTP/1.1\r\nHost: x\r\n"
                    f"Authorization: Bearer {client.token}\r\n"
                    "Content-Type: application/json\r\nContent-Length: 4096\r\n\r\n"
                    '{"message": "'.encode()
                )
                stalled.set()
                # The server gives up on the body at its deadline and closes.
                assert sock.recv(1024) == b""
                order.append("stalled client cut off")

        def post(text: str) -> None:
            answer = client.request("POST", SEND, json_body={"message": text}, timeout=30)
            assert answer.status == 200
            order.append(f"{len(text)}-byte send answered")

        async with anyio.create_task_group() as clients:
            clients.start_soon(anyio.to_thread.run_sync, stall_halfway)
            await anyio.to_thread.run_sync(stalled.wait)
            await anyio.sleep(0.2)  # its head read and its slot taken
            await anyio.to_thread.run_sync(post, "x")
            await anyio.to_thread.run_sync(post, "y" * 4096)
        large_answered = "4096-byte send answered"
        if held == 1:
            assert order == ["1-byte send answered", "stalled client cut off", large_answered]
        else:
            assert order == ["1-byte send answered", large_answered, "stalled client cut off"]
        assert await _bus_rows(box) == 2


async def test_non_loopback_needs_an_explicit_flag(tmp_path: Path) -> None:
    async with Box.open(tmp_path / "box", projects_root=tmp_path / "p") as box:
        with pytest.raises(RemoteBindRefused):
            async with serve_box(box, host="0.0.0.0"):
                pass


async def test_openapi_document_matches_the_route_table(tmp_path: Path) -> None:
    document = openapi_document()
    assert document["openapi"] == "3.1.0"
    paths = document["paths"]
    assert isinstance(paths, dict)
    assert set(paths) == {route.path for route in ROUTES}
    for route in ROUTES:
        operations = paths[route.path]
        assert isinstance(operations, dict)
        assert set(operations) == {method.lower() for method in route.methods}
        for operation in operations.values():
            assert isinstance(operation, dict)
            responses = operation["responses"]
            assert isinstance(responses, dict)
            assert {"401", "405"} <= set(responses)
            assert {str(status) for status in route.responses} <= set(responses)
    async with served_box(tmp_path) as (_, client, _):
        served = await client.call("GET", "/api/openapi.json")
        assert served.status == 200
        assert served.json() == document
        # Every documented operation is routed, and answers a status it documents.
        for route in ROUTES:
            if route.operation_id == "events":
                continue
            path = route.path.replace("{ref}", "s/u/0")
            for method in route.methods:
                body = {"message": "x"} if route.operation_id == "chatSend" else None
                answer = await client.call(method, path, json_body=body)
                operations = paths[route.path]
                assert isinstance(operations, dict)
                operation = operations[method.lower()]
                assert isinstance(operation, dict)
                responses = operation["responses"]
                assert isinstance(responses, dict)
                assert str(answer.status) in responses, (method, path, answer.status)
                assert answer.status != 405


def test_the_openapi_document_is_valid_openapi_3_1() -> None:
    # Against the OpenAPI 3.1 schema itself, not only our own reading of it.
    validate(openapi_document())


# Requests the server answers without reading the body they declare: method, path,
# content type, whether the token is right, the status.
_REFUSED_WITH_A_BODY = (
    ("POST", "/api/nope", "application/json", True, 404),
    ("POST", "/nope", "application/json", True, 404),
    ("POST", "/api/chat/send", "application/json", False, 401),
    ("PUT", "/api/chat/sessions", "application/json", True, 405),
    ("POST", "/api/chat/send", "text/plain", True, 415),
)


@pytest.mark.parametrize(
    "refused", _REFUSED_WITH_A_BODY, ids=lambda case: f"{case[0]} {case[1]} {case[-1]}"
)
async def test_a_body_left_unread_is_never_read_as_the_next_request(
    tmp_path: Path, refused: tuple[str, str, str, bool, int]
) -> None:
    method, path, content_type, right_token, status = refused
    # The lingering close waits for the client's own close this long at most.
    async with served_box(tmp_path, limits=HttpLimits(linger_seconds=0.2)) as (box, client, _):
        body = b'{"message": "GET /api/chat/sessions HTTP/1.1"}'
        authorization = f"Authorization: Bearer {box.token if right_token else 'wrong'}\r\n"
        request = (
            f"{method} {path} HTTP/1.1\r\nHost: x\r\n{authorization}"
            f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        # A second request right behind it on the same connection, as a browser reuses one.
        behind = f"GET /api/chat/sessions HTTP/1.1\r\nHost: x\r\n{authorization}\r\n".encode()
        answer = await anyio.to_thread.run_sync(client.raw, request + behind)
    head, _, _ = answer.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status} ".encode()), answer
    # One answer, then the connection closed: the body's bytes were not taken for a
    # request (they used to be, and were answered a 400 page).
    assert b"\r\nConnection: close" in head
    assert answer.count(b"HTTP/1.1 ") == 1, answer


async def test_expect_100_continue_is_answered_before_the_body_and_only_when_it_is_read(
    tmp_path: Path,
) -> None:
    async with served_box(tmp_path) as (box, client, _):
        body = b'{"message": "continued"}'

        def send_expecting(token: str) -> tuple[bytes, bytes]:
            """The head with ``Expect: 100-continue``: what comes back before the body is
            sent, and then everything after it."""
            head = (
                f"POST /api/chat/send HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                "Content-Type: application/json\r\nExpect: 100-continue\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            ).encode()
            with socket.create_connection((client.host, client.port), timeout=5) as sock:
                sock.sendall(head)
                # The client waits for this before its body; curl gives up after a second.
                first = sock.recv(65536)
                with contextlib.suppress(OSError):
                    sock.sendall(body)
                rest = []
                while chunk := sock.recv(65536):
                    rest.append(chunk)
            return first, b"".join(rest)

        first, rest = await anyio.to_thread.run_sync(send_expecting, box.token)
        assert first == b"HTTP/1.1 100 Continue\r\n\r\n"
        assert rest.startswith(b"HTTP/1.1 200 "), rest
        assert b'"turnId"' in rest
        # Refused on its head: the final answer at once, and no invitation to send the body.
        first, _ = await anyio.to_thread.run_sync(send_expecting, "wrong")
        assert first.startswith(b"HTTP/1.1 401 "), first
        assert b"100 Continue" not in first


async def test_every_content_length_a_request_gives_counts_as_declaring_a_body(
    tmp_path: Path,
) -> None:
    async with served_box(tmp_path, limits=HttpLimits(linger_seconds=0.2)) as (box, client, _):
        authorization = f"Authorization: Bearer {box.token}\r\n"
        # The first length says no body; the second says seven bytes follow, and they do.
        request = (
            f"POST /api/nope HTTP/1.1\r\nHost: x\r\n{authorization}"
            "Content-Length: 0\r\nContent-Length: 7\r\n\r\nGET / H"
        ).encode()
        behind = f"GET /api/chat/sessions HTTP/1.1\r\nHost: x\r\n{authorization}\r\n".encode()
        answer = await anyio.to_thread.run_sync(client.raw, request + behind)
    assert answer.startswith(b"HTTP/1.1 404 "), answer
    assert answer.count(b"HTTP/1.1 ") == 1, answer


async def test_an_http_1_0_client_is_never_sent_100_continue(tmp_path: Path) -> None:
    async with served_box(tmp_path) as (box, client, _):
        body = b'{"message": "from an old client"}'
        request = (
            f"POST /api/chat/send HTTP/1.0\r\nAuthorization: Bearer {box.token}\r\n"
            "Content-Type: application/json\r\nExpect: 100-continue\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        answer = await anyio.to_thread.run_sync(client.raw, request)
    # RFC 9110 §10.1.1: it cannot read an interim answer, so it gets the final one alone.
    assert answer.startswith(b"HTTP/1.1 200 "), answer
    assert b"100 Continue" not in answer


@pytest.mark.parametrize(
    "cut",
    [
        "POST /api/chat/reset HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n",
        "POST /api/chat/reset HTTP/1.1\r\nAuthorization: Bearer {token}\r\nX-Half: ab",
        "POST /api/chat/reset HTTP/1.1",
    ],
    ids=["before the blank line", "mid-field", "mid-request-line"],
)
async def test_a_request_cut_short_is_not_run(tmp_path: Path, cut: str) -> None:
    async with served_box(tmp_path) as (box, client, _):
        sent = await client.call("POST", "/api/chat/send", json_body={"message": "keep me"})
        assert sent.status == 200
        await wait_until(lambda: box.session_id is not None)
        session_id = box.session_id

        def send_cut() -> bytes:
            with socket.create_connection((client.host, client.port), timeout=5) as sock:
                sock.sendall(cut.replace("{token}", box.token).encode())
                # The client's end: the head never gets its blank line.
                sock.shutdown(socket.SHUT_WR)
                return sock.recv(65536)

        answer = await anyio.to_thread.run_sync(send_cut)
        assert answer == b"", "no answer to a request that never arrived whole"
        # And it was not run: a reset would have forgotten the session.
        assert box.session_id == session_id
