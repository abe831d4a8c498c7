"""The engine's process misbehaving (issue 9 §3): the session recovers per the lifecycle contract.

The box runs the Claude engine over the real SDK against `faulty_claude`, a
stand-in CLI that dies mid-turn, writes garbage or hangs at start when the
test's plan says so. What the lifecycle promises
(`docs/sources.md#lifecycle-queue-drain`, `docs/design.md#design-5-persisted-queue`):
a run that dies on its own is closed and the chat goes back to idle; what was
queued behind the dead turn drains into a fresh run; the next send starts a fresh
run; a start that hangs fails after the box's start timeout (`BoundedStartEngine`;
here `START_TIMEOUT`, well over the stand-in's real start) and the chat is idle
again, where the SDK alone would hold it ``starting`` for its own 60 s.
"""

from __future__ import annotations

import gc
import json
import stat
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from beebox_impl.engine import ClaudeEngine
from tests.reliability.support import Served, served_box_sync

FAULTY = Path(__file__).with_name("faulty_claude.py")
# A real start of the stand-in takes a second or two, more on a loaded machine.
START_TIMEOUT = 10.0


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 30) -> None:
    """Poll until ``condition`` holds (a bound on a wait, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


class Plan:
    """The faulty CLI's plan file and what it recorded."""

    def __init__(self, folder: Path, modes: list[str]) -> None:
        self.path = folder / "plan"
        self.path.write_text("\n".join(modes) + "\n")

    def turns(self) -> list[tuple[int, str]]:
        file = self.path.with_name("plan.turns")
        if not file.exists():
            return []
        lines = file.read_text().splitlines()
        return [(int(t["start"]), str(t["text"])) for t in map(json.loads, lines)]

    def starts(self) -> int:
        file = self.path.with_name("plan.starts")
        return len(file.read_text().splitlines()) if file.exists() else 0

    def kill_now(self) -> None:
        self.path.with_name("plan.die").touch()


@pytest.fixture
def faulty(
    tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Served, Plan]]:
    script = tmp_path / "bin" / "claude"
    script.parent.mkdir()
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAULTY}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    plan = Plan(tmp_path, list(request.param))
    monkeypatch.setenv("FAULTY_CLAUDE_PLAN", str(plan.path))
    engine = ClaudeEngine(cli_path=script, env={"CLAUDE_CONFIG_DIR": str(tmp_path / "config")})
    with served_box_sync(tmp_path, engine=engine, start_timeout=START_TIMEOUT) as served:
        yield served, plan
    # A dead run lets go of what the SDK held for it (`ClaudeRun._went_away`): nothing
    # is left for the collector to warn about in a later test.
    gc.collect()


def send(served: Served, text: str) -> dict[str, object]:
    answer = served.client.request(
        "POST", "/api/chat/send", json_body={"message": text, "messageId": f"id-{text}"}
    )
    assert answer.status == 200, answer.body
    body: dict[str, object] = answer.json()
    return body


def idle(served: Served) -> bool:
    status = served.box.status()
    return not status["busy"] and status["queued"] == 0


@pytest.mark.parametrize("faulty", [["die", "ok"]], indirect=True)
def test_a_run_dying_mid_turn_drains_its_queue_into_a_fresh_run(
    faulty: tuple[Served, Plan],
) -> None:
    served, plan = faulty
    assert "turnId" in send(served, "first")
    wait_for(lambda: plan.turns() == [(1, "first")], "the first turn to reach the CLI")
    assert send(served, "second") == {"queued": True}
    plan.kill_now()
    wait_for(lambda: (2, "second") in plan.turns(), "the queued text to reach a fresh run")
    wait_for(lambda: idle(served), "the chat to go idle")
    assert "turnId" in send(served, "third")
    wait_for(lambda: (2, "third") in plan.turns(), "the next turn")
    wait_for(lambda: idle(served), "the chat to go idle")
    assert plan.turns() == [(1, "first"), (2, "second"), (2, "third")]
    assert served.box.status()["phase"] == "ready"


@pytest.mark.parametrize("faulty", [["garbage", "ok"]], indirect=True)
def test_a_run_writing_garbage_is_closed_and_the_next_send_starts_afresh(
    faulty: tuple[Served, Plan],
) -> None:
    served, plan = faulty
    assert "turnId" in send(served, "first")
    wait_for(lambda: idle(served) and not served.box.status()["running"], "the run to end")
    assert "turnId" in send(served, "second")
    wait_for(lambda: (2, "second") in plan.turns(), "a fresh run")
    wait_for(lambda: idle(served), "the chat to go idle")
    assert plan.starts() == 2


@pytest.mark.parametrize("faulty", [["hang", "ok"]], indirect=True)
def test_a_start_that_hangs_fails_after_the_timeout_and_the_next_send_starts_afresh(
    faulty: tuple[Served, Plan],
) -> None:
    served, plan = faulty
    assert "turnId" in send(served, "first")
    wait_for(lambda: plan.starts() == 1, "the start that hangs")
    assert served.box.status()["phase"] == "starting"
    wait_for(
        lambda: served.box.status()["phase"] == "idle",
        "the hung start to fail",
        timeout=START_TIMEOUT + 30,
    )
    # The text the failed start carried is still the record's: pending, not lost.
    boot = served.client.request("GET", "/api/chat/bootstrap").json()
    assert [entry["content"] for entry in boot["pending"]] == [[{"type": "text", "text": "first"}]]
    assert "turnId" in send(served, "second")
    wait_for(lambda: (2, "second") in plan.turns(), "a fresh run")
    wait_for(lambda: idle(served), "the chat to go idle")
    assert plan.starts() == 2
