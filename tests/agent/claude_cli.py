"""Claude Code itself, run offline: the CLI the ``claude`` extra ships, on the API double.

`OfflineClaude` gives one test a private world for the real CLI: its own home,
config folder (so its transcripts go to ``<config>/projects``, where the box reads
them) and temporary folder, and an environment that points it at a
`MessagesApiDouble` on 127.0.0.1 with every outside call turned off. Nothing here
stands in for the CLI: `cli_path` is the binary claude-agent-sdk bundles, and a
missing one fails the test (the ``tests`` session installs the extra), never skips.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from beebox_impl.engine.claude import ClaudeEngine
from tests.agent.messages_api import MessagesApiDouble

__all__ = [
    "CLAUDE_RETRIES",
    "OfflineClaude",
    "claude_processes",
    "cli_path",
    "cli_version",
    "freeze",
    "kill",
]

# How often the CLI retries a failed API call in these tests (its default is 10,
# with backoff): enough to see a retry, few enough to keep an error turn short.
CLAUDE_RETRIES = 2


def cli_path() -> Path:
    """The ``claude`` binary bundled with claude-agent-sdk (the ``claude`` extra)."""
    spec = importlib.util.find_spec("claude_agent_sdk")
    if spec is None or spec.origin is None:
        raise AssertionError(
            "claude-agent-sdk is not installed: these tests run the real CLI it bundles "
            "(pip install -e '.[test,claude]'; nox's tests session does)"
        )
    binary = Path(spec.origin).parent / "_bundled" / "claude"
    if not os.access(binary, os.X_OK):
        raise AssertionError(f"claude-agent-sdk's bundled CLI is missing at {binary}")
    return binary


def cli_version() -> str:
    """What ``claude --version`` prints, e.g. ``2.1.332 (Claude Code)``."""
    done = subprocess.run(
        [cli_path(), "--version"], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.strip()


@dataclass
class OfflineClaude:
    """A private home for the real CLI under ``root``, talking to ``api``."""

    root: Path
    api: MessagesApiDouble
    retries: int = CLAUDE_RETRIES
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for folder in (self.home, self.config, self.tmp):
            folder.mkdir(parents=True, exist_ok=True)

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def config(self) -> Path:
        """``CLAUDE_CONFIG_DIR``: settings, state, and ``projects/`` with the transcripts."""
        return self.root / "claude-config"

    @property
    def projects(self) -> Path:
        return self.config / "projects"

    @property
    def tmp(self) -> Path:
        return self.root / "claude-tmp"

    @property
    def env(self) -> dict[str, str]:
        """What the CLI's environment needs to run here, offline, on the double."""
        return {
            "HOME": str(self.home),
            "CLAUDE_CONFIG_DIR": str(self.config),
            "CLAUDE_CODE_TMPDIR": str(self.tmp),
            "ANTHROPIC_BASE_URL": self.api.url,
            "ANTHROPIC_API_KEY": "sk-ant-offline-test",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CODE_MAX_RETRIES": str(self.retries),
            **self.extra_env,
        }

    def process_env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's environment) with `env` over it."""
        return {**(os.environ if base is None else base), **self.env}

    def engine(self, **options: Any) -> ClaudeEngine:
        """A `ClaudeEngine` on the bundled CLI with this environment."""
        return ClaudeEngine(cli_path=cli_path(), env=self.env, **options)

    def transcripts(self) -> list[Path]:
        """Every transcript the CLI has written, oldest first."""
        return sorted(self.projects.glob("*/*.jsonl"), key=lambda path: path.stat().st_mtime_ns)


def claude_processes(config: Path) -> list[int]:
    """The pids of live CLI processes whose environment names ``config`` (Linux /proc).

    Only the CLI itself: the shells its tools start inherit the environment too.
    """
    needle = f"CLAUDE_CONFIG_DIR={config}".encode()
    binary = str(cli_path().resolve())
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(entry / "exe") != binary:
                continue
            environ = (entry / "environ").read_bytes()
            status = (entry / "stat").read_text()
        except OSError:
            continue
        # A zombie has gone; it is only waiting for its parent to read its status.
        if needle in environ.split(b"\0") and status.rsplit(")", 1)[-1].split()[0] != "Z":
            found.append(int(entry.name))
    return found


def kill(pid: int) -> None:
    """SIGKILL ``pid`` (gone already is fine)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def freeze(pid: int) -> None:
    """SIGSTOP ``pid``: it does nothing more until killed (gone already is fine)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGSTOP)
