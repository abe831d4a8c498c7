"""Scheduled scripts: enabled cards run at their cron times, lock groups honoured."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

from beebox_impl.box import init_box
from beebox_impl.review.cards import FieldValue, render_card, update_card
from beebox_impl.review.lock import hold_lock_group
from beebox_impl.review.schedule_card import install_review_schedule_card
from beebox_impl.scheduler import (
    SCHEDULE_DIR,
    read_scheduled_scripts,
    run_schedules,
    script_command,
)
from beebox_impl.session.clock import ManualClock

pytestmark = pytest.mark.anyio

# A minute before the review's 04:00.
START = datetime(2026, 12, 2, 3, 59, tzinfo=UTC)


def write_card(box: Path, name: str, **fields: FieldValue) -> Path:
    path = box / SCHEDULE_DIR / f"{name}.scheduled-script.card"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_card({"name": name, **fields}), encoding="utf-8")
    return path


def enable_review(box: Path) -> None:
    install_review_schedule_card(box)
    path = box / SCHEDULE_DIR / "chat-review.scheduled-script.card"
    update_card(box, path, lambda _card: {"enabled": True})


def test_only_enabled_well_formed_cards_are_scripts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    box = init_box(tmp_path / "box").root
    # `bbx init` installs the review's card disabled: nothing to run.
    assert read_scheduled_scripts(box) == []
    enable_review(box)
    write_card(box, "bad-cron", cron="61 * * * *", runs="true", enabled=True)
    write_card(box, "no-runs", cron="* * * * *", enabled=True)
    write_card(box, "off", cron="* * * * *", runs="true", enabled=False)
    with caplog.at_level(logging.WARNING, logger="beebox_impl.scheduler"):
        (review,) = read_scheduled_scripts(box)
    assert review.name == "chat-review"
    assert review.cron == "0 4 * * *"
    assert review.lock_group == "retro"
    assert review.not_before == timedelta(hours=20)
    assert review.command == (sys.executable, "-m", "beebox_impl", "chat", "review", "run")
    assert "bad-cron" in caplog.text
    assert "no-runs" in caplog.text


def test_a_command_line_is_split_without_a_shell() -> None:
    assert script_command("echo 'a b' c") == ("echo", "a b", "c")
    assert script_command("bbx chat review run --dry-run")[1:] == (
        "-m",
        "beebox_impl",
        "chat",
        "review",
        "run",
        "--dry-run",
    )


class Launches:
    """A launcher that records each command and ends when the test says so."""

    def __init__(self) -> None:
        self.commands: list[tuple[str, ...]] = []
        self.release = anyio.Event()

    async def __call__(self, command: Sequence[str], box_root: Path) -> int:
        self.commands.append(tuple(command))
        await self.release.wait()
        return 0


async def settle_on(clock: ManualClock) -> None:
    # The scheduler reads cards in a worker thread; wait until it sleeps on the clock.
    with anyio.fail_after(10):
        while clock.sleepers == 0:
            await anyio.sleep(0.005)
        await anyio.wait_all_tasks_blocked()


async def test_scripts_run_at_their_cron_times_one_per_lock_group(tmp_path: Path) -> None:
    box = init_box(tmp_path / "box").root
    enable_review(box)
    # A second script in the same lock group, due at the same time, and one outside it.
    write_card(box, "also-retro", cron="0 4 * * *", runs="echo retro", lockGroup="retro",
               enabled=True)  # fmt: skip
    write_card(box, "free", cron="0 4 * * *", runs="echo free", enabled=True)
    clock = ManualClock(START)
    launches = Launches()
    async with anyio.create_task_group() as task_group:
        task_group.start_soon(lambda: run_schedules(box, clock=clock, launch=launches))
        await settle_on(clock)
        assert launches.commands == []
        clock.advance(timedelta(minutes=1))
        await settle_on(clock)
        # One of group retro (file order: also-retro) and the free script run.
        # (Tasks start in the loop's order, so compare as sets.)
        assert sorted(command[-1] for command in launches.commands) == ["free", "retro"]
        launches.release.set()
        # The next night both retro scripts are due again: the one that waited goes.
        clock.advance(timedelta(days=1))
        await settle_on(clock)
        assert sorted(command[-1] for command in launches.commands[2:]) == ["free", "run"]
        task_group.cancel_scope.cancel()


async def test_a_group_held_by_another_process_skips_the_firing(tmp_path: Path) -> None:
    box = init_box(tmp_path / "box").root
    enable_review(box)
    clock = ManualClock(START)
    launches = Launches()
    launches.release.set()
    async with anyio.create_task_group() as task_group:
        task_group.start_soon(lambda: run_schedules(box, clock=clock, launch=launches))
        await settle_on(clock)
        # A review started from a terminal holds the group at 04:00.
        with hold_lock_group(box, "retro", "chat-review"):
            clock.advance(timedelta(minutes=1))
            await settle_on(clock)
        assert launches.commands == []
        # Not made up later that day; the next night it runs.
        clock.advance(timedelta(hours=12))
        await settle_on(clock)
        assert launches.commands == []
        clock.advance(timedelta(hours=12))
        await settle_on(clock)
        assert [command[-1] for command in launches.commands] == ["run"]
        task_group.cancel_scope.cancel()


async def test_a_real_script_runs_in_the_box_folder(tmp_path: Path) -> None:
    box = init_box(tmp_path / "box").root
    write_card(box, "touch", cron="0 4 * * *", runs="touch ran-here", enabled=True)
    clock = ManualClock(START)
    async with anyio.create_task_group() as task_group:
        task_group.start_soon(lambda: run_schedules(box, clock=clock))
        await settle_on(clock)
        clock.advance(timedelta(minutes=1))
        with anyio.fail_after(10):
            while not (box / "ran-here").exists():
                await anyio.sleep(0.01)
        task_group.cancel_scope.cancel()
