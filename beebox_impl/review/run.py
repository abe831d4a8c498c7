"""The chat review run: discover, then review each planned session in turn (§4.7).

The whole run holds lock group `retro` across processes (a second run is
refused at once with `LockHeldError`). It loads the journal, discovers, plans
the first `max_sessions` qualified sessions (oldest first; the rest are the
`overflow`, served on later nights), and for each planned session:

1. re-stats the transcript (gone → `missingTranscripts`; modified within 30
   minutes → `deferredActive`, unless the run includes active sessions — ``--now``,
   `quiescence_judged_at`): discovery ran a while ago;
2. reads the span again, from the file as it is now (resuming at the boundary
   discovery saw when the file still starts with the same bytes);
3. counts a bootstrap, and a rewrite (the existing account is kept and passed
   in, and a warning says so);
4. decides with the spec's `next_session_action`: nothing new, given up
   (`exhausted`), already on the husk (`alreadyApplied`: the journal catches up,
   no model call), or review;
5. calls the reviewer with `reviewer_span_text` (rendered, redacted, elided) and
   checks its output against §4.5; a failure counts against this span;
6. applies the output to the husk (`apply_review`) and moves the state as
   `state_after_write` says;
7. saves the journal — after *every* session, so a crash loses at most the
   session in flight (and that one is recognised next time by `review-span`).

An exception in one session is counted (`sessionErrors`), reported, and the run
goes on. A span longer than one page (`clipped`) is folded in a page at a time
over the following runs, and reported rather than silently deferred.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Final

import anyio

from beebox_impl.files import FileIdentity
from beebox_impl.review.apply import apply_review
from beebox_impl.review.cards import (
    FIELD_EVIDENCE,
    FIELD_REVIEW_SPAN,
    FIELD_TITLE,
    Card,
    HuskCard,
    StampedCard,
    husk_of_card,
    read_stamped_card,
)
from beebox_impl.review.discovery import (
    Discovery,
    TranscriptLocator,
    WalkResume,
    discover,
    mtime_of,
    prefix_digest,
    quiescence_judged_at,
    span_measure,
)
from beebox_impl.review.lock import REVIEW_LOCK_GROUP, hold_lock_group
from beebox_impl.review.origin import MachineOrigin
from beebox_impl.review.reviewers.protocol import Reviewer
from beebox_impl.review.store import (
    CachedHusk,
    CachedTranscript,
    DiscoveryCache,
    GrowthMark,
    ReviewStateFile,
    journal_span_id,
)
from beebox_impl.review.walk import (
    BoundaryMark,
    FileTag,
    PrefixHasher,
    SpanWalk,
    TranscriptEntries,
    resolve_span_walk,
)
from beebox_spec.entries import MAX_SESSION_ENTRIES, JsonValue, SessionEntry
from beebox_spec.errors import InvalidArgument
from beebox_spec.js_values import to_iso_timestamp
from beebox_spec.review.husk import HuskWritePlan
from beebox_spec.review.journal import (
    METADATA_CONSUMER,
    AppliedSpan,
    ResolvedSpan,
    ReviewState,
    SessionAction,
    SessionReviewState,
    applied_span_for,
    is_rewrite,
    next_session_action,
    session_state,
    span_id_for,
    state_after_already_applied,
    state_after_reviewer_failure,
    state_after_run,
    state_after_write,
    with_session,
)
from beebox_spec.review.qualification import QualifiedSession, SkipReason, is_quiescent
from beebox_spec.review.rendering import reviewer_span_text
from beebox_spec.review.reviewer import ReviewArgs, ReviewOutput, validate_review_output

__all__ = [
    "DEFAULT_MAX_SESSIONS",
    "REVIEW_LOCK_HOLDER",
    "ReviewPlan",
    "RunSummary",
    "plan_review",
    "review_chat_sessions",
    "run_chat_review",
]

_log = logging.getLogger(__name__)

# §4.8: sessions reviewed per run unless `--max-sessions` says otherwise.
DEFAULT_MAX_SESSIONS: Final = 20
# §4.7: who holds the lock, as a refused caller is told.
REVIEW_LOCK_HOLDER: Final = "chat-review"

Clock = Callable[[], datetime]
Warn = Callable[[str], None]
Progress = Callable[[int, int], None]


@dataclass
class RunSummary:
    """What a run did (§4.7 `RunSummary`); discovery's skips seed the first counters."""

    reviewed: int = 0
    already_applied: int = 0
    bootstrapped: int = 0
    rewritten: int = 0
    reviewer_failures: int = 0
    session_errors: int = 0
    exhausted: int = 0
    rejected: list[str] = field(default_factory=list)
    missing_transcripts: int = 0
    deferred_active: int = 0
    below_threshold: int = 0
    too_few_turns: int = 0
    foreign_origin: int = 0
    overflow: int = 0
    clipped: list[str] = field(default_factory=list)


