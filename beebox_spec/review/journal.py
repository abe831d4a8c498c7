"""The span journal: which part of a transcript chat review has not yet read.

Spec sources, in `docs/sources.md` (a bare §N.M below is its anchor `facts-N-M`):
`docs/sources.md#review-incremental` ("Incremental by necessity"),
`docs/sources.md#review-editing` ("Editing what it writes"),
`docs/sources.md#facts-4-3` (§4.3: the span journal and its state file),
`docs/sources.md#facts-4-7` (§4.7: the run, steps 3–8) and
`docs/sources.md#facts-2-4` (§2.4: `MAX_SESSION_ENTRIES`). Where the journal lives
is `docs/design.md#design-3` (§3).

Review is incremental: each night the reviewer sees only the entries added
since the last review, plus the account it wrote then. The journal records,
per session, the **identity** of the last entry folded in (`endUuid`) and a
hash of everything up to and including it (`prefixHash`) — never a bare
index, because transcripts are rewritten under us (auto-compaction,
`--resume` forks) and an index would silently shift.

The rules, top to bottom:

1. **Hashes.** `content_hash` (`beebox_spec.review.husk`) is the first 16 hex
   digits of SHA-256 over the UTF-8 text. `prefix_hash(entries, i)` hashes, for
   entries 0..i, the parts `uuid + "\\u0000" + render_entries([entry])` joined
   by "\\n": identity AND rendered content, so an in-place text edit is seen too
   (and an edit that does not change the rendering, such as a tool result, is
   not). A span id is the content hash of session id, end uuid and prefix hash
   joined by "\\n".
2. **Resolving the span** (`resolve_span`). With no journal, or a journal whose
   `endUuid` is "" (a missing uuid is no identity), the span is a *bootstrap*:
   the first `limit` entries. Otherwise the first entry whose uuid is the
   boundary is found; if the hash of the transcript through it differs from
   the journal's, the history before the boundary was rewritten: bootstrap,
   `prefix-rewritten`. If the boundary never occurs: bootstrap,
   `boundary-missing`. If it matches: the span is the entries after it, at most
   `limit`. Either way `clipped` says that more entries exist past the span; the
   backlog is finished over the following nights.
3. **The span's end.** `endIndex` is the absolute index of the span's last
   entry and `endPrefixHash` the prefix hash through it. When the span is
   empty — a bootstrap over an empty transcript, or no new entries after a
   matching boundary — `endIndex` is -1 and `endPrefixHash` is None: an empty
   span has no last entry, and its end is not the boundary's own index (§4.3:
   "endIndex (absolute, -1 if empty)"; `docs/spec-decisions.md#empty-span-end`).
4. **The state file** (`.beebox/chat-review/state.json`): its exact JSON
   shapes, read with `JSON.parse`'s rules (`beebox_spec.js_values`); a fresh
   state for a missing, unparsable or malformed file (with the reason, so the
   caller can warn — silently for a missing one); and the serialisation
   `JSON.stringify(state, null, 2) + "\\n"`, byte for byte as JavaScript
   writes it (key order, escapes, numbers).
5. **Per-session decisions** (§4.7 steps 4–8), as pure functions from the old
   session state to the new one: an empty span is skipped; a span that failed
   `MAX_REVIEW_ATTEMPTS` times is given up on (only that span: new material is
   a new span); a span the husk already carries (`review-span`) advances the
   journal without a model call; otherwise the reviewer runs, and its failure
   or the husk write decides the new state.

This is the obviously-correct version over a plain list of entries. The
implementation walks the transcript in pages and folds the hash as it goes
(nothing before the boundary is kept); the test suites prove the two equal.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Final, Literal, NamedTuple, NotRequired, TypedDict

from beebox_spec.entries import MAX_SESSION_ENTRIES, JsonObject, JsonValue, SessionEntry
from beebox_spec.errors import InvariantError
from beebox_spec.js_values import (
    UnparsableJson,
    js_json_stringify,
    parse_json_text,
)
from beebox_spec.review.husk import HuskWritePlan, TitleOwner, content_hash, resolve_title_owner
from beebox_spec.review.rendering import render_entries

__all__ = [
    "MAX_REVIEW_ATTEMPTS",
    "METADATA_CONSUMER",
    "STATE_FILE",
    "AppliedSpan",
    "BootstrapReason",
    "JournalBoundary",
    "ResolvedSpan",
    "ReviewState",
    "SessionAction",
    "SessionReviewState",
    "StateLoad",
    "StateProblem",
    "applied_span_for",
    "fresh_review_state",
    "fresh_session_state",
    "is_exhausted",
    "is_rewrite",
    "next_session_action",
    "parse_review_state",
    "prefix_hash",
    "resolve_span",
    "review_state_from_json",
    "review_state_json",
    "serialize_review_state",
    "session_state",
    "session_state_json",
    "span_id",
    "span_id_for",
    "span_size",
    "state_after_already_applied",
    "state_after_reviewer_failure",
    "state_after_run",
    "state_after_write",
    "with_session",
]

# §4.3: a span whose review failed this many times is given up on.
MAX_REVIEW_ATTEMPTS: Final = 2
# §4.3: the journal consumer the review pass advances.
METADATA_CONSUMER: Final = "metadata"
# `docs/design.md#design-3` (§3): where the journal lives, relative to the box root.
STATE_FILE: Final = ".beebox/chat-review/state.json"


# ---------------------------------------------------------------------------
# Shapes (the state file's JSON keys)
# ---------------------------------------------------------------------------

# §4.3: why a span is read from the top instead of continuing the journal.
BootstrapReason = Literal["no-journal", "boundary-missing", "prefix-rewritten"]


class JournalBoundary(TypedDict):
    """What resolution needs of a journal entry: the boundary's identity and prefix hash.

    `endIndex` is recorded for people reading the file; resolution ignores it.
    """

    endUuid: str
    endIndex: int
    prefixHash: str


class AppliedSpan(JournalBoundary):
    """A journal entry: the last span folded in, its id, and when (`at`, ISO-8601)."""

    spanId: str
    at: str


class SessionReviewState(TypedDict):
    """One session's review state (§4.3).

    `applied` maps a consumer (`METADATA_CONSUMER`) to its journal entry;
    `titleOwner`/`titleHash` record who owns the husk title and the hash of the
    title the pass last wrote; `attempts` counts failed reviews of
    `failedSpanId`.
    """

    applied: dict[str, AppliedSpan]
    titleOwner: TitleOwner
    titleHash: str | None
    attempts: int
    failedSpanId: NotRequired[str]


class ReviewState(TypedDict):
    """The whole state file: when the last run finished, and every session's state."""

    lastRunAt: str | None
    sessions: dict[str, SessionReviewState]


