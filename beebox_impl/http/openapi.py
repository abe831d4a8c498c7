"""The OpenAPI 3.1 document of the box's HTTP API, generated from the route table.

One table (`beebox_impl.http.routes.ROUTES`) serves the requests and writes this
document, so the two cannot drift; a test walks both. Every ``/api`` operation
requires the box token: ``Authorization: Bearer <token>``, or the HttpOnly
cookie ``bbx_token_<port>`` that the URL printed by ``bbx serve`` sets; the chat
page (``/``, ``/static/{name}``) is public (``security: []``).
"""

from __future__ import annotations

from typing import Final

from beebox_impl.http.routes import ROUTES, TRANSPORT_RESPONSES, Route
from beebox_spec.entries import JsonObject, JsonValue

__all__ = ["OPENAPI_VERSION", "openapi_document"]

OPENAPI_VERSION: Final = "3.1.0"

_ERROR_SCHEMA: Final[JsonObject] = {
    "type": "object",
    "required": ["error"],
    "properties": {"error": {"type": "string"}},
}


# What each prefix route's path parameter holds.
_PATH_PARAMETERS: Final = {
    "ref": "<sessionId>/<entryUuid>/<index> (not URL-encoded)",
    "name": "a file name of the page (index.html is served at /)",
    "id": "a permission request's id, as its permission-request event gave it",
}


def _response(route: Route, status: int, description: str) -> JsonObject:
    if route.public and status in (200, 303):
        # The page and its files: HTML, JavaScript, CSS; a login's redirect has no body.
        return (
            {"description": description}
            if status == 303
            else {
                "description": description,
                "content": {"text/html" if route.path == "/" else "*/*": {}},
            }
        )
    if route.operation_id == "events" and status == 200:
        return {"description": description, "content": {"text/event-stream": {}}}
    if route.operation_id == "sessionMedia" and status == 200:
        headers: JsonObject = {
            name: {"schema": {"type": "string", "const": value}}
            for name, value in (
                ("Cache-Control", "private, max-age=31536000, immutable"),
                ("X-Content-Type-Options", "nosniff"),
                ("Content-Disposition", "inline"),
            )
        }
        return {
            "description": description,
            "headers": headers,
            "content": {"image/*": {"schema": {"type": "string", "format": "binary"}}},
        }
    schema: JsonObject = _ERROR_SCHEMA if status >= 400 else {"type": "object"}
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _operation(route: Route, method: str) -> JsonObject:
    responses: JsonObject = {
        str(status): _response(route, status, description)
        # The route's own word on a status wins (the page's 401 is about its login URL).
        for status, description in sorted({**TRANSPORT_RESPONSES, **route.responses}.items())
    }
    parameters: list[JsonValue] = []
    if route.prefix:
        name = route.path[route.path.rindex("{") + 1 : -1]
        parameters.append(
            {
                "name": name,
                "in": "path",
                "required": True,
                "description": _PATH_PARAMETERS[name],
                "schema": {"type": "string"},
            }
        )
    for name, (kind, description) in route.query.items():
        parameters.append(
            {
                "name": name,
                "in": "query",
                "required": False,
                "description": description,
                "schema": {"type": kind},
            }
        )
    operation: JsonObject = {
        "operationId": route.operation_id if method != "HEAD" else route.operation_id + "Head",
        "summary": route.summary,
        "responses": responses,
    }
    if parameters:
        operation["parameters"] = parameters
    if route.public:
        # Served without the token: the page holds nothing of the box.
        operation["security"] = []
    if route.request_body is not None:
        operation["requestBody"] = {
            "required": route.operation_id == "chatSend",
            "content": {"application/json": {"schema": route.request_body}},
        }
    return operation


def openapi_document() -> JsonObject:
    """The document, built from `ROUTES`."""
    paths: JsonObject = {}
    for route in ROUTES:
        paths[route.path] = {method.lower(): _operation(route, method) for method in route.methods}
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "beebox",
            "version": "1",
            "description": "The HTTP API of one box (see docs/http.md).",
        },
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}, {"cookie": []}],
        "components": {
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "cookie": {
                    "type": "apiKey",
                    "in": "cookie",
                    "name": "bbx_token_<port>",
                    "description": "Set by the URL `bbx serve` prints (HttpOnly, SameSite=Strict)",
                },
            }
        },
        "paths": paths,
    }
