"""Title ownership and the husk write: what a review may change on the card.

Spec sources, in `docs/sources.md` (a bare §N.M below is its anchor `facts-N-M`):
`docs/sources.md#facts-4-6` (§4.6: applying to the husk),
`docs/sources.md#facts-4-3` (§4.3: `contentHash`) and
`docs/sources.md#review-editing` ("Editing what it writes").

A hand-set title wins for good; the pass hashes the titles it writes, and
recognises its own and the first-message snippet. Each generated field passes the
leak scan or is dropped.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Literal

from beebox_spec.entries import JsonValue
from beebox_spec.review.leak_scan import has_credential
from beebox_spec.review.reviewer import ReviewOutput, render_account

__all__ = [
    "HuskField",
    "HuskWritePlan",
    "TitleOwner",
    "content_hash",
    "plan_husk_write",
    "read_husk_field",
    "resolve_title_owner",
]

TitleOwner = Literal["unmanaged", "generated", "manual"]


def content_hash(text: str) -> str:
    """The first 16 hex digits of SHA-256 over the UTF-8 text (§4.3 `contentHash`).

    Used for the titles the pass writes (§4.6) and, through
    `beebox_spec.review.journal`, for the prefix hash and span ids. A lone surrogate
    (possible in a Python string read from a JSON escape) is encoded as U+FFFD,
    as JavaScript encodes it. **(inference: Node's UTF-8 encoder)**
    """
    well_formed = re.sub("[\ud800-\udfff]", "\ufffd", text)
    return hashlib.sha256(well_formed.encode("utf-8")).hexdigest()[:16]


def resolve_title_owner(
    stored_owner: TitleOwner,
    stored_hash: str | None,
    live_title: str | None,
    snippet_title: str | None,
) -> TitleOwner:
    """Who owns the husk's title now, from the card as it is at write time (§4.6).

    1. A title once found hand-set stays `manual`.
    2. A husk with no title is `unmanaged`: nothing to protect.
    3. Once the pass has written a title (a stored hash), the live title is
       `generated` if it still hashes the same, else a person edited it: `manual`.
    4. Before the first write (no hash), the first-message snippet is ours to
       replace (`unmanaged`); any other title was put there by a person (`manual`).
    """
    # Rule 1: a hand-set title wins for good.
    if stored_owner == "manual":
        return "manual"
    # Rule 2: no title on the card.
    if live_title is None:
        return "unmanaged"
    # Rule 3: we wrote a title; is it still ours?
    if stored_hash is not None:
        return "generated" if content_hash(live_title) == stored_hash else "manual"
    # Rule 4: first review; only the reproducible snippet is ours.
    return "unmanaged" if live_title == snippet_title else "manual"


def read_husk_field(value: JsonValue) -> str | None:
    """A husk front-matter field as review reads it: a non-empty string, else None (§4.6)."""
    return value if isinstance(value, str) and value != "" else None


HuskField = Literal["title", "contains", "contains-evidence"]


@dataclass(frozen=True)
class HuskWritePlan:
    """The one card write a review makes (§4.6), and what it leaves in the journal.

    `title`, `contains` and `contains_evidence` are the values to set, None
    where the field is left as it is. `review_span_applied` says whether the
    `review-span` marker is written (every field passed the leak scan);
    `rejected` names the fields the scan dropped; `title_owner` and
    `title_hash` are the session's title state after the write.
    """

    title: str | None
    contains: str | None
    contains_evidence: str | None
    review_span_applied: bool
    rejected: tuple[HuskField, ...]
    title_owner: TitleOwner
    title_hash: str | None


def plan_husk_write(
    output: ReviewOutput, owner: TitleOwner, stored_hash: str | None
) -> HuskWritePlan:
    """Apply the §4.6 rules to a validated output, given the owner resolved from the live card.

    Each generated field is leak-scanned (`title` only when offered, i.e. not
    ""; an empty field passes) and only a credential shape rejects it. The
    title is written when clean and the owner is not `manual`. The span counts
    as applied only when nothing was rejected: a dropped account means the span
    was not folded in and must be retried. Afterwards the owner is `generated`
    if a title was written, else unchanged; the hash is that of the written
    title, else None for a manual title, else the stored hash.
    """
    account = render_account(output["notes"])
    rejected: list[HuskField] = []
    title_offered = output["title"] != ""
    # An offered title carrying a credential shape is dropped.
    title_clean = title_offered and not has_credential(output["title"])
    if title_offered and not title_clean:
        rejected.append("title")
    # `contains` carrying a credential shape is dropped.
    contains_clean = not has_credential(output["contains"])
    if not contains_clean:
        rejected.append("contains")
    # The account carrying a credential shape is dropped.
    account_clean = not has_credential(account)
    if not account_clean:
        rejected.append("contains-evidence")
    # A hand-set title is never touched.
    write_title = title_clean and owner != "manual"
    if write_title:
        title_owner: TitleOwner = "generated"
        title_hash: str | None = content_hash(output["title"])
    else:
        title_owner = owner
        title_hash = None if owner == "manual" else stored_hash
    return HuskWritePlan(
        title=output["title"] if write_title else None,
        contains=output["contains"] if contains_clean else None,
        contains_evidence=account if account_clean else None,
        review_span_applied=not rejected,
        rejected=tuple(rejected),
        title_owner=title_owner,
        title_hash=title_hash,
    )
