"""`bbx` as a process of its own (`beebox_impl.cli.program`): a short read ends the
process as soon as its output is out, every other command exits as Python does, and
either way what the command printed, wrote and answered is what `main` gives.

Each case runs the program in a child that registers an exit handler first: the
handler's line on stderr says the interpreter was torn down.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from beebox_impl.cli import main as bbx
from beebox_impl.cli.common import write_output
from tests.impl import test_cli
from tests.impl.test_cli import PHOTO, SESSION

# A box whose session holds a caption and a photo, then a reply.
box = test_cli.box

TORN_DOWN = "the interpreter was torn down"

_CHILD = f"""
import atexit, sys
atexit.register(lambda: print({TORN_DOWN!r}, file=sys.stderr))
sys.argv[0] = "bbx"
from beebox_impl.cli import program
program()
"""


def run_program(
    arguments: list[str], *, stdout: int | None = subprocess.PIPE
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _CHILD, *arguments],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_history_read_ends_at_once_with_all_of_mains_output(
    box: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    arguments = ["chat", "history", SESSION, "--json", "--box", str(box)]
    assert bbx(arguments) == 0
    printed = capsys.readouterr().out
    ran = run_program(arguments)
    assert (ran.returncode, ran.stderr) == (0, "")
    assert ran.stdout == printed
    assert [entry["uuid"] for entry in json.loads(ran.stdout)["entries"]] == ["u-1", "a-1"]


def test_a_photo_written_to_a_file_ends_at_once_with_the_file_whole(
    box: Path,
    tmp_path: Path,
) -> None:
    photo = tmp_path / "photo.png"
    ran = run_program(["chat", "media", f"{SESSION}/u-1/0", "-o", str(photo), "--box", str(box)])
    assert (ran.returncode, ran.stderr) == (0, f"wrote {len(PHOTO)} bytes (image/png) to {photo}\n")
    assert photo.read_bytes() == PHOTO


def test_a_photo_written_to_stdout_ends_at_once_with_every_byte_out(
    box: Path,
) -> None:
    ran = subprocess.run(
        [sys.executable, "-c", _CHILD, "chat", "media", f"{SESSION}/u-1/0", "-o", "-",
         "--box", str(box)],
        capture_output=True,
        timeout=60,
        check=False,
    )  # fmt: skip
    assert (ran.returncode, ran.stderr) == (0, b"")
    assert ran.stdout == PHOTO


def test_the_phase_table_ends_at_once() -> None:
    ran = run_program(["phases"])
    assert (ran.returncode, ran.stderr) == (0, "")
    assert "idle" in ran.stdout


def test_a_short_read_that_fails_says_why_before_it_ends(
    box: Path,
) -> None:
    other = "0f0c3e52-2a51-4d4b-9b0e-0d8f6f1c2a10"
    ran = run_program(["chat", "history", other, "--box", str(box)])
    assert ran.returncode == 1
    assert ran.stderr.startswith(f"bbx: no transcript for session {other} at ")
    assert TORN_DOWN not in ran.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("command", ["history", "phases"])
def test_output_that_cannot_be_written_is_said_not_lost_silently(box: Path, command: str) -> None:
    arguments = ["chat", "history", SESSION, "--box", str(box)] if command == "history" else []
    with open("/dev/full", "w") as full:
        ran = run_program(arguments or ["phases"], stdout=full.fileno())
    assert ran.returncode == 1
    assert ran.stderr == "bbx: cannot write the output: No space left on device\n"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_an_unwritable_stdout_is_said_and_left_as_it_was(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # In a host's process (`main`): its stdout is its own, not to be sent elsewhere.
    with open("/dev/full", "w") as full:
        monkeypatch.setattr(sys, "stdout", full)
        assert write_output("an answer") == 1
        assert os.fstat(full.fileno()).st_rdev == os.stat("/dev/full").st_rdev
    assert capsys.readouterr().err == "bbx: cannot write the output: No space left on device\n"


def test_a_read_with_no_stdout_says_so(box: Path) -> None:
    ran = subprocess.run(
        [sys.executable, "-c", _CHILD, "chat", "history", SESSION, "--box", str(box)],
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=lambda: os.close(1),
    )
    assert (ran.returncode, ran.stderr) == (1, "bbx: there is no standard output to write to\n")


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param(["chat", "sessions"], id="sessions"),
        pytest.param(["chat", "history"], id="history-of-the-current-chat"),
        pytest.param(["--help"], id="help"),
        pytest.param(["chat", "history", SESSION, "--tail", "x"], id="usage-error"),
    ],
)
def test_every_other_command_exits_as_python_does(
    box: Path,
    arguments: list[str],
) -> None:
    ran = run_program([*arguments, *(["--box", str(box)] if arguments[0] == "chat" else [])])
    assert ran.stderr.endswith(TORN_DOWN + "\n"), ran.stderr


def test_python_dash_m_is_the_program(box: Path) -> None:
    ran = subprocess.run(
        [sys.executable, "-c", _CHILD.replace(
            "from beebox_impl.cli import program\nprogram()",
            "import runpy\nrunpy.run_module('beebox_impl', run_name='__main__')",
        ), "chat", "history", SESSION, "--box", str(box)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )  # fmt: skip
    assert (ran.returncode, ran.stderr) == (0, "")
    assert ran.stdout.startswith(f"session {SESSION}: 2 entries")
