"""The two examples of docs/embedding.md run as written, each in a fresh process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "embedding.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)


def test_the_doc_has_an_asyncio_and_a_trio_example() -> None:
    assert len(BLOCKS) == 2
    assert "asyncio.run(" in BLOCKS[0]
    assert "trio.run(" in BLOCKS[1]


@pytest.mark.parametrize("index", [0, 1], ids=["asyncio", "trio"])
def test_the_example_runs(index: int, tmp_path: Path) -> None:
    env = {**os.environ, "BBX_CLAUDE_PROJECTS_DIR": str(tmp_path / "unused")}
    result = subprocess.run(
        [sys.executable, "-c", BLOCKS[index]],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    if index == 0:
        assert 'the agent said: You said: "hello from asyncio"' in result.stdout
        assert "['user', 'assistant']" in result.stdout
    else:
        assert "the box answered {'turnId':" in result.stdout
        assert "/?token=" in result.stdout


def test_the_guide_imports_only_the_public_api() -> None:
    # Every example imports beebox from `beebox_impl` itself: the contract.
    text = DOC.read_text(encoding="utf-8")
    imports = re.findall(r"^\s*(?:from|import) (beebox\w*(?:\.\w+)*)", text, re.MULTILINE)
    assert imports
    assert set(imports) == {"beebox_impl"}, imports


def test_the_guide_says_what_every_box_method_returns_and_raises() -> None:
    from beebox_impl import Box  # noqa: PLC0415

    text = DOC.read_text(encoding="utf-8")
    public = [name for name in vars(Box) if not name.startswith("_")]
    for name in public:
        assert f"`{name}`" in text or f"box.{name}" in text or f"Box.{name}" in text, name


def test_the_guides_error_tree_is_the_code_s() -> None:
    from beebox_impl.errors import error_tree  # noqa: PLC0415

    assert f"```\n{error_tree()}\n```" in DOC.read_text(encoding="utf-8")
