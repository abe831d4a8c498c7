"""Where chat review keeps things in a box (`docs/design.md#design-3`).

Husk cards are the corpus (`_content/chat/web/*.chat.card`); the span journal is
`beebox_spec.review.journal.STATE_FILE`; beside it sits a cache of what discovery
last learned of each husk (a cache: deleting it costs one slow `status`, nothing
else); lock files for lock groups live under `.beebox/locks/`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from beebox_spec.review.journal import STATE_FILE

__all__ = [
    "DISCOVERY_CACHE_FILE",
    "HUSK_DIR",
    "HUSK_SUFFIX",
    "LOCK_DIR",
    "SCHEDULE_CARD",
    "discovery_cache_path",
    "husk_dir",
    "lock_path",
    "schedule_card_path",
    "state_path",
]

# §4.1: husk cards, one per chat session.
HUSK_DIR: Final = "_content/chat/web"
HUSK_SUFFIX: Final = ".chat.card"
# Ours, as `docs/design.md#design-5` goes further: discovery's per-husk facts, so an
# unchanged box costs stats only.
DISCOVERY_CACHE_FILE: Final = ".beebox/chat-review/discovery-cache.json"
LOCK_DIR: Final = ".beebox/locks"
# §4.9, with the newer `_config/` root of `docs/design.md#design-3`.
SCHEDULE_CARD: Final = "_config/schedules/chat-review.scheduled-script.card"


def husk_dir(box_root: Path) -> Path:
    """The folder of the box's husk cards."""
    return box_root / HUSK_DIR


def state_path(box_root: Path) -> Path:
    """The span journal's state file."""
    return box_root / STATE_FILE


def discovery_cache_path(box_root: Path) -> Path:
    """Discovery's cache of per-husk facts."""
    return box_root / DISCOVERY_CACHE_FILE


def lock_path(box_root: Path, group: str) -> Path:
    """The lock file of one lock group (every holder of the group takes the same file)."""
    return box_root / LOCK_DIR / f"{group}.lock"


def schedule_card_path(box_root: Path) -> Path:
    """Where `bbx init` installs the chat-review schedule card."""
    return box_root / SCHEDULE_CARD
