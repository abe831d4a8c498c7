"""Qualification: which sessions a review run takes, and in what order.

Spec sources, in `docs/sources.md` (a bare §N.M below is its anchor `facts-N-M`):
`docs/sources.md#facts-4-2` (§4.2: discovery) and `docs/sources.md#facts-4-7`
(§4.7: the run's summary counters).

One ordered table of gates; the first that fails names the skip reason: another
machine's session, transcript missing, modified within the last 30 minutes, fewer
than 2 real user turns, transcript gone when the span was read, fewer than 6,000
rendered characters of new material. A qualified session is scalars only;
qualified sessions are reviewed oldest modification first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Final

from beebox_spec.errors import InvariantError
from beebox_spec.js_values import js_trim
from beebox_spec.review.journal import BootstrapReason

__all__ = [
    "DISCOVERY_GATES",
    "QUIESCENCE",
    "REVIEW_CHAR_THRESHOLD",
    "REVIEW_MIN_USER_TURNS",
    "DiscoveryFacts",
    "DiscoveryGate",
    "QualifiedSession",
    "SkipReason",
    "claims_session",
    "first_skip_reason",
    "has_enough_new_material",
    "has_enough_user_turns",
    "is_quiescent",
    "order_for_review",
    "snippet_title_from",
]

# §4.2 QUIESCENCE_MS: a transcript modified more recently than this is still in use.
QUIESCENCE: Final = timedelta(minutes=30)
# §4.2: pre-elision rendered characters of the unread span needed for a review.
REVIEW_CHAR_THRESHOLD: Final = 6_000
# §4.2: real user turns in the whole session needed before it is reviewed at all.
REVIEW_MIN_USER_TURNS: Final = 2
# §4.2's `PARSE_LIMIT` (the span walk's page size, the most entries one review
# folds in) is `beebox_spec.review.journal.resolve_span`'s `limit`, whose default is
# `MAX_SESSION_ENTRIES`; it is not repeated here.


class SkipReason(StrEnum):
    """Why discovery passed over a husk; the values are the run summary's counters (§4.2, §4.7)."""

    FOREIGN_ORIGIN = "foreignOrigin"
    MISSING_TRANSCRIPT = "missingTranscripts"
    DEFERRED_ACTIVE = "deferredActive"
    TOO_FEW_TURNS = "tooFewTurns"
    BELOW_THRESHOLD = "belowThreshold"


def claims_session(husk_origin: str | None, local_origin: str) -> bool:
    """A machine reviews only sessions it originated; a husk with no origin predates the stamp."""
    return husk_origin is None or husk_origin == local_origin


def is_quiescent(mtime: datetime, now: datetime) -> bool:
    """True when the transcript has been unmodified for at least `QUIESCENCE`.

    Both times must be timezone-aware. A modification time in the future (clock
    skew) reads as active.
    """
    # Naive times cannot be compared with aware ones: a caller bug.
    if mtime.tzinfo is None or now.tzinfo is None:
        raise InvariantError("quiescence needs timezone-aware times")
    return now - mtime >= QUIESCENCE


def has_enough_user_turns(user_turns: int) -> bool:
    """At least `REVIEW_MIN_USER_TURNS` real user turns in the session."""
    return user_turns >= REVIEW_MIN_USER_TURNS


def has_enough_new_material(span_chars: int) -> bool:
    """At least `REVIEW_CHAR_THRESHOLD` rendered characters (pre-elision) in the unread span."""
    return span_chars >= REVIEW_CHAR_THRESHOLD


@dataclass(frozen=True)
class DiscoveryFacts:
    """What discovery learns about one husk, as scalars.

    `transcript_mtime` is None when the transcript is missing at the stat;
    `span_chars` is None when it was gone by the time the span was read. An
    implementation gathers these lazily, in the gates' order, and stops at the
    first gate that fails; fields a failed gate made unnecessary may hold any
    value.
    """

    husk_origin: str | None
    local_origin: str
    transcript_mtime: datetime | None
    user_turns: int
    span_chars: int | None


@dataclass(frozen=True)
class DiscoveryGate:
    """One row of the gate table: the reason recorded when `passes` is false."""

    reason: SkipReason
    passes: Callable[[DiscoveryFacts, datetime], bool]


def _origin_claimed(facts: DiscoveryFacts, now: datetime) -> bool:
    return claims_session(facts.husk_origin, facts.local_origin)


def _transcript_present(facts: DiscoveryFacts, now: datetime) -> bool:
    return facts.transcript_mtime is not None


def _quiet_long_enough(facts: DiscoveryFacts, now: datetime) -> bool:
    # Reached only after _transcript_present, so the mtime is known.
    assert facts.transcript_mtime is not None
    return is_quiescent(facts.transcript_mtime, now)


def _enough_turns(facts: DiscoveryFacts, now: datetime) -> bool:
    return has_enough_user_turns(facts.user_turns)


def _span_readable(facts: DiscoveryFacts, now: datetime) -> bool:
    return facts.span_chars is not None


def _enough_material(facts: DiscoveryFacts, now: datetime) -> bool:
    # Reached only after _span_readable, so the size is known.
    assert facts.span_chars is not None
    return has_enough_new_material(facts.span_chars)


# §4.2 "Per husk, in order": the first gate that fails names the skip. The
# transcript can vanish twice: at the stat, and between the stat and the span
# read. Exhaustion (§4.7 step 5) is deliberately not a gate: it belongs to a
# span, which is only known at review time.
DISCOVERY_GATES: Final[tuple[DiscoveryGate, ...]] = (
    DiscoveryGate(SkipReason.FOREIGN_ORIGIN, _origin_claimed),
    DiscoveryGate(SkipReason.MISSING_TRANSCRIPT, _transcript_present),
    DiscoveryGate(SkipReason.DEFERRED_ACTIVE, _quiet_long_enough),
    DiscoveryGate(SkipReason.TOO_FEW_TURNS, _enough_turns),
    DiscoveryGate(SkipReason.MISSING_TRANSCRIPT, _span_readable),
    DiscoveryGate(SkipReason.BELOW_THRESHOLD, _enough_material),
)


def first_skip_reason(facts: DiscoveryFacts, now: datetime) -> SkipReason | None:
    """The reason of the first gate the husk fails, or None when it qualifies."""
    for gate in DISCOVERY_GATES:
        if not gate.passes(facts, now):
            return gate.reason
    return None


@dataclass(frozen=True)
class QualifiedSession:
    """A session that passed every gate, as scalars only (§4.2 step 7).

    Nothing parsed is kept: the span is read again inside the review step, after
    the per-run cap, so only one session's entries are ever held at once.
    `bootstrap` is the span's bootstrap reason (None when it continues the
    journal); `snippet_title` is what `snippet_title_from` makes of the first
    real user snippet.
    """

    session_id: str
    husk_path: str
    log_path: str
    engine: str | None
    mtime: datetime
    span_chars: int
    bootstrap: BootstrapReason | None
    snippet_title: str | None


def snippet_title_from(first_user_snippet: str | None) -> str | None:
    """`firstUserSnippet.trim() || null`: the snippet a qualified session is compared against."""
    if first_user_snippet is None:
        return None
    return js_trim(first_user_snippet) or None


def order_for_review(sessions: Iterable[QualifiedSession]) -> list[QualifiedSession]:
    """Oldest modification first, ties in discovery order: a capped run serves the neglected."""
    return sorted(sessions, key=lambda session: session.mtime)
