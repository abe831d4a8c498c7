"""Sessions for developers and CI: ``nox`` runs the default set (what CI runs).

Every session is a thin wrapper over `install`, so the way the project is installed
lives in one place. Long fuzzing, soak and benchmark runs get sessions of their own
and are not in the default set.
"""

from __future__ import annotations

import os
import re
import shutil
import tomllib
from pathlib import Path

import nox
from nox.command import CommandFailed

nox.options.sessions = ["lint", "typecheck", "tests", "conformance", "browser"]
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_external_run = True


def claimed_pythons() -> list[str]:
    """The Python versions pyproject.toml's classifiers claim (``3.11``, …)."""
    with (Path(__file__).parent / "pyproject.toml").open("rb") as file:
        classifiers: list[str] = tomllib.load(file)["project"]["classifiers"]
    prefix = "Programming Language :: Python :: "
    versions = [line.removeprefix(prefix) for line in classifiers if line.startswith(prefix)]
    return [version for version in versions if re.fullmatch(r"3\.\d+", version)]


# Every Python the package claims: `tests` runs on each one installed. One missing is
# skipped with a line saying so, CI variable or not, and is never downloaded: `nox`
# works on a machine with 3.11 alone, offline, in CI's time.
PYTHONS = claimed_pythons()
nox.options.error_on_missing_interpreters = False
nox.options.download_python = "never"

PACKAGES = ["beebox_spec", "beebox_impl", "conformance"]

# The extras the test suite runs with: its tools, Claude Code, and the model clients.
TEST_EXTRAS = ("test", "claude", "anthropic", "openai")

# The browser the chat page's tests drive: Debian's package, never a downloaded build.
CHROMIUM = "/usr/bin/chromium"

# The peer `bench/peers.py` measures `bbx` against, at the version the figures name.
PEER = "claude-code-log==1.7.0"


def install(session: nox.Session, *extras: str) -> None:
    """Install the project (editable) with ``extras`` into the session's virtualenv."""
    target = f".[{','.join(extras)}]" if extras else "."
    session.install("--upgrade", "pip")
    session.install("-e", target)


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """The pytest suite, on asyncio and trio, on each claimed Python installed (the
    page's tests run in `browser`)."""
    # The model clients too: the remote reviewers' tests (redaction before a span
    # leaves the machine) run against local fake servers through them. And Claude
    # Code itself (the claude extra): tests/agent runs the real CLI, offline.
    install(session, *TEST_EXTRAS)
    # One worker a core, at most four: the suite's crash and load tests start servers
    # and clients of their own beside the workers. On CI's two cores (12-04, fresh-clone
    # runs) the suite took 8 min 7 s on one worker and 4 min 3 s to 4 min 21 s on two.
    workers = str(min(os.cpu_count() or 1, 4))
    session.run("pytest", "-n", workers, "--ignore=tests/web", *session.posargs)


@nox.session
def conformance(session: nox.Session) -> None:
    """Every packaged vector: spec, implementation on asyncio and trio, a served box, the JS."""
    install(session, "test")
    session.run("python", "-m", "conformance", "--target", "all", "--serve", *session.posargs)
    # The page's JavaScript reconcile against the same reconcile/* vectors, under Node.
    session.run("pytest", "tests/web/test_reconcile_js.py")


@nox.session
def browser(session: nox.Session) -> None:
    """The chat page in headless Chromium (tests/web), installing Debian's chromium if root."""
    if not os.path.exists(CHROMIUM):
        if os.geteuid() != 0 or shutil.which("apt-get") is None:
            session.skip(f"{CHROMIUM} is missing, and installing it needs root and apt-get")
        apt_env = {"DEBIAN_FRONTEND": "noninteractive"}
        try:
            session.run("apt-get", "update", external=True, env=apt_env)
            session.run(
                "apt-get",
                "install",
                "-y",
                "--no-install-recommends",
                "chromium",
                external=True,
                env=apt_env,
            )
        except CommandFailed:
            # No archive reachable (an offline machine): say so rather than fail the run.
            session.skip("Debian's chromium could not be installed (apt-get failed; see above)")
    # The claude extra too: the permission cards' tests run the real Claude Code CLI.
    install(session, "test", "claude")
    session.run("pytest", "tests/web", *session.posargs)


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict over the packages, the tests and this file."""
    # What the tests import, so their types are checked too.
    install(session, *TEST_EXTRAS)
    session.install("nox")
    session.run("mypy", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff: lint rules and formatting."""
    session.install("ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def docs(session: nox.Session) -> None:
    """Regenerate the generated documents (docs/phases.md)."""
    install(session)
    with open("docs/phases.md", "w", encoding="utf-8") as out:
        session.run("python", "-m", "beebox_spec", "--markdown", stdout=out)


@nox.session
def deep(session: nox.Session) -> None:
    """The property tests with many more Hypothesis examples (long; not part of CI)."""
    install(session, "test")
    session.run("pytest", "tests/spec", *session.posargs, env={"HYPOTHESIS_PROFILE": "deep"})


@nox.session
def bench(session: nox.Session) -> None:
    """The benchmarks, each figure beside a baseline measured in the same run (long)."""
    # The Claude benchmark runs the CLI the claude extra bundles. Installed as the
    # README installs it, not editable: an editable install's finder runs in every
    # interpreter's start (~8 ms here), `python -c pass` included, and bench/peers.py's
    # whole-process figures would hide what bbx's own imports cost.
    session.install("--upgrade", "pip")
    session.install(".[claude]")
    # The transcript viewer bench/peers.py measures bbx against: the benchmark's alone.
    session.install(PEER)
    session.run("python", "bench/transcripts.py", *session.posargs)
    session.run("python", "bench/sessions.py", *session.posargs)
    session.run("python", "bench/box_http.py", *session.posargs)
    session.run("python", "bench/review.py", *session.posargs)
    session.run("python", "bench/claude.py", *session.posargs)
    session.run("python", "bench/permissions.py", *session.posargs)
    session.run("python", "bench/peers.py", *session.posargs)


@nox.session
def fuzz(session: nox.Session) -> None:
    """Each atheris fuzz target for ``--seconds`` (default 600) in turn (long; not in CI)."""
    install(session, "test")
    session.install("atheris")
    for target in ("transcript", "media_ref", "media_extract", "card", "http"):
        session.run("python", f"fuzz/fuzz_{target}.py", *(session.posargs or ["--seconds", "600"]))


@nox.session
def load(session: nox.Session) -> None:
    """64 clients against `bbx serve` for 5 minutes (``-- --quick`` for a smoke run)."""
    install(session)
    session.run("python", "bench/load.py", *session.posargs)


@nox.session(name="held-objects")
def held_objects(session: nox.Session) -> None:
    """What the box's Python heap holds under load, sampled in its own process (5 minutes)."""
    install(session)
    session.run("python", "bench/held_objects.py", *session.posargs)


@nox.session
def faults(session: nox.Session) -> None:
    """kill -9 cycles under load, a full disk, a misbehaving engine (long; not in CI)."""
    install(session, "claude")
    session.run("python", "bench/faults.py", *session.posargs)
