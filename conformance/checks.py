"""Public conformance checks: call them from your own test suite, with your own implementation.

Each ``check_*`` takes a factory for the thing under test — as trio's
``check_one_way_stream`` does — runs the packaged vectors of its kinds through the
runner (`conformance.runner.run_files`), and raises `ConformanceFailure` listing
every failing case in the runner's own lines: file, case, expected, got, and the
first place they differ. None of them needs pytest. The factory is called afresh
for each case, so no case sees another's state. `conformance.protocols` says what
each factory must return; `beebox_spec`'s modules are implementations of the pure
rules' protocols, so ``check_reconcile(lambda: beebox_spec.reconcile)`` passes.

- ``check_media_refs``, ``check_content_transform``, ``check_transcript_reader``,
  ``check_reconcile``, ``check_journal``, ``check_review_rules``,
  ``check_lifecycle`` are plain functions;
- ``check_engine``, ``check_chat_session`` and ``check_thread_session`` are
  ``async`` (anyio): await them from an async test on asyncio or on trio. The
  session checks drive the host's session on the caller's own event loop, while
  the runner walks the vector files in a worker thread.

Every check accepts ``vectors``: the files or folders to run (default: the
packaged vectors), so a host can add its own. A file that cannot be parsed, or is
of a kind the format does not know, fails every check it is given to; a check
that finds no case of its kinds fails too — a check that checked nothing must not
read as a pass.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread

from beebox_spec.transcript import PhotoMode
from conformance.engine_contract import DEFAULT_TIMEOUT_SECONDS, run_engine_contract
from conformance.protocols import (
    ChatSessionFactory,
    ContentTransformer,
    EngineFactory,
    LifecycleTable,
    MediaRefCodec,
    Reconciler,
    ReviewRules,
    SpanJournal,
    ThreadSessionFactory,
    TranscriptReader,
)
from conformance.runner import (
    PACKAGED_VECTORS,
    CaseFailure,
    RunReport,
    find_vector_files,
    run_files,
)
from conformance.targets import KNOWN_KINDS, HandlerTable
from conformance.targets.impl_session import run_session_scenario
from conformance.targets.spec_lifecycle import lifecycle_handlers
from conformance.targets.spec_media import content_transform_handlers, media_ref_handlers
from conformance.targets.spec_reconcile import reconcile_handlers
from conformance.targets.spec_review import journal_handlers, review_rule_handlers
from conformance.targets.transcript_files import transcript_file_handlers
from conformance.vectorfile import VectorFile, VectorFileError, load_vector_file

__all__ = [
    "ConformanceFailure",
    "check_chat_session",
    "check_content_transform",
    "check_engine",
    "check_journal",
    "check_lifecycle",
    "check_media_refs",
    "check_reconcile",
    "check_review_rules",
    "check_thread_session",
    "check_transcript_reader",
]

_SESSION_SCENARIO = "session/scenario"


class ConformanceFailure(AssertionError):
    """A check found cases the implementation does not pass.

    The message opens with the check and the count, then one runner line per
    failing case, then the runner's closing line. ``failures`` holds the cases.
    """

    def __init__(self, check: str, report: RunReport) -> None:
        self.failures: tuple[CaseFailure, ...] = tuple(report.failures or ())
        ran = report.passed + report.failed
        heading = (
            f"{check}: {report.failed} of {ran} cases failed"
            if ran
            else f"{check}: no vector case of its kinds was found, so nothing was checked"
        )
        lines = [heading, *(failure.render() for failure in self.failures), report.closing_line()]
        super().__init__("\n".join(lines))


def _is_for_this_check(vector_file: VectorFile, kinds: frozenset[str], session: str | None) -> bool:
    # A kind the format does not know fails every check it reaches: never passed over.
    if vector_file.kind not in KNOWN_KINDS:
        return True
    if vector_file.kind not in kinds:
        return False
    return session is None or any(
        isinstance(case.input, dict) and case.input.get("session") == session
        for case in vector_file.cases
    )


def _files_for(
    vectors: Iterable[Path], kinds: frozenset[str], session: str | None = None
) -> list[Path]:
    """The vector files a check runs: those of its kinds, and those no check may pass over.

    A file that cannot be read, or of a kind the format does not know, is kept:
    the runner reports it as a failure. With ``session``, a scenario file is kept
    when any of its cases is of that session kind (a case of the other kind in it
    fails: the check has no such session to run it on).
    """
    chosen: list[Path] = []
    for path in find_vector_files(vectors):
        try:
            keep = _is_for_this_check(load_vector_file(path), kinds, session)
        except VectorFileError:
            keep = True
        if keep:
            chosen.append(path)
    return chosen


def _raise_unless_passed(check: str, report: RunReport) -> None:
    if report.failed or report.passed == 0:
        raise ConformanceFailure(check, report)


def _check(check: str, vectors: Iterable[Path], handlers: HandlerTable) -> None:
    _raise_unless_passed(check, run_files(_files_for(vectors, frozenset(handlers)), handlers))


# --- The pure rules -------------------------------------------------------------------


def check_media_refs(
    make_codec: Callable[[], MediaRefCodec], *, vectors: Iterable[Path] = (PACKAGED_VECTORS,)
) -> None:
    """The photo reference grammar: every ``media-ref/parse`` and ``media-ref/encode`` case."""
    _check("check_media_refs", vectors, media_ref_handlers(make_codec))


def check_content_transform(
    make_transformer: Callable[[], ContentTransformer],
    *,
    vectors: Iterable[Path] = (PACKAGED_VECTORS,),
) -> None:
    """Message content as history blocks, references minted: every ``content/transform`` case."""
    _check("check_content_transform", vectors, content_transform_handlers(make_transformer))


def check_transcript_reader(
    make_reader: Callable[[PhotoMode], TranscriptReader],
    *,
    vectors: Iterable[Path] = (PACKAGED_VECTORS,),
) -> None:
    """Transcript files read back: ``transcript/read-lines``, ``transcript/entries``,
    ``media/find-line`` and ``media/extract``.

    Each case's lines are written to a temporary file joined by ``\\n``, and a
    fresh reader from ``make_reader(photo_mode)`` reads it: ``"original"``, or the
    mode the case names (``"refs"``: every photo by reference).
    """
    _check("check_transcript_reader", vectors, transcript_file_handlers(make_reader))


def check_reconcile(
    make_reconciler: Callable[[], Reconciler], *, vectors: Iterable[Path] = (PACKAGED_VECTORS,)
) -> None:
    """The join of the two records: every ``reconcile/pending`` and ``reconcile/merge-accepted``."""
    _check("check_reconcile", vectors, reconcile_handlers(make_reconciler))


def check_journal(
    make_journal: Callable[[], SpanJournal], *, vectors: Iterable[Path] = (PACKAGED_VECTORS,)
) -> None:
    """The review's span journal: every ``journal/prefix-hash`` and ``journal/resolve-span``."""
    _check("check_journal", vectors, journal_handlers(make_journal))


