"""`GET /api/chat/sessions`: the box's chat sessions as their husk cards name them.

A husk card (``<box>/_content/chat/web/*.chat.card``, `docs/sources.md#facts-4-1`) is
the box's record of one chat session: YAML front matter with ``session`` and, once
the nightly review has read it, ``title`` and ``contains``. The page lists them
so a person can find an old conversation by what it was about. Cards are read
with the review's own reader (`beebox_impl.review.cards`), so a card means the
same thing here as there; a card that cannot be read, or names no session, is
skipped (the review warns about it).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TypedDict

from beebox_impl.review.cards import (
    FIELD_CONTAINS,
    FIELD_SESSION,
    FIELD_TITLE,
    CardFormatError,
    iter_husk_paths,
    read_card,
)

__all__ = ["ChatSessionCard", "list_chat_sessions"]

_log = logging.getLogger(__name__)


class ChatSessionCard(TypedDict):
    """One session as the page lists it; ``title``/``contains`` null until reviewed."""

    sessionId: str
    title: str | None
    contains: str | None
    card: str


def list_chat_sessions(box_root: Path) -> list[ChatSessionCard]:
    """Every readable husk's session, newest card first (names start with the date)."""
    sessions: list[ChatSessionCard] = []
    for path in reversed(iter_husk_paths(box_root)):
        try:
            card = read_card(path)
        except (OSError, UnicodeDecodeError, CardFormatError) as error:
            _log.debug("not listing %s: %s", path, error)
            continue
        session_id = card.text(FIELD_SESSION)
        # A card without a session is not a husk.
        if session_id is None:
            continue
        sessions.append(
            {
                "sessionId": session_id,
                "title": card.text(FIELD_TITLE),
                "contains": card.text(FIELD_CONTAINS),
                "card": path.name,
            }
        )
    return sessions
