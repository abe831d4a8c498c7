"""Scheduled scripts: `bbx serve` runs a box's enabled schedule cards at their cron times.

Spec sources: `docs/sources.md#review-running` (the chat review ships as a scheduled
script, nightly at 04:00 in lock group ``retro``, disabled) and
`docs/sources.md#facts-4-9` (§4.9, the card's fields). A schedule card is
``_config/schedules/<name>.scheduled-script.card``, read with the review's card
reader (`beebox_impl.review.cards`), fields:

===========  =============================================================
``cron``     five-field cron expression, in UTC (`cronsim`)
``enabled``  only ``true`` runs; box-owned, so a template re-sync keeps it
``runs``     the command line, split like a shell would (no shell runs it);
             a leading ``bbx`` is this beebox (``python -m beebox_impl``)
``lockGroup``  optional: at most one script of a group runs at a time
``notBefore``  optional, ``<n>h`` / ``<n>m``: at least that long between two
               runs of this card started by this scheduler
===========  =============================================================

How it runs: every `RESCAN_SECONDS` (and at each due time) the scheduler reads
the cards again, so enabling, disabling or editing a card takes effect without a
restart. A card is due when a cron time has passed since the scheduler last
looked (a firing missed while the box was down is not made up: ``onWakeup`` is
``false`` for the review, and other values are not acted on yet). A due script
whose lock group is held — by a script this scheduler started, or by another
process (`beebox_impl.review.lock`: a review run from a terminal) — is skipped
for that firing and logged; of several due together in one group, the one whose
last start is oldest goes first (then file-name order), so they take turns.
Scripts run as child processes in the box folder; their output goes to the log.
A card that cannot be read or has a bad cron expression is logged and skipped,
never fatal.
"""

from __future__ import annotations

import logging
import re
import shlex
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Final

import anyio
import anyio.to_thread
from cronsim import CronSim, CronSimError

from beebox_impl.review.cards import CardFormatError, read_card
from beebox_impl.review.lock import LockHeldError, hold_lock_group
from beebox_impl.session.clock import SessionClock

__all__ = [
    "RESCAN_SECONDS",
    "SCHEDULE_DIR",
    "ScheduledScript",
    "read_scheduled_scripts",
    "run_schedules",
    "script_command",
]

_log = logging.getLogger(__name__)

SCHEDULE_DIR: Final = "_config/schedules"
_CARD_SUFFIX: Final = ".scheduled-script.card"
# Cards are read again at least this often (an edit takes effect within it).
RESCAN_SECONDS: Final = 60.0
_DURATION_RE: Final = re.compile(r"(\d+)\s*([hm])")

# Runs one script's command line to its end (the default starts a child process).
Launcher = Callable[[Sequence[str], Path], Awaitable[int]]


@dataclass(frozen=True)
class ScheduledScript:
    """One enabled, well-formed schedule card."""

    name: str
    cron: str
    command: tuple[str, ...]
    lock_group: str | None
    not_before: timedelta
    path: Path


def script_command(runs: str) -> tuple[str, ...]:
    """The argv of a card's ``runs``; a leading ``bbx`` is this interpreter's beebox."""
    argv = tuple(shlex.split(runs))
    if argv and argv[0] == "bbx":
        return (sys.executable, "-m", "beebox_impl", *argv[1:])
    return argv


def _duration(text: str | None) -> timedelta:
    if not text:
        return timedelta(0)
    match = _DURATION_RE.fullmatch(text.strip())
    if match is None:
        raise CardFormatError(f"notBefore {text!r} is not <n>h or <n>m")
    amount, unit = int(match.group(1)), match.group(2)
    return timedelta(hours=amount) if unit == "h" else timedelta(minutes=amount)


