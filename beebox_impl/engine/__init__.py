"""Agent engines: what a chat session starts runs on.

`protocol` says what an engine is (`Engine`, `Run`, `StartOptions`, `TurnContent`,
`EngineStartError`). Three engines implement it:

- `EchoEngine` — the embedded default: answers offline, deterministically, and
  writes a real Claude-Code-format transcript, so a box works with no model;
- `ClaudeEngine` — Claude Code through the official ``claude-agent-sdk`` (the
  optional extra ``claude``, imported only when a run starts);
- `ScriptedEngine` — for tests: the test decides every start, message and close.

`BoundedStartEngine` wraps any of them so a start that hangs fails after a
timeout (the box's engine is always wrapped). `messages` builds the raw
stream-json messages the engines (and the conformance runner's scripted steps)
emit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from beebox_impl.lazy import lazy_names

if TYPE_CHECKING:
    from beebox_impl.engine.bounded import DEFAULT_START_TIMEOUT, BoundedStartEngine
    from beebox_impl.engine.claude import ClaudeEngine, ClaudeRun, raw_message_from_sdk
    from beebox_impl.engine.echo import EchoEngine, EchoRun
    from beebox_impl.engine.protocol import (
        Engine,
        EngineStartError,
        Run,
        StartOptions,
        TurnContent,
    )
    from beebox_impl.engine.scripted import ScriptedEngine, ScriptedRun

__all__ = [
    "DEFAULT_START_TIMEOUT",
    "BoundedStartEngine",
    "ClaudeEngine",
    "ClaudeRun",
    "EchoEngine",
    "EchoRun",
    "Engine",
    "EngineStartError",
    "Run",
    "ScriptedEngine",
    "ScriptedRun",
    "StartOptions",
    "TurnContent",
    "raw_message_from_sdk",
]

# Where each name lives: imported on first use (`beebox_impl.lazy`), so a command that
# reads the permission modes does not import every engine.
_HOMES: dict[str, str] = {
    "DEFAULT_START_TIMEOUT": "beebox_impl.engine.bounded",
    "BoundedStartEngine": "beebox_impl.engine.bounded",
    "ClaudeEngine": "beebox_impl.engine.claude",
    "ClaudeRun": "beebox_impl.engine.claude",
    "raw_message_from_sdk": "beebox_impl.engine.claude",
    "EchoEngine": "beebox_impl.engine.echo",
    "EchoRun": "beebox_impl.engine.echo",
    "Engine": "beebox_impl.engine.protocol",
    "EngineStartError": "beebox_impl.engine.protocol",
    "Run": "beebox_impl.engine.protocol",
    "StartOptions": "beebox_impl.engine.protocol",
    "TurnContent": "beebox_impl.engine.protocol",
    "ScriptedEngine": "beebox_impl.engine.scripted",
    "ScriptedRun": "beebox_impl.engine.scripted",
}

__getattr__, __dir__ = lazy_names(__name__, globals(), _HOMES)