@dataclass
class ReviewPlan:
    """Discovery, and the sessions a run would review now (`planned`) within the cap."""

    discovery: Discovery
    planned: list[QualifiedSession]
    overflow: int


def plan_review(
    box_root: Path,
    *,
    origin: MachineOrigin,
    now: datetime,
    locate: TranscriptLocator,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    state: ReviewState | None = None,
    cache: DiscoveryCache | None = None,
    keep_resumes: bool = False,
    include_active: bool = False,
) -> ReviewPlan:
    """Discover and cap (what `status` and `run --dry-run` print); no lock, no model call.

    ``include_active`` (``--now``): sessions active within the last 30 minutes
    qualify too (`quiescence_judged_at`).
    """
    # The cap counts sessions: fewer than one would plan nothing forever.
    if max_sessions < 1:
        raise InvalidArgument(f"max_sessions must be at least 1, got {max_sessions}")
    if state is None:
        state = ReviewStateFile(box_root).load().state
    own_cache = cache is None
    if cache is None:
        cache = DiscoveryCache(box_root)
    discovery = discover(
        box_root,
        state=state,
        origin=origin,
        now=quiescence_judged_at(now, include_active=include_active),
        locate=locate,
        cache=cache,
        keep_resumes=keep_resumes,
    )
    if own_cache:
        cache.save()
    planned = discovery.qualified[:max_sessions]
    return ReviewPlan(discovery, planned, len(discovery.qualified) - len(planned))


def run_chat_review(
    box_root: Path,
    reviewer: Reviewer,
    *,
    origin: MachineOrigin,
    clock: Clock,
    locate: TranscriptLocator,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    warn: Warn | None = None,
    progress: Progress | None = None,
    include_active: bool = False,
) -> RunSummary:
    """One review run under the `retro` lock (`LockHeldError` when another holds it).

    ``include_active`` (``--now``) reviews sessions active within the last 30
    minutes too (`plan_review`).
    """
    say = warn if warn is not None else _log.warning
    with hold_lock_group(box_root, REVIEW_LOCK_GROUP, REVIEW_LOCK_HOLDER):
        store = ReviewStateFile(box_root)
        state = store.load().state
        cache = DiscoveryCache(box_root)
        plan = plan_review(
            box_root,
            origin=origin,
            now=clock(),
            locate=locate,
            max_sessions=max_sessions,
            state=state,
            cache=cache,
            keep_resumes=True,
            include_active=include_active,
        )
        skipped = plan.discovery.skipped
        summary = RunSummary(
            missing_transcripts=skipped[SkipReason.MISSING_TRANSCRIPT],
            deferred_active=skipped[SkipReason.DEFERRED_ACTIVE],
            below_threshold=skipped[SkipReason.BELOW_THRESHOLD],
            too_few_turns=skipped[SkipReason.TOO_FEW_TURNS],
            foreign_origin=skipped[SkipReason.FOREIGN_ORIGIN],
            overflow=plan.overflow,
        )
        session_run = _SessionReview(
            box_root,
            reviewer=reviewer,
            clock=clock,
            warn=say,
            summary=summary,
            cache=cache,
            include_active=include_active,
        )
        for done, qualified in enumerate(plan.planned):
            if progress is not None:
                progress(done, len(plan.planned))
            try:
                changed = session_run.review(
                    state,
                    qualified,
                    plan.discovery.resumes.get(qualified.session_id),
                    plan.discovery.husk_names.get(qualified.session_id),
                )
            except Exception as error:
                # One session's trouble (an unreadable card, a full disk) is not the run's.
                summary.session_errors += 1
                _log.debug("chat review of %s failed", qualified.session_id, exc_info=True)
                say(f"chat review: session {qualified.session_id}: {type(error).__name__}: {error}")
                continue
            if changed is not None:
                state = changed
                store.save(state)
        if progress is not None:
            progress(len(plan.planned), len(plan.planned))
        store.save(state_after_run(state, to_iso_timestamp(clock())))
        cache.save()
        return summary


