"""`bbx chat review status|run`: the command line of the nightly pass (§4.8).

`add_review_commands(chat_subparsers)` adds ``review status [--check] [--now]``
and ``review run [--dry-run] [--now] [--max-sessions N] [--reviewer NAME]`` under
``bbx chat``; `run_review_command(args)` runs the one parsed. Output lines and
exit codes are §4.8's:

- ``status``: ``<N> chat session(s) ready to review`` and the skip lines;
  ``--check`` exits 1 when N is 0.
- ``run --dry-run``: what a run would review now, and why the rest are skipped;
  no lock, no model call.
- ``run``: one summary line and one line per field the leak scan dropped; a
  second concurrent run exits 1 with ``another chat review is already running``.
  ``--max-sessions`` that is not a positive integer exits 1.

**(ours, departures)** A session active within the last 30 minutes is deferred
(§4.2); a new user's first chats are all such, and the original's
``deferred (active within 30m): <n>`` read as if nothing would ever happen. Here
the skip line is ``<n> deferred: active in the last 30 minutes; --now reviews
them anyway``, the run's counter says the same, and ``--now`` (on each command)
reviews them anyway — through the spec's own gate, judged at a later instant
(`beebox_impl.review.discovery.quiescence_judged_at`). Every error is one line
that starts ``bbx: `` (§4.8's ``--max-sessions`` and lock messages included), and
a ``--box`` that is not a box exits 1 instead of finding nothing to review.

Sessions originated on another machine are counted, never named. Warnings
(rewritten transcripts, spans past the per-run entry cap, reviewer failures) go
to stderr; on a terminal, so does a progress bar — never into piped output.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, Final, TextIO

from beebox_impl.cli import REVIEW_HELP
from beebox_impl.cli.common import EXIT_FAILED, add_box_option, box_refusal, fail
from beebox_impl.review.discovery import box_transcript_locator
from beebox_impl.review.lock import LockHeldError
from beebox_impl.review.origin import local_origin
from beebox_impl.review.reviewers.protocol import (
    DEFAULT_REVIEWER,
    REVIEWER_NAMES,
    ReviewerUnavailable,
    reviewer_by_name,
)
from beebox_impl.review.run import (
    DEFAULT_MAX_SESSIONS,
    ReviewPlan,
    RunSummary,
    plan_review,
    run_chat_review,
)
from beebox_impl.transcript.location import transcript_roots
from beebox_spec.review.qualification import QUIESCENCE, REVIEW_CHAR_THRESHOLD, SkipReason

__all__ = ["add_review_commands", "add_review_options", "run_review_command"]

EXIT_OK: Final = 0
_PROGRESS_WIDTH: Final = 24
# What a deferred session is told, and how it is reviewed anyway.
_ACTIVE_WITHIN: Final = f"active in the last {QUIESCENCE.total_seconds() / 60:g} minutes"
_NOW_HINT: Final = "--now reviews them anyway"


def add_review_commands(chat_subparsers: Any) -> None:
    """Add ``review status`` and ``review run`` to `bbx chat`'s subparsers."""
    add_review_options(chat_subparsers.add_parser("review", help=REVIEW_HELP))


def add_review_options(review: argparse.ArgumentParser) -> None:
    """Add ``status`` and ``run`` to the parser of ``bbx chat review``."""
    commands = review.add_subparsers(
        dest="review_command", metavar="REVIEW_COMMAND", required=True, help="what to do"
    )
    status = commands.add_parser("status", help="how many sessions have enough new material")
    status.add_argument(
        "--check", action="store_true", help="exit 1 when no session is ready to review"
    )
    _add_now_option(status)
    add_box_option(status)
    run = commands.add_parser("run", help="review the sessions that are ready")
    run.add_argument(
        "--dry-run", action="store_true", help="say which sessions would be reviewed, and stop"
    )
    _add_now_option(run)
    run.add_argument(
        "--max-sessions",
        default=str(DEFAULT_MAX_SESSIONS),
        metavar="N",
        help=f"review at most N sessions (default {DEFAULT_MAX_SESSIONS}); the rest wait",
    )
    run.add_argument(
        "--reviewer",
        default=DEFAULT_REVIEWER,
        metavar="NAME",
        help=f"{' | '.join(REVIEWER_NAMES)} (default {DEFAULT_REVIEWER}: offline)",
    )
    add_box_option(run)


def _add_now_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--now",
        action="store_true",
        help=f"include the sessions {_ACTIVE_WITHIN} (deferred otherwise)",
    )


def run_review_command(
    args: argparse.Namespace,
    *,
    environ: Mapping[str, str] | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    clock: Callable[[], datetime] | None = None,
) -> int:
    """Run the parsed ``bbx chat review …`` command; answers the exit code."""
    env = os.environ if environ is None else environ
    out = sys.stdout if stdout is None else stdout
    err = sys.stderr if stderr is None else stderr
    now = clock if clock is not None else (lambda: datetime.now(UTC))
    refusal = box_refusal(Path(args.box))
    if refusal is not None:
        return fail(refusal, stream=err)
    box_root = Path(args.box).resolve()
    try:
        return _run(args, box_root, env=env, out=out, err=err, now=now)
    except OSError as error:
        # A box the file system refuses (an unreadable husk folder, a full disk).
        return fail(f"cannot review the chats of {box_root}: {error}", stream=err)