class ResolvedSpan(TypedDict):
    """The unread span of a transcript (§4.3 `resolveSpan`'s result)."""

    entries: list[SessionEntry]
    endIndex: int
    endPrefixHash: str | None
    bootstrap: BootstrapReason | None
    clipped: bool


# ---------------------------------------------------------------------------
# Hashes
# ---------------------------------------------------------------------------


def prefix_hash(entries: Sequence[SessionEntry], end_index: int) -> str:
    """The content hash of entries 0..`end_index`, each as `uuid + "\\u0000" + its rendering`.

    An `end_index` of -1 hashes the empty prefix; one past the end covers every
    entry.
    """
    # Below -1 there is no prefix to name (JavaScript's slice would count from the end).
    if end_index < -1:
        raise InvariantError(f"prefix end index must be at least -1, got {end_index}")
    parts = [
        f"{entry['uuid']}\u0000{render_entries([entry])}" for entry in entries[: end_index + 1]
    ]
    return content_hash("\n".join(parts))


def span_id(session_id: str, end_uuid: str, prefix_hash: str) -> str:
    """The idempotency key of a span, written to the husk as `review-span`."""
    return content_hash("\n".join([session_id, end_uuid, prefix_hash]))


# ---------------------------------------------------------------------------
# Resolving the span
# ---------------------------------------------------------------------------


