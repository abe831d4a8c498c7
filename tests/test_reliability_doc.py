"""docs/reliability.md names tests, commands and history that exist.

The page is a table of promises, each with the test that holds it, the command that
measures it again and a link into the diary behind it: a renamed test or a moved
heading would leave a reader a promise with nothing behind it.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "reliability.md"
DIARY = ROOT / "docs" / "reliability-diary.md"

# `tests/x.py` or `tests/x.py::test_name` in a code span; likewise bench/ and fuzz/.
NAMED_FILE = re.compile(r"`(?:python )?((?:tests|bench|fuzz)/[\w/<>]+\.py)(?:::(\w+))?")
LINK = re.compile(r"\]\(([\w.-]*)#([\w-]+)\)")
FUZZ_TARGET_ROW = re.compile(r"^\| `(\w+)` \|", re.MULTILINE)


def github_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a page: its headings' slugs and its explicit ids."""
    anchors = set(re.findall(r'<a id="([\w-]+)"></a>', markdown))
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#+ (.+)$", markdown, re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def test_every_test_and_script_the_page_names_exists() -> None:
    page = PAGE.read_text(encoding="utf-8")
    named = NAMED_FILE.findall(page)
    # A page that names nothing would pass by reading nothing.
    assert named
    targets = FUZZ_TARGET_ROW.findall(page.split("### Fuzz targets", 1)[1])
    for path, test in named:
        # `fuzz/fuzz_<target>.py` stands for one script a target of the fuzz table.
        paths = [path.replace("<target>", target) for target in targets] if "<" in path else [path]
        for one in paths:
            assert (ROOT / one).is_file(), f"{one} is named in docs/reliability.md"
            if test:
                text = (ROOT / one).read_text(encoding="utf-8")
                assert f"def {test}(" in text, f"{one}::{test} is named in docs/reliability.md"


def test_every_link_into_the_page_and_its_diary_resolves() -> None:
    page = PAGE.read_text(encoding="utf-8")
    documents = {"": page, "reliability.md": page, "reliability-diary.md": None}
    links = LINK.findall(page)
    assert links
    for document, anchor in links:
        assert document in documents, f"docs/reliability.md links to {document}#{anchor}"
        text = documents[document] or DIARY.read_text(encoding="utf-8")
        assert anchor in github_anchors(text), f"{document or 'reliability.md'}#{anchor}"


def test_the_diary_says_what_it_is_and_keeps_the_history() -> None:
    diary = DIARY.read_text(encoding="utf-8").splitlines()
    # One line says it is the history behind the table; the history follows it whole.
    assert "the history behind the table in [reliability.md](reliability.md)" in diary[0]
    assert "# Reliability and security under fire" in diary
    assert "## What was found, and fixed" in diary
