"""The Claude engine: start options, start failures, and a run over a stand-in CLI.

No network and no model here: the SDK is pointed (``cli_path``) at `fake_claude`, a
small program that speaks the CLI's stream-json protocol, so these pin what the
engine asks of any CLI (its arguments, resume, interrupt, close). The real CLI runs
through the box in `tests/agent/`. The ``claude`` extra is installed wherever the
tests run (nox's ``tests`` session): nothing here skips without it.
"""

from __future__ import annotations

import base64
import json
import re
import stat
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

import beebox_impl.engine.claude as claude_module
from beebox_impl.engine import ClaudeEngine, ClaudeRun, EngineStartError, StartOptions
from beebox_impl.engine.claude import INSTALL_HINT
from beebox_impl.transcript.location import encode_project_dir
from beebox_spec.entries import JsonObject
from beebox_spec.sdk_messages import adapt_sdk_message
from tests.impl.engine.fake_claude import option_value

FAKE_CLAUDE = Path(__file__).with_name("fake_claude.py")


# ---------------------------------------------------------------------------
# Options, and an SDK that cannot be imported
# ---------------------------------------------------------------------------


def test_a_new_session_gets_the_system_prompt_and_a_resumed_one_does_not(tmp_path: Path) -> None:
    engine = ClaudeEngine(cli_path="/opt/claude", permission_mode="acceptEdits")
    new = engine.agent_options(
        StartOptions(cwd=tmp_path, system_prompt="be brief", model="m", env={"A": "1"})
    )
    assert new == {
        "cwd": tmp_path,
        "env": {"A": "1"},
        "include_partial_messages": True,
        "system_prompt": "be brief",
        "model": "m",
        "cli_path": "/opt/claude",
        "permission_mode": "acceptEdits",
    }
    resumed = engine.agent_options(
        StartOptions(cwd=tmp_path, resume_session_id="s-1", system_prompt="be brief")
    )
    assert resumed["resume"] == "s-1"
    assert "system_prompt" not in resumed
    extra = ClaudeEngine(
        extra_options={"max_turns": 3, "include_partial_messages": False},
        setting_sources=["project"],
    )
    assert extra.agent_options(StartOptions(cwd=tmp_path)) == {
        "cwd": tmp_path,
        "env": {},
        "include_partial_messages": False,
        "setting_sources": ["project"],
        "max_turns": 3,
    }


@pytest.mark.anyio
async def test_without_the_sdk_a_start_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A None entry makes the import fail, whether or not the SDK is installed.
    monkeypatch.setitem(sys.modules, "claude_agent_sdk", None)
    with pytest.raises(EngineStartError, match=r"claude-agent-sdk") as caught:
        await ClaudeEngine().start(StartOptions(cwd=tmp_path))
    assert INSTALL_HINT in str(caught.value)


# ---------------------------------------------------------------------------
# A stand-in CLI
# ---------------------------------------------------------------------------


@pytest.fixture
def fake_cli(tmp_path: Path) -> Path:
    script = tmp_path / "bin" / "claude"
    script.parent.mkdir()
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_CLAUDE}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


@pytest.fixture
def box(tmp_path: Path) -> Path:
    folder = tmp_path / "box"
    folder.mkdir()
    return folder


def starts_logged(log: Path) -> list[JsonObject]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


async def read_turn(stream: AsyncIterator[JsonObject]) -> list[JsonObject]:
    received: list[JsonObject] = []
    with anyio.fail_after(20):
        while not received or received[-1]["type"] != "result":
            received.append(await stream.__anext__())
    return received


@pytest.mark.anyio
async def test_a_missing_cli_is_a_clear_start_error(tmp_path: Path) -> None:
    engine = ClaudeEngine(cli_path=tmp_path / "no-such-claude")
    with pytest.raises(EngineStartError, match="no-such-claude does not exist: give ClaudeEngine"):
        await engine.start(StartOptions(cwd=tmp_path))
    folder = ClaudeEngine(cli_path=tmp_path)
    with pytest.raises(EngineStartError, match="is not a file"):
        await folder.start(StartOptions(cwd=tmp_path))