def _bootstrap(
    entries: Sequence[SessionEntry], limit: int, reason: BootstrapReason
) -> ResolvedSpan:
    """Read from the top: the first `limit` entries, clipped when there are more."""
    span = list(entries[:limit])
    end_index = len(span) - 1
    return {
        "entries": span,
        "endIndex": end_index,
        "endPrefixHash": prefix_hash(entries, end_index) if span else None,
        "bootstrap": reason,
        "clipped": len(entries) > limit,
    }


def resolve_span(
    entries: Sequence[SessionEntry],
    applied: JournalBoundary | None,
    limit: int = MAX_SESSION_ENTRIES,
) -> ResolvedSpan:
    """The part of the transcript `entries` not yet folded into the account (§4.3).

    `applied` is the session's journal entry for this consumer (any object with
    `endUuid` and `prefixHash`), or None when there is none. `limit` is the
    most entries one review folds in: discovery's window (§4.2 `PARSE_LIMIT`,
    which is `MAX_SESSION_ENTRIES`) is this default, and lives here only.
    """
    # A span of no entries would never advance: a caller bug.
    if limit < 1:
        raise InvariantError(f"span limit must be at least 1, got {limit}")
    # Never reviewed: read from the top.
    if applied is None:
        return _bootstrap(entries, limit, "no-journal")
    # An empty uuid is no identity (several entries may lack one): read from the top.
    if applied["endUuid"] == "":
        return _bootstrap(entries, limit, "boundary-missing")
    for index, entry in enumerate(entries):
        # The first entry carrying the boundary's uuid is the boundary.
        if entry["uuid"] == applied["endUuid"]:
            # The boundary is here but what led up to it changed: read from the top.
            if prefix_hash(entries, index) != applied["prefixHash"]:
                return _bootstrap(entries, limit, "prefix-rewritten")
            after = entries[index + 1 :]
            span = list(after[:limit])
            end_index = index + len(span) if span else -1
            return {
                "entries": span,
                "endIndex": end_index,
                "endPrefixHash": prefix_hash(entries, end_index) if span else None,
                "bootstrap": None,
                "clipped": len(after) > limit,
            }
    # The boundary entry is gone: the transcript was rewritten wholesale.
    return _bootstrap(entries, limit, "boundary-missing")


def is_rewrite(bootstrap: BootstrapReason | None) -> bool:
    """True when the span was read from the top because the transcript was rewritten (§4.7 step 3).

    The existing account is kept and passed in: it is now the only record of
    what the rewrite destroyed.
    """
    return bootstrap is not None and bootstrap != "no-journal"


def span_size(span: ResolvedSpan) -> int:
    """How much new material a span holds: its rendered length before elision (§4.3)."""
    return len(render_entries(span["entries"]))


def span_id_for(session_id: str, span: ResolvedSpan) -> str | None:
    """The span's id from its last entry and end hash (§4.7 step 4); None for an empty span.

    The one place a span's id is computed: the run compares it with the husk's
    `review-span`, and `applied_span_for` records it in the journal.
    """
    # An empty span has nothing to fold in, so no id.
    if not span["entries"] or span["endPrefixHash"] is None:
        return None
    return span_id(session_id, span["entries"][-1]["uuid"], span["endPrefixHash"])


def applied_span_for(session_id: str, span: ResolvedSpan, now_iso: str) -> AppliedSpan | None:
    """The journal entry recording that `span` was folded in at `now_iso` (§4.3 `appliedSpanFor`).

    None when the span is empty or its last entry has no uuid: no boundary
    identity means no journal entry, and the next run reads from the top —
    wasteful, never wrong.
    """
    key = span_id_for(session_id, span)
    # Nothing was read, so there is nothing to record.
    if key is None:
        return None
    end_uuid = span["entries"][-1]["uuid"]
    # An entry without a uuid cannot anchor a journal.
    if end_uuid == "":
        return None
    # A span with an id has an end hash (span_id_for said so).
    assert span["endPrefixHash"] is not None
    return {
        "spanId": key,
        "endUuid": end_uuid,
        "endIndex": span["endIndex"],
        "prefixHash": span["endPrefixHash"],
        "at": now_iso,
    }


