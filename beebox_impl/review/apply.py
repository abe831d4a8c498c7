"""Applying a review to the husk: the leak scan, title ownership, one write (§4.6).

The decision is the spec's `plan_husk_write`, made on the card as it is at
write time: under the card lock the card is re-read, the live title's owner
re-derived by `resolve_title_owner` (so a hand edit made during the run is
honoured), and the plan's fields written in one atomic write — `review-span`
with them only when the leak scan rejected nothing.
"""

from __future__ import annotations

from pathlib import Path

from beebox_impl.review.cards import (
    FIELD_CONTAINS,
    FIELD_EVIDENCE,
    FIELD_REVIEW_SPAN,
    FIELD_TITLE,
    Card,
    StampedCard,
    update_card,
)
from beebox_spec.review.husk import HuskWritePlan, plan_husk_write, resolve_title_owner
from beebox_spec.review.journal import SessionReviewState
from beebox_spec.review.reviewer import ReviewOutput

__all__ = ["apply_review"]


def apply_review(
    box_root: Path,
    husk_path: Path,
    output: ReviewOutput,
    *,
    stored: SessionReviewState,
    snippet_title: str | None,
    span_id: str,
    known: StampedCard | None = None,
) -> tuple[HuskWritePlan, Card]:
    """Write `output` onto the husk as §4.6 says; answers the plan that was written,
    and the card as it was read for the write (under the card lock: every field but
    those the plan set is the written card's). `known` is the card as the caller
    read it, used if the file has not changed since."""
    plans: list[HuskWritePlan] = []

    def decide(card: Card) -> dict[str, str]:
        owner = resolve_title_owner(
            stored["titleOwner"], stored["titleHash"], card.text(FIELD_TITLE), snippet_title
        )
        plan = plan_husk_write(output, owner, stored["titleHash"])
        plans.append(plan)
        fields: dict[str, str] = {}
        if plan.contains is not None:
            fields[FIELD_CONTAINS] = plan.contains
        if plan.contains_evidence is not None:
            fields[FIELD_EVIDENCE] = plan.contains_evidence
        if plan.title is not None:
            fields[FIELD_TITLE] = plan.title
        if plan.review_span_applied:
            fields[FIELD_REVIEW_SPAN] = span_id
        return fields

    card, _ = update_card(box_root, husk_path, decide, known=known)
    return plans[-1], card
