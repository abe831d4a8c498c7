"""Every citation outside the specification resolves in the repository too.

`tests/spec/test_citations.py` holds the rules (its docstring states them) and checks
`beebox_spec` with the three pages it rests on. This test applies the same rules,
imported, to everything else a reader meets: the Python of `beebox_impl`,
`conformance`, `tests`, `bench`, `fuzz` and `examples`, the page's own JavaScript, every
other page of `docs/`, the README, and the description of each conformance vector file
(the one place a vector file says what it pins down; its cases are data). A comment
that cites `DESIGN.md §5` or `original-facts.md` §2.1 sends a reader to a document the
repository does not hold; it cites `docs/design.md#design-5-persisted-queue` or
`docs/sources.md#facts-2-1`.

What is not a citation: a path to data that lives beside the repository, such as the
transcript corpus a test reads when it is there (`/work/shared/corpus/…`, its
`SOURCES.md` of licences). The outside documents are named by the test's list
(`OUTSIDE`), which holds the requirement, facts, format, design and conformance
documents and nothing else, so a corpus path passes and any of those names fails.

Three files are not read: `tests/spec/test_citations.py`, `tests/spec/test_departures.py`
and this one, which hold made-up citations as the data their tests feed a checker.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.runner import PACKAGED_VECTORS, find_vector_files
from conformance.vectorfile import load_vector_file
from tests.spec.test_citations import MARKDOWN_FILES, ROOT, check_file, check_text

CODE_FOLDERS = ("beebox_impl", "conformance", "tests", "bench", "fuzz", "examples")
# Files that hold broken citations on purpose, as test data.
CHECKER_TESTS = {
    ROOT / "tests" / "spec" / "test_citations.py",
    ROOT / "tests" / "spec" / "test_departures.py",
    Path(__file__).resolve(),
}
# The page's scripts, minus the vendored Markdown lexer (marked's own source).
SCRIPTS = sorted(
    path for path in (ROOT / "beebox_impl" / "web").glob("*.js") if path.name != "marked.esm.js"
)
CODE_FILES = [
    path
    for folder in CODE_FOLDERS
    for path in sorted((ROOT / folder).rglob("*.py"))
    if path not in CHECKER_TESTS
]
# The spec's own pages are checked with the spec.
PAGES = [
    *(path for path in sorted((ROOT / "docs").glob("*.md")) if path not in MARKDOWN_FILES),
    ROOT / "README.md",
]
FILES = [*CODE_FILES, *SCRIPTS, *PAGES]
VECTOR_FILES = sorted(find_vector_files([PACKAGED_VECTORS]))


@pytest.mark.parametrize("path", FILES, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_citation_resolves_in_the_repository(path: Path) -> None:
    checked = check_file(path)
    assert not checked.problems, f"{path.relative_to(ROOT)}:\n" + "\n".join(checked.problems)


@pytest.mark.parametrize("path", VECTOR_FILES, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_citation_in_a_vector_description_resolves(path: Path) -> None:
    description = load_vector_file(path).description
    problems = check_text(description, markdown=False, bare_sections=True).problems
    assert not problems, f"{path.relative_to(ROOT)}: " + "; ".join(problems)


def test_the_check_reads_the_citations_of_the_implementation() -> None:
    # A file list that missed the implementation would pass by reading nothing.
    cited = [path for path in CODE_FILES if check_file(path).citations > 0]
    assert {"chat.py", "acceptance.py", "run.py", "scenario.py"} <= {path.name for path in cited}


def test_a_path_to_the_corpus_is_not_a_citation() -> None:
    text = (
        'CORPUS = Path("/work/shared/corpus/claude-transcripts")\n'
        "# the corpus (`shared/corpus/claude-transcripts/`, licences in its SOURCES.md)\n"
    )
    assert check_text(text, markdown=False, bare_sections=True).problems == []


@pytest.mark.parametrize(
    ("comment", "problem"),
    [
        ("# The persisted queue (DESIGN.md §5).", "'DESIGN' names a document outside"),
        ("# See `transcript-format.md` §8.", "'transcript-format' names a document outside"),
        ("# As CONFORMANCE.md says.", "'CONFORMANCE.md' names a document outside"),
        ("# `docs/design.md#design-5-queue` (§5)", "design.md has no #design-5-queue"),
        ("# The husk's fields (§4.12).", "§4.12 is not a section of docs/sources.md"),
    ],
)
def test_a_dangling_citation_in_code_fails(tmp_path: Path, comment: str, problem: str) -> None:
    module = tmp_path / "module.py"
    module.write_text(comment + "\n", encoding="utf-8")
    problems = check_file(module).problems
    assert any(problem in found for found in problems), problems