def read_scheduled_scripts(box_root: Path) -> list[ScheduledScript]:
    """The box's enabled schedule cards, in file-name order (bad ones logged, skipped)."""
    scripts: list[ScheduledScript] = []
    for path in sorted((box_root / SCHEDULE_DIR).glob(f"*{_CARD_SUFFIX}")):
        try:
            card = read_card(path)
        except (OSError, ValueError) as error:
            _log.warning("schedule card %s unreadable: %s", path, error)
            continue
        if card.fields.get("enabled") is not True:
            continue
        try:
            cron, runs = card.text("cron"), card.text("runs")
            if not cron or not runs:
                raise CardFormatError("it needs both cron and runs")
            CronSim(cron, datetime.now().astimezone())  # validates the expression
            command = script_command(runs)
            if not command:
                raise CardFormatError("runs is empty")
            scripts.append(
                ScheduledScript(
                    name=card.text("name") or path.name.removesuffix(_CARD_SUFFIX),
                    cron=cron,
                    command=command,
                    lock_group=card.text("lockGroup"),
                    not_before=_duration(card.text("notBefore")),
                    path=path,
                )
            )
        except (CronSimError, CardFormatError, ValueError) as error:
            _log.warning("schedule card %s skipped: %s", path, error)
    return scripts


def _next_time(script: ScheduledScript, after: datetime) -> datetime:
    return next(CronSim(script.cron, after))


async def _launch_process(command: Sequence[str], box_root: Path) -> int:
    done = await anyio.run_process(list(command), cwd=box_root, check=False)
    for stream, text in (("stdout", done.stdout), ("stderr", done.stderr)):
        for line in text.decode("utf-8", "replace").splitlines():
            _log.info("%s %s: %s", command[-1] if command else "?", stream, line)
    return done.returncode


def _group_held_elsewhere(box_root: Path, group: str) -> bool:
    # The lock is advisory and only tested here: the script takes it itself.
    try:
        with hold_lock_group(box_root, group, "scheduler check"):
            return False
    except LockHeldError:
        return True


async def run_schedules(
    box_root: Path,
    *,
    clock: SessionClock,
    launch: Launcher = _launch_process,
    rescan_seconds: float = RESCAN_SECONDS,
) -> None:
    """Run the box's enabled scheduled scripts at their times, until cancelled."""
    looked_at = clock.now()
    busy_groups: set[str] = set()
    last_started: dict[Path, datetime] = {}

    async def run_one(script: ScheduledScript) -> None:
        _log.info("scheduled script %s starting: %s", script.name, shlex.join(script.command))
        try:
            code = await launch(script.command, box_root)
        except OSError as error:
            _log.warning("scheduled script %s could not start: %s", script.name, error)
            return
        finally:
            if script.lock_group is not None:
                busy_groups.discard(script.lock_group)
        _log.info("scheduled script %s ended with exit code %d", script.name, code)

    async with anyio.create_task_group() as task_group:
        while True:
            now = clock.now()
            scripts = await anyio.to_thread.run_sync(read_scheduled_scripts, box_root)
            # Within a lock group the script that waited longest goes first: two due
            # together take turns, night after night, instead of one always winning.
            waited_longest = sorted(
                scripts,
                key=lambda script: last_started.get(
                    script.path, datetime.min.replace(tzinfo=now.tzinfo)
                ),
            )
            for script in waited_longest:
                if _next_time(script, looked_at) > now:
                    continue
                previous = last_started.get(script.path)
                if previous is not None and now - previous < script.not_before:
                    _log.info("scheduled script %s skipped: ran at %s", script.name, previous)
                    continue
                group = script.lock_group
                if group is not None and (
                    group in busy_groups
                    or await anyio.to_thread.run_sync(_group_held_elsewhere, box_root, group)
                ):
                    _log.warning(
                        "scheduled script %s skipped: lock group %s is busy", script.name, group
                    )
                    continue
                if group is not None:
                    busy_groups.add(group)
                last_started[script.path] = now
                task_group.start_soon(run_one, script, name=f"scheduled script {script.name}")
            looked_at = now
            due = [_next_time(script, now) for script in scripts]
            wait = min([rescan_seconds, *((at - now).total_seconds() for at in due)])
            await clock.sleep(max(wait, 0.0))
