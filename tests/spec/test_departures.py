"""Every rule the spec marks as ours has its entry in docs/spec-decisions.md, and back.

A rule that departs from the original says so beside it, in one form:
``(ours, `docs/spec-decisions.md#<anchor>`)``. The anchor is an entry of the page's
"Where the spec departs from the original" section, which gives the original's
behaviour and why ours differs. Checked here:

- every mark names an entry of that section, and the entry names the module that
  carries the mark (so a mark cannot point at another rule's entry);
- every entry of that section is marked somewhere in the spec (so the page lists
  no departure the spec does not make);
- every other link from the spec to the page names one of its entries;
- nothing else in the spec reads as a departure marker (``(Ours)``, ``(ours)``,
  ``ours:``, "departure", "(deliberate difference)"): such a mark would name no
  entry, and escape the two checks above.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "beebox_spec"
DECISIONS = ROOT / "docs" / "spec-decisions.md"
SECTION_ANCHOR = '<a id="departures"></a>'

MARK = re.compile(r"\(ours, `docs/spec-decisions\.md#([a-z0-9-]+)`\)")
# What else would read as a departure marker to someone reading the spec.
LOOSE = re.compile(
    r"\(ours\b|\bours[:;,)]|\bdepartures?\b|\(deliberate difference\)", re.IGNORECASE
)
ENTRY = re.compile(r'<a id="([a-z0-9-]+)"></a>\n')
LINK = re.compile(r"docs/spec-decisions\.md#([a-z0-9-]+)")


@dataclass(frozen=True)
class Mark:
    """One mark: the module that carries it, its line, and the entry it names."""

    module: str
    line: int
    anchor: str


def module_name(path: Path) -> str:
    """`review.journal` for beebox_spec/review/journal.py, `review` for its __init__."""
    parts = list(path.relative_to(SPEC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def read_marks(text: str, module: str) -> tuple[list[Mark], list[str]]:
    """The marks in one module's text, and its loose markers as problems."""
    marks = [
        Mark(module, text.count("\n", 0, found.start()) + 1, found.group(1))
        for found in MARK.finditer(text)
    ]
    spans = [found.span() for found in MARK.finditer(text)]
    problems = [
        f"{module}:{text.count(chr(10), 0, loose.start()) + 1}: {loose.group()!r} names no "
        "entry; write (ours, `docs/spec-decisions.md#<anchor>`)"
        for loose in LOOSE.finditer(text)
        if not any(start <= loose.start() < end for start, end in spans)
    ]
    return marks, problems


def departure_entries(page: str) -> dict[str, str]:
    """The entries of the departures section, by anchor: each one's text."""
    # The section runs from its anchor to the next heading of its level.
    section = page.split(SECTION_ANCHOR, 1)[1]
    section = section.split("\n## ", 2)[1] if section.lstrip().startswith("## ") else section
    pieces = ENTRY.split(section)
    return dict(zip(pieces[1::2], pieces[2::2], strict=True))


def departure_problems(marks: list[Mark], entries: dict[str, str]) -> list[str]:
    """What does not match between the spec's marks and the page's entries."""
    problems = []
    for mark in marks:
        entry = entries.get(mark.anchor)
        # The mark must lead to an entry of the departures section.
        if entry is None:
            problems.append(f"{mark.module}:{mark.line}: no departure entry #{mark.anchor}")
        # The entry must be about the module that points at it.
        elif f"`{mark.module}`" not in entry:
            problems.append(
                f"{mark.module}:{mark.line}: #{mark.anchor} does not name `{mark.module}`"
            )
    marked = {mark.anchor for mark in marks}
    # Every entry must be a departure the spec makes, marked beside its rule.
    problems += [
        f"#{anchor} is marked nowhere in beebox_spec" for anchor in entries if anchor not in marked
    ]
    return problems


def spec_marks() -> tuple[list[Mark], list[str]]:
    marks: list[Mark] = []
    problems: list[str] = []
    for path in sorted(SPEC.rglob("*.py")):
        found, loose = read_marks(path.read_text(encoding="utf-8"), module_name(path))
        marks += found
        problems += loose
    return marks, problems


def test_every_departure_the_spec_marks_is_listed_and_every_listed_one_is_marked() -> None:
    marks, problems = spec_marks()
    entries = departure_entries(DECISIONS.read_text(encoding="utf-8"))
    problems += departure_problems(marks, entries)
    assert not problems, "\n".join(problems)
    # A check that found nothing would pass by reading nothing.
    assert len(entries) >= 20
    assert len(marks) >= len(entries)


def test_every_link_to_spec_decisions_in_the_spec_names_an_entry() -> None:
    # A rule may point at any entry of the page (an inference, a side taken).
    page = DECISIONS.read_text(encoding="utf-8")
    anchors = set(ENTRY.findall(page)) | {"departures"}
    dangling = [
        f"{module_name(path)}: #{anchor}"
        for path in sorted(SPEC.rglob("*.py"))
        for anchor in LINK.findall(path.read_text(encoding="utf-8"))
        if anchor not in anchors
    ]
    assert not dangling


@pytest.mark.parametrize(
    "text",
    [
        "8. (Ours) **A refused turn.**",
        "# (ours) a reference that would not parse is never handed out.",
        "**(ours, departure)** The record's type …",
        "# Ours: an attribute value escaped as XML escapes one",
        "(rule 3, ours)",
        "with one departure: a cut never splits a pair",
        "split a character in two. **(deliberate difference)**",
    ],
)
def test_a_marker_that_names_no_entry_is_caught(text: str) -> None:
    _, problems = read_marks(text, "m")
    assert problems


def test_a_mark_must_lead_to_an_entry_about_its_module() -> None:
    page = (
        "## Where the sources disagreed\n\n"
        '<a id="other"></a>\n**Not a departure** (`m`).\n\n'
        f"{SECTION_ANCHOR}\n## Where the spec departs from the original\n\n"
        '<a id="cut"></a>\n**A cut** (`javascript`).\n\n'
        '<a id="unmarked"></a>\n**Listed, never marked** (`m`).\n\n'
        "## Beyond the spec's rules\n\n"
        '<a id="later"></a>\n**Not a departure of the spec** (`m`).\n'
    )
    entries = departure_entries(page)
    assert set(entries) == {"cut", "unmarked"}
    marks, _ = read_marks(
        "a (ours, `docs/spec-decisions.md#cut`)\nb (ours, `docs/spec-decisions.md#other`)", "m"
    )
    assert departure_problems(marks, entries) == [
        "m:1: #cut does not name `m`",
        "m:2: no departure entry #other",
        "#unmarked is marked nowhere in beebox_spec",
    ]
