"""Run conformance vector files against a target and report what failed.

`python -m conformance [PATHS...] [--target spec]` runs every vector file named (or
found under a named folder) against the target, prints one line per failing case
— file, case, expected, got, and where they first differ — and closes with
``N passed, N failed``. It exits non-zero on any failure, on a file it cannot
parse, and on a kind the target does not know.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance.targets import KNOWN_KINDS, HandlerTable
from conformance.targets.http import project_exchange
from conformance.vectorfile import (
    VectorFile,
    VectorFileError,
    first_difference,
    load_vector_file,
)

__all__ = ["PACKAGED_VECTORS", "CaseFailure", "RunReport", "find_vector_files", "run_files"]

PACKAGED_VECTORS = Path(__file__).parent / "vectors"

# Long values are cut in failure lines; the path of the first difference says where to look.
_SHOWN_CHARS = 160

# Kinds compared on part of the answer (CONFORMANCE.md): what the answer is cut down to.
_PROJECTIONS: dict[str, Callable[[Any, Any], Any]] = {"http/exchange": project_exchange}


@dataclass(frozen=True)
class CaseFailure:
    """One failing case, or one unreadable file (``case`` is then ``None``)."""

    path: Path
    case: str | None
    message: str

    def render(self) -> str:
        where = str(self.path) if self.case is None else f"{self.path} :: {self.case}"
        return f"FAIL {where}: {self.message}"


@dataclass
class RunReport:
    """Counts and failures of one run."""

    passed: int = 0
    failed: int = 0
    skipped: int = 0
    failures: list[CaseFailure] | None = None
    skipped_kinds: set[str] | None = None

    def record(self, failure: CaseFailure | None) -> None:
        if failure is None:
            self.passed += 1
            return
        self.failed += 1
        if self.failures is None:
            self.failures = []
        self.failures.append(failure)

    def skip(self, kind: str, cases: int) -> None:
        self.skipped += cases
        if self.skipped_kinds is None:
            self.skipped_kinds = set()
        self.skipped_kinds.add(kind)

    def merge(self, other: RunReport) -> None:
        self.passed += other.passed
        self.failed += other.failed
        self.skipped += other.skipped
        self.failures = [*(self.failures or ()), *(other.failures or ())] or None
        kinds = (self.skipped_kinds or set()) | (other.skipped_kinds or set())
        self.skipped_kinds = kinds or None

    def closing_line(self) -> str:
        line = f"{self.passed} passed, {self.failed} failed"
        return f"{line}, {self.skipped} skipped" if self.skipped else line


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


def run_files(paths: Iterable[Path], handlers: HandlerTable, target: str = "") -> RunReport:
    """Run every case of every vector file under ``paths`` against ``handlers``.

    ``target`` names the target in failure lines when several are run.
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
            report.skip(vectors.kind, len(vectors.cases))
            continue
        if vectors.kind not in handlers:
            # Every case of the file is a failure: the closing line must not under-count.
            unknown = CaseFailure(path, None, f"unknown kind {vectors.kind!r}")
            for _ in range(max(1, len(vectors.cases))):
                report.record(unknown)
            continue
        for case in vectors.cases:
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
