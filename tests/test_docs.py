"""Generated documents are current, and the CLI prints the same table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from beebox_impl.cli import main as bbx
from beebox_spec.__main__ import main as spec_main
from beebox_spec.lifecycle import Phase
from beebox_spec.phase_doc import render_markdown, render_text

ROOT = Path(__file__).resolve().parent.parent


def test_phases_md_is_generated_from_the_table() -> None:
    current = (ROOT / "docs" / "phases.md").read_text(encoding="utf-8")
    assert current == render_markdown(), "docs/phases.md is stale: run `nox -s docs`"


def test_python_m_beebox_spec_prints_every_phase(capsys: pytest.CaptureFixture[str]) -> None:
    assert spec_main([]) == 0
    printed = capsys.readouterr().out
    assert printed == render_text()
    for phase in Phase:
        assert phase.value in printed
    assert "stopping   → idle" in printed


def test_bbx_phases_prints_the_same_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert bbx(["phases"]) == 0
    assert capsys.readouterr().out == render_text()


def test_the_installed_bbx_console_script_runs() -> None:
    # The README's first command ends in `bbx phases`: the console script must exist.
    script = Path(sys.executable).parent / "bbx"
    if not script.exists():
        pytest.skip("beebox is not installed in this interpreter's environment (run under nox)")
    done = subprocess.run([script, "phases"], capture_output=True, text=True, check=True)
    assert done.stdout == render_text()
