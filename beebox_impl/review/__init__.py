"""Chat review: the nightly pass that titles and summarises sessions into their husks.

`docs/sources.md#review` and `docs/sources.md#facts-4` (§4), built on the rules of
`beebox_spec.review`'s modules (each rule lives there, once):

- `cards`: husk cards — YAML front matter edited field by field, the body never
  touched; `ensure_chat_husk`; origin stamping;
- `discovery`: husk-first gates, with a cache so an unchanged box reads no
  transcript;
- `walk`: the span walk over a transcript stream, the prefix hash folded as it
  goes, resumable at a boundary;
- `store`: the journal file (atomic writes) and discovery's cache;
- `reviewers`: one protocol — `extractive` (offline default), `anthropic`,
  `openai` — and the redaction of everything that leaves the machine;
- `apply`: the leak scan, title ownership, one card write;
- `run`: the run under lock group `retro`, the journal saved after every session;
- `schedule_card`: the schedule card `bbx init` installs;
- `command`: `bbx chat review status|run`.

Everything here is synchronous, blocking file (and network) work;
`review_chat_sessions` runs a whole pass in a worker thread for async callers.
"""

from __future__ import annotations

from beebox_impl.review.cards import (
    CardFormatError,
    HuskCard,
    ensure_chat_husk,
    list_chat_husks,
    reconcile_husk_origins,
)
from beebox_impl.review.command import add_review_commands, run_review_command
from beebox_impl.review.discovery import Discovery, box_transcript_locator, discover
from beebox_impl.review.lock import REVIEW_LOCK_GROUP, LockHeldError, hold_lock_group
from beebox_impl.review.origin import MachineOrigin, local_origin
from beebox_impl.review.reviewers import (
    ExtractiveReviewer,
    Reviewer,
    ReviewerFailure,
    ReviewerUnavailable,
    reviewer_by_name,
)
from beebox_impl.review.run import (
    ReviewPlan,
    RunSummary,
    plan_review,
    review_chat_sessions,
    run_chat_review,
)
from beebox_impl.review.schedule_card import install_review_schedule_card
from beebox_impl.review.walk import first_message_title

__all__ = [
    "REVIEW_LOCK_GROUP",
    "CardFormatError",
    "Discovery",
    "ExtractiveReviewer",
    "HuskCard",
    "LockHeldError",
    "MachineOrigin",
    "ReviewPlan",
    "Reviewer",
    "ReviewerFailure",
    "ReviewerUnavailable",
    "RunSummary",
    "add_review_commands",
    "box_transcript_locator",
    "discover",
    "ensure_chat_husk",
    "first_message_title",
    "hold_lock_group",
    "install_review_schedule_card",
    "list_chat_husks",
    "local_origin",
    "plan_review",
    "reconcile_husk_origins",
    "review_chat_sessions",
    "reviewer_by_name",
    "run_chat_review",
    "run_review_command",
]