def check_review_rules(
    make_rules: Callable[[], ReviewRules], *, vectors: Iterable[Path] = (PACKAGED_VECTORS,)
) -> None:
    """The review's text rules: every ``review/elide-middle``, ``review/title-owner`` and
    ``review/leak-scan`` case."""
    _check("check_review_rules", vectors, review_rule_handlers(make_rules))


def check_lifecycle(
    make_table: Callable[[], LifecycleTable], *, vectors: Iterable[Path] = (PACKAGED_VECTORS,)
) -> None:
    """The legal-transition table and its readings: ``lifecycle/transition`` and
    ``lifecycle/flags``."""
    _check("check_lifecycle", vectors, lifecycle_handlers(make_table))


# --- Engines and sessions (async) -----------------------------------------------------


async def check_engine(
    make_engine: EngineFactory, *, timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
) -> None:
    """The engine protocol's contract (`conformance.engine_contract`), clause by clause.

    ``make_engine(box_root, start_fails=...)`` makes a fresh engine for each
    clause; with ``start_fails`` true its starts must fail. A clause that takes
    longer than ``timeout_seconds`` fails, naming the step it hung in.
    """
    report = await run_engine_contract(make_engine, timeout_seconds=timeout_seconds)
    _raise_unless_passed("check_engine", report)


# Runs one ``session/scenario`` input on the running loop: its observations.
_ScenarioRunner = Callable[[Any], Coroutine[Any, Any, list[dict[str, Any]]]]


async def _check_scenarios(
    check: str, session: str, vectors: Iterable[Path], run_scenario: _ScenarioRunner
) -> None:
    def on_the_callers_loop(scenario: Any) -> list[dict[str, Any]]:
        # The runner calls handlers synchronously from its worker thread; the
        # session must live on the caller's loop, where its tasks and settling are.
        return anyio.from_thread.run(run_scenario, scenario)

    def run() -> RunReport:
        files = _files_for(vectors, frozenset({_SESSION_SCENARIO}), session)
        return run_files(files, {_SESSION_SCENARIO: on_the_callers_loop})

    _raise_unless_passed(check, await anyio.to_thread.run_sync(run))


async def check_chat_session(
    make_session: ChatSessionFactory, *, vectors: Iterable[Path] = (PACKAGED_VECTORS,)
) -> None:
    """Every chat ``session/scenario`` against sessions opened by ``make_session``.

    ``make_session(engine=, box_root=, queue_store=, session_id_store=)`` opens
    the session as an async context manager (`ChatSession.open` is one); the
    check gives it a scripted engine the steps drive, and in-memory stores.
    """

    async def run_scenario(scenario: Any) -> list[dict[str, Any]]:
        return await run_session_scenario(scenario, open_chat_session=make_session)

    await _check_scenarios("check_chat_session", "chat", vectors, run_scenario)


async def check_thread_session(
    make_session: ThreadSessionFactory, *, vectors: Iterable[Path] = (PACKAGED_VECTORS,)
) -> None:
    """Every thread ``session/scenario`` against sessions opened by ``make_session``.

    ``make_session(engine=, box_root=)`` opens the session as an async context
    manager (`ChatThreadSession.open` is one).
    """

    async def run_scenario(scenario: Any) -> list[dict[str, Any]]:
        return await run_session_scenario(scenario, open_thread_session=make_session)

    await _check_scenarios("check_thread_session", "thread", vectors, run_scenario)