@pytest.mark.anyio
async def test_a_cli_that_exits_at_once_is_a_start_error(fake_cli: Path, box: Path) -> None:
    engine = ClaudeEngine(cli_path=fake_cli)
    with anyio.fail_after(20), pytest.raises(EngineStartError, match="did not start"):
        await engine.start(StartOptions(cwd=box, env={"FAKE_CLAUDE_EXIT": "3"}))


@pytest.mark.anyio
async def test_a_run_streams_turns_and_closes(fake_cli: Path, box: Path, tmp_path: Path) -> None:
    engine = ClaudeEngine(cli_path=fake_cli, env={"CLAUDE_CONFIG_DIR": str(tmp_path / "config")})
    with anyio.fail_after(30):
        run = await engine.start(StartOptions(cwd=box, system_prompt="be brief", model="opus"))
    assert isinstance(run, ClaudeRun)
    # Not known until the CLI announces it.
    session_before_init = run.session_id
    assert session_before_init is None
    stream = run.messages()
    await run.send("hello")
    init, assistant, result = await read_turn(stream)
    session = init["session_id"]
    assert isinstance(session, str)
    assert adapt_sdk_message(init) == {"type": "system", "subtype": "init", "session_id": session}
    assert init["model"] == "opus"
    assert run.session_id == session
    adapted = adapt_sdk_message(assistant)
    assert adapted is not None
    assert adapted["type"] == "assistant"
    assert adapted["session_id"] == session
    assert adapted["message"]["content"] == [{"type": "text", "text": "echo: hello (0 images)"}]
    assert adapt_sdk_message(result) == {
        "type": "result",
        "subtype": "success",
        "session_id": session,
        "is_error": False,
        "duration_ms": 1,
        "num_turns": 1,
        "total_cost_usd": 0.0,
        "result": "echo: hello (0 images)",
    }
    # Content blocks, an image among them, reach the CLI as they were sent.
    photo = base64.b64encode(b"\x89PNG fake").decode("ascii")
    await run.send(
        [
            {"type": "text", "text": "see"},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": photo},
            },
        ]
    )
    assistant, _ = await read_turn(stream)
    body = assistant["message"]
    assert isinstance(body, dict)
    assert body["content"] == [{"type": "text", "text": "echo: see (1 images)"}]
    await run.close()
    assert run.closed
    with pytest.raises(StopAsyncIteration):
        await stream.__anext__()
    with pytest.raises(anyio.ClosedResourceError):
        await run.send("late")
    await run.close()


@pytest.mark.anyio
async def test_a_session_resumes_by_its_id_with_the_system_prompt_only_when_new(
    fake_cli: Path, box: Path, tmp_path: Path
) -> None:
    log = tmp_path / "starts.jsonl"
    env = {"FAKE_CLAUDE_LOG": str(log)}
    engine = ClaudeEngine(cli_path=fake_cli, env={"CLAUDE_CONFIG_DIR": str(tmp_path / "config")})
    with anyio.fail_after(30):
        run = await engine.start(
            StartOptions(cwd=box, system_prompt="be brief", model="opus", env=env)
        )
    stream = run.messages()
    await run.send("hello")
    init, _, _ = await read_turn(stream)
    session = init["session_id"]
    assert isinstance(session, str)
    await run.close()

    # The CLI resumes only a session it wrote a conversation of (the stand-in writes none).
    resume = StartOptions(cwd=box, resume_session_id=session, system_prompt="be brief", env=env)
    transcript = engine.cli_transcript(resume, session)
    project = tmp_path / "config" / "projects" / encode_project_dir(box)
    assert transcript == project / f"{session}.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text('{"type":"queue-operation"}\n{"type":"user","message":{}}\n')
    with anyio.fail_after(30):
        resumed = await engine.start(resume)
    stream = resumed.messages()
    await resumed.send("again")
    init, _, _ = await read_turn(stream)
    assert init["session_id"] == session
    await resumed.close()

    first, second = starts_logged(log)
    assert Path(str(first["cwd"])).resolve() == box.resolve()
    first_args, second_args = first["args"], second["args"]
    assert isinstance(first_args, list)
    assert isinstance(second_args, list)
    # Streaming input, with partial messages (live text); the model; a system
    # prompt for the new session only.
    assert "--input-format" in first_args
    assert "--include-partial-messages" in first_args
    assert "--include-partial-messages" in second_args
    assert option_value(first_args, "--model") == "opus"
    assert option_value(first_args, "--system-prompt") == "be brief"
    assert not any(str(arg).startswith("--resume") for arg in first_args)
    assert f"--resume={session}" in second_args
    assert not option_value(second_args, "--system-prompt")


