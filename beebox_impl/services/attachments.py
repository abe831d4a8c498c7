"""Photos on their way to the engine: the one rule that carries them through the queue.

A send's photos are stored with its acceptance record
(`beebox_impl.store.acceptance`), but the chat session's turns — and its
persisted queue — are text. So the turn text of a send with photos ends with a
*photo marker*, ``<bbx-photos row="N"/>`` on a line of its own, naming the bus
row that holds them. `PhotoEngine` wraps the box's engine: when a turn's text
holds markers, it removes them and sends the engine Messages-API content blocks
instead — every marked row's photos (base64 ``image`` blocks, in order), then
the text. A turn without markers reaches the engine unchanged.

Only the box writes markers: `without_markers` removes any a client typed
before the message is recorded, so a client cannot make a turn carry another
send's photos. A marker whose photos are gone (expired with the claims) adds
nothing.
"""

from __future__ import annotations

import base64
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Final

from beebox_impl.engine.protocol import Engine, Run, StartOptions, TurnContent
from beebox_impl.store.acceptance import Attachment
from beebox_spec.entries import JsonObject

__all__ = [
    "PhotoEngine",
    "PhotoRun",
    "handed_text",
    "photo_marker",
    "split_photo_markers",
    "without_markers",
]

# A marker with the line break before it (the break is the box's, not the client's).
_MARKER_RE: Final = re.compile(r'\n?<bbx-photos row="([0-9]{1,18})"/>')
# Anything a client could have typed that looks like a marker.
_MARKER_LIKE_RE: Final = re.compile(r"<bbx-photos\b[^>]*>")

# The photos of each of the given sends (bus row ids), in one read: a turn drained
# after a restart may carry the photos of hundreds of sends.
PhotoLoader = Callable[[Sequence[int]], Awaitable[dict[int, list[Attachment]]]]


def photo_marker(row_id: int) -> str:
    """What the box appends to a turn text whose send (bus row ``row_id``) carried photos."""
    return f'\n<bbx-photos row="{row_id}"/>'


def handed_text(message: str, row_id: int, carried_photos: bool) -> str:
    """What a send hands the session: its message, and its photos' marker if it had any."""
    return message + photo_marker(row_id) if carried_photos else message


def without_markers(text: str) -> str:
    """A client's message with anything marker-like removed."""
    return _MARKER_LIKE_RE.sub("", text)


def split_photo_markers(text: str) -> tuple[str, list[int]]:
    """The text with its markers removed, and the rows they named, in order."""
    rows = [int(match) for match in _MARKER_RE.findall(text)]
    return (_MARKER_RE.sub("", text) if rows else text), rows


def _image_block(photo: Attachment) -> JsonObject:
    return {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": photo.media_type,
            "data": base64.b64encode(photo.data).decode("ascii"),
        },
    }


class PhotoRun:
    """A run whose marked turns are sent as image and text blocks (see the module doc)."""

    def __init__(self, run: Run, load: PhotoLoader) -> None:
        self._run = run
        self._load = load

    @property
    def inner(self) -> Run:
        """The engine's own run."""
        return self._run

    @property
    def closed(self) -> bool:
        return self._run.closed

    def messages(self) -> AsyncIterator[JsonObject]:
        return self._run.messages()

    async def send(self, content: TurnContent) -> None:
        if isinstance(content, str):
            text, rows = split_photo_markers(content)
            if rows:
                photos = await self._load(rows)
                blocks: list[JsonObject] = []
                for row_id in rows:
                    blocks.extend(_image_block(photo) for photo in photos.get(row_id, ()))
                if text or not blocks:
                    blocks.append({"type": "text", "text": text})
                content = blocks
        await self._run.send(content)

    async def interrupt(self) -> None:
        await self._run.interrupt()

    async def close(self) -> None:
        await self._run.close()


class PhotoEngine:
    """Wraps an engine so the box's photo markers become image blocks."""

    def __init__(self, engine: Engine, load: PhotoLoader) -> None:
        self._engine = engine
        self._load = load

    @property
    def inner(self) -> Engine:
        """The wrapped engine."""
        return self._engine

    async def start(self, options: StartOptions) -> PhotoRun:
        return PhotoRun(await self._engine.start(options), self._load)