@dataclass(frozen=True)
class _Walked:
    """A session's span as the review step walked it: the walk, the resume point it
    went on from (None when it read from the top), its source, and the file's
    `stat` before it."""

    walk: SpanWalk[FileTag]
    resumed: WalkResume | None
    source: TranscriptEntries
    status: os.stat_result


class _SessionReview:
    """Steps 1–8 of §4.7 for one session (see the module docstring)."""

    def __init__(
        self,
        box_root: Path,
        *,
        reviewer: Reviewer,
        clock: Clock,
        warn: Warn,
        summary: RunSummary,
        cache: DiscoveryCache,
        include_active: bool,
    ) -> None:
        self.box_root = box_root
        self.include_active = include_active
        self.reviewer = reviewer
        self.clock = clock
        self.warn = warn
        self.summary = summary
        self.cache = cache

    def review(
        self,
        state: ReviewState,
        qualified: QualifiedSession,
        resume: WalkResume | None,
        husk_name: str | None,
    ) -> ReviewState | None:
        """The state after reviewing one session, or None when it did not change."""
        session_id = qualified.session_id
        quiet = self._stat_if_quiet(Path(qualified.log_path))
        if quiet is None:
            return None
        status, now = quiet
        previous = session_state(state, session_id)
        walked = self._reread(qualified, previous, resume, status)
        if walked is None:
            return None
        span = walked.walk.span
        # Step 4: the span's identity.
        key = span_id_for(session_id, span)
        husk_path = Path(qualified.husk_path)
        read = read_stamped_card(husk_path)
        card = read.card
        action = next_session_action(previous, key, card.text(FIELD_REVIEW_SPAN))
        if action is SessionAction.NOTHING_NEW:
            return None
        assert key is not None, "a span with entries has an id"
        if action is SessionAction.EXHAUSTED:
            self.summary.exhausted += 1
            return None
        applied = applied_span_for(session_id, span, to_iso_timestamp(now))
        if action is SessionAction.ALREADY_APPLIED:
            self.summary.already_applied += 1
            after = state_after_already_applied(
                previous, applied, card.text(FIELD_TITLE), qualified.snippet_title
            )
            self._after(session_id, after=after, walked=walked, husk_name=husk_name)
            return with_session(state, session_id, after)
        output = self._reviewer_output(session_id, span, card)
        if output is None:
            return with_session(state, session_id, state_after_reviewer_failure(previous, key))
        plan = self._write_husk(
            qualified, husk_name, output, stored=previous, span_id=key, read=read
        )
        after = state_after_write(previous, applied, plan, key)
        if plan.review_span_applied:
            self.summary.reviewed += 1
        self._after(session_id, after=after, walked=walked, husk_name=husk_name)
        return with_session(state, session_id, after)

    def _stat_if_quiet(self, log_path: Path) -> tuple[os.stat_result, datetime] | None:
        """Step 1: the transcript's `stat` as it is now, and the instant it was judged
        quiet at; None (counted) when it is gone or active again."""
        try:
            status = os.stat(log_path)
        except OSError:
            self.summary.missing_transcripts += 1
            return None
        now = self.clock()
        judged_at = quiescence_judged_at(now, include_active=self.include_active)
        if not is_quiescent(mtime_of(status), judged_at):
            self.summary.deferred_active += 1
            return None
        return status, now

    def _reread(
        self,
        qualified: QualifiedSession,
        previous: SessionReviewState,
        resume: WalkResume | None,
        status: os.stat_result,
    ) -> _Walked | None:
        """Steps 2–3: the span as the transcript is now (its `stat` ``status``),
        bootstraps and rewrites counted; None (counted) when it is gone."""
        summary = self.summary
        session_id = qualified.session_id
        log_path = Path(qualified.log_path)
        # Step 2: the span, re-read.
        source = TranscriptEntries(log_path, session_id)
        try:
            walked = self._walk(
                source,
                previous["applied"].get(METADATA_CONSUMER),
                journal_span_id(previous),
                resume,
                status,
            )
        except OSError:
            summary.missing_transcripts += 1
            return None
        # Step 3: read from the top.
        bootstrap = walked.walk.span["bootstrap"]
        if bootstrap is not None:
            summary.bootstrapped += 1
            if is_rewrite(bootstrap):
                summary.rewritten += 1
                self.warn(
                    f"chat review: session {session_id} was rewritten ({bootstrap}): "
                    "read from the top, existing account kept"
                )
        return walked

    def _reviewer_output(
        self, session_id: str, span: ResolvedSpan, card: Card
    ) -> ReviewOutput | None:
        """Step 7: the reviewer's output on ``span``, checked against §4.5; None
        (counted, and said) when the reviewer failed."""
        args = ReviewArgs(
            session_id=session_id,
            current_title=card.text(FIELD_TITLE),
            current_account=card.text(FIELD_EVIDENCE),
            span=reviewer_span_text(span["entries"]),
            bootstrap=span["bootstrap"] is not None,
        )
        try:
            # Checked here too: a third-party reviewer is held to the same schema.
            return validate_review_output(_as_json(self.reviewer.review(args)))
        except Exception as error:
            # The reviewer's trouble counts against this span only.
            self.summary.reviewer_failures += 1
            self.warn(f"chat review: reviewer failed on session {session_id}: {error}")
            return None

    def _write_husk(
        self,
        qualified: QualifiedSession,
        husk_name: str | None,
        output: ReviewOutput,
        *,
        stored: SessionReviewState,
        span_id: str,
        read: StampedCard,
    ) -> HuskWritePlan:
        """Step 8: ``output`` applied to the husk (`apply_review`), the leak scan's
        drops said; the plan that was written."""
        session_id = qualified.session_id
        husk_path = Path(qualified.husk_path)
        plan, written = apply_review(
            self.box_root,
            husk_path,
            output,
            stored=stored,
            snippet_title=qualified.snippet_title,
            span_id=span_id,
            known=read,
        )
        # The review sets no field discovery reads: the card read for the write has them.
        self._remember_husk(husk_path, husk_name, husk_of_card(husk_path, written))
        for rejected in plan.rejected:
            self.summary.rejected.append(f"{session_id}:{rejected}")
            self.warn(f"chat review: leak scan dropped {session_id}:{rejected}")
        return plan

    def _remember_husk(self, husk_path: Path, husk_name: str | None, husk: HuskCard) -> None:
        """Our own card write changed the husk's identity, not its discovery fields."""
        if husk_name is None:
            return
        identity = FileIdentity.of(os.stat(husk_path))
        self.cache.remember_husk(
            husk_name,
            CachedHusk(identity, husk.session, husk.origin, husk.engine, husk.context_dir),
        )

    def _walk(
        self,
        source: TranscriptEntries,
        applied: AppliedSpan | None,
        journal: str | None,
        resume: WalkResume | None,
        status: os.stat_result,
    ) -> _Walked:
        """The span, resumed at discovery's boundary when the file still starts the same."""
        if (
            resume is not None
            and journal == resume.journal
            and resume.holds_for(source.path, FileIdentity.of(status))
        ):
            walk = resolve_span_walk(
                source.open, applied, resume=(resume.mark, source.open_after(resume.mark))
            )
            return _Walked(walk, resume, source, status)
        return _Walked(resolve_span_walk(source.open, applied), None, source, status)

    def _after(
        self,
        session_id: str,
        *,
        after: SessionReviewState,
        walked: _Walked,
        husk_name: str | None,
    ) -> None:
        """Report a clipped span; tell discovery's cache when nothing is left unread."""
        walk, resumed, source = walked.walk, walked.resumed, walked.source
        span = walk.span
        if span["clipped"]:
            self.summary.clipped.append(session_id)
            self.warn(
                f"chat review: session {session_id} has more than {MAX_SESSION_ENTRIES} new "
                f"entries: folded in {len(span['entries'])}, the rest on the next runs"
            )
        journal = journal_span_id(after)
        # Only a walk whose first pass counted every line up to the span's end
        # knows the turns (a rewrite or a lost boundary is read twice, counted once).
        if (
            husk_name is None
            or journal is None
            or journal != span_id_for(session_id, span)
            or span["bootstrap"] not in (None, "no-journal")
            or walk.last_tag is None
        ):
            return
        growth = None
        if span["clipped"]:
            turns, snippet, chars, growth = _next_page_facts(
                source.path, session_id, walk.last_tag, resumed
            )
        else:
            turns, snippet, chars = source.user_turns, source.first_user_snippet, 0
            # All read and applied: what is appended next is the whole next span.
            prefix = (
                prefix_digest(source.path, source.counted_end, resumed)
                if source.counted_end
                else None
            )
            if prefix is not None:
                growth = GrowthMark(source.counted_end, source.counted_lines, prefix.hex(), 0, 0)
        self.cache.remember_transcript(
            husk_name,
            CachedTranscript(
                FileIdentity.of(walked.status), journal, turns, snippet, chars, None, growth
            ),
        )