@pytest.mark.anyio
async def test_an_interrupt_ends_the_turn_in_flight(fake_cli: Path, box: Path) -> None:
    engine = ClaudeEngine(cli_path=fake_cli)
    with anyio.fail_after(30):
        run = await engine.start(StartOptions(cwd=box))
    stream = run.messages()
    await run.send("hold")
    with anyio.fail_after(20):
        init = await stream.__anext__()
    assert init["subtype"] == "init"
    await run.interrupt()
    with anyio.fail_after(20):
        result = await stream.__anext__()
    adapted = adapt_sdk_message(result)
    assert adapted is not None
    assert adapted["type"] == "result"
    assert adapted["subtype"] == "error_during_execution"
    assert adapted["is_error"] is True
    # The run stays open: the next turn is answered.
    await run.send("after")
    assistant, _ = await read_turn(stream)
    assert assistant["type"] == "assistant"
    await run.close()
    await run.interrupt()  # a closed run: nothing to do


@pytest.mark.anyio
async def test_closing_while_the_pump_waits_ends_its_stream(fake_cli: Path, box: Path) -> None:
    engine = ClaudeEngine(cli_path=fake_cli)
    with anyio.fail_after(30):
        run = await engine.start(StartOptions(cwd=box))
    received: list[JsonObject] = []
    first_arrived = anyio.Event()

    async def pump() -> None:
        async for message in run.messages():
            received.append(message)
            first_arrived.set()

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(pump)
            await run.send("hold")
            # The CLI holds the turn: the pump now waits on the SDK for more.
            await first_arrived.wait()
            await run.close()
    assert [message["subtype"] for message in received] == ["init"]
    assert run.closed
    assert run.error is None


@pytest.mark.anyio
async def test_a_session_the_cli_never_wrote_is_started_anew(
    fake_cli: Path, box: Path, tmp_path: Path
) -> None:
    # A CLI killed before it flushed its first transcript leaves an id with no file:
    # resuming it fails every time ("No conversation found"), so a new session starts.
    log = tmp_path / "starts.jsonl"
    engine = ClaudeEngine(cli_path=fake_cli, env={"CLAUDE_CONFIG_DIR": str(tmp_path / "config")})
    with anyio.fail_after(30):
        run = await engine.start(
            StartOptions(
                cwd=box,
                resume_session_id="never-written",
                system_prompt="be brief",
                env={"FAKE_CLAUDE_LOG": str(log)},
            )
        )
    stream = run.messages()
    await run.send("hello")
    init, _, _ = await read_turn(stream)
    assert init["session_id"] != "never-written"
    await run.close()
    (start,) = starts_logged(log)
    args = start["args"]
    assert isinstance(args, list)
    assert not any(str(arg).startswith("--resume") for arg in args)
    # A new session: it gets the system prompt.
    assert option_value(args, "--system-prompt") == "be brief"


@pytest.mark.anyio
async def test_the_sdk_is_imported_off_the_event_loop_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Importing claude-agent-sdk takes up to a second: on the loop it held every task
    # (a first send's answer, the HTTP adapter with it). `prepare` does it ahead.
    threads: list[threading.Thread] = []

    def recording_load() -> object:
        threads.append(threading.current_thread())
        return object()

    monkeypatch.setattr(claude_module, "load_sdk", recording_load)
    engine = ClaudeEngine()
    await engine.prepare()
    await engine.prepare()
    assert len(threads) == 1
    assert threads[0] is not threading.main_thread()


