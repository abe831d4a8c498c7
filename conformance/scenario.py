"""`session/scenario` vectors: steps that drive a session with a scripted engine.

The step language is `docs/conformance.md`'s. A caller step is ``{"call": "send" |
"enqueue", "text"}`` or ``{"call": "stop" | "restart" | "resetSession" | "park"}``
(``park`` is a thread session's); an engine step is ``{"engine": "started" |
"startFailed" | "init" | "assistant" | "result" | "closed", ...}``. This module
parses steps, builds the raw SDK messages a scripted engine emits for them (the
same for every target, so every target runs them through its one
`adapt_sdk_message`), and runs a scenario against the specification's models.

Conventions (from `docs/conformance.md`): closing a run (on stop, restart or park) ends
its message stream at once; ``{"engine": "closed"}`` is the run ending on its
own. A run is listed in ``runs`` once the engine reports it started.
Observations are taken after the session settled.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from beebox_impl.engine.messages import raw_sdk_message
from beebox_spec import chat_session, phases, thread_pool
from beebox_spec.errors import BeeboxError, InvariantError
from beebox_spec.sdk_messages import AdaptedMessage, adapt_sdk_message

__all__ = [
    "CallName",
    "CallStep",
    "EngineName",
    "EngineStep",
    "ScenarioError",
    "Step",
    "parse_steps",
    "raw_sdk_message",
    "run_spec_scenario",
    "scripted_sdk_message",
]

CallName: TypeAlias = Literal["send", "enqueue", "stop", "restart", "resetSession", "park"]
EngineName: TypeAlias = Literal["started", "startFailed", "init", "assistant", "result", "closed"]
_CALLS: tuple[CallName, ...] = ("send", "enqueue", "stop", "restart", "resetSession", "park")
_ENGINE: tuple[EngineName, ...] = (
    "started",
    "startFailed",
    "init",
    "assistant",
    "result",
    "closed",
)

# The text a scripted start failure reports.
START_FAILURE_REASON = "scripted start failure"


class ScenarioError(ValueError):
    """A scenario the step language cannot express (unknown step, missing field)."""


@dataclass(frozen=True)
class CallStep:
    """The caller acts on the session."""

    call: CallName
    text: str = ""


@dataclass(frozen=True)
class EngineStep:
    """The scripted engine reports on the current run."""

    engine: EngineName
    text: str = ""
    session_id: str = ""


Step: TypeAlias = CallStep | EngineStep


def parse_steps(raw_steps: Any) -> list[Step]:
    """Read a scenario's ``steps`` list, or raise `ScenarioError` naming the bad step."""
    if not isinstance(raw_steps, list):
        raise ScenarioError("steps must be a list")
    steps: list[Step] = []
    for number, raw in enumerate(raw_steps, start=1):
        if not isinstance(raw, dict):
            raise ScenarioError(f"step {number} must be an object")
        call, engine = raw.get("call"), raw.get("engine")
        if call in _CALLS:
            text = raw.get("text", "")
            if call in ("send", "enqueue") and not isinstance(text, str):
                raise ScenarioError(f"step {number}: {call} needs a text")
            steps.append(CallStep(call, text))
        elif engine in _ENGINE:
            text, session_id = raw.get("text", ""), raw.get("sessionId", "")
            if not isinstance(text, str) or not isinstance(session_id, str):
                raise ScenarioError(f"step {number}: text and sessionId must be strings")
            if engine == "init" and not session_id:
                raise ScenarioError(f"step {number}: init needs a sessionId")
            steps.append(EngineStep(engine, text, session_id))
        else:
            raise ScenarioError(
                f"step {number} is neither a known call nor a known engine step: {raw!r}"
            )
    return steps


def scripted_sdk_message(step: EngineStep, session_id: str, ordinal: int) -> AdaptedMessage:
    """`raw_sdk_message` passed through the one adapter, as a session receives it."""
    adapted = adapt_sdk_message(raw_sdk_message(step, session_id, ordinal))
    if adapted is None:
        raise ScenarioError(f"the adapter dropped the scripted {step.engine} message")
    return adapted