def _as_json(output: ReviewOutput) -> JsonValue:
    """A reviewer's output as the plain JSON the schema check reads."""
    return {
        "title": output["title"],
        "contains": output["contains"],
        "notes": [{"kind": note["kind"], "text": note["text"]} for note in output["notes"]],
    }


async def review_chat_sessions(
    box_root: Path,
    reviewer: Reviewer,
    *,
    origin: MachineOrigin,
    clock: Clock,
    locate: TranscriptLocator,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    warn: Warn | None = None,
    include_active: bool = False,
) -> RunSummary:
    """`run_chat_review` from async code: the blocking run goes to a worker thread.

    Cancelling the caller does not stop the run mid-session (the thread finishes
    its work and the journal stays consistent); the result is then dropped.
    """
    return await anyio.to_thread.run_sync(
        partial(
            run_chat_review,
            box_root,
            reviewer,
            origin=origin,
            clock=clock,
            locate=locate,
            max_sessions=max_sessions,
            warn=warn,
            include_active=include_active,
        )
    )


def _next_page_facts(
    path: Path, session_id: str, end: FileTag, resumed: WalkResume | None
) -> tuple[int, str | None, int, GrowthMark | None]:
    """What discovery would find after a clipped span: turns, snippet, the next span's
    size, and where that was counted to (`GrowthMark`).

    Read now, while the file is in the page cache, so the next `status` of an
    unchanged box reads no transcript (and of a grown one, only what was appended):
    the entries after the span's last line, one page of them measured, the rest
    only counted.
    """
    source = TranscriptEntries(path, session_id)
    page: list[SessionEntry] = []
    for entry, _ in source.open_after(BoundaryMark(PrefixHasher(), -1, end)):
        if len(page) < MAX_SESSION_ENTRIES:
            page.append(entry)
    chars, pieces = span_measure(page)
    prefix = prefix_digest(path, source.counted_end, resumed) if source.counted_end else None
    growth = (
        None
        if prefix is None
        else GrowthMark(source.counted_end, source.counted_lines, prefix.hex(), len(page), pieces)
    )
    return source.user_turns, source.first_user_snippet, chars, growth