@pytest.mark.anyio
async def test_prepare_says_how_to_install_a_missing_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "claude_agent_sdk", None)
    with pytest.raises(EngineStartError, match=re.escape(INSTALL_HINT)):
        await ClaudeEngine().prepare()


# ---------------------------------------------------------------------------
# Closing and starting when things go wrong (no CLI: an SDK client stand-in)
# ---------------------------------------------------------------------------


class StandInClient:
    """The few methods of ``ClaudeSDKClient`` a run calls, and what was called."""

    def __init__(self, *, interrupt: str = "answers") -> None:
        self.interrupt_behaviour = interrupt
        self.disconnects = 0
        self.cancel_on_connect: anyio.CancelScope | None = None
        self._transport: object = None

    async def connect(self) -> None:
        await anyio.lowlevel.checkpoint()
        if self.cancel_on_connect is not None:
            # Cancelled just as the connect succeeds: the next checkpoint is the caller's.
            self.cancel_on_connect.cancel()

    async def query(self, messages: AsyncIterator[JsonObject]) -> None:
        await anyio.lowlevel.checkpoint()

    async def interrupt(self) -> None:
        if self.interrupt_behaviour == "raises":
            raise RuntimeError("the CLI is gone")
        if self.interrupt_behaviour == "hangs":
            await anyio.sleep_forever()

    async def disconnect(self) -> None:
        await anyio.lowlevel.checkpoint()
        self.disconnects += 1


@pytest.mark.anyio
async def test_a_close_whose_interrupt_fails_still_lets_the_cli_go() -> None:
    client = StandInClient(interrupt="raises")
    run = ClaudeRun(client, None, "s-1")
    await run.send("a turn")
    await run.close()
    assert client.disconnects == 1
    assert run.closed


@pytest.mark.anyio
async def test_a_close_cancelled_during_its_interrupt_still_lets_the_cli_go() -> None:
    client = StandInClient(interrupt="hangs")
    run = ClaudeRun(client, None, "s-1")
    await run.send("a turn")
    with anyio.move_on_after(0.05):
        await run.close()
    assert client.disconnects == 1
    # Asked again, it has nothing left to do.
    await run.close()
    assert client.disconnects == 1


@pytest.mark.anyio
async def test_a_second_close_returns_once_the_first_has_let_go() -> None:
    client = StandInClient(interrupt="hangs")
    run = ClaudeRun(client, None, "s-1")
    await run.send("a turn")
    seen: list[int] = []
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(run.close)
        await anyio.wait_all_tasks_blocked()

        async def second() -> None:
            await run.close()
            seen.append(client.disconnects)

        tasks.start_soon(second)
        await anyio.wait_all_tasks_blocked()
        # The first is still interrupting (at most CLOSE_GRACE_S): the second waits.
        assert seen == []
        tasks.cancel_scope.cancel()
    assert client.disconnects == 1


@pytest.mark.anyio
async def test_a_start_cancelled_once_connected_lets_its_client_go() -> None:
    client = StandInClient()
    with anyio.CancelScope() as scope:
        client.cancel_on_connect = scope
        await claude_module._connect(client)
    assert scope.cancelled_caught
    assert client.disconnects == 1


class HungProcess:
    """A CLI process that exits when terminated (as Claude Code does, in a moment)."""

    def __init__(self) -> None:
        self.returncode: int | None = None
        self.signals: list[str] = []
        self._exited = anyio.Event()

    def terminate(self) -> None:
        self.signals.append("TERM")
        self.returncode = -15
        self._exited.set()

    def kill(self) -> None:
        self.signals.append("KILL")

    async def wait(self) -> int:
        await self._exited.wait()
        return -15


@pytest.mark.anyio
async def test_a_start_given_up_on_stops_its_cli_at_once() -> None:
    process = HungProcess()

    class Transport:
        _process = process

    class HungClient(StandInClient):
        async def connect(self) -> None:
            self._transport = Transport()
            await anyio.sleep_forever()

    client = HungClient()
    with anyio.move_on_after(0.05):
        await claude_module._connect(client)
    # Terminated by the watcher, not left to the SDK's 5 s wait for it to exit.
    assert process.signals == ["TERM"]
