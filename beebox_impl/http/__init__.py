"""The box's HTTP adapter: stdlib `http.server` in front of the anyio core.

- `server` — `serve_box`: a `ThreadingHTTPServer` reaching the box through
  `anyio.from_thread.run`; auth, limits, timeouts, clean shutdown;
- `routes` — the one route table: handlers and what each answers;
- `events` — ``GET /api/events`` as Server-Sent Events;
- `openapi` — the OpenAPI 3.1 document, generated from the route table.

See ``docs/http.md``.
"""

from __future__ import annotations

from beebox_impl.http.openapi import openapi_document
from beebox_impl.http.routes import ROUTES, Route
from beebox_impl.http.server import (
    DEFAULT_HOST,
    HttpLimits,
    RemoteBindRefused,
    RunningServer,
    cookie_name,
    serve_box,
)

__all__ = [
    "DEFAULT_HOST",
    "ROUTES",
    "HttpLimits",
    "RemoteBindRefused",
    "Route",
    "RunningServer",
    "cookie_name",
    "openapi_document",
    "serve_box",
]
