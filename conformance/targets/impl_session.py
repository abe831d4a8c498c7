"""`session/scenario` and `lifecycle/*` vectors against the implementation, on one backend.

`run_session_scenario` drives a session on the running event loop (asyncio or
trio): the session is opened by a factory — `ChatSession.open` and
`ChatThreadSession.open` here, a host's own in `conformance.check_chat_session`
and `check_thread_session` — over a `ScriptedEngine` whose every start, message
and end the steps decide, with stores that stay on the loop. After each step the
loop is settled (`beebox_impl.testing.settle`) and the session observed. The
`impl` target runs each scenario on a fresh loop of the chosen backend.

Engine steps the current state cannot express — a start nobody asked for, a
message or an end with no run — are the scenario's impossible engine events: the
observation is ``{"raises": "InvariantError"}``, as the specification answers.
Lifecycle kinds read the same table the implementation uses for every phase write.
"""

from __future__ import annotations

import importlib
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from beebox_impl.engine import ScriptedEngine
from beebox_impl.engine.messages import raw_sdk_message
from beebox_impl.engine.protocol import TurnContent
from beebox_impl.session.chat import ChatSession
from beebox_impl.session.thread import ChatThreadSession
from beebox_impl.store.memory import InMemoryQueueStore, InMemorySessionIdStore
from beebox_impl.testing import settle
from beebox_spec.errors import BeeboxError, InvariantError
from conformance.protocols import ChatSessionFactory, ThreadSessionFactory
from conformance.scenario import (
    START_FAILURE_REASON,
    CallStep,
    EngineStep,
    ScenarioError,
    Step,
    parse_steps,
)
from conformance.targets import HandlerTable
from conformance.targets.spec_lifecycle import HANDLERS as LIFECYCLE

__all__ = ["impl_session_handlers", "missing_backend_package", "run_session_scenario"]


def _turn_text(content: TurnContent) -> str:
    # A turn the session sends as blocks reads as its text blocks, joined.
    if isinstance(content, str):
        return content
    return "".join(str(block.get("text", "")) for block in content if block.get("type") == "text")


class _EngineDriver:
    """Plays the scripted engine's part of the steps."""

    def __init__(self, engine: ScriptedEngine) -> None:
        self.engine = engine
        self.announced_session = ""
        self.messages = 0

    def current_run_is_open(self) -> bool:
        return bool(self.engine.runs) and not self.engine.last_run.ended

    async def apply(self, step: EngineStep) -> None:
        if step.engine in ("started", "startFailed"):
            # Only a start the session asked for can have an outcome.
            if self.engine.waiting_starts == 0:
                raise InvariantError(f"engine {step.engine}: no start was asked for")
            if step.engine == "started":
                self.engine.accept_start()
            else:
                self.engine.fail_start(START_FAILURE_REASON)
            return
        # Messages and ends come only from a run that is open.
        if not self.current_run_is_open():
            raise InvariantError(f"engine {step.engine}: there is no open run")
        run = self.engine.last_run
        if step.engine == "closed":
            await run.end()
            return
        self.messages += 1
        if step.engine == "init":
            self.announced_session = step.session_id
        await run.emit(raw_sdk_message(step, self.announced_session, self.messages))

    def runs(self) -> list[list[str]]:
        return [[_turn_text(turn) for turn in run.sent] for run in self.engine.runs]


