"""Discovery: which husks' sessions have enough unread material to review (§4.2).

Husk-first: the corpus is `_content/chat/web/*.chat.card`; a session without a
husk is out of scope. Per husk, the gates of
`beebox_spec.review.qualification.DISCOVERY_GATES` decide, in their order, with facts
gathered only as far as needed:

1. the husk's fields (session, origin) — from the discovery cache when the husk
   file is unchanged, else read;
2. a stat of the transcript (missing, or modified within the last 30 minutes);
3. only then a walk of the transcript (`beebox_impl.review.walk`): real user
   turns over every line, and the unread span resolved against the journal, its
   size measured as `beebox_spec.review.journal.span_size` — or, when neither the
   transcript nor the session's journal entry changed since the last walk, the
   cached result of that walk, reading no transcript byte; or, when the
   transcript is the same file grown longer (same inode, and every byte up to
   where the last walk stopped unchanged — a digest at C speed, not a parse),
   the cached result counted on over the appended lines alone (`_count_on`). That last shortcut is
   `status`'s: the run's own discovery walks, to hand the review step its resume
   point, and the review step always resolves the span from the journal.

A qualified session is the spec's `QualifiedSession`: scalars only. Nothing
parsed survives discovery; the review step reads its span again. For the run,
discovery may also keep a *resume point* per qualified session — the prefix
hash state at the journal's boundary and a digest of the file's bytes before it
(`WalkResume`) — so the review step reads only what follows the boundary when
the file still starts with exactly those bytes. Those bytes are hashed once a
run: the growth mark's digest of the whole walked file, here and after the
review, goes on from the resume point's digest state over the bytes after the
boundary; and the review step takes the file as unchanged, without hashing its
prefix again, while its identity (device, inode, size, mtime) is the one
discovery hashed — the same test the transcript indexes stand on
(`docs/design.md#design-5-offset-index`).
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from beebox_impl.files import FileIdentity
from beebox_impl.review.cards import CardFormatError, HuskCard, iter_husk_paths, read_husk
from beebox_impl.review.origin import MachineOrigin
from beebox_impl.review.store import (
    CachedHusk,
    CachedTranscript,
    DiscoveryCache,
    GrowthMark,
    journal_span_id,
)
from beebox_impl.review.walk import (
    Blake2b,
    BoundaryMark,
    FileTag,
    SpanWalk,
    TranscriptEntries,
    hash_on,
    raw_prefix_digest,
    raw_prefix_hash,
    resolve_span_walk,
)
from beebox_impl.transcript.location import (
    InvalidSessionId,
    encode_project_dir,
    locate_transcript_named,
)
from beebox_spec.entries import MAX_SESSION_ENTRIES, SessionEntry
from beebox_spec.errors import InvalidArgument
from beebox_spec.review.journal import METADATA_CONSUMER, ReviewState, session_state
from beebox_spec.review.qualification import (
    QUIESCENCE,
    REVIEW_CHAR_THRESHOLD,
    REVIEW_MIN_USER_TURNS,
    DiscoveryFacts,
    QualifiedSession,
    SkipReason,
    first_skip_reason,
    order_for_review,
    snippet_title_from,
)
from beebox_spec.review.rendering import RENDERED_ENTRY_SEPARATOR, render_entries

__all__ = [
    "Discovery",
    "TranscriptLocator",
    "WalkResume",
    "box_transcript_locator",
    "discover",
    "mtime_of",
    "prefix_digest",
    "quiescence_judged_at",
    "span_measure",
]

_log = logging.getLogger(__name__)

TranscriptLocator = Callable[[HuskCard], Path]
"""Where a husk's transcript is on this machine (`InvalidSessionId` when it cannot be named)."""


def box_transcript_locator(box_root: Path, *projects_roots: Path) -> TranscriptLocator:
    """Claude Code's layout: the session's JSONL in the project folder of the box,
    under the first of ``projects_roots`` (at least one) that holds it, as the box
    looks (`beebox_impl.transcript.location.transcript_roots`: its own folder, where
    the echo engine writes, then Claude Code's).

    A husk whose session ran in a context folder (`context-dir`, relative to the
    box) has its transcript in that folder's project. **(inference: §4.1 records
    the context folder beside the session; the engine runs there)**
    """
    if not projects_roots:
        raise InvalidArgument("a box's transcripts need at least one projects root")
    # A folder's project name, found once per locator (one discovery): finding it
    # resolves the folder's real path, a system call per path component.
    encoded: dict[Path, str] = {}

    def locate(husk: HuskCard) -> Path:
        cwd = box_root / husk.context_dir if husk.context_dir else box_root
        name = encoded.get(cwd)
        if name is None:
            name = encoded[cwd] = encode_project_dir(cwd)
        return locate_transcript_named(name, husk.session, projects_roots)

    return locate


