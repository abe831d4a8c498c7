"""The box's HTTP routes: one table, from which the dispatch and the OpenAPI document come.

Spec sources: `docs/design.md#design-4` (§4, the routes), `docs/sources.md#facts-1-7`
(§1.7, the media route's statuses, bodies and headers) and §2.1–§2.4 (send,
bootstrap, history).

Each `Route` names its path (an OpenAPI path template), its methods, what it
answers with which status, and the function that serves it. A handler runs in
the HTTP server's worker thread and reaches the box through `Exchange.call`,
which runs a coroutine on the box's event loop (`anyio.from_thread.run`): the
handlers translate between the wire and `beebox_impl.box.Box`, and hold no rule
of their own.

The chat page (``/`` and ``/static/<name>``, `beebox_impl.web`) is in the table
too, marked ``public``: it holds nothing of the box, and the login URL
(``/?token=…``) is how a browser gets the token's cookie in the first place.
Everything the page reads comes from ``/api``, which needs the token.

Errors are JSON ``{"error": "<message>"}``. The transport's own answers (401,
404, 405, 411, 413, 415, 400 for malformed JSON) come from
`beebox_impl.http.server` and are listed in every route's responses here.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar
from urllib.parse import unquote

from beebox_impl.box import Box
from beebox_impl.services.bootstrap import Bootstrap
from beebox_impl.services.history import DEFAULT_HISTORY_TAIL, HistorySlice
from beebox_impl.services.send import InvalidRequest, PhotosWaiting, SendFailed, parse_send_body
from beebox_impl.store.permissions import MAX_LISTED
from beebox_impl.transcript import MediaFound, PageSlice, TailSlice
from beebox_impl.transcript.location import InvalidAgentId, InvalidSessionId
from beebox_impl.web import INDEX, PAGE_HEADERS, read_asset
from beebox_impl.web.sessions import list_chat_sessions
from beebox_spec.entries import JsonObject, JsonValue
from beebox_spec.js_values import UnparsableJson, parse_json_text
from beebox_spec.media import SESSION_MEDIA_ROUTE, MalformedMediaRef
from beebox_spec.permissions import (
    MAX_DENY_MESSAGE_CHARS,
    parse_permission_answer,
)

__all__ = [
    "MEDIA_HEADERS",
    "MEDIA_MISSING_MESSAGES",
    "MEDIA_PREFIX",
    "PERMISSIONS_PREFIX",
    "ROUTES",
    "STATIC_PREFIX",
    "BytesReply",
    "Exchange",
    "JsonReply",
    "Reply",
    "Route",
    "StreamReply",
    "error_reply",
    "find_route",
]

T = TypeVar("T")

# §1.7: the photo route, and the headers of its 200.
MEDIA_PREFIX: Final = f"/api/{SESSION_MEDIA_ROUTE}/"
PERMISSIONS_PREFIX: Final = "/api/chat/permissions/"
# The longest permission request id the route looks up (the box's are 37 characters).
_MAX_PERMISSION_ID: Final = 200
MEDIA_HEADERS: Final = (
    ("Cache-Control", "private, max-age=31536000, immutable"),
    ("X-Content-Type-Options", "nosniff"),
    ("Content-Disposition", "inline"),
)

# The page's files other than index.html (`beebox_impl.web`).
STATIC_PREFIX: Final = "/static/"
# What a browser that opened the login URL with a wrong token is shown.
LOGIN_REFUSED: Final = "login-refused.html"


@dataclass(frozen=True)
class JsonReply:
    """A JSON answer."""

    status: int
    # JSON-serialisable: a JsonValue, or one of the TypedDicts of the wire shapes.
    body: object
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class BytesReply:
    """Raw bytes of a content type (a photo, the page)."""

    status: int
    content_type: str
    data: bytes
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class StreamReply:
    """A streamed answer (Server-Sent Events): the server calls ``stream`` with the exchange."""

    stream: Callable[[Exchange], None]


Reply = JsonReply | BytesReply | StreamReply


def error_reply(status: int, message: str) -> JsonReply:
    """The one error shape: ``{"error": message}``."""
    return JsonReply(status, {"error": message})


@dataclass
class Exchange:
    """One request as a handler sees it.

    ``call`` runs an async function on the box's loop and returns its result
    (typed: `run`); ``call_sync`` runs a plain function there;
    ``write`` sends raw bytes on the connection (streams only); ``peer_closed``
    reads true once the client has closed its end (streams only: a stream's
    client sends nothing more); ``stopping`` reads true once the server is
    shutting down; ``login_cookie`` is the
    ``Set-Cookie`` value that logs a browser in with the given token, or None
    when the token is wrong (the transport owns the token and the cookie's name);
    ``accept`` is the request's ``Accept`` header ("" without one).
    """

    method: str
    path: str
    query: Mapping[str, list[str]]
    body: bytes
    box: Box
    call: Callable[..., Any]
    call_sync: Callable[..., Any]
    write: Callable[[bytes], None] = field(repr=False)
    stopping: Callable[[], bool] = field(repr=False)
    sse_heartbeat_seconds: float = 15.0
    login_cookie: Callable[[str], str | None] = field(default=lambda _token: None, repr=False)
    peer_closed: Callable[[], bool] = field(default=lambda: False, repr=False)
    accept: str = ""

    def run(self, function: Callable[..., Coroutine[Any, Any, T]], *args: object) -> T:
        """Run ``function(*args)`` on the box's event loop and return what it returns."""
        result: T = self.call(function, *args)
        return result

    def json_body(self) -> JsonValue:
        """The body as JSON (an empty body reads as ``{}``); `InvalidRequest` when malformed."""
        if not self.body.strip():
            return {}
        try:
            text = self.body.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidRequest("malformed JSON: the body is not UTF-8") from None
        try:
            return parse_json_text(text)
        except UnparsableJson as error:
            raise InvalidRequest(f"malformed JSON: {error}") from None


@dataclass(frozen=True)
class Route:
    """One route: where, which methods, what it answers, and who serves it.

    ``prefix`` routes match every path under ``match`` (the media route);
    ``responses`` maps each status the route itself answers to its meaning;
    ``query`` lists the query parameters (name → description, all optional
    integers or strings as ``query_types`` says); ``request_body`` is the JSON
    schema of the body, if it takes one. A ``public`` route is served without
    the token (the page and its files; never an ``/api`` path).
    """

    operation_id: str
    methods: tuple[str, ...]
    path: str
    match: str
    summary: str
    handler: Callable[[Exchange], Reply]
    responses: Mapping[int, str]
    prefix: bool = False
    query: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    request_body: JsonObject | None = None
    response_schema: JsonObject | None = None
    public: bool = False


# --- Query parameters -----------------------------------------------------------


def _query_strict(exchange: Exchange, allowed: tuple[str, ...]) -> dict[str, str]:
    values: dict[str, str] = {}
    for name, given in exchange.query.items():
        # A parameter the route does not know is a client bug, said by name.
        if name not in allowed:
            raise InvalidRequest(f'unexpected query parameter "{name}"')
        if len(given) != 1:
            raise InvalidRequest(f'query parameter "{name}" given {len(given)} times')
        values[name] = given[0]
    return values


def _int_parameter(values: Mapping[str, str], name: str) -> int | None:
    raw = values.get(name)
    if raw is None:
        return None
    # ASCII digits only: no sign, no space, no other script's digits.
    if not raw.isascii() or not raw.isdigit() or len(raw) > 9:
        raise InvalidRequest(f'query parameter "{name}" must be a non-negative integer')
    return int(raw)


def _history_slice(values: Mapping[str, str]) -> HistorySlice:
    """§2.4: ``tail`` alone, or ``offset`` with ``limit``; mixing them is refused."""
    tail = _int_parameter(values, "tail")
    offset = _int_parameter(values, "offset")
    limit = _int_parameter(values, "limit")
    # A slice out of its bounds is the spec's `InvalidHistorySlice`: a 400 as it stands.
    if tail is not None:
        if offset is not None or limit is not None:
            raise InvalidRequest('"tail" cannot be combined with "offset" or "limit"')
        return TailSlice(tail)
    if offset is None and limit is None:
        return TailSlice(DEFAULT_HISTORY_TAIL)
    if offset is None or limit is None:
        raise InvalidRequest('"offset" and "limit" go together')
    return PageSlice(offset, limit)


# --- Handlers -------------------------------------------------------------------


def _send(exchange: Exchange) -> Reply:
    request = parse_send_body(exchange.json_body())
    # Recorded in this thread, then one crossing to the loop (`Box.send_from_thread`).
    outcome = exchange.box.send_from_thread(request, exchange.run)
    if isinstance(outcome, PhotosWaiting):
        retry = (("Retry-After", str(outcome.retry_after_seconds)),)
        return JsonReply(429, outcome.body(), retry)
    return JsonReply(500 if isinstance(outcome, SendFailed) else 200, outcome.body())


_HISTORY_QUERY: Final = ("session", "tail", "offset", "limit")


def _history(exchange: Exchange) -> Reply:
    values = _query_strict(exchange, (*_HISTORY_QUERY, "agent"))
    window = _history_slice(values)
    session_id = values.get("session") or exchange.box.session_id
    if session_id is None:
        return error_reply(404, "No chat session yet")
    agent = values.get("agent")
    try:
        # A file read: done in this handler thread, without a hop through the loop.
        history = exchange.box.read_history(session_id, window, agent=agent)
    except InvalidSessionId:
        raise InvalidRequest('"session" is not a session id') from None
    except InvalidAgentId:
        raise InvalidRequest('"agent" is not an agent id') from None
    # A session without that sub-agent is `SubAgentNotFound`'s 404, said by the server.
    return JsonReply(200, history)


def _bootstrap(exchange: Exchange) -> Reply:
    values = _query_strict(exchange, _HISTORY_QUERY)
    window = _history_slice(values)
    session = values.get("session")
    if session == "":
        raise InvalidRequest('"session" must not be empty')

    async def bootstrap() -> Bootstrap:
        return await exchange.box.bootstrap(session=session, window=window)

    try:
        return JsonReply(200, exchange.run(bootstrap))
    except InvalidSessionId:
        raise InvalidRequest('"session" is not a session id') from None


def _media(exchange: Exchange) -> Reply:
    raw = unquote(exchange.path[len(MEDIA_PREFIX) :])
    try:
        found = exchange.box.read_media(raw)
    except InvalidSessionId:
        # §1.7: one 400 for every malformed reference (`MalformedMediaRef`'s answer).
        raise MalformedMediaRef(raw, "not a session id") from None
    if isinstance(found, MediaFound):
        return BytesReply(200, found.media_type, found.data, MEDIA_HEADERS)
    return error_reply(found.status_hint, MEDIA_MISSING_MESSAGES[found.status_hint])


# §1.7: a line too large to read is 413; every other miss is one 404
# (`MediaMissing.status_hint`).
MEDIA_MISSING_MESSAGES: Final = {413: "Transcript entry too large to read", 404: "Not found"}


def _control(
    action: Callable[[Box], Callable[[], Coroutine[Any, Any, None]]],
) -> Callable[[Exchange], Reply]:
    def handle(exchange: Exchange) -> Reply:
        body = exchange.json_body()
        if not isinstance(body, dict):
            raise InvalidRequest("the request body must be a JSON object")
        for name in body:
            raise InvalidRequest(f'unexpected field "{name}"')
        exchange.run(action(exchange.box))
        return JsonReply(200, {"ok": True, "status": exchange.box.status()})

    return handle


def _answer_permission(exchange: Exchange) -> Reply:
    request_id = unquote(exchange.path[len(PERMISSIONS_PREFIX) :])
    reply = parse_permission_answer(exchange.json_body())
    # Not an id the box could have given out: the same 404 as any unknown one.
    if not request_id or "/" in request_id or len(request_id) > _MAX_PERMISSION_ID:
        return error_reply(404, "No such permission request")

    async def answer() -> None:
        await exchange.box.answer_permission(request_id, reply, by="page")

    exchange.run(answer)
    return JsonReply(200, {"ok": True, "id": request_id, "decision": reply.decision})


def _permissions(exchange: Exchange) -> Reply:
    values = _query_strict(exchange, ("limit",))
    limit = _int_parameter(values, "limit")
    if limit is not None and not 1 <= limit <= MAX_LISTED:
        raise InvalidRequest(f'"limit" must be 1-{MAX_LISTED}')

    async def decisions() -> dict[str, object]:
        listed = await exchange.box.permission_decisions(limit or 100)
        return {
            "pending": exchange.box.pending_permissions(),
            "decisions": [decision.as_json() for decision in listed],
        }

    return JsonReply(200, exchange.run(decisions))


def _events(exchange: Exchange) -> Reply:
    _query_strict(exchange, ())
    # Imported here: the event stream's loop lives with the transport.
    from beebox_impl.http.sse import stream_events  # noqa: PLC0415

    return StreamReply(stream_events)


def _sessions(exchange: Exchange) -> Reply:
    _query_strict(exchange, ())
    # A few small files, read in this worker thread: the box's loop is not involved.
    return JsonReply(200, {"sessions": list_chat_sessions(exchange.box.root)})


def _asset_reply(name: str, status: int = 200) -> Reply:
    asset = read_asset(name)
    if asset is None:
        return error_reply(404, "Not found")
    return BytesReply(status, asset.content_type, asset.data, PAGE_HEADERS)


def _page(exchange: Exchange) -> Reply:
    given = exchange.query.get("token")
    if given is None:
        return _asset_reply(INDEX)
    cookie = exchange.login_cookie(given[0]) if len(given) == 1 else None
    if cookie is None:
        # A browser opening the address gets a page saying what to do; a client
        # that asks for no HTML (curl, the conformance runner) the API's JSON.
        if "text/html" in exchange.accept:
            return _asset_reply(LOGIN_REFUSED, 401)
        return error_reply(401, "Unauthorized")
    # Redirect so the token leaves the address bar and the history.
    return BytesReply(
        303,
        "text/plain; charset=utf-8",
        b"",
        (("Location", "/"), ("Set-Cookie", cookie), ("Referrer-Policy", "no-referrer")),
    )


def _static(exchange: Exchange) -> Reply:
    return _asset_reply(exchange.path[len(STATIC_PREFIX) :])


def _openapi(exchange: Exchange) -> Reply:
    from beebox_impl.http.openapi import openapi_document  # noqa: PLC0415

    _query_strict(exchange, ())
    return JsonReply(200, openapi_document())


# --- The table ------------------------------------------------------------------

# Answered by the transport for every /api route (beebox_impl.http.server).
TRANSPORT_RESPONSES: Final[Mapping[int, str]] = {
    401: "Missing or wrong token (no detail)",
    405: "Method not allowed for this path (see the Allow header)",
}
# A route that takes no query parameter refuses any (`_query_strict`).
NO_QUERY_RESPONSES: Final[Mapping[int, str]] = {400: "A query parameter: this route takes none"}
BODY_RESPONSES: Final[Mapping[int, str]] = {
    400: "Malformed JSON, or a missing or unexpected field (the message names it)",
    411: "A body without Content-Length (chunked bodies are refused)",
    413: "Body over the limit (32 MiB by default), refused before it is read",
    415: "A body that is not application/json",
}

_SEND_BODY: Final[JsonObject] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["message"],
    "properties": {
        "message": {"type": "string"},
        "messageId": {"type": "string", "minLength": 1, "maxLength": 200},
        "images": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["mediaType", "data"],
                "properties": {
                    "mediaType": {"type": "string"},
                    "data": {"type": "string", "contentEncoding": "base64"},
                },
            },
        },
    },
}
_EMPTY_BODY: Final[JsonObject] = {"type": "object", "additionalProperties": False}
_PERMISSION_ANSWER_BODY: Final[JsonObject] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["decision"],
    "properties": {
        "decision": {"enum": ["allow", "deny"]},
        "message": {"type": "string", "maxLength": MAX_DENY_MESSAGE_CHARS},
        "always": {"type": "boolean", "description": "with allow: keep the rule the CLI suggested"},
    },
}
_SLICE_QUERY: Final[Mapping[str, tuple[str, str]]] = {
    "session": ("string", "the SDK session id (default: the chat's own session)"),
    "tail": ("integer", f"the last N entries, 1-5000 (default {DEFAULT_HISTORY_TAIL})"),
    "offset": ("integer", "a page's first entry (with limit)"),
    "limit": ("integer", "a page's size, 1-5000 (with offset)"),
}