async def _chat_scenario(
    open_session: ChatSessionFactory, steps: list[Step], box_root: Path
) -> list[dict[str, Any]]:
    engine = ScriptedEngine()
    driver = _EngineDriver(engine)
    observations: list[dict[str, Any]] = []
    async with open_session(
        engine=engine,
        box_root=box_root,
        queue_store=InMemoryQueueStore(),
        session_id_store=InMemorySessionIdStore(),
    ) as session:
        calls: dict[str, Callable[[], Awaitable[None]]] = {
            "stop": session.stop,
            "restart": session.restart,
            "resetSession": session.reset_session,
        }
        for step in steps:
            accepted: bool | None = None
            try:
                match step:
                    case CallStep(call="send", text=text):
                        accepted = await session.send(text)
                    case CallStep(call="enqueue", text=text):
                        await session.enqueue(text)
                    case CallStep(call="park"):
                        raise ScenarioError("park is a thread session's call")
                    case CallStep(call=call):
                        await calls[call]()
                    case EngineStep():
                        await driver.apply(step)
            except (BeeboxError, InvariantError) as error:
                observations.append({"raises": type(error).__name__})
                continue
            await settle()
            observation: dict[str, Any] = {
                "phase": str(session.phase),
                "busy": session.busy,
                "running": session.running,
                "queue": list(session.queue),
                "runs": driver.runs(),
            }
            if accepted is not None:
                observation["accepted"] = accepted
            observations.append(observation)
    return observations


async def _thread_scenario(
    open_session: ThreadSessionFactory, steps: list[Step], box_root: Path
) -> list[dict[str, Any]]:
    engine = ScriptedEngine()
    driver = _EngineDriver(engine)
    observations: list[dict[str, Any]] = []
    async with open_session(engine=engine, box_root=box_root) as session:
        for step in steps:
            sent = False
            try:
                match step:
                    case CallStep(call="send", text=text):
                        await session.start_turn(text)
                        sent = True
                    case CallStep(call="park"):
                        await session.park()
                    case CallStep(call="stop" | "resetSession"):
                        await session.stop()
                    case CallStep(call=call):
                        raise ScenarioError(f"a thread session has no {call}")
                    case EngineStep():
                        await driver.apply(step)
            except (BeeboxError, InvariantError) as error:
                observations.append({"raises": type(error).__name__})
                continue
            await settle()
            observation: dict[str, Any] = {
                "phase": str(session.phase),
                "busy": session.busy,
                "running": session.running,
                "queue": [],
                "runs": driver.runs(),
            }
            if sent:
                observation["accepted"] = True
            observations.append(observation)
    return observations


async def run_session_scenario(
    scenario: Any,
    *,
    open_chat_session: ChatSessionFactory | None = None,
    open_thread_session: ThreadSessionFactory | None = None,
) -> list[dict[str, Any]]:
    """Run a ``session/scenario`` input on the running loop; one observation a step.

    A chat scenario needs ``open_chat_session``, a thread scenario
    ``open_thread_session``; a scenario with no session to run on is a
    `ScenarioError`, never a pass.
    """
    if not isinstance(scenario, dict) or scenario.get("session") not in ("chat", "thread"):
        raise ScenarioError('a scenario needs "session": "chat" or "thread"')
    steps = parse_steps(scenario.get("steps"))
    with tempfile.TemporaryDirectory(prefix="bbx-scenario-") as folder:
        if scenario["session"] == "chat":
            if open_chat_session is None:
                raise ScenarioError("a chat scenario, and no chat session to run it on")
            return await _chat_scenario(open_chat_session, steps, Path(folder))
        if open_thread_session is None:
            raise ScenarioError("a thread scenario, and no thread session to run it on")
        return await _thread_scenario(open_thread_session, steps, Path(folder))


def missing_backend_package(backend: str) -> str | None:
    """The package ``backend`` needs that is not installed here, or None.

    Each of anyio's backends is the package of its name (asyncio's is the standard
    library's), and `anyio.run` on one that cannot be imported fails every case.
    """
    try:
        importlib.import_module(backend)
    except ImportError:
        return backend
    return None


def impl_session_handlers(backend: str) -> HandlerTable:
    """The session and lifecycle kinds answered by the implementation on ``backend``."""

    def scenario_on_a_fresh_loop(scenario: Any) -> list[dict[str, Any]]:
        async def main() -> list[dict[str, Any]]:
            return await run_session_scenario(
                scenario,
                open_chat_session=ChatSession.open,
                open_thread_session=ChatThreadSession.open,
            )

        return anyio.run(main, backend=backend)

    return {
        **{kind: LIFECYCLE[kind] for kind in ("lifecycle/transition", "lifecycle/flags")},
        "session/scenario": scenario_on_a_fresh_loop,
    }
