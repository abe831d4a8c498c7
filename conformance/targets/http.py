"""The `http` target: `http/exchange` vectors against a live host over HTTP.

``python -m conformance --url URL --token T [PATHS...]`` sends each case's
requests, in order, to the host at ``URL`` with ``Authorization: Bearer T`` and
compares what came back with the case's ``expect`` — one ``{"status", "json"?,
"headers"?}`` per request, of which only the listed JSON keys (of an object; any
other JSON value is compared whole) and the listed headers (names in lower case)
are compared (`docs/conformance.md`, `http/exchange`).

A request is ``{"method", "path", "json"?}``, with three optional keys beyond
the table in `docs/conformance.md`, for what a JSON body cannot say: ``"body"`` (a raw
request body, as a string: malformed JSON), ``"headers"`` (extra request
headers) and ``"auth": false`` (send no token).

``setup`` (all keys optional) prepares the host before the requests:

- ``{"photo": {"mediaType", "data"}}`` — sends one message carrying that photo
  (base64 ``data``), waits until the host's history (``GET
  /api/chat/bootstrap``) shows it stripped with a reference, and binds that
  reference: every ``{photoRef}`` in a request path is replaced by it.

- ``{"idle": true}`` — waits until the host's chat is not busy (``status.busy``
  of ``GET /api/chat/bootstrap`` is false): no turn of an earlier case in flight.

Every ``{token}`` in a request path is replaced by the host's token (the login
URL ``bbx serve`` prints is ``/?token=…``). Within a case the requests behave as
a browser's: a cookie an answer sets (``Set-Cookie``) is sent with the case's
later requests. An answer that is an event stream (``text/event-stream``) never
ends, so its body is not read: only its status and headers are compared.

Hosts keep state between cases (a conformance run is one conversation with a
live box), so a vector expects only what holds on any box: a send's body is
compared only where it cannot depend on the chat being busy. Against someone's
live box (``--url``) the cases that write to it (`exchange_writes`: a reset, a
send, a photo) run only with ``--allow-writes``.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import time
import uuid
from collections.abc import Callable, Mapping
from functools import partial
from http.cookies import SimpleCookie
from typing import Any, Final
from urllib.parse import quote, urlencode, urlsplit

from beebox_impl.transcript.media import MediaMissing
from beebox_spec.entries import MAX_SESSION_ENTRIES
from beebox_spec.js_values import parse_json_object_or_none
from beebox_spec.media import SAFE_ID_RE
from beebox_spec.transcript import PhotoMode
from conformance.targets import HandlerTable
from conformance.targets.transcript_files import case_photo_mode

__all__ = [
    "HttpHost",
    "TranscriptWriter",
    "exchange_writes",
    "http_handlers",
    "project_exchange",
    "served_transcript_handlers",
]

# Writes a session's transcript where the served box reads it: (session id, bytes).
TranscriptWriter = Callable[[str, bytes], None]

# How long a setup waits for the host's engine to write a photo to its transcript.
_SETUP_TIMEOUT: Final = 60.0
_REQUEST_TIMEOUT: Final = 60.0
# The media type of an answer whose body is not read (it does not end).
_EVENT_STREAM: Final = "text/event-stream"
# Methods that only read (RFC 9110 §9.2.1): a host changes nothing for them.
_SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
# The setup that only reads the host; every other setup key writes to it.
_READ_ONLY_SETUP: Final = frozenset({"idle"})
# A request status from this one up is a refusal, which changes nothing on the host.
_FIRST_REFUSAL: Final = 400


class HttpHost:
    """A live host: its address and token."""

    def __init__(self, url: str, token: str) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or parts.hostname is None:
            raise ValueError(f"not an http:// URL: {url!r}")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.token = token

    def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        auth: bool = True,
        cookies: SimpleCookie | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        """One request on a fresh connection: status, headers (lower-case names), body
        (empty for an event stream, which does not end). With ``cookies``, a browser's
        jar: what it holds is sent, and every cookie the answer sets is kept in it."""
        sent = dict(headers or {})
        if auth:
            sent.setdefault("Authorization", f"Bearer {self.token}")
        if cookies:
            sent.setdefault(
                "Cookie", "; ".join(f"{name}={m.coded_value}" for name, m in cookies.items())
            )
        connection = http.client.HTTPConnection(self.host, self.port, timeout=_REQUEST_TIMEOUT)
        try:
            # The host may answer before taking the whole body (413): read that answer.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                connection.request(method, path, body=body, headers=sent)
            response = connection.getresponse()
            streamed = (response.getheader("Content-Type") or "").startswith(_EVENT_STREAM)
            data = b"" if streamed else response.read()
            # The stream's socket is the answer's once the host said it would close it.
            response.close()
            if cookies is not None:
                for set_cookie in response.msg.get_all("Set-Cookie") or ():
                    cookies.load(set_cookie)
            return (
                response.status,
                {name.lower(): value for name, value in response.getheaders()},
                data,
            )
        finally:
            connection.close()


def _send_photo(host: HttpHost, photo: Any) -> str:
    nonce = f"conformance photo {uuid.uuid4()}"
    body = json.dumps({"message": nonce, "images": [photo]}).encode("utf-8")
    status, _, answer = host.request(
        "POST", "/api/chat/send", body=body, headers={"Content-Type": "application/json"}
    )
    if status != 200:
        raise RuntimeError(f"setup: sending the photo answered {status}: {answer[:200]!r}")
    deadline = time.monotonic() + _SETUP_TIMEOUT
    while time.monotonic() < deadline:
        status, _, answer = host.request("GET", "/api/chat/bootstrap?tail=50")
        history = json.loads(answer).get("history") if status == 200 else None
        for entry in (history or {}).get("entries", []):
            texts = [b.get("text", "") for b in entry["content"] if b.get("type") == "text"]
            if entry["type"] == "user" and any(nonce in text for text in texts):
                for block in entry["content"]:
                    if block.get("type") == "image" and "imageRef" in block:
                        return str(block["imageRef"])
        time.sleep(0.1)
    raise RuntimeError("setup: the photo never reached the host's history")


def _wait_until_idle(host: HttpHost) -> None:
    deadline = time.monotonic() + _SETUP_TIMEOUT
    while time.monotonic() < deadline:
        status, _, answer = host.request("GET", "/api/chat/bootstrap?tail=1")
        if status == 200 and not json.loads(answer)["status"]["busy"]:
            return
        time.sleep(0.1)
    raise RuntimeError("setup: the host's chat never went idle")


def _exchange(host: HttpHost, case_input: Any) -> list[dict[str, Any]]:
    setup = case_input.get("setup") or {}
    bindings: dict[str, str] = {"{token}": host.token}
    if setup.get("idle"):
        _wait_until_idle(host)
    if "photo" in setup:
        bindings["{photoRef}"] = _send_photo(host, setup["photo"])
    cookies = SimpleCookie()
    answers: list[dict[str, Any]] = []
    for request in case_input["requests"]:
        path = request["path"]
        for name, value in bindings.items():
            path = path.replace(name, value)
        headers = dict(request.get("headers") or {})
        body: bytes | None = None
        if "json" in request:
            body = json.dumps(request["json"], ensure_ascii=False).encode("utf-8")
            headers.setdefault("Content-Type", "application/json")
        elif "body" in request:
            body = request["body"].encode("utf-8")
        status, got_headers, data = host.request(
            request["method"],
            path,
            body=body,
            headers=headers,
            auth=request.get("auth", True),
            cookies=cookies,
        )
        answer: dict[str, Any] = {"status": status, "headers": got_headers}
        if got_headers.get("content-type", "").startswith("application/json") and data:
            answer["json"] = json.loads(data)
        answers.append(answer)
    return answers


def exchange_writes(case_input: Any, expect: Any) -> str | None:
    """What an `http/exchange` case writes to the host, or None when it only reads.

    Its setup writes unless it only waits (``photo`` sends a message); a request
    writes when its method is not a safe one and the case expects the host to take
    it (a status below 400): a request the case expects refused changes nothing on
    a host that conforms. A case too malformed to tell counts as writing.
    """
    if not isinstance(case_input, dict) or not isinstance(case_input.get("requests"), list):
        return "a case that cannot be read"
    for key in case_input.get("setup") or {}:
        if key not in _READ_ONLY_SETUP:
            return "its setup sends a photo" if key == "photo" else f"its setup {key!r}"
    answers = expect if isinstance(expect, list) else []
    for index, request in enumerate(case_input["requests"]):
        if not isinstance(request, dict):
            return "a request that cannot be read"
        method = str(request.get("method", "")).upper()
        if method in _SAFE_METHODS:
            continue
        answer = answers[index] if index < len(answers) else None
        status = answer.get("status") if isinstance(answer, dict) else None
        if not isinstance(status, int) or status < _FIRST_REFUSAL:
            return f"{method} {request.get('path', '')}"
    return None


def _project(expect: Any, got: Any) -> Any:
    # Only the listed keys of an expected object are compared.
    if isinstance(expect, dict) and isinstance(got, dict):
        return {key: got[key] for key in expect if key in got}
    return got


def project_exchange(expect: Any, got: Any) -> Any:
    """``got`` cut down to what ``expect`` lists (the `http/exchange` comparison rule)."""
    if not isinstance(expect, list) or not isinstance(got, list):
        return got
    projected: list[Any] = []
    for index, answer in enumerate(got):
        wanted = expect[index] if index < len(expect) and isinstance(expect[index], dict) else {}
        kept: dict[str, Any] = {"status": answer["status"]}
        if "json" in wanted:
            kept["json"] = _project(wanted["json"], answer.get("json"))
        if "headers" in wanted:
            kept["headers"] = _project(wanted["headers"], answer["headers"])
        projected.append(kept)
    return projected


def http_handlers(url: str, token: str) -> HandlerTable:
    """The kinds a live host answers: `http/exchange`."""
    return {"http/exchange": partial(_exchange, HttpHost(url, token))}


def served_transcript_handlers(
    boxes: Mapping[PhotoMode, tuple[HttpHost, TranscriptWriter]],
) -> HandlerTable:
    """`transcript/entries` and `media/extract` through a served box's API.

    For boxes whose transcripts this process can write (`python -m conformance
    --serve` starts one a photo mode, ``boxes``: its host and its writer): each
    case's lines become the transcript of its session in the box reading photos
    in the case's mode (`case_photo_mode`), and the host's history of it, read as
    one page from the top, is the answer; `ServedMediaExtract` reads photos back
    by reference. `transcript/read-lines` and `media/find-line` have no route
    that answers in their shapes (line classes, line numbers), so a served box
    leaves them out.
    """

    def entries(case_input: Any) -> Any:
        host, write_transcript = boxes[case_photo_mode(case_input)]
        session_id = str(case_input["sessionId"])
        lines = "\n".join(case_input["lines"])
        write_transcript(session_id, lines.encode("utf-8", "surrogatepass"))
        query = urlencode({"session": session_id, "offset": 0, "limit": MAX_SESSION_ENTRIES})
        status, _, answer = host.request("GET", f"/api/chat/history?{query}")
        if status != 200:
            return {"status": status, "body": answer[:200].decode("utf-8", "replace")}
        return json.loads(answer)["entries"]

    # Following a reference back does not depend on the photo mode: either box.
    return {
        "transcript/entries": entries,
        "media/extract": ServedMediaExtract(*boxes[next(iter(boxes))]),
    }


# The session every served media/extract case's line is written to.
_MEDIA_SESSION: Final = "conformance-media"
# The id given to a line that has none of its own, so the route can address it.
_MEDIA_UUID: Final = "conformance-line"


class ServedMediaExtract:
    """`media/extract` through ``GET /api/session-media/<ref>`` of a served box.

    The case's line is the session's whole transcript; its own top-level ``uuid``
    addresses it (a line without one gets ``"uuid"`` inserted as its first key, the
    rest of its bytes untouched). The route answers the photo (200) or a status
    (§1.7: 413 for a line too large to read, one 404 for every other miss), so a
    missing photo is compared as that status: `project` turns the expected reason
    into the status the route must answer for it.
    """

    def __init__(self, host: HttpHost, write_transcript: TranscriptWriter) -> None:
        self._host = host
        self._write_transcript = write_transcript

    def __call__(self, case_input: Any) -> Any:
        line, uuid = _addressable(str(case_input["line"]))
        self._write_transcript(_MEDIA_SESSION, line.encode("utf-8", "surrogatepass"))
        ref = quote(f"{_MEDIA_SESSION}/{uuid}/{int(case_input['index'])}", safe="/")
        status, headers, body = self._host.request("GET", f"/api/session-media/{ref}")
        if status != 200:
            return {"ok": False, "status": status}
        return {
            "ok": True,
            "mediaType": headers.get("content-type", ""),
            "sha256": hashlib.sha256(body).hexdigest(),
            "size": len(body),
        }

    @staticmethod
    def project(expect: Any, got: Any) -> Any:
        """A miss answered with the status its expected reason maps to reads as expected."""
        if (
            isinstance(expect, dict)
            and expect.get("ok") is False
            and isinstance(got, dict)
            and got.get("status") == MediaMissing(expect["reason"]).status_hint
        ):
            return expect
        return got


def _addressable(line: str) -> tuple[str, str]:
    # The line and the id that addresses it: its own, or one inserted in front.
    parsed = parse_json_object_or_none(line)
    if parsed is None:
        return line, _MEDIA_UUID  # unparsable: no line has that id, as for any miss
    own = parsed.get("uuid")
    if isinstance(own, str) and SAFE_ID_RE.fullmatch(own):
        return line, own
    if "uuid" in parsed:
        return line, _MEDIA_UUID  # an id the route cannot carry: a miss
    opening = line.index("{") + 1
    return f'{line[:opening]}"uuid":"{_MEDIA_UUID}",{line[opening:]}', _MEDIA_UUID