class _SpecChatDriver:
    """Runs steps on `beebox_spec.chat_session` and records the runs' turns."""

    def __init__(self) -> None:
        self.state = chat_session.initial_state()
        self.runs: list[list[str]] = []
        self.run_index: dict[int, int] = {}
        self.announced_session = ""
        self.messages = 0

    def apply(self, step: Step) -> bool | None:
        match step:
            case CallStep(call="send", text=text):
                return self._feed(chat_session.Send(text))
            case CallStep(call="enqueue", text=text):
                self._feed(chat_session.Enqueue(text))
            case CallStep(call="stop"):
                self._feed(chat_session.Stop())
            case CallStep(call="restart"):
                self._feed(chat_session.Restart())
            case CallStep(call="resetSession"):
                self._feed(chat_session.ResetSession())
            case CallStep(call="park"):
                raise ScenarioError("park is a thread session's call")
            case EngineStep(engine="started"):
                self._feed(chat_session.RunStarted())
            case EngineStep(engine="startFailed"):
                self._feed(chat_session.RunStartFailed(START_FAILURE_REASON))
            case EngineStep(engine="closed"):
                self._feed(chat_session.RunClosed(self.state.runs_started))
            case EngineStep():
                self.messages += 1
                if step.engine == "init":
                    self.announced_session = step.session_id
                message = scripted_sdk_message(step, self.announced_session, self.messages)
                self._feed(chat_session.SdkMessageArrived(self.state.runs_started, message))
        return None

    def _feed(self, first: chat_session.ChatSessionEvent) -> bool | None:
        events: deque[chat_session.ChatSessionEvent] = deque([first])
        accepted: bool | None = None
        while events:
            event = events.popleft()
            result = chat_session.step(self.state, event)
            self.state = result.state
            if isinstance(event, chat_session.RunStarted):
                # Listed once the engine reports it started; failed starts are never listed.
                self.run_index[self.state.runs_started] = len(self.runs)
                self.runs.append([])
            if event is first:
                accepted = result.accepted
            for effect in result.effects:
                if isinstance(effect, chat_session.SendTurn):
                    self.runs[self.run_index[effect.run]].append(effect.text)
                elif isinstance(effect, chat_session.CloseRun):
                    # Convention: closing a run ends its message stream at once.
                    events.append(chat_session.RunClosed(effect.run))
        return accepted

    def observe(self) -> dict[str, Any]:
        reading = chat_session.observe(self.state)
        return {
            "phase": str(reading.phase),
            "busy": reading.busy,
            "running": reading.running,
            "queue": list(reading.queue),
            "runs": [list(turns) for turns in self.runs],
        }


class _SpecThreadDriver:
    """Runs steps on `beebox_spec.thread_pool`'s thread session."""

    def __init__(self) -> None:
        self.state = thread_pool.initial_thread_state()
        self.runs: list[list[str]] = []
        self.run_index: dict[int, int] = {}
        self.announced_session = ""
        self.messages = 0

    def apply(self, step: Step) -> bool | None:
        run = self.state.runs_started
        match step:
            case CallStep(call="send", text=text):
                self._feed(thread_pool.Send(text))
                return True
            case CallStep(call="park"):
                self._feed(thread_pool.Park())
            case CallStep(call="stop" | "resetSession"):
                self._feed(thread_pool.Stop())
            case CallStep(call="enqueue" | "restart"):
                raise ScenarioError(f"a thread session has no {step.call}")
            case EngineStep(engine="started"):
                self._feed(thread_pool.RunStarted())
            case EngineStep(engine="startFailed"):
                self._feed(thread_pool.RunStartFailed(START_FAILURE_REASON))
            case EngineStep(engine="closed"):
                self._feed(thread_pool.RunClosed(run))
            case EngineStep():
                self.messages += 1
                if step.engine == "init":
                    self.announced_session = step.session_id
                message = scripted_sdk_message(step, self.announced_session, self.messages)
                self._feed(thread_pool.SdkMessageArrived(run, message))
        return None

    def _feed(self, first: thread_pool.ThreadEvent) -> None:
        events: deque[thread_pool.ThreadEvent] = deque([first])
        while events:
            event = events.popleft()
            result = thread_pool.step(self.state, event)
            self.state = result.state
            if isinstance(event, thread_pool.RunStarted):
                # Listed once the engine reports it started; failed starts are never listed.
                self.run_index[self.state.runs_started] = len(self.runs)
                self.runs.append([])
            for effect in result.effects:
                if isinstance(effect, thread_pool.SendTurn):
                    self.runs[self.run_index[effect.run]].append(effect.text)
                elif isinstance(effect, thread_pool.CloseRun):
                    events.append(thread_pool.RunClosed(effect.run))

    def observe(self) -> dict[str, Any]:
        phase = self.state.lifecycle.phase
        return {
            "phase": str(phase),
            "busy": phases.is_busy(phase),
            "running": thread_pool.session_running(self.state),
            "queue": [],
            "runs": [list(turns) for turns in self.runs],
        }


def run_spec_scenario(scenario: Any) -> list[dict[str, Any]]:
    """Run a ``session/scenario`` input against the specification; one observation a step."""
    if not isinstance(scenario, dict) or scenario.get("session") not in ("chat", "thread"):
        raise ScenarioError('a scenario needs "session": "chat" or "thread"')
    steps = parse_steps(scenario.get("steps"))
    driver: _SpecChatDriver | _SpecThreadDriver = (
        _SpecChatDriver() if scenario["session"] == "chat" else _SpecThreadDriver()
    )
    observations: list[dict[str, Any]] = []
    for step in steps:
        try:
            accepted = driver.apply(step)
        except (BeeboxError, InvariantError) as error:
            observations.append({"raises": type(error).__name__})
            continue
        observation = driver.observe()
        if isinstance(step, CallStep) and step.call == "send":
            observation["accepted"] = accepted
        observations.append(observation)
    return observations