def _control_route(name: str, verb: str, summary: str, action: Callable[[Box], Any]) -> Route:
    return Route(
        operation_id=f"chat{name}",
        methods=("POST",),
        path=f"/api/chat/{verb}",
        match=f"/api/chat/{verb}",
        summary=summary,
        handler=_control(action),
        responses={200: "Done: {ok: true, status}", **BODY_RESPONSES},
        request_body=_EMPTY_BODY,
    )


ROUTES: Final[tuple[Route, ...]] = (
    Route(
        operation_id="chatSend",
        methods=("POST",),
        path="/api/chat/send",
        match="/api/chat/send",
        summary="Record a message (durably), then start or queue its turn",
        handler=_send,
        responses={
            200: "{turnId} (a turn started), {queued: true} or {deduplicated: true}",
            429: "Not recorded: too many photos wait for the next turn; send it again "
            "(same messageId) after Retry-After seconds",
            500: "Recorded, but handing it to the chat failed: {error}",
            **BODY_RESPONSES,
        },
        request_body=_SEND_BODY,
    ),
    Route(
        operation_id="chatHistory",
        methods=("GET",),
        path="/api/chat/history",
        match="/api/chat/history",
        summary="A slice of a session's history from its transcript (photos as references),"
        " or of one of its sub-agents' transcripts",
        handler=_history,
        responses={
            200: "SessionHistory {sessionId, entries, total}",
            400: "A bad slice, session id or agent id",
            404: "No session asked for and the chat has none yet; or no such sub-agent",
        },
        query={
            **_SLICE_QUERY,
            "agent": (
                "string",
                "a sub-agent of the session, as a Task or Agent call's agentId names it:"
                " its own transcript is read instead",
            ),
        },
    ),
    Route(
        operation_id="chatBootstrap",
        methods=("GET",),
        path="/api/chat/bootstrap",
        match="/api/chat/bootstrap",
        summary="History and pending (accepted, maybe not yet in the transcript) side by side",
        handler=_bootstrap,
        responses={
            200: "{kind: empty|unavailable|resumable, sessionId, history, label, status, pending,"
            " permissions}",
            400: "A bad slice or session id",
        },
        query=_SLICE_QUERY,
    ),
    Route(
        operation_id="sessionMedia",
        methods=("GET", "HEAD"),
        path=MEDIA_PREFIX + "{ref}",
        match=MEDIA_PREFIX,
        prefix=True,
        summary="One photo of a transcript, by reference <sessionId>/<entryUuid>/<index>",
        handler=_media,
        responses={
            200: "The image bytes (Content-Type: its media type; cached privately, immutable)",
            400: "Malformed media reference",
            404: "Not found",
            413: "Transcript entry too large to read",
        },
    ),
    Route(
        operation_id="events",
        methods=("GET",),
        path="/api/events",
        match="/api/events",
        summary="Server-Sent Events: bus events and turn events, in order, with heartbeats",
        handler=_events,
        responses={200: "text/event-stream", **NO_QUERY_RESPONSES},
    ),
    Route(
        operation_id="chatPermissionAnswer",
        methods=("POST",),
        path="/api/chat/permissions/{id}",
        match=PERMISSIONS_PREFIX,
        prefix=True,
        summary="Answer a pending permission request; the agent goes on at once",
        handler=_answer_permission,
        responses={
            200: "{ok: true, id, decision}",
            404: "No such permission request",
            409: "The request has ended already (answered, timed out, or stopped)",
            **BODY_RESPONSES,
        },
        request_body=_PERMISSION_ANSWER_BODY,
    ),
    Route(
        operation_id="chatPermissions",
        methods=("GET",),
        path="/api/chat/permissions",
        match="/api/chat/permissions",
        summary="The pending permission requests, and how the last ones ended (newest first)",
        handler=_permissions,
        responses={
            200: "{pending: [request], decisions: [{id, toolName, input, request, askedAt,"
            " endedAt, how, decision, always, message, answeredBy}]}",
            400: "A bad limit",
        },
        query={"limit": ("integer", f"how many decisions, 1-{MAX_LISTED} (default 100)")},
    ),
    _control_route("Stop", "stop", "Stop the chat's run and clear its queue", lambda b: b.stop),
    _control_route(
        "Restart",
        "restart",
        "Close the run; the queue drains into a fresh one",
        lambda b: b.restart,
    ),
    _control_route(
        "Reset", "reset", "Stop and start a new SDK session next time", lambda b: b.reset
    ),
    Route(
        operation_id="chatSessions",
        methods=("GET",),
        path="/api/chat/sessions",
        match="/api/chat/sessions",
        summary="The box's chat sessions from their husk cards, newest first",
        handler=_sessions,
        responses={
            200: "{sessions: [{sessionId, title, contains, card}]} (title/contains null"
            " until the review wrote them)",
            **NO_QUERY_RESPONSES,
        },
    ),
    Route(
        operation_id="page",
        methods=("GET", "HEAD"),
        path="/",
        match="/",
        summary="The chat page; with ?token=… it logs the browser in instead",
        handler=_page,
        responses={
            200: "The page (HTML, with a strict Content-Security-Policy)",
            303: "?token=… was right: sets the HttpOnly cookie and redirects to /",
            401: "?token=… was wrong: a page saying how to log in when the request"
            " accepts text/html (a browser), else the JSON error",
        },
        query={"token": ("string", "the box token, as the URL bbx serve prints carries it")},
        public=True,
    ),
    Route(
        operation_id="pageAsset",
        methods=("GET", "HEAD"),
        path="/static/{name}",
        match=STATIC_PREFIX,
        prefix=True,
        summary="One of the page's files (JavaScript modules, CSS, icon)",
        handler=_static,
        responses={
            200: "The file (with the page's Content-Security-Policy)",
            # Listed for every route; a public file never answers it.
            401: "Never: the page's files are public",
            404: "No such file",
        },
        public=True,
    ),
    Route(
        operation_id="openapi",
        methods=("GET",),
        path="/api/openapi.json",
        match="/api/openapi.json",
        summary="This document",
        handler=_openapi,
        responses={200: "The OpenAPI 3.1 document", **NO_QUERY_RESPONSES},
    ),
)


def find_route(path: str) -> Route | None:
    """The route serving ``path`` (any method), or None."""
    for route in ROUTES:
        if route.prefix:
            if path.startswith(route.match):
                return route
        elif path == route.match:
            return route
    return None
