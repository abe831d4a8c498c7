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
from beebox_spec.phase_doc import render_markdown, render_text
from beebox_spec.phases import Phase

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


def test_the_readme_first_command_serves_a_box_in_a_new_folder(tmp_path: Path) -> None:
    # The README's first command, run as written by a shell (its `~` expanded), from a
    # checkout: it makes the box in the new folder, leaves the checkout alone, prints
    # the URL with the token, and stops cleanly on a signal.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first = readme.split("```sh\n", 1)[1].splitlines()[0]
    install, serve = (part.strip() for part in first.split("#", 1)[0].split("&&"))
    assert install == "pip install ."
    assert serve.startswith("bbx serve --box ")
    home, checkout = tmp_path / "home", tmp_path / "checkout"
    home.mkdir()
    checkout.mkdir()
    env = {
        **os.environ,
        "HOME": str(home),
        "PATH": f"{Path(installed_bbx()).parent}{os.pathsep}{os.environ['PATH']}",
        "BBX_CLAUDE_PROJECTS_DIR": str(tmp_path / "projects"),
    }
    process = subprocess.Popen(
        ["bash", "-c", f"exec {serve} --port 0"],
        cwd=checkout,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    box = (home / serve.split("~/", 1)[1]).resolve()
    try:
        line = process.stdout.readline()
        assert line.startswith(f"beebox serving {box} at http://127.0.0.1:"), line
        token = (box / ".beebox" / "token").read_text().strip()
        assert line.strip().endswith(f"/?token={token}")
        assert list(checkout.iterdir()) == []
    finally:
        process.send_signal(signal.SIGINT)
        _, errors = process.communicate(timeout=30)
    assert process.returncode == 0, errors