def mtime_of(status: os.stat_result) -> datetime:
    """A file's modification time as a zone-aware instant."""
    return datetime.fromtimestamp(status.st_mtime_ns / 1e9, UTC)


def quiescence_judged_at(now: datetime, *, include_active: bool) -> datetime:
    """The instant `beebox_spec.review.qualification.is_quiescent` is judged at.

    ``now``; with ``include_active`` (``bbx chat review … --now``), `QUIESCENCE`
    later: the spec's own gate, given that instant, then passes every transcript
    last written by ``now``, so a session still active is reviewed anyway (one
    modified in the future, a clock's skew, is still deferred).
    """
    return now + QUIESCENCE if include_active else now


@dataclass(frozen=True)
class WalkResume:
    """Where a walk may resume: the boundary mark, valid for journal entry `journal`.

    Valid while the file's first `mark.tag.end` bytes are unchanged: taken as so
    while the file's identity is still `identity` (the file as it was when they
    were hashed), else checked against `prefix_hash`'s digest.
    """

    journal: str
    mark: BoundaryMark[FileTag]
    identity: FileIdentity
    prefix_hash: Blake2b = field(repr=False)  # of the first `mark.tag.end` bytes; copy to go on

    def holds_for(self, path: Path, identity: FileIdentity) -> bool:
        """Whether the file now at `path`, of `identity`, still starts with those bytes."""
        if identity == self.identity:
            return True
        return raw_prefix_digest(path, self.mark.tag.end) == self.prefix_hash.digest()

    def hash_to(self, path: Path, end: int) -> bytes | None:
        """The digest of the file's first `end` bytes (≥ the boundary's), going on
        from the boundary: only the bytes after it are read. Valid once `holds_for`."""
        hashed = hash_on(self.prefix_hash.copy(), path, self.mark.tag.end, end)
        return None if hashed is None else hashed.digest()


@dataclass
class Discovery:
    """What discovery found: the qualified sessions (oldest first) and why the rest were skipped.

    `skipped` counts by `SkipReason`; `deferred_sessions` names the sessions
    still active (§4.2 keeps that list); `husk_names` maps a qualified
    session to its husk's file name (the cache's key); `resumes` holds resume
    points when asked for.
    """

    qualified: list[QualifiedSession] = field(default_factory=list)
    skipped: Counter[SkipReason] = field(default_factory=Counter)
    deferred_sessions: list[str] = field(default_factory=list)
    husk_names: dict[str, str] = field(default_factory=dict)
    resumes: dict[str, WalkResume] = field(default_factory=dict)
    transcript_bytes_read: int = 0


def discover(
    box_root: Path,
    *,
    state: ReviewState,
    origin: MachineOrigin,
    now: datetime,
    locate: TranscriptLocator,
    cache: DiscoveryCache,
    keep_resumes: bool = False,
) -> Discovery:
    """Run the gates over every husk of the box (see the module docstring), judged at
    ``now`` (`quiescence_judged_at` is the instant to give for ``--now``)."""
    gates = _HuskGates(state, origin, now, locate, cache, keep_resumes)
    qualified: list[QualifiedSession] = []
    names: set[str] = set()
    for husk_path in iter_husk_paths(box_root):
        names.add(husk_path.name)
        husk = _husk(husk_path, cache)
        if husk is None:
            continue
        session = gates.judge(husk_path, husk)
        if session is not None:
            qualified.append(session)
    cache.keep_only(names)
    found = gates.found
    found.qualified = order_for_review(qualified)
    return found


