"""The Messages API double, noting when each piece of text leaves it.

`TimedDouble.sent_at` maps each marker word (``mk0107z``: `MARKER`) in a text delta
to the wall-clock time (``time.time()``) the double wrote the delta to the CLI: the
start of the way a piece of a reply takes to the page. A page notes the same markers
with ``performance.timeOrigin + performance.now()``, the same clock. Used by the
real-CLI page test and `bench/page.py`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from tests.agent.messages_api import Answer, MessagesApiDouble, Text

MARKER: Final = re.compile(r"mk\d{4}z")


def marker(reply: int, piece: int) -> str:
    """The marker word of piece ``piece`` of reply ``reply``."""
    return f"mk{reply:02d}{piece:02d}z"


class TimedDouble(MessagesApiDouble):
    """The double, noting when each text piece with a marker is written to the CLI."""

    def __init__(self, fallback: Answer | None = None) -> None:
        super().__init__(fallback)
        self.sent_at: dict[str, float] = {}

    def _events(self, answer: Any, model: str) -> Iterator[Any]:
        for event in super()._events(answer, model):
            if event is not None and event[0] == "content_block_delta":
                for found in MARKER.findall(event[1]["delta"].get("text", "")):
                    self.sent_at.setdefault(found, time.time())
            # Noted before it is yielded: the handler writes and flushes it at once.
            yield event


@dataclass(frozen=True)
class Pieces(Text):
    """A text block streamed exactly as ``parts``, one delta each (``text`` is their join)."""

    parts: tuple[str, ...] = ()

    @classmethod
    def of(cls, parts: list[str], delay: float) -> Pieces:
        return cls("".join(parts), delay=delay, parts=tuple(parts))

    def deltas(self) -> list[str]:
        return list(self.parts)