def _run(
    args: argparse.Namespace,
    box_root: Path,
    *,
    env: Mapping[str, str],
    out: TextIO,
    err: TextIO,
    now: Callable[[], datetime],
) -> int:
    origin = local_origin(env)
    locate = box_transcript_locator(box_root, *transcript_roots(box_root, env, Path.home()))

    if args.review_command == "status":
        plan = plan_review(
            box_root, origin=origin, now=now(), locate=locate, include_active=args.now
        )
        count = len(plan.discovery.qualified)
        noun = "session" if count == 1 else "sessions"
        out.write(f"{count} chat {noun} ready to review\n")
        _write_skips(plan, out)
        return EXIT_FAILED if args.check and count == 0 else EXIT_OK

    max_sessions = _positive_int(args.max_sessions)
    if max_sessions is None:
        return fail(
            f'--max-sessions must be a positive integer, got "{args.max_sessions}"', stream=err
        )
    if args.dry_run:
        plan = plan_review(
            box_root,
            origin=origin,
            now=now(),
            locate=locate,
            max_sessions=max_sessions,
            include_active=args.now,
        )
        _write_dry_run(plan, out)
        return EXIT_OK
    try:
        reviewer = reviewer_by_name(args.reviewer, env)
    except ReviewerUnavailable as error:
        return fail(str(error), stream=err)
    progress = _ProgressBar(err) if err.isatty() else None
    try:
        summary = run_chat_review(
            box_root,
            reviewer,
            origin=origin,
            clock=now,
            locate=locate,
            max_sessions=max_sessions,
            warn=partial(_warn, err),
            progress=progress,
            include_active=args.now,
        )
    except LockHeldError as error:
        return fail(f"another chat review is already running — {error}", stream=err)
    finally:
        if progress is not None:
            progress.close()
    _write_run_summary(summary, out, include_active=args.now)
    return EXIT_OK


def _warn(err: TextIO, message: str) -> None:
    fail(message, stream=err)


def _positive_int(text: str) -> int | None:
    # A whole number written in decimal digits, at least 1 ("2.5", "-1", "x" are not).
    stripped = text.strip()
    if not stripped.isdecimal() or not stripped.isascii():
        return None
    value = int(stripped)
    return value if value >= 1 else None


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def _write_skips(plan: ReviewPlan, out: TextIO) -> None:
    """§4.8's skip lines (only non-zero ones), then the sessions of other machines."""
    skipped = plan.discovery.skipped
    deferred = skipped[SkipReason.DEFERRED_ACTIVE]
    if deferred > 0:
        out.write(f"  {deferred} deferred: {_ACTIVE_WITHIN}; {_NOW_HINT}\n")
    lines = [
        (f"below the {REVIEW_CHAR_THRESHOLD}-char threshold", skipped[SkipReason.BELOW_THRESHOLD]),
        ("too few user turns", skipped[SkipReason.TOO_FEW_TURNS]),
        ("husks whose transcript is gone", skipped[SkipReason.MISSING_TRANSCRIPT]),
    ]
    for label, count in lines:
        if count > 0:
            out.write(f"  {label}: {count}\n")
    foreign = skipped[SkipReason.FOREIGN_ORIGIN]
    if foreign > 0:
        sessions = _plural(foreign, "session", "sessions")
        out.write(f"  {sessions} originated on another machine (not reviewed here)\n")


def _write_dry_run(plan: ReviewPlan, out: TextIO) -> None:
    qualified = len(plan.discovery.qualified)
    out.write(f"would review {len(plan.planned)} of {qualified} qualified session(s)\n")
    for session in plan.planned:
        how = session.bootstrap or "increment"
        out.write(
            f"  {session.session_id}  {session.span_chars} new chars ({how})  {session.husk_path}\n"
        )
    if plan.overflow > 0:
        out.write(f"  (+{plan.overflow} beyond the per-run cap)\n")
    _write_skips(plan, out)


def _write_run_summary(summary: RunSummary, out: TextIO, *, include_active: bool) -> None:
    """§4.8: ``reviewed <n> session(s)``, the non-zero counters in order, the leak-scan drops."""
    # Under --now only a transcript written in the future (a clock's skew) is still
    # deferred, and --now would not review it either.
    still_active = "still active" if include_active else f"still active ({_NOW_HINT})"
    counters = [
        (summary.deferred_active, still_active),
        (summary.below_threshold, "below threshold"),
        (summary.missing_transcripts, "husk(s) with no transcript"),
        (summary.exhausted, "given up on"),
        (summary.session_errors, "error(s)"),
        (summary.bootstrapped, "read from the top"),
        (summary.rewritten, "transcript(s) rewritten"),
        (summary.already_applied, "already applied"),
        (summary.reviewer_failures, "failure(s)"),
        (summary.overflow, "deferred to the next run"),
    ]
    parts = [f"reviewed {summary.reviewed} session(s)"]
    parts.extend(f"{count} {label}" for count, label in counters if count > 0)
    out.write(", ".join(parts) + "\n")
    for rejected in summary.rejected:
        out.write(f"  leak scan dropped {rejected}\n")


class _ProgressBar:
    """A one-line bar on a terminal's stderr, redrawn in place."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._drawn = False

    def __call__(self, done: int, total: int) -> None:
        filled = _PROGRESS_WIDTH * done // total if total else _PROGRESS_WIDTH
        bar = "#" * filled + "-" * (_PROGRESS_WIDTH - filled)
        self._stream.write(f"\rchat review [{bar}] {done}/{total} sessions")
        self._stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            self._stream.write("\n")
            self._stream.flush()
