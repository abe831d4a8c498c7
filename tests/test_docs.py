"""Generated documents are current, and the CLI prints the same table."""

from __future__ import annotations

import os
import signal
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


def installed_bbx() -> Path:
    script = Path(sys.executable).parent / "bbx"
    if not script.exists():
        pytest.skip("beebox is not installed in this interpreter's environment (run under nox)")
    return script


def test_the_installed_bbx_console_script_runs() -> None:
    done = subprocess.run([installed_bbx(), "phases"], capture_output=True, text=True, check=True)
    assert done.stdout == render_text()


def test_the_readme_first_command_serves_a_box_in_the_current_folder(tmp_path: Path) -> None:
    # The README's first command is `bbx serve`, run in an empty folder: it must make
    # the box there, print the URL with the token, and stop cleanly on a signal.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "pip install . && bbx serve " in readme
    env = {**os.environ, "BBX_CLAUDE_PROJECTS_DIR": str(tmp_path / "projects")}
    process = subprocess.Popen(
        [installed_bbx(), "serve", "--port", "0"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    try:
        line = process.stdout.readline()
        assert line.startswith(f"beebox serving {tmp_path.resolve()} at http://127.0.0.1:")
        token = (tmp_path / ".beebox" / "token").read_text().strip()
        assert line.strip().endswith(f"/?token={token}")
    finally:
        process.send_signal(signal.SIGINT)
        _, errors = process.communicate(timeout=30)
    assert process.returncode == 0, errors
