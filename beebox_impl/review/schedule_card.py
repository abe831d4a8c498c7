"""The chat-review schedule card that `bbx init` installs (§4.9, `docs/sources.md#review-running`).

`_config/schedules/chat-review.scheduled-script.card`: nightly at 04:00 in lock
group `retro`, running `bbx chat review run`, shipped **disabled**. `enabled`
is box-owned: the boxholder turns the review on by setting it, and a later
install (a template re-sync) rewrites the template's own fields but never
`enabled`. Everything else on the card — comments, fields the box added, the
body — is kept byte for byte (`beebox_impl.review.cards`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from beebox_impl.review.cards import (
    Card,
    FieldValue,
    create_card_exclusive,
    render_card,
    update_card,
)
from beebox_impl.review.lock import REVIEW_LOCK_GROUP
from beebox_impl.review.paths import schedule_card_path

__all__ = ["BOX_OWNED_FIELDS", "REVIEW_SCHEDULE", "install_review_schedule_card"]

# §4.9 `DEFAULT_SCHEDULES` (the chat-review entry), in the card's field order.
REVIEW_SCHEDULE: Final[dict[str, FieldValue]] = {
    "name": "chat-review",
    "description": (
        "Nightly chat review: title and summarize chat sessions that have grown enough "
        "to be worth re-reading"
    ),
    "cron": "0 4 * * *",
    "notBefore": "20h",
    "onWakeup": False,
    "enabled": False,
    "lockGroup": REVIEW_LOCK_GROUP,
    "runs": "bbx chat review run",
    "reason": "Nightly sweep; opt in per box",
}
# Fields the box owns once the card exists: a re-sync never changes them.
BOX_OWNED_FIELDS: Final = frozenset({"enabled"})

_BODY: Final = """\
Runs `bbx chat review run` every night at 04:00. It ships disabled: set
`enabled: true` above to turn the review on for this box. `enabled` belongs to
the box, so template updates never flip it back.
"""


def install_review_schedule_card(box_root: Path) -> Path:
    """Install the schedule card, or bring an installed one up to the template.

    A new card gets every template field (so `enabled: false`). An existing card
    gets the template's values for the fields the template owns; `enabled` is
    left as the box set it (and added as false only if missing).
    """
    path = schedule_card_path(box_root)
    if create_card_exclusive(path, render_card(REVIEW_SCHEDULE, _BODY)):
        return path

    def resync(card: Card) -> dict[str, FieldValue]:
        return {
            name: value
            for name, value in REVIEW_SCHEDULE.items()
            if name not in BOX_OWNED_FIELDS or name not in card.fields
        }

    update_card(box_root, path, resync)
    return path