# ---------------------------------------------------------------------------
# The state file
# ---------------------------------------------------------------------------


def fresh_review_state() -> ReviewState:
    """The state of a box never reviewed."""
    return {"lastRunAt": None, "sessions": {}}


def fresh_session_state() -> SessionReviewState:
    """The state of a session never reviewed."""
    return {"applied": {}, "titleOwner": "unmanaged", "titleHash": None, "attempts": 0}


def session_state(state: ReviewState, session_id: str) -> SessionReviewState:
    """A session's state, or a fresh one when the file does not know it."""
    return state["sessions"].get(session_id) or fresh_session_state()


StateProblem = Literal["missing", "invalid-json", "schema-mismatch"]


class StateLoad(NamedTuple):
    """A loaded state, and what was wrong with the file when a fresh state stands in for it.

    `missing` is normal (never reviewed) and not warned about; the others are.
    """

    state: ReviewState
    problem: StateProblem | None


def parse_review_state(text: str | None) -> StateLoad:
    """Read the state file's text; None means the file does not exist.

    The text is read as `JSON.parse` reads it (`parse_json_text`: no `NaN`, no
    `Infinity`, any depth without a crash). A missing file, text that is not
    JSON, or JSON of the wrong shape gives a fresh state and names the problem
    (§4.3).
    """
    # No file: never reviewed.
    if text is None:
        return StateLoad(fresh_review_state(), "missing")
    try:
        obj = parse_json_text(text)
    except UnparsableJson:
        # Not JSON at all.
        return StateLoad(fresh_review_state(), "invalid-json")
    state = review_state_from_json(obj)
    # JSON, but not the journal's shape.
    if state is None:
        return StateLoad(fresh_review_state(), "schema-mismatch")
    return StateLoad(state, None)


def _as_int(value: JsonValue) -> int | None:
    """A JSON integer (2.0 counts, as JavaScript's `Number.isInteger` says); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _applied_from_json(value: JsonValue) -> AppliedSpan | None:
    # A journal entry is an object.
    if not isinstance(value, dict):
        return None
    strings = [value.get(key) for key in ("spanId", "endUuid", "prefixHash", "at")]
    end_index = _as_int(value.get("endIndex"))
    span, end_uuid, prefix, at = strings
    # Every field is present with its type.
    if not (
        isinstance(span, str)
        and isinstance(end_uuid, str)
        and isinstance(prefix, str)
        and isinstance(at, str)
        and end_index is not None
    ):
        return None
    return {
        "spanId": span,
        "endUuid": end_uuid,
        "endIndex": end_index,
        "prefixHash": prefix,
        "at": at,
    }


_TITLE_OWNERS: Final[dict[str, TitleOwner]] = {
    "unmanaged": "unmanaged",
    "generated": "generated",
    "manual": "manual",
}


def _session_from_json(value: JsonValue) -> SessionReviewState | None:
    # A session's state is an object.
    if not isinstance(value, dict):
        return None
    raw_applied = value.get("applied")
    # `applied` maps consumers to journal entries.
    if not isinstance(raw_applied, dict):
        return None
    applied: dict[str, AppliedSpan] = {}
    for consumer, raw_entry in raw_applied.items():
        entry = _applied_from_json(raw_entry)
        # Every journal entry must be well formed.
        if entry is None:
            return None
        applied[consumer] = entry
    raw_owner = value.get("titleOwner")
    owner = _TITLE_OWNERS.get(raw_owner) if isinstance(raw_owner, str) else None
    title_hash = value.get("titleHash")
    attempts = _as_int(value.get("attempts"))
    # The owner is one of three; attempts an integer.
    if owner is None or attempts is None:
        return None
    # The hash is required: a string, or null before the first title write (never absent).
    if "titleHash" not in value or not (title_hash is None or isinstance(title_hash, str)):
        return None
    session: SessionReviewState = {
        "applied": applied,
        "titleOwner": owner,
        "titleHash": title_hash,
        "attempts": attempts,
    }
    if "failedSpanId" in value:
        failed = value["failedSpanId"]
        # When present, the failed span id is a string.
        if not isinstance(failed, str):
            return None
        session["failedSpanId"] = failed
    return session


def review_state_from_json(obj: JsonValue) -> ReviewState | None:
    """The state in a parsed state file, or None when it is not the §4.3 shape.

    Every key of §4.3 is required except `failedSpanId`; keys it does not
    name are dropped. **(inference: the original validates with a zod object
    schema, which strips unknown keys by default)**
    """
    # The file holds an object.
    if not isinstance(obj, dict):
        return None
    last_run_at = obj.get("lastRunAt")
    # `lastRunAt` is required: a string, or null before the first run (never absent).
    if "lastRunAt" not in obj or not (last_run_at is None or isinstance(last_run_at, str)):
        return None
    raw_sessions = obj.get("sessions")
    # `sessions` maps session ids to their states.
    if not isinstance(raw_sessions, dict):
        return None
    sessions: dict[str, SessionReviewState] = {}
    for session_id, raw_session in raw_sessions.items():
        session = _session_from_json(raw_session)
        # Every session's state must be well formed.
        if session is None:
            return None
        sessions[session_id] = session
    return {"lastRunAt": last_run_at, "sessions": sessions}


def serialize_review_state(state: ReviewState) -> str:
    """The file's text, `JSON.stringify(state, null, 2) + "\\n"`, for an atomic write.

    Byte for byte what JavaScript writes: members in JavaScript's property
    order (integer-like keys such as a session id "10" first, ascending),
    strings escaped as `JSON.stringify` escapes them (a lone surrogate as
    `\\uXXXX`, other non-ASCII as it is), and each entry's keys in the §4.3
    order.
    """
    return js_json_stringify(review_state_json(state), indent=2) + "\n"


def review_state_json(state: ReviewState) -> JsonObject:
    """The state as a plain JSON object, its keys in the §4.3 order: ``lastRunAt``,
    then ``sessions``, each session's entry as `session_state_json` gives it."""
    return {
        "lastRunAt": state["lastRunAt"],
        "sessions": {
            session_id: session_state_json(session)
            for session_id, session in state["sessions"].items()
        },
    }


