"""Every citation in the specification resolves to a section written in this repository.

The spec cites its sources in three forms (`docs/sources.md` states the scheme):

- a link to an anchor: `docs/sources.md#facts-1-4` or `docs/design.md#design-5` in
  Python, `[§1.4](sources.md#facts-1-4)` in Markdown. The anchor must exist. A
  section number in the parenthesis right after a Python link, or in a Markdown
  link's text, must be the anchor's own (`#facts-1-4` is §1.4; `#design-5-…` is
  §5), and further numbers in that parenthesis must name sections of the same
  document. A quoted heading there must begin the anchor's heading;
- a bare `§N.M`, which always means `docs/sources.md#facts-N-M`;
- nothing else: a citation that names one of the outside documents the spec was
  written from (`original-facts.md`, `DESIGN.md`, …) cannot be checked by a reader
  who has only the repository.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
ANCHORED = {"sources": DOCS / "sources.md", "design": DOCS / "design.md"}
SPEC_FILES = sorted((ROOT / "beebox_spec").rglob("*.py"))
MARKDOWN_FILES = [DOCS / "spec-decisions.md", DOCS / "sources.md", DOCS / "design.md"]
# Files whose bare § are citations of the facts (in sources.md and design.md a
# bare § is a heading or a section of the page itself).
BARE_SECTION_FILES = {*SPEC_FILES, DOCS / "spec-decisions.md"}

ANCHOR = re.compile(r'<a id="([a-z0-9-]+)"></a>')
PY_LINK = re.compile(r"docs/(sources|design)\.md#([a-z0-9-]+)`?")
MD_LINK = re.compile(r"\[([^\]]*)\]\((sources|design)\.md#([a-z0-9-]+)\)")
# Any link to the two documents: each must be one of the two forms above.
ANY_LINK = re.compile(r"(?:sources|design)\.md#[\w-]*")
SECTION = re.compile(r"§\s?(\d+(?:\.\d+)?)")
QUOTED = re.compile(r'\s*"([^"]+)"')
# The parenthesis right after a Python link (one level of parentheses inside it):
# what it says belongs to the link.
AFTER_LINK = re.compile(r"\s*\(((?:[^()]|\([^()]*\))*)\)")
# The documents the spec was written from, which are not in the repository.
OUTSIDE = re.compile(
    r"original-facts|transcript-format|spec-sources|CONFORMANCE\.md|\bDESIGN\b"
    r"|chat-(?:history|review|session-lifecycle)\.md|\bchat-(?:history|review) \""
    r"|lifecycle doc"
)


@dataclass(frozen=True)
class Section:
    """An anchor of a sources or design document, and the heading it stands before."""

    number: str | None
    heading: str


@cache
def anchors(document: str) -> dict[str, Section]:
    """The anchors `document` ("sources" or "design") defines; ids must be unique."""
    text = ANCHORED[document].read_text(encoding="utf-8")
    found: dict[str, Section] = {}
    for match in ANCHOR.finditer(text):
        anchor = match.group(1)
        # An id defined twice makes every citation of it ambiguous.
        assert anchor not in found, f"{document}.md defines #{anchor} twice"
        rest = text[match.end() :].lstrip("\n").split("\n", 1)[0]
        heading = rest.lstrip("#").strip().strip('"') if rest.startswith("#") else ""
        numbers = re.findall(r"\d+", anchor)
        found[anchor] = Section(".".join(numbers) if numbers else None, heading)
    return found


def section_anchor(family: str, number: str) -> str:
    """The anchor of section `number` of a family: ("facts", "1.4") → "facts-1-4"."""
    return f"{family}-{number.replace('.', '-')}"


@dataclass(frozen=True)
class Checked:
    """What checking one text found: how many citations, and what is wrong with them."""

    citations: int
    problems: list[str]


def check_link(document: str, anchor: str, numbers: list[str], quoted: str | None) -> list[str]:
    """What is wrong with one link, given the § numbers and quoted heading it is cited with."""
    sections = anchors(document)
    # The anchor must be one the document defines.
    if anchor not in sections:
        return [f"{document}.md has no #{anchor}"]
    section = sections[anchor]
    problems = []
    # The first number names the anchor's own section; the rest its family's.
    if numbers and numbers[0] != section.number:
        problems.append(f"#{anchor} is not §{numbers[0]}")
    family = anchor.split("-", 1)[0]
    for number in numbers[1:]:
        # A further number must name a section of the same document.
        if section_anchor(family, number) not in sections:
            problems.append(f"{document}.md has no §{number} beside #{anchor}")
    # A quoted heading must be the start of the anchor's heading.
    if quoted is not None and not section.heading.startswith(quoted):
        problems.append(f'#{anchor} is "{section.heading}", not "{quoted}"')
    return problems


def _blank(match: re.Match[str]) -> str:
    return " " * len(match.group())


def check_text(text: str, *, markdown: bool, bare_sections: bool) -> Checked:
    """Check every citation in `text`; a problem reads "line N: what is wrong"."""
    problems: list[str] = []
    citations = 0
    claimed: list[tuple[int, int]] = []  # spans whose § belong to a link

    def report(position: int, problem: str) -> None:
        problems.append(f"line {text.count(chr(10), 0, position) + 1}: {problem}")

    forms = (MD_LINK, PY_LINK) if markdown else (PY_LINK,)
    for form in forms:
        for link in form.finditer(text):
            citations += 1
            if form is MD_LINK:
                said, document, anchor = link.groups()
                span = link.span()
            else:
                document, anchor = link.groups()
                after = AFTER_LINK.match(text, link.end())
                said = after.group(1) if after else ""
                span = (link.start(), after.end() if after else link.end())
            claimed.append(span)
            quoted = QUOTED.match(" ".join(said.split()))
            numbers = SECTION.findall(said)
            for problem in check_link(
                document, anchor, numbers, quoted.group(1) if quoted else None
            ):
                report(link.start(), problem)
    # A link in any other spelling would escape the checks above.
    unread = text
    for form in forms:
        unread = form.sub(_blank, unread)
    for stray in ANY_LINK.finditer(unread):
        report(stray.start(), f"{stray.group()} is not a citation this test reads")
    if bare_sections:
        for bare in SECTION.finditer(text):
            if any(start <= bare.start() < end for start, end in claimed):
                continue
            citations += 1
            # A bare § is a section of the facts read off the original.
            if section_anchor("facts", bare.group(1)) not in anchors("sources"):
                report(bare.start(), f"§{bare.group(1)} is not a section of docs/sources.md")
    for outside in OUTSIDE.finditer(text):
        citations += 1
        report(outside.start(), f"{outside.group()!r} names a document outside the repository")
    return Checked(citations, problems)


def check_file(path: Path) -> Checked:
    if path.suffix == ".md":
        # Links inside sources.md and design.md to their own anchors use "(#id)".
        text = path.read_text(encoding="utf-8")
        if path.parent == DOCS and path.stem in ANCHORED:
            text = text.replace("](#", f"]({path.stem}.md#")
        return check_text(text, markdown=True, bare_sections=path in BARE_SECTION_FILES)
    return check_text(
        path.read_text(encoding="utf-8"), markdown=False, bare_sections=path in BARE_SECTION_FILES
    )


@pytest.mark.parametrize(
    "path", [*SPEC_FILES, *MARKDOWN_FILES], ids=lambda path: str(path.relative_to(ROOT))
)
def test_every_citation_resolves_in_the_repository(path: Path) -> None:
    checked = check_file(path)
    assert not checked.problems, f"{path.relative_to(ROOT)}:\n" + "\n".join(checked.problems)


def test_every_spec_module_with_rules_cites_a_source() -> None:
    # A checker that found no citation at all would pass by reading nothing.
    uncited = [
        path.name
        for path in SPEC_FILES
        if path.stem not in {"__init__", "__main__", "phase_doc"}
        and check_file(path).citations == 0
    ]
    assert not uncited


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("`docs/sources.md#facts-9-9` (§9.9)", "sources.md has no #facts-9-9"),
        ("the rule of §9.9", "§9.9 is not a section of docs/sources.md"),
        ("`docs/sources.md#facts-1-4` (§1.5)", "#facts-1-4 is not §1.5"),
        ("`docs/sources.md#facts-3-2` (§3.2–§3.9)", "sources.md has no §3.9 beside #facts-3-2"),
        ('`docs/sources.md#history-photos` ("Two records")', '#history-photos is "Photos in'),
        ("`docs/design.md#design-5-made-up` (§5)", "design.md has no #design-5-made-up"),
        ("`docs/design.md#design-5-line-lookup` (§4)", "#design-5-line-lookup is not §4"),
        ("`original-facts.md` §1.4", "'original-facts' names a document outside"),
        ("as DESIGN §5 says", "'DESIGN' names a document outside"),
        ('chat-review "What qualifies"', "'chat-review \"' names a document outside"),
        ("see sources.md#facts-1-4", "sources.md#facts-1-4 is not a citation this test reads"),
        # Markdown: the link's text says the section.
        ("[§9.9](sources.md#facts-9-9)", "sources.md has no #facts-9-9"),
        ("[§1.5](sources.md#facts-1-4)", "#facts-1-4 is not §1.5"),
        ("[design](design.md#design-9)", "design.md has no #design-9"),
    ],
)
def test_a_made_up_citation_is_caught(text: str, problem: str) -> None:
    markdown = text.startswith("[")
    problems = check_text(text, markdown=markdown, bare_sections=True).problems
    assert any(problem in found for found in problems), problems


def test_a_true_citation_passes() -> None:
    text = (
        "`docs/sources.md#facts-4-7` (§4.7 step 6), §4.3, §3.2–§3.5,"
        ' `docs/sources.md#lifecycle-contract` ("The contract"),'
        " `docs/sources.md#format-2` (§2–§4), `docs/design.md#design-5-line-lookup` (§5)"
    )
    assert check_text(text, markdown=False, bare_sections=True) == Checked(7, [])
