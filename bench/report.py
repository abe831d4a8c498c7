"""The table a benchmark prints: one row a figure, beside its baseline, and a verdict.

`print_table` prints the rows (measure, ours, baseline, ratio, target, status) and a
``SUMMARY:`` line that repeats, loudly, every row whose status is neither ``ok`` nor
one of the statuses that judge nothing (``info``, ``n/a``); `load_average` is the
figure every report prints beside its own, since the machines are shared.

`bench/peers.py`, `sessions.py` and `claude.py` print through it, each with its own
row type (anything with the six fields, `TableRow`); `transcripts.py` prints its
rows and summary through `print_rows` and `print_summary`, with its notes between.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

__all__ = [
    "UNJUDGED",
    "Row",
    "TableRow",
    "load_average",
    "print_rows",
    "print_summary",
    "print_table",
]

# Statuses that are figures only: no target, or nothing to judge in this run.
UNJUDGED: Final = frozenset({"info", "n/a"})


class TableRow(Protocol):
    """What the table reads of a row (each benchmark may narrow ``status``'s type)."""

    @property
    def measure(self) -> str: ...
    @property
    def ours(self) -> str: ...
    @property
    def baseline(self) -> str: ...
    @property
    def ratio(self) -> str: ...
    @property
    def target(self) -> str: ...
    @property
    def status(self) -> str: ...


@dataclass(frozen=True)
class Row:
    """One figure: what, ours, the baseline beside it, their ratio, the target, the verdict."""

    measure: str
    ours: str
    baseline: str
    ratio: str
    target: str
    status: str


def print_table(rows: Sequence[TableRow], unjudged: Collection[str] = UNJUDGED) -> None:
    """The table, then the summary line (rows that missed or broke repeated, loudly)."""
    print_rows(rows)
    print()
    print_summary(rows, unjudged)


def print_rows(rows: Sequence[TableRow]) -> None:
    """The table alone: a header, a rule, a line a row ending in its status."""
    header = ("measure", "ours", "baseline", "ratio", "target")
    cells = [header, *[(r.measure, r.ours, r.baseline, r.ratio, r.target) for r in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]

    def line(row: tuple[str, ...], status: str) -> str:
        padded = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        return " | ".join(padded) + f" | {status}"

    print(line(header, "ok?"))
    print("-+-".join("-" * width for width in widths) + "-+-----")
    for row, cell in zip(rows, cells[1:], strict=True):
        print(line(cell, row.status))


def print_summary(rows: Sequence[TableRow], unjudged: Collection[str] = UNJUDGED) -> None:
    """The ``SUMMARY:`` line, and every row that missed or broke, repeated."""
    judged = [row for row in rows if row.status not in unjudged]
    missed = [row for row in judged if row.status != "ok"]
    if missed:
        print(f"SUMMARY: {len(judged) - len(missed)}/{len(judged)} targets met — MISSED:")
        for row in missed:
            print(f"  *** {row.status}: {row.measure} ({row.ours} vs {row.baseline}; {row.target})")
    else:
        print(f"SUMMARY: all {len(judged)} targets met.")


def load_average() -> str:
    """The 1-minute load average, or ``?`` where the system does not say."""
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "?"