def session_state_json(session: SessionReviewState) -> JsonObject:
    """One session's journal entry as a plain JSON object, its keys in the §4.3 order."""
    obj: JsonObject = {
        "applied": {
            consumer: {
                "spanId": entry["spanId"],
                "endUuid": entry["endUuid"],
                "endIndex": entry["endIndex"],
                "prefixHash": entry["prefixHash"],
                "at": entry["at"],
            }
            for consumer, entry in session["applied"].items()
        },
        "titleOwner": session["titleOwner"],
        "titleHash": session["titleHash"],
        "attempts": session["attempts"],
    }
    if "failedSpanId" in session:
        obj["failedSpanId"] = session["failedSpanId"]
    return obj


# ---------------------------------------------------------------------------
# Per-session decisions (§4.7 steps 4–8)
# ---------------------------------------------------------------------------


class SessionAction(StrEnum):
    """What the run does with one planned session, once its span is resolved."""

    NOTHING_NEW = "nothing-new"
    EXHAUSTED = "exhausted"
    ALREADY_APPLIED = "already-applied"
    REVIEW = "review"


def is_exhausted(session: SessionReviewState, span_id: str) -> bool:
    """True when this very span failed `MAX_REVIEW_ATTEMPTS` times (§4.7 step 5).

    Only that span is given up on: new material makes a new span, so a few
    nights of provider trouble cannot retire a session for good.
    """
    return session["attempts"] >= MAX_REVIEW_ATTEMPTS and session.get("failedSpanId") == span_id


def next_session_action(
    session: SessionReviewState, span_id: str | None, husk_review_span: str | None
) -> SessionAction:
    """Steps 4–7 in order: nothing to fold in, given up, already on the husk, or review it."""
    # An empty span has no id and nothing to fold in.
    if span_id is None:
        return SessionAction.NOTHING_NEW
    # This span kept failing: skip it.
    if is_exhausted(session, span_id):
        return SessionAction.EXHAUSTED
    # A run that died after writing the husk but before saving the journal.
    if husk_review_span == span_id:
        return SessionAction.ALREADY_APPLIED
    return SessionAction.REVIEW