@dataclass
class _HuskGates:
    """One discovery's gates, run husk by husk; what they skipped, and why, in `found`."""

    state: ReviewState
    origin: MachineOrigin
    now: datetime
    locate: TranscriptLocator
    cache: DiscoveryCache
    keep_resumes: bool
    found: Discovery = field(default_factory=Discovery)

    def judge(self, husk_path: Path, husk: HuskCard) -> QualifiedSession | None:
        """The husk's session when it passes every gate, else None (its skip counted)."""
        quiet = self._quiet_transcript(husk_path, husk)
        if quiet is None:
            return None
        log_path, log_status, mtime = quiet
        facts = _transcript_facts(
            husk,
            husk_path.name,
            log_path,
            log_status,
            state=self.state,
            cache=self.cache,
            found=self.found,
            keep_resumes=self.keep_resumes,
        )
        reason = first_skip_reason(
            DiscoveryFacts(
                husk.origin,
                self.origin.id,
                mtime,
                # A transcript gone mid-walk is missing, whatever its turns were.
                facts.user_turns if facts is not None else REVIEW_MIN_USER_TURNS,
                facts.span_chars if facts is not None else None,
            ),
            self.now,
        )
        if reason is not None:
            self.found.skipped[reason] += 1
            self.found.resumes.pop(husk.session, None)
            return None
        assert facts is not None, "a qualified session was walked"
        self.found.husk_names[husk.session] = husk_path.name
        return QualifiedSession(
            session_id=husk.session,
            husk_path=os.fspath(husk_path),
            log_path=os.fspath(log_path),
            engine=husk.engine,
            mtime=mtime,
            span_chars=facts.span_chars,
            bootstrap=facts.bootstrap,
            snippet_title=snippet_title_from(facts.first_user_snippet),
        )

    def _quiet_transcript(
        self, husk_path: Path, husk: HuskCard
    ) -> tuple[Path, os.stat_result, datetime] | None:
        """The husk's transcript, its `stat` and modification time, when the gates that
        need no read pass; else None (the skip counted)."""
        try:
            log_path = self.locate(husk)
        except InvalidSessionId as error:
            _log.warning("husk %s names no transcript: %s", husk_path, error)
            self.found.skipped[SkipReason.MISSING_TRANSCRIPT] += 1
            return None
        try:
            log_status: os.stat_result | None = os.stat(log_path)
        except OSError:
            log_status = None
        mtime = mtime_of(log_status) if log_status is not None else None
        # The gates up to the quiescence check need no read; the later facts pass here.
        early = first_skip_reason(
            DiscoveryFacts(
                husk.origin, self.origin.id, mtime, REVIEW_MIN_USER_TURNS, REVIEW_CHAR_THRESHOLD
            ),
            self.now,
        )
        if early is not None:
            self.found.skipped[early] += 1
            if early is SkipReason.DEFERRED_ACTIVE:
                self.found.deferred_sessions.append(husk.session)
            return None
        assert log_status is not None, "a quiet transcript was stat'ed"
        assert mtime is not None, "a quiet transcript has a modification time"
        return log_path, log_status, mtime


def _husk(path: Path, cache: DiscoveryCache) -> HuskCard | None:
    try:
        identity = FileIdentity.of(os.stat(path))
    except OSError:
        return None
    cached = cache.husk(path.name, identity)
    if cached is not None:
        return HuskCard(path, cached.session, cached.origin, cached.engine, cached.context_dir)
    try:
        husk = read_husk(path)
    except (OSError, UnicodeDecodeError, CardFormatError) as error:
        _log.warning("skipping husk %s: %s", path, error)
        return None
    cache.remember_husk(
        path.name,
        CachedHusk(identity, husk.session, husk.origin, husk.engine, husk.context_dir),
    )
    return husk


def _transcript_facts(
    husk: HuskCard,
    husk_name: str,
    log_path: Path,
    log_status: os.stat_result,
    *,
    state: ReviewState,
    cache: DiscoveryCache,
    found: Discovery,
    keep_resumes: bool,
) -> CachedTranscript | None:
    """The walk's facts (cached, or walked now); None when the transcript vanished."""
    session = session_state(state, husk.session)
    journal = journal_span_id(session)
    identity = FileIdentity.of(log_status)
    cached = cache.transcript(husk_name, identity, journal)
    if cached is not None:
        return cached
    grown = None if keep_resumes else cache.grown_transcript(husk_name, identity, journal)
    if grown is not None:
        counted_on = _count_on(grown, log_path, husk.session, identity, found)
        if counted_on is not None:
            cache.remember_transcript(husk_name, counted_on)
            return counted_on
    source = TranscriptEntries(log_path, husk.session)
    try:
        walk = resolve_span_walk(source.open, session["applied"].get(METADATA_CONSUMER), drain=True)
    except OSError as error:
        _log.info("transcript %s gone while reading it: %s", log_path, error)
        return None
    finally:
        found.transcript_bytes_read += source.bytes_read
    chars, pieces = span_measure(walk.span["entries"])
    resume = None
    mark = walk.boundary
    if keep_resumes and journal is not None and mark is not None and mark.tag.terminated:
        hashed = raw_prefix_hash(log_path, mark.tag.end)
        if hashed is not None:
            resume = found.resumes[husk.session] = WalkResume(journal, mark, identity, hashed)
    facts = CachedTranscript(
        identity,
        journal,
        source.user_turns,
        source.first_user_snippet,
        chars,
        walk.span["bootstrap"],
        _growth_mark(log_path, source, walk, pieces, resume),
    )
    cache.remember_transcript(husk_name, facts)
    return facts


