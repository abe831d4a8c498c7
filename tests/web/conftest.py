"""Fixtures for the browser tests: Debian's Chromium driven by Playwright, and served boxes.

The browser is ``/usr/bin/chromium`` (Debian's ``chromium`` package), launched by
Playwright for Python with ``executable_path``: Playwright's own browser download
(``playwright install``) is never used. Where either is missing the browser tests
skip, saying which (``pytest -ra`` prints it); the `browser` nox session installs
both where it can.

A box is served by ``tests/web/box_server.py`` in a child process, so a test can
kill it (SIGKILL) and start it again on the same port, where the page's cookie
(``bbx_token_<port>``) still holds.

Screenshots go to ``$BBX_SCREENSHOT_DIR`` when it is set (``docs/screenshots`` to
refresh the README's), else to the test's temporary folder.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Route

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
# The flags the brief of issue 8 fixes: headless, no sandbox (CI runs as root), and
# nothing that reaches out to the network on its own.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SERVER_START_SECONDS = 30


def _why_no_browser() -> str | None:
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is missing (Debian package chromium; `nox -s browser` installs it)"
    try:
        import playwright.sync_api  # noqa: F401, PLC0415
    except ImportError:
        return "playwright is not installed (pip install -e '.[test]')"
    return None


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    reason = _why_no_browser()
    if reason is not None:
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright  # noqa: PLC0415

    with sync_playwright() as driver:
        launched = driver.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def screenshot_dir(tmp_path: Path) -> Path:
    chosen = os.environ.get("BBX_SCREENSHOT_DIR")
    folder = Path(chosen) if chosen else tmp_path / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def abandoned_by_the_page(error: Exception) -> bool:
    """Whether a route handler's answer failed because the page let the request go.

    A reload (or a closing page) abandons a read in flight, and Playwright may
    still call a handler for it, even one unrouted a moment before: its answer
    then fails with "already handled" or "closed". That route is gone, not the
    test's to answer; what the test expects of the page is asserted elsewhere.
    """
    return "already handled" in str(error) or "closed" in str(error)


def fulfill_unless_abandoned(route: Route, **answer: Any) -> bool:
    """``route.fulfill(**answer)``; False if the page had let the request go."""
    from playwright.sync_api import Error as PlaywrightError  # noqa: PLC0415 - skips without it

    try:
        route.fulfill(**answer)
    except PlaywrightError as error:
        if not abandoned_by_the_page(error):
            raise
        return False
    return True


def answer_changed(route: Route, change: Callable[[dict[str, Any]], None]) -> dict[str, Any] | None:
    """The box's own JSON answer to ``route``, edited in place by ``change``, given to
    the page; None if the page had let the request go (`abandoned_by_the_page`)."""
    from playwright.sync_api import Error as PlaywrightError  # noqa: PLC0415 - skips without it

    try:
        answer = route.fetch()
        body: dict[str, Any] = answer.json()
        change(body)
        route.fulfill(response=answer, json=body)
    except PlaywrightError as error:
        if not abandoned_by_the_page(error):
            raise
        return None
    return body


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class ServedBox:
    """A box served by a child process; `stop`, `kill` and `start` it again."""

    box: Path
    projects: Path
    port: int
    gate: Path | None = None
    login_url: str = ""
    process: subprocess.Popen[str] | None = field(default=None, repr=False)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def token(self) -> str:
        return (self.box / ".beebox" / "token").read_text(encoding="ascii").strip()

    def start(self, *, gated: bool | None = None) -> ServedBox:
        command = [
            sys.executable,
            "-m",
            "tests.web.box_server",
            "--box",
            str(self.box),
            "--projects",
            str(self.projects),
            "--port",
            str(self.port),
        ]
        if self.gate is not None and gated is not False:
            command += ["--gate", str(self.gate)]
        self.process = subprocess.Popen(
            command, cwd=REPO, stdout=subprocess.PIPE, text=True, start_new_session=True
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line.startswith("READY "), f"the box server did not start: {line!r}"
        self.login_url = line.removeprefix("READY ").strip()
        return self

    def release(self, turn: int) -> None:
        """Let turn ``turn`` (from 1, in this server process) end."""
        assert self.gate is not None
        (self.gate / str(turn)).touch()

    def kill(self) -> None:
        """A crash: SIGKILL, no clean shutdown."""
        self._end(signal.SIGKILL)

    def stop(self) -> None:
        self._end(signal.SIGTERM)

    def _end(self, how: signal.Signals) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(how)
        self.process.wait(timeout=SERVER_START_SECONDS)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.process = None

    def api(self, method: str, path: str, body: Any = None) -> Any:
        """Call the box's API with the bearer token; the JSON answer."""
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(
            self.base_url + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read())


@pytest.fixture
def served_box(tmp_path: Path) -> Iterator[Callable[..., ServedBox]]:
    """Start a box server: ``served_box(gated=True)``; every one is stopped afterwards."""
    started: list[ServedBox] = []

    def start(*, gated: bool = False) -> ServedBox:
        gate = tmp_path / "gate" if gated else None
        if gate is not None:
            gate.mkdir(exist_ok=True)
        served = ServedBox(tmp_path / "box", tmp_path / "projects", free_port(), gate)
        started.append(served)
        return served.start()

    yield start
    for served in started:
        served.stop()
