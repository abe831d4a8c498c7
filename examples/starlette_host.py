"""A Starlette app (asyncio) that embeds a box behind routes of its own.

Its lifespan opens the box; ``POST /messages`` sends (a retry repeats the ``messageId``
it answered); ``GET /history/<n>``, ``GET /photos/<imageRef>`` and ``GET /events`` (SSE)
read; one handler answers every `Rejection` with its ``status_hint``. Run offline (the
echo engine) with uvicorn on port 8000: ``python examples/starlette_host.py [BOX_FOLDER]``.
"""

from __future__ import annotations

import base64
import json
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from beebox_impl import (
    Attachment,
    Box,
    Deduplicated,
    MalformedMediaRef,
    MediaFound,
    MediaMissing,
    PhotosWaiting,
    Queued,
    Rejection,
    SendFailed,
    SendRequest,
    TailSlice,
    TurnStarted,
)


class BadRequest(Rejection):
    """A body or query this host cannot read (a `Rejection`: answered 400)."""


def box_of(request: Request) -> Box:
    box: Box = request.app.state.box
    return box


def read_message(raw: bytes) -> SendRequest:
    """``{"text", "messageId"?, "photos"?: [{"mediaType", "data": base64}]}`` as a send."""
    try:
        body = json.loads(raw)
        text, message_id = body["text"], body.get("messageId") or str(uuid.uuid4())
        photos = [
            (p["mediaType"], base64.b64decode(p["data"], validate=True))
            for p in body.get("photos", [])
        ]
    except (ValueError, LookupError, TypeError) as error:
        raise BadRequest(f"not a message: {error}") from None
    strings = (text, message_id, *(kind for kind, _ in photos))
    if not all(isinstance(value, str) for value in strings):
        raise BadRequest('"text", "messageId" and "mediaType" must be strings')
    # SendRequest checks the rest, as the box's own route does (InvalidRequest: 400).
    return SendRequest(text, message_id, tuple(Attachment(*photo) for photo in photos))


async def send(request: Request) -> Response:
    """POST /messages: answers the ``messageId`` a retry must repeat (minted if none)."""
    message = read_message(await request.body())
    sent = {"messageId": message.message_id}
    match outcome := await box_of(request).send(message):
        case TurnStarted() | Queued() | Deduplicated():
            # Sent, or sent before: {"turnId"}, {"queued": true} or {"deduplicated": true}.
            return JSONResponse({**sent, **outcome.body()})
        case PhotosWaiting(retry_after_seconds=seconds):
            # Not recorded: send it again, same messageId, once the turn in flight ends.
            return JSONResponse(sent, 429, {"Retry-After": str(seconds)})
        case SendFailed(error=error):
            # Recorded: the box delivers it when it next opens; a retry is deduplicated.
            return JSONResponse({**sent, "error": error}, 500)


async def history(request: Request) -> Response:
    """GET /history/<n>: the current session's last n entries (TailSlice checks n)."""
    box, window = box_of(request), TailSlice(request.path_params["last"])
    if (session_id := box.session_id) is None:
        return JSONResponse({"error": "no conversation yet"}, status_code=404)
    return JSONResponse(await box.history(session_id, window))


async def photo(request: Request) -> Response:
    """GET /photos/<sessionId>/<entryUuid>/<index>: the photo's bytes."""
    match await box_of(request).media(request.path_params["ref"]):
        case MediaFound(media_type=media_type, data=data):
            return Response(data, media_type=media_type)
        case MediaMissing(reason=reason):
            return JSONResponse({"error": f"no photo: {reason}"}, status_code=404)


async def events(request: Request) -> Response:
    """GET /events[?until=<name>]: the box's events (SSE) till it closes or this one lags."""
    box, until = box_of(request), request.query_params.get("until")

    async def stream() -> AsyncIterator[str]:
        with box.subscribe() as subscription:
            async for event in subscription:
                yield f"id: {event.seq}\nevent: {event.name}\ndata: {json.dumps(event.data)}\n\n"
                if event.name == until:
                    return

    return StreamingResponse(stream(), media_type="text/event-stream")


async def refuse(request: Request, error: Exception) -> Response:
    """Every rejection of outside input, answered with the status its rule chose."""
    assert isinstance(error, Rejection)
    # Which rule a media ref broke would describe the box's files to a prober.
    said = "malformed media reference" if isinstance(error, MalformedMediaRef) else str(error)
    return JSONResponse({"error": said}, status_code=error.status_hint)


def create_app(folder: Path) -> Starlette:
    """The app; its lifespan holds the box at ``folder``/box open while it serves."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # Entered and left in the one lifespan task, as Box.open requires.
        async with Box.open(folder / "box", projects_root=folder / "projects") as box:
            app.state.box = box
            yield

    routes = [
        Route("/messages", send, methods=["POST"]),
        Route("/history/{last:int}", history),
        Route("/photos/{ref:path}", photo),
        Route("/events", events),
    ]
    return Starlette(routes=routes, lifespan=lifespan, exception_handlers={Rejection: refuse})


if __name__ == "__main__":
    import uvicorn  # the ASGI server is the host's choice; any will do

    with tempfile.TemporaryDirectory() as temporary:
        app = create_app(Path(sys.argv[1] if len(sys.argv) > 1 else temporary))
        # An open stream ends as the box closes, which uvicorn does only after: wait 1 s.
        uvicorn.run(app, timeout_graceful_shutdown=1)