def prefix_digest(path: Path, end: int, resume: WalkResume | None) -> bytes | None:
    """`raw_prefix_digest(path, end)`, going on from `resume`'s digest state when it
    holds and its boundary lies within the first `end` bytes."""
    if resume is not None and resume.mark.tag.end <= end:
        return resume.hash_to(path, end)
    return raw_prefix_digest(path, end)


def span_measure(entries: list[SessionEntry]) -> tuple[int, int]:
    """`beebox_spec.review.journal.span_size` of a span of `entries`, and how many of them
    rendered to something: the rendered entries, joined by the separator."""
    lengths = [len(rendered) for entry in entries if (rendered := render_entries([entry]))]
    if not lengths:
        return 0, 0
    return sum(lengths) + len(RENDERED_ENTRY_SEPARATOR) * (len(lengths) - 1), len(lengths)


def _growth_mark(
    log_path: Path,
    source: TranscriptEntries,
    walk: SpanWalk[FileTag],
    pieces: int,
    resume: WalkResume | None,
) -> GrowthMark | None:
    # Facts can be counted on from where this walk stopped only when appending lines
    # extends its span (or, past a page, leaves it be): a span resolved normally or
    # from the top with no journal, over a counting pass that reached a complete line.
    span = walk.span
    if span["bootstrap"] not in (None, "no-journal"):
        return None
    if source.counted_end == 0:
        return None
    prefix = prefix_digest(log_path, source.counted_end, resume)
    if prefix is None:
        return None
    return GrowthMark(
        source.counted_end, source.counted_lines, prefix.hex(), len(span["entries"]), pieces
    )


def _count_on(
    grown: CachedTranscript,
    log_path: Path,
    session_id: str,
    identity: FileIdentity,
    found: Discovery,
) -> CachedTranscript | None:
    """`grown`'s facts for the file it was counted from, now longer: the appended lines
    counted on (turns, the span's entries up to a page). None when the file was not
    simply appended to, or is gone: then it is walked."""
    mark = grown.growth
    assert mark is not None, "only a cached walk with a growth mark is counted on"
    # One pass over the bytes: the old prefix checked, then fed on to the new end.
    hashed = raw_prefix_hash(log_path, mark.end)
    if hashed is None or hashed.hexdigest() != mark.prefix:
        return None
    source = TranscriptEntries(log_path, session_id)
    chars, pieces, entries = grown.span_chars, mark.span_pieces, mark.span_entries
    try:
        for entry, _tag in source.open_at(mark.end, mark.line_count + 1):
            # Past a page the span is clipped; the turns are still counted to the end.
            if entries == MAX_SESSION_ENTRIES:
                continue
            entries += 1
            rendered = render_entries([entry])
            if rendered:
                chars += len(rendered) + (len(RENDERED_ENTRY_SEPARATOR) if pieces else 0)
                pieces += 1
    except OSError as error:
        _log.info("transcript %s gone while reading it: %s", log_path, error)
        return None
    finally:
        found.transcript_bytes_read += source.bytes_read
    prefix = hash_on(hashed, log_path, mark.end, source.counted_end)
    return CachedTranscript(
        identity,
        grown.journal,
        grown.user_turns + source.user_turns,
        grown.first_user_snippet
        if grown.first_user_snippet is not None
        else source.first_user_snippet,
        chars,
        grown.bootstrap,
        None
        if prefix is None
        else GrowthMark(
            source.counted_end, source.counted_lines, prefix.hexdigest(), entries, pieces
        ),
    )