def _copy_session(previous: SessionReviewState) -> SessionReviewState:
    session: SessionReviewState = {
        "applied": dict(previous["applied"]),
        "titleOwner": previous["titleOwner"],
        "titleHash": previous["titleHash"],
        "attempts": previous["attempts"],
    }
    if "failedSpanId" in previous:
        session["failedSpanId"] = previous["failedSpanId"]
    return session


def state_after_reviewer_failure(previous: SessionReviewState, span_id: str) -> SessionReviewState:
    """The reviewer failed on `span_id` (§4.7 step 7): one more attempt against that span."""
    session = _copy_session(previous)
    session["attempts"] = previous["attempts"] + 1
    session["failedSpanId"] = span_id
    return session


def state_after_already_applied(
    previous: SessionReviewState,
    applied: AppliedSpan | None,
    live_title: str | None,
    snippet_title: str | None,
) -> SessionReviewState:
    """The husk already carries this span (§4.7 step 6): catch the journal up, no model call.

    The journal advances to `applied` (`applied_span_for` of the span; when that
    is None nothing changes) and attempts return to 0. The title owner is
    re-derived by `resolve_title_owner` from the *saved* owner and hash and the
    live title (§4.6); when it comes out `generated`, the hash becomes that of
    the live title, otherwise the saved hash stays.

    This does **not** recover a title written by the run that died: that run
    saved neither its owner nor its hash, and the card does not say who wrote
    its title (`review-span` names the span, not the title). So a title that
    run wrote reads as a hand edit, `manual`, and the pass never retitles the
    session again — unless the saved state recognises it anyway (it equals the
    title the saved hash names or, with no saved hash, the first-message
    snippet). A lost or unreadable state file (a fresh session state) does the
    same to every title but the snippet. Erring this way never overwrites a
    person's title ("A title you set by hand wins permanently"): the cost is a
    machine title frozen, never a human one clobbered. The original does
    exactly this; it narrows the window instead, by saving the state after
    every session (§4.7 step 9).
    """
    # No boundary identity: there is nothing to record.
    if applied is None:
        return previous
    owner = resolve_title_owner(
        previous["titleOwner"], previous["titleHash"], live_title, snippet_title
    )
    session = _copy_session(previous)
    session["applied"][METADATA_CONSUMER] = applied
    session["titleOwner"] = owner
    if owner == "generated" and live_title is not None:
        session["titleHash"] = content_hash(live_title)
    session["attempts"] = 0
    return session


def state_after_write(
    previous: SessionReviewState,
    applied: AppliedSpan | None,
    plan: HuskWritePlan,
    span_id: str,
) -> SessionReviewState:
    """The husk was written as `plan` says (§4.7 step 8).

    The journal advances to `applied` only when the span was applied (no field
    rejected); the title owner and hash are the write's; attempts return to 0
    on success, else count one more failure of `span_id`. On success a previous
    `failedSpanId` stays, harmless with attempts at 0, as the original keeps it.
    """
    session = _copy_session(previous)
    # Only a span whose account landed moves the journal.
    if plan.review_span_applied and applied is not None:
        session["applied"][METADATA_CONSUMER] = applied
    session["titleOwner"] = plan.title_owner
    session["titleHash"] = plan.title_hash
    if plan.review_span_applied:
        session["attempts"] = 0
    else:
        session["attempts"] = previous["attempts"] + 1
        session["failedSpanId"] = span_id
    return session


def with_session(state: ReviewState, session_id: str, session: SessionReviewState) -> ReviewState:
    """The state with one session's state replaced (saved after every session, §4.7 step 9)."""
    sessions = dict(state["sessions"])
    sessions[session_id] = session
    return {"lastRunAt": state["lastRunAt"], "sessions": sessions}


def state_after_run(state: ReviewState, now_iso: str) -> ReviewState:
    """The state at the end of a run: `lastRunAt` is now (§4.7 step 9)."""
    return {"lastRunAt": now_iso, "sessions": dict(state["sessions"])}
