"""The chat page: static files kept in the package, and the headers they are served with.

`docs/design.md#design-4` (§4: `GET /` is the box's own chat page); ``docs/web.md``.
The page is plain HTML, CSS and JavaScript modules in this folder: no build step, no
framework, nothing fetched from elsewhere, so it works offline. The HTTP adapter serves
``index.html`` at ``/`` and the other files at ``/static/<name>``
(`beebox_impl.http.routes`); both are public, and everything the page reads comes
from ``/api``, which needs the token (the HttpOnly cookie the login URL sets).

Only the files listed in `ASSET_TYPES` by suffix are served, looked up by exact
name in this folder: a request cannot name a path outside it.

`PAGE_HEADERS` carry a strict Content-Security-Policy: scripts and styles only from
the box itself and never inline (so text from a transcript can never run), photos
from the box or from ``blob:`` URLs (the composer's previews and photos a history
read returned inline), no frames, no plugins, no `<base>`.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import files
from typing import Final

__all__ = [
    "ASSET_TYPES",
    "CONTENT_SECURITY_POLICY",
    "INDEX",
    "PAGE_HEADERS",
    "Asset",
    "read_asset",
]

# The page itself (served at `/`).
INDEX: Final = "index.html"

# What may be served, by suffix, and as which type.
ASSET_TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}

CONTENT_SECURITY_POLICY: Final = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' blob:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    )
)

# Sent with the page and every static file.
PAGE_HEADERS: Final = (
    ("Content-Security-Policy", CONTENT_SECURITY_POLICY),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
    # Small files, read fresh: an upgraded box never serves a stale script.
    ("Cache-Control", "no-store"),
)


@dataclass(frozen=True)
class Asset:
    """One file of the page: its content type and bytes."""

    content_type: str
    data: bytes


def read_asset(name: str) -> Asset | None:
    """The file ``name`` of this folder, or None when it is not one the page serves."""
    suffix = name[name.rfind(".") :] if "." in name else ""
    content_type = ASSET_TYPES.get(suffix)
    # A plain file name only: no folders, no dot files, no other suffix.
    if content_type is None or "/" in name or "\\" in name or name.startswith("."):
        return None
    resource = files(__name__).joinpath(name)
    if not resource.is_file():
        return None
    return Asset(content_type, resource.read_bytes())
