"""Light `bbx` commands import what they use, in the one interpreter they start in.

``bbx --help``, ``bbx phases``, ``bbx chat history`` and ``bbx chat media`` are run
through `beebox_impl.cli.main` (what the ``bbx`` script, `program`, runs), each in a
child process that then reports what is in `sys.modules`: none of the box, its HTTP
server, sessions, services, stores, engines, the review, YAML, ``urllib.request``
or an event loop. The child refuses to execute a program: a light command never
restarts its interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from beebox_impl.box import init_box
from beebox_impl.settings import SETTINGS_TEMPLATE, settings_path
from beebox_impl.transcript.location import (
    CLAUDE_CONFIG_DIR_ENV,
    PROJECTS_DIR_ENV,
    box_projects_root,
    transcript_path,
)
from tests.impl.test_cli import PHOTO, SESSION, write_chat

# What no light command may load: the module, or anything under it.
NEVER_LOADED = (
    "beebox_impl.box",
    "beebox_impl.cli.box",
    "beebox_impl.cli.sessions",
    "beebox_impl.http",
    "beebox_impl.session",
    "beebox_impl.services",
    "beebox_impl.store",
    "beebox_impl.review",
    "beebox_impl.web",
    "beebox_impl.scheduler",
    "beebox_impl.allocator",
    "ruamel",
    "urllib.request",
    "http.server",
    "sqlite3",
    "claude_agent_sdk",
    "beebox_impl.engine.claude_permissions",
    "beebox_spec.permissions",
    # OpenSSL, loaded by hashlib: the index's BLAKE2b is `beebox_impl.blake2`.
    "hashlib",
    # The read's records are named tuples (`beebox_impl.transcript`): dataclasses,
    # with inspect under it, were ~13 ms of a read.
    "dataclasses",
    "inspect",
    # Said only by a box's other commands (`beebox_impl.cli.box_warnings`): a read's
    # shelf says its own warning (`IndexShelf`), and its debug lines load it when said.
    "logging",
    # The index cache's locks are `_thread`'s (`threading.Lock` is one).
    "threading",
    # A read names an entry's sender by `beebox_spec.attribution`, not by the
    # acceptance record's rules; JavaScript's numbers print without `decimal`.
    "beebox_spec.reconcile",
    "decimal",
)
# Of the engines' package, a light command may load only the words the settings
# file is checked against (the permission modes), never an engine; nor an event loop.
ENGINE_VOCABULARY = {
    "beebox_impl.engine",
    "beebox_impl.engine.permission_modes",
}

_CHILD = r"""
import json, os, sys

def refuse(*arguments):
    print("bbx tried to execute a program", file=sys.stderr, flush=True)
    os._exit(99)

os.execv = os.execve = refuse
report = sys.argv.pop(1)
sys.argv[0] = "bbx"
from beebox_impl.cli import main
try:
    code = main()
except SystemExit as exit:
    code = exit.code
with open(report, "w") as file:
    json.dump({"code": code, "modules": sorted(sys.modules)}, file)
"""


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A box as `bbx init` makes it (its settings file too), with one chat and a photo."""
    root = init_box(tmp_path_factory.mktemp("imports") / "box").root
    assert settings_path(root).read_text() == SETTINGS_TEMPLATE
    write_chat(transcript_path(root, SESSION, box_projects_root(root)))
    return root


def run_bbx(arguments: list[str], tmp_path: Path) -> dict[str, Any]:
    """Run ``bbx arguments`` in a child; its exit code and the modules it loaded."""
    report = tmp_path / "report.json"
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in {PROJECTS_DIR_ENV, CLAUDE_CONFIG_DIR_ENV, "GLIBC_TUNABLES"}
    }
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(report), *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        env={**environment, "HOME": str(tmp_path)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(report.read_text())
    return result


def light_commands(box: Path, tmp_path: Path) -> dict[str, list[str]]:
    photo_file = str(tmp_path / "p.png")
    return {
        "help": ["--help"],
        "phases": ["phases"],
        "history": ["chat", "history", SESSION, "--tail", "200", "--json", "--box", str(box)],
        "media": ["chat", "media", f"{SESSION}/u-1/0", "-o", photo_file, "--box", str(box)],
    }


LIGHT = ("help", "phases", "history", "media")


def loaded_under(modules: list[str], roots: tuple[str, ...]) -> list[str]:
    return [name for name in modules if any(name == r or name.startswith(r + ".") for r in roots)]


@pytest.mark.parametrize("command", LIGHT)
def test_a_light_command_loads_none_of_the_box(box: Path, tmp_path: Path, command: str) -> None:
    ran = run_bbx(light_commands(box, tmp_path)[command], tmp_path)
    assert ran["code"] == 0
    assert loaded_under(ran["modules"], NEVER_LOADED) == []
    if command == "media":
        assert (tmp_path / "p.png").read_bytes() == PHOTO


@pytest.mark.parametrize(
    "command",
    [
        "help",
        "phases",
        "history",
        "media",
    ],
)
def test_a_light_command_loads_no_engine(box: Path, tmp_path: Path, command: str) -> None:
    ran = run_bbx(light_commands(box, tmp_path)[command], tmp_path)
    engines = set(loaded_under(ran["modules"], ("beebox_impl.engine",)))
    assert engines <= ENGINE_VOCABULARY
    assert loaded_under(ran["modules"], ("asyncio", "anyio", "trio")) == []


@pytest.mark.parametrize("command", ["help", "phases"])
def test_help_and_phases_load_no_transcript_reader_nor_settings(
    box: Path, tmp_path: Path, command: str
) -> None:
    ran = run_bbx(light_commands(box, tmp_path)[command], tmp_path)
    assert loaded_under(ran["modules"], ("beebox_impl.transcript", "beebox_impl.settings")) == []


@pytest.mark.parametrize("command", LIGHT)
def test_a_command_that_writes_no_file_loads_no_shutil(
    box: Path, tmp_path: Path, command: str
) -> None:
    # argparse's formatter imports shutil for the terminal's width unless given it
    # (`beebox_impl.cli.help_formatter`). A cold read saves its index (tempfile brings
    # shutil), so history is read twice and the warm run is the one looked at.
    arguments = light_commands(box, tmp_path)[command]
    if command == "history":
        run_bbx(arguments, tmp_path)
    ran = run_bbx(arguments, tmp_path)
    assert loaded_under(ran["modules"], ("shutil",)) == []
