"""Every citation in the specification resolves to a section written in this repository.

The spec cites its sources in three forms (`docs/sources.md` states the scheme):

- a link to an anchor: `docs/sources.md#facts-1-4` or `docs/design.md#design-5` in
  Python, `[§1.4](sources.md#facts-1-4)` in Markdown. The anchor must exist. A
  section number in the parenthesis right after a Python link, or in a Markdown
  link's text, must be the anchor's own (`#facts-1-4` is §1.4; `#design-5-…` is
  §5), and further numbers in that parenthesis must name sections of the same
  document. A quoted heading there must begin the anchor's heading;
- a bare `§N.M`, which always means `docs/sources.md#facts-N-M` (in code, and in
  spec-decisions.md; other pages use § for their own sections). A § right after
  `RFC <n>` or `issue <n>` is a section of that document, not a bare one;
- nothing else: a citation that names one of the outside documents the spec was
  written from (`original-facts.md`, `DESIGN.md`, …) cannot be checked by a reader
  who has only the repository.

In code, a page named as `docs/<page>.md` must exist, and an anchor after it
(`docs/spec-decisions.md#line-lookup`) must be one the page defines.
`tests/test_citations_outside_spec.py` applies these rules, unchanged, to the
implementation, the conformance runner, the tests, the benches and the other docs.
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

ANCHOR = re.compile(r'<a id="([a-z0-9-]+)"></a>')
PY_LINK = re.compile(r"docs/(sources|design)\.md#([a-z0-9-]+)`?")
MD_LINK = re.compile(r"\[([^\]]*)\]\((sources|design)\.md#([a-z0-9-]+)\)")
# Any link to the two documents: each must be one of the two forms above.
ANY_LINK = re.compile(r"(?:sources|design)\.md#[\w-]*")
SECTION = re.compile(r"§\s?(\d+(?:\.\d+)?)")
# Sections of another named document ("RFC 9110 §5.1, §5.6.2", "issue 9 §3"): not
# the facts, so not bare.
NAMED_SECTIONS = re.compile(r"\b(?:RFC|issue) \d+ §[\d.]+(?:(?:, | and |–)§[\d.]+)*")
# A page of the repository's docs named from code, with the anchor it may link to.
DOC_PAGE = re.compile(r"docs/([\w-]+\.md)(?:#([a-z0-9-]+))?")
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


@cache
def page_anchors(page: str) -> frozenset[str] | None:
    """The anchors `docs/<page>` defines, or None when the page is not in the repository."""
    path = DOCS / page
    return frozenset(ANCHOR.findall(path.read_text(encoding="utf-8"))) if path.is_file() else None


def check_doc_page(page: str, anchor: str | None) -> list[str]:
    """What is wrong with naming `docs/<page>` (and `#anchor`) from code."""
    found = page_anchors(page)
    if found is None:
        return [f"docs/{page} is not in the repository"]
    # A link to sources.md or design.md is checked, section and all, as a citation.
    if anchor is not None and page.removesuffix(".md") not in ANCHORED and anchor not in found:
        return [f"docs/{page} has no #{anchor}"]
    return []


# What one kind of check found in a text: how many citations it read, and each
# problem with the position it was found at.
Found = tuple[int, list[tuple[int, str]]]


def check_doc_pages(text: str) -> Found:
    """Check each page of docs/ that code names; sources.md and design.md links are
    counted (and checked, section and all) as links."""
    pages = list(DOC_PAGE.finditer(text))
    cited = sum(page.group(1).removesuffix(".md") not in ANCHORED for page in pages)
    return cited, [
        (page.start(), problem) for page in pages for problem in check_doc_page(*page.groups())
    ]


def check_bare_sections(text: str, claimed: list[tuple[int, int]]) -> Found:
    """Check each bare § outside the `claimed` spans (a link's, another document's)."""
    claimed = claimed + [named.span() for named in NAMED_SECTIONS.finditer(text)]
    bare = [
        section
        for section in SECTION.finditer(text)
        if not any(start <= section.start() < end for start, end in claimed)
    ]
    # A bare § is a section of the facts read off the original.
    return len(bare), [
        (section.start(), f"§{section.group(1)} is not a section of docs/sources.md")
        for section in bare
        if section_anchor("facts", section.group(1)) not in anchors("sources")
    ]


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
    checks = [check_doc_pages(text)] if not markdown else []
    if bare_sections:
        checks.append(check_bare_sections(text, claimed))
    for cited, found in checks:
        citations += cited
        for position, problem in found:
            report(position, problem)
    for outside in OUTSIDE.finditer(text):
        citations += 1
        report(outside.start(), f"{outside.group()!r} names a document outside the repository")
    return Checked(citations, problems)


def reads_bare_sections(path: Path) -> bool:
    """Whether a bare § in `path` cites the facts: in code and in spec-decisions.md (in
    sources.md, design.md and the guides a bare § is a heading or the page's own)."""
    return path.suffix != ".md" or path == DOCS / "spec-decisions.md"


def check_file(path: Path) -> Checked:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".md":
        # Links inside sources.md and design.md to their own anchors use "(#id)".
        if path.parent == DOCS and path.stem in ANCHORED:
            text = text.replace("](#", f"]({path.stem}.md#")
        # The README links into docs/ from the repository's root.
        if path.parent == ROOT:
            text = text.replace("](docs/", "](")
    return check_text(text, markdown=path.suffix == ".md", bare_sections=reads_bare_sections(path))


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
        # Only the § right after the RFC is the RFC's.
        ("RFC 9110 §5.1; §5.9", "§5.9 is not a section of docs/sources.md"),
        ("see `docs/no-such-page.md`", "docs/no-such-page.md is not in the repository"),
        ("`docs/spec-decisions.md#made-up`", "docs/spec-decisions.md has no #made-up"),
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


def test_a_section_of_another_named_document_is_not_a_citation_of_the_facts() -> None:
    text = "a token (RFC 9110 §5.1, §5.6.2); obs-fold (RFC 9112 §5.2); issue 9 §3 and §4"
    assert check_text(text, markdown=False, bare_sections=True) == Checked(0, [])
