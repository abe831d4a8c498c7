"""`serving_environment` and `restart_for_serving`: `bbx serve` runs with glibc's
per-thread caches off, and hands the person's own ``GLIBC_TUNABLES`` on.

The restart replaces the whole program, so it is exercised in child processes: a
child calls `restart_for_serving`, is executed again with the same arguments (and
calls it again, now as the restarted process), then reports its pid, how many
times it started, the environment it would hand on, and whether a freed small
chunk stayed in a per-thread cache: the witness that glibc read the tunable.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from beebox_impl import allocator, cli_box
from beebox_impl.allocator import PER_THREAD_CACHE_TUNABLE, serving_environment
from beebox_impl.cli import main as bbx

glibc_only = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's tunables")

_MARK = "BBX_SERVE_PERSONS_GLIBC_TUNABLES"


def test_the_tunable_is_added_when_the_person_set_none() -> None:
    environment = serving_environment({"HOME": "/h"}, glibc=True)
    assert environment == {
        "HOME": "/h",
        "GLIBC_TUNABLES": PER_THREAD_CACHE_TUNABLE,
        _MARK: "",
    }


def test_the_persons_other_tunables_are_kept_and_remembered() -> None:
    persons = "glibc.malloc.mxfast=0:glibc.malloc.tcache_max=512"
    environment = serving_environment({"GLIBC_TUNABLES": persons}, glibc=True)
    assert environment is not None
    assert environment["GLIBC_TUNABLES"] == f"{persons}:{PER_THREAD_CACHE_TUNABLE}"
    assert environment[_MARK] == persons


@pytest.mark.parametrize(
    "persons", ["glibc.malloc.tcache_count=3", "glibc.malloc.mxfast=0:glibc.malloc.tcache_count=7"]
)
def test_a_cache_count_the_person_set_stands(persons: str) -> None:
    assert serving_environment({"GLIBC_TUNABLES": persons}, glibc=True) is None


def test_nothing_to_add_elsewhere_than_glibc() -> None:
    assert serving_environment({}, glibc=False) is None


_CHILD = r"""
import ctypes, json, os, sys
from beebox_impl.allocator import read_heap, restart_for_serving

print("started", flush=True)
if sys.argv[1] == "restart":
    restart_for_serving()
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
chunk = libc.malloc(200)
in_use = read_heap().in_arenas
libc.free(chunk)
# A chunk a thread's cache keeps still counts as in use; otherwise it is free.
cached = read_heap().in_arenas == in_use
print(json.dumps({
    "pid": os.getpid(),
    "handed_on": os.environ.get("GLIBC_TUNABLES"),
    "mark_left": "BBX_SERVE_PERSONS_GLIBC_TUNABLES" in os.environ,
    "cached": cached,
}))
"""


def _child(mode: str, **environment: str) -> dict[str, object]:
    base = {key: value for key, value in os.environ.items() if key != "GLIBC_TUNABLES"}
    process = subprocess.Popen(
        [sys.executable, "-c", _CHILD, mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**base, **environment},
    )
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    *starts, report = out.splitlines()
    answer: dict[str, object] = json.loads(report)
    answer["starts"] = len(starts)
    # A restart is an exec: the pid the parent started is the one that answered.
    assert answer.pop("pid") == process.pid
    return answer


@glibc_only
@pytest.mark.parametrize(
    ("mode", "persons", "starts", "handed_on", "cached"),
    [
        # The behaviour the restart exists for; if glibc stops doing this, it says so.
        ("plain", None, 1, None, True),
        # Restarted: glibc caches nothing, and the environment is the person's again.
        ("restart", None, 2, None, False),
        # The person's tunables are read with ours, and handed on alone.
        ("restart", "glibc.malloc.mxfast=0", 2, "glibc.malloc.mxfast=0", False),
        # A cache count of the person's: no restart, their setting stands.
        ("restart", "glibc.malloc.tcache_count=7", 1, "glibc.malloc.tcache_count=7", True),
    ],
)
def test_a_restart_turns_the_caches_off_and_hands_the_persons_environment_on(
    mode: str, persons: str | None, starts: int, handed_on: str | None, cached: bool
) -> None:
    environment = {} if persons is None else {"GLIBC_TUNABLES": persons}
    assert _child(mode, **environment) == {
        "starts": starts,
        "handed_on": handed_on,
        "mark_left": False,
        "cached": cached,
    }


def test_a_refused_restart_is_logged_and_serving_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def refuse(*_arguments: object) -> None:
        raise PermissionError("exec refused")

    monkeypatch.setattr(os, "execve", refuse)
    monkeypatch.setattr(allocator, "serving_environment", lambda _environ: {"A": "b"})
    monkeypatch.delenv(_MARK, raising=False)
    allocator.restart_for_serving()
    assert "restart refused: exec refused" in caplog.text


def test_only_the_command_line_of_the_process_restarts_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `main(argv)` from a host's own code must never replace the host's process.
    restarts: list[bool] = []
    monkeypatch.setattr(cli_box, "restart_for_serving", lambda: restarts.append(True))
    monkeypatch.setattr(cli_box, "tune_allocator_for_serving", lambda: None)
    monkeypatch.setattr(anyio, "run", lambda *_arguments: None)
    arguments = ["serve", "--box", str(tmp_path / "box"), "--port", "0"]
    assert bbx(arguments) == 0
    assert restarts == []
    monkeypatch.setattr(sys, "argv", ["bbx", *arguments])
    assert bbx() == 0
    assert restarts == [True]
