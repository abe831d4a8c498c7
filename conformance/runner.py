"""Run conformance vector files against a target and report what failed.

`python -m conformance [PATHS...] [--target spec]` runs every vector file named (or
found under a named folder) against the target, prints one line per failing case
— file, case, expected, got, and where they first differ — and closes with
``N passed, N failed``. It exits non-zero on any failure, on a file it cannot
parse, and on a kind the target does not know. A read-only run (a live box) skips
the cases that would write to the host, and says which.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.targets import KNOWN_KINDS, HandlerTable
from conformance.targets.http import exchange_writes, project_exchange
from conformance.vectorfile import (
    VectorFile,
    VectorFileError,
    first_difference,
    load_vector_file,
)

__all__ = [
    "ALLOW_WRITES",
    "PACKAGED_VECTORS",
    "CaseFailure",
    "RunReport",
    "SkippedCase",
    "find_vector_files",
    "run_files",
]

PACKAGED_VECTORS = Path(__file__).parent / "vectors"

# Long values are cut in failure lines; the path of the first difference says where to look.
_SHOWN_CHARS = 160

# Kinds compared on part of the answer (`docs/conformance.md`): what the answer is cut to.
_PROJECTIONS: dict[str, Callable[[Any, Any], Any]] = {"http/exchange": project_exchange}

# What a case of a kind changes on the host it runs against, from its input and
# expect (None: it only reads). Every kind not listed is answered in-process and
# touches no host. A read-only run (a live box without ALLOW_WRITES) skips the rest.
_WRITES: dict[str, Callable[[Any, Any], str | None]] = {"http/exchange": exchange_writes}

# The command-line flag that lets a run against a live box write to it.
ALLOW_WRITES = "--allow-writes"


@dataclass(frozen=True)
class CaseFailure:
    """One failing case, or one unreadable file (``case`` is then ``None``)."""

    path: Path
    case: str | None
    message: str

    def render(self) -> str:
        where = str(self.path) if self.case is None else f"{self.path} :: {self.case}"
        return f"FAIL {where}: {self.message}"


@dataclass(frozen=True)
class SkippedCase:
    """A case a read-only run left out, and what it would have changed on the host."""

    path: Path
    case: str
    writes: str

    def render(self) -> str:
        return (
            f"SKIP {self.path} :: {self.case}: it writes to the box ({self.writes}); "
            f"{ALLOW_WRITES} runs it"
        )


@dataclass
class RunReport:
    """Counts, failures and skips of one run."""

    passed: int = 0
    failed: int = 0
    failures: list[CaseFailure] | None = None
    # Cases of a kind of the format the target does not answer, by kind.
    skipped_kinds: Counter[str] = field(default_factory=Counter)
    # Cases a read-only run left out because they write to the host.
    skipped_writes: list[SkippedCase] = field(default_factory=list)
    # Why the target did not run at all (one failure), e.g. a missing package.
    not_run: str | None = None

    @property
    def skipped(self) -> int:
        return sum(self.skipped_kinds.values()) + len(self.skipped_writes)

    def record(self, failure: CaseFailure | None) -> None:
        if failure is None:
            self.passed += 1
            return
        self.failed += 1
        if self.failures is None:
            self.failures = []
        self.failures.append(failure)

    def merge(self, other: RunReport) -> None:
        self.passed += other.passed
        self.failed += other.failed
        self.failures = [*(self.failures or ()), *(other.failures or ())] or None
        self.skipped_kinds += other.skipped_kinds
        self.skipped_writes += other.skipped_writes

    def closing_line(self) -> str:
        line = f"{self.passed} passed, {self.failed} failed"
        return f"{line}, {self.skipped} skipped" if self.skipped else line

    def summary(self, target: str) -> str:
        """One line for ``target``: what ran, what was skipped and why."""
        if self.not_run is not None:
            return f"{target}: not run, 1 failed"  # the why is on its FAIL line
        counts = [f"{self.passed} passed"]
        if self.failed:
            counts.append(f"{self.failed} failed")
        reasons = []
        if self.skipped_kinds:
            kinds = ", ".join(sorted(self.skipped_kinds))
            reasons.append(f"kinds this target does not answer: {kinds}")
        if self.skipped_writes:
            writes = len(self.skipped_writes)
            reasons.append(f"{writes} that write to the box: {ALLOW_WRITES} runs them")
        if reasons:
            counts.append(f"{self.skipped} skipped ({'; '.join(reasons)})")
        return f"{target}: {', '.join(counts)}"


def find_vector_files(paths: Iterable[Path]) -> Iterator[Path]:
    """Every ``*.json`` file named, or under a named folder, in sorted order."""
    for path in paths:
        if path.is_dir():
            yield from sorted(path.rglob("*.json"))
        else:
            yield path


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…"


def _run_case(
    vectors: VectorFile, handlers: HandlerTable, name: str, given: Any, expect: Any
) -> CaseFailure | None:
    handler = handlers[vectors.kind]
    try:
        got = handler(given)
    except Exception as error:  # a crash in the target is that case's failure, not the run's
        return CaseFailure(
            vectors.path, name, f"expected {_show(expect)}, raised {type(error).__name__}: {error}"
        )
    # A handler may cut the expectation down to what its target can show (a live
    # host's API folds several reasons into one status); else the kind's projection.
    project = getattr(handler, "project", None) or _PROJECTIONS.get(vectors.kind)
    if project is not None:
        got = project(expect, got)
    difference = first_difference(expect, got)
    if difference is None:
        return None
    return CaseFailure(
        vectors.path,
        name,
        f"expected {_show(expect)}, got {_show(got)}; first difference at {difference}",
    )


def run_files(
    paths: Iterable[Path], handlers: HandlerTable, target: str = "", *, read_only: bool = False
) -> RunReport:
    """Run every case of every vector file under ``paths`` against ``handlers``.

    ``target`` names the target in failure lines when several are run. With
    ``read_only``, a case that would write to the host (`_WRITES`) is skipped, and
    the report says which and what it would have written.
    """
    report = RunReport()
    for path in find_vector_files(paths):
        if not path.exists():
            report.record(CaseFailure(path, None, "no such file or folder"))
            continue
        try:
            vectors = load_vector_file(path)
        except VectorFileError as error:
            report.record(CaseFailure(path, None, f"cannot parse: {error}"))
            continue
        if vectors.kind in KNOWN_KINDS and vectors.kind not in handlers:
            # A kind of the format this target does not answer yet: said, not failed.
            report.skipped_kinds[vectors.kind] += len(vectors.cases)
            continue
        if vectors.kind not in handlers:
            # Every case of the file is a failure: the closing line must not under-count.
            unknown = CaseFailure(path, None, f"unknown kind {vectors.kind!r}")
            for _ in range(max(1, len(vectors.cases))):
                report.record(unknown)
            continue
        writes = _WRITES.get(vectors.kind) if read_only else None
        for case in vectors.cases:
            written = writes(case.input, case.expect) if writes is not None else None
            if written is not None:
                report.skipped_writes.append(SkippedCase(path, case.name, written))
                continue
            outcome = _run_case(vectors, handlers, case.name, case.input, case.expect)
            if outcome is not None and target:
                outcome = CaseFailure(outcome.path, outcome.case, f"[{target}] {outcome.message}")
            report.record(outcome)
    return report


def count_kinds(paths: Iterable[Path]) -> Counter[str]:
    """How many cases each kind has under ``paths`` (unreadable files are skipped)."""
    counts: Counter[str] = Counter()
    for path in find_vector_files(paths):
        try:
            vectors = load_vector_file(path)
        except VectorFileError:
            continue
        counts[vectors.kind] += len(vectors.cases)
    return counts
