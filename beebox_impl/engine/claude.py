"""The Claude engine: runs over the official ``claude-agent-sdk`` (the optional extra ``claude``).

Why this shape: a box talks to Claude Code the way the original did — one long-lived
conversation per run in *streaming-input* mode (`docs/sources.md#format-8`), so
turns, interrupts and the session id all travel over one CLI process — and it
reads that conversation through the one adapter every engine shares
(`beebox_spec.sdk_messages.adapt_sdk_message`), which reads the CLI's *raw*
stream-json dicts. The Python SDK hands out typed objects instead, so this module
converts each one back to the raw shape (`raw_message_from_sdk`); the test suite
runs that conversion over every message of a recorded CLI stream and checks that
adapting the converted message equals adapting the recorded one.

A run (`ClaudeRun`) is one ``ClaudeSDKClient``:

- **start**: ``cwd`` = the box folder (so the CLI files the transcript under the
  box's encoded path), ``resume=`` the session id to continue, ``model``, the
  system prompt for new sessions only (the original's rule), ``env`` added to the
  CLI's environment. The client connects with no prompt: streaming input, so the
  CLI sends ``system/init`` when the first turn arrives. A session to resume whose
  transcript the CLI never wrote (it was killed within a second or so of its
  first turn, before it flushed the file) cannot be resumed — the CLI refuses
  with "No conversation found" — so a new session is started instead; its
  ``system/init`` announces the new id, which the chat session takes as the SDK
  assigning one. Any failure to connect —
  the SDK not installed, the CLI binary missing, the CLI exiting — is an
  `EngineStartError` whose message says what to fix.
- **send**: one stream-json ``user`` message (text or content blocks, images
  included) per turn.
- **interrupt**: the SDK's interrupt control request.
- **close**: lets the CLI end by itself, then disconnects: a turn in flight is
  interrupted, the CLI's input ended, and its output read (and dropped) to its
  end, the CLI having exited (at most `CLOSE_GRACE_S` in all); then the SDK
  client is disconnected, whatever happened before (an interrupt that fails, a
  close cancelled), once. Nothing is relayed after ``close()`` is called; the
  message stream ends with the CLI's output. The interrupt is why a stop
  mid-stream is quick: a CLI whose input ends while it streams a reply finishes
  the reply first, and the SDK gives it 5 s before it terminates it; the
  transcript records the turn as interrupted, as it does for a person's
  interrupt. Reading to the end is why nothing is left behind: the CLI writes a
  line after each turn's result (``session_state_changed``), and the SDK's reader,
  stopped while one still comes, leaves its line reader to the garbage collector
  (a ResourceWarning on trio; claude-agent-sdk 0.2.189).
- **messages**: a plain async iterator over the SDK's messages, converted (not a
  generator of ours: a pump that stops reading leaves nothing to finalize). The
  start asks for partial messages (``include_partial_messages``): the CLI says
  each event of the API's stream as a ``stream_event`` while a message streams,
  which the session shows as live text (`beebox_spec.sdk_messages`, "Live
  text"); a host may turn that off with
  ``extra_options={"include_partial_messages": False}``. If
  the CLI dies (a crash, or the non-zero exit that follows an error result) the
  stream simply ends, as the engine protocol says a dead run's stream does; the
  error is logged and kept on ``ClaudeRun.error``.

The SDK is imported lazily and typed as `Any` here, so beebox installs, imports
and type-checks without it. What the conversion cannot restore: the Python SDK's
parser keeps no image blocks of ``user`` messages and no ``session_id`` on them
(the run fills in the session id it knows), and unknown fields of typed messages
are gone; none of that is read by the adapter. A message class the converter does
not know becomes ``{"type": "sdk:<ClassName>"}``, which the adapter turns into its
visible ``unknown`` sentinel rather than dropping it silently.

Transcripts: the CLI writes them under its own config folder
(``$CLAUDE_CONFIG_DIR/projects``, by default ``~/.claude/projects``), and the box
reads the same place (`beebox_impl.transcript.location.projects_root`) unless
``BBX_CLAUDE_PROJECTS_DIR`` points it elsewhere. A ``CLAUDE_CONFIG_DIR`` given to
the engine alone (``ClaudeEngine(env=...)``) is the CLI's; the box must be told
too (``Box.open(projects_root=...)``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import logging
import os
from collections import deque
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, Final

import anyio
from anyio.lowlevel import checkpoint

from beebox_impl.engine.claude_permissions import can_use_tool_for, split_allowed_tools
from beebox_impl.engine.mailbox import PullIterator
from beebox_impl.engine.permission_modes import permission_mode as permission_mode_of
from beebox_impl.engine.protocol import EngineStartError, StartOptions, TurnContent
from beebox_impl.transcript.location import (
    InvalidSessionId,
    claude_projects_root,
    project_dir,
    transcript_in,
)
from beebox_spec.entries import JsonObject, JsonValue
from beebox_spec.errors import InvalidArgument, InvariantError
from beebox_spec.transcript import SNIFF_CHARS, sniff_record_type

__all__ = [
    "INSTALL_HINT",
    "SDK_MODULE",
    "ClaudeEngine",
    "ClaudeRun",
    "ClosingRuns",
    "load_sdk",
    "raw_message_from_sdk",
]

logger = logging.getLogger(__name__)

SDK_MODULE = "claude_agent_sdk"
INSTALL_HINT = "pip install 'beebox[claude]'"
# How many of the CLI's last stderr lines a start failure quotes.
_STDERR_TAIL = 20
# How long a CLI given up on at start has to exit on SIGTERM before it is killed.
STOP_GRACE_S = 2.0
# How long a close lets the CLI end by itself (its turn interrupted, its input ended,
# its output read to the end) before it disconnects anyway (the SDK then waits 5 s
# for the process to exit, and terminates it).
CLOSE_GRACE_S = 3.0


def load_sdk() -> ModuleType:
    """The ``claude_agent_sdk`` module, or `EngineStartError` saying how to install it."""
    try:
        return importlib.import_module(SDK_MODULE)
    except ImportError as error:
        raise EngineStartError(
            f"the claude engine needs the claude-agent-sdk package ({INSTALL_HINT})"
        ) from error


# ---------------------------------------------------------------------------
# Typed SDK objects back to raw stream-json dicts
# ---------------------------------------------------------------------------


def _is(value: object, sdk: Any, name: str) -> bool:
    """Whether ``value`` is an instance of the SDK class ``name`` (older SDKs lack some).

    A plain bool, not a type guard: the SDK is untyped here, its objects stay `Any`.
    """
    cls = getattr(sdk, name, None)
    return isinstance(cls, type) and isinstance(value, cls)


def _set_if(raw: JsonObject, key: str, value: Any) -> None:
    # Optional fields the SDK reports as None were absent (or null) on the wire.
    if value is not None:
        raw[key] = value


def _block_to_raw(sdk: Any, block: Any) -> JsonObject:
    """One typed content block as the Messages-API dict it was parsed from."""
    if _is(block, sdk, "TextBlock"):
        return {"type": "text", "text": block.text}
    if _is(block, sdk, "ThinkingBlock"):
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if _is(block, sdk, "ToolUseBlock"):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if _is(block, sdk, "ToolResultBlock"):
        raw: JsonObject = {"type": "tool_result", "tool_use_id": block.tool_use_id}
        _set_if(raw, "content", block.content)
        _set_if(raw, "is_error", block.is_error)
        return raw
    if _is(block, sdk, "ServerToolUseBlock"):
        return {"type": "server_tool_use", "id": block.id, "name": block.name, "input": block.input}
    if _is(block, sdk, "ServerToolResultBlock"):
        # The SDK's parser makes this class from `advisor_tool_result` blocks only.
        return {
            "type": "advisor_tool_result",
            "tool_use_id": block.tool_use_id,
            "content": block.content,
        }
    # A block class this code predates: keep its fields, name it visibly.
    fields: JsonObject = (
        dataclasses.asdict(block)
        if dataclasses.is_dataclass(block) and not isinstance(block, type)
        else {}
    )
    return {"type": f"sdk:{type(block).__name__}", **fields}


def _content_to_raw(sdk: Any, content: Any) -> str | list[JsonValue]:
    if isinstance(content, str):
        return content
    return [_block_to_raw(sdk, block) for block in content]


def raw_message_from_sdk(
    message: object, *, session_id: str | None = None, sdk: Any = None
) -> JsonObject:
    """The raw stream-json dict a typed SDK message was parsed from (as far as it kept it).

    ``session_id`` is the session the run knows, for messages the SDK keeps none on
    (``UserMessage``). ``sdk`` is the SDK module (imported when not given).
    """
    sdk = sdk if sdk is not None else importlib.import_module(SDK_MODULE)
    typed: Any = message
    # Every system subtype — init, compact_boundary, the task and hook messages —
    # is a SystemMessage (or a subclass) that keeps the raw dict as `data`.
    if _is(message, sdk, "SystemMessage"):
        raw: JsonObject = dict(typed.data)
        raw.setdefault("type", "system")
        raw.setdefault("subtype", typed.subtype)
        return raw
    if _is(message, sdk, "AssistantMessage"):
        return _assistant_to_raw(sdk, typed, session_id)
    if _is(message, sdk, "UserMessage"):
        return _user_to_raw(sdk, typed, session_id)
    if _is(message, sdk, "ResultMessage"):
        return _result_to_raw(typed)
    if _is(message, sdk, "StreamEvent"):
        return {
            "type": "stream_event",
            "uuid": typed.uuid,
            "session_id": typed.session_id,
            "event": typed.event,
            "parent_tool_use_id": typed.parent_tool_use_id,
        }
    if _is(message, sdk, "RateLimitEvent"):
        info = typed.rate_limit_info
        return {
            "type": "rate_limit_event",
            "rate_limit_info": dict(getattr(info, "raw", None) or {"status": info.status}),
            "uuid": typed.uuid,
            "session_id": typed.session_id,
        }
    if _is(message, sdk, "ConversationResetMessage"):
        return {
            "type": "conversation_reset",
            "new_conversation_id": typed.new_conversation_id,
            "uuid": typed.uuid,
            "session_id": typed.session_id,
        }
    # A message class this code predates: the adapter's unknown sentinel, visibly.
    return {"type": f"sdk:{type(message).__name__}"}


def _assistant_to_raw(sdk: Any, typed: Any, session_id: str | None) -> JsonObject:
    """An ``AssistantMessage``: the Messages-API message in its envelope."""
    body: JsonObject = {}
    _set_if(body, "id", typed.message_id)
    body.update(
        {
            "type": "message",
            "role": "assistant",
            "model": typed.model,
            "content": _content_to_raw(sdk, typed.content),
            "stop_reason": typed.stop_reason,
        }
    )
    _set_if(body, "usage", typed.usage)
    raw: JsonObject = {"type": "assistant", "message": body}
    _set_if(raw, "parent_tool_use_id", typed.parent_tool_use_id)
    _set_if(raw, "error", typed.error)
    _set_if(raw, "session_id", typed.session_id or session_id)
    _set_if(raw, "uuid", typed.uuid)
    return raw


def _user_to_raw(sdk: Any, typed: Any, session_id: str | None) -> JsonObject:
    """A ``UserMessage``, which keeps no session id: the run's (``session_id``)."""
    raw: JsonObject = {
        "type": "user",
        "message": {"role": "user", "content": _content_to_raw(sdk, typed.content)},
    }
    _set_if(raw, "parent_tool_use_id", typed.parent_tool_use_id)
    _set_if(raw, "session_id", session_id)
    _set_if(raw, "uuid", typed.uuid)
    _set_if(raw, "tool_use_result", typed.tool_use_result)
    _set_if(raw, "origin", getattr(typed, "origin", None))
    return raw


def _result_to_raw(typed: Any) -> JsonObject:
    """A ``ResultMessage``: the turn's result, each optional field when the SDK kept it."""
    raw: JsonObject = {
        "type": "result",
        "subtype": typed.subtype,
        "is_error": typed.is_error,
        "duration_ms": typed.duration_ms,
        "duration_api_ms": typed.duration_api_ms,
        "num_turns": typed.num_turns,
        "session_id": typed.session_id,
    }
    for key, attribute in (
        ("result", "result"),
        ("stop_reason", "stop_reason"),
        ("total_cost_usd", "total_cost_usd"),
        ("usage", "usage"),
        ("modelUsage", "model_usage"),
        ("permission_denials", "permission_denials"),
        ("structured_output", "structured_output"),
        ("errors", "errors"),
        ("api_error_status", "api_error_status"),
        ("terminal_reason", "terminal_reason"),
        ("uuid", "uuid"),
    ):
        _set_if(raw, key, getattr(typed, attribute, None))
    deferred = getattr(typed, "deferred_tool_use", None)
    if deferred is not None:
        raw["deferred_tool_use"] = {
            "id": deferred.id,
            "name": deferred.name,
            "input": deferred.input,
        }
    return raw


# ---------------------------------------------------------------------------
# The engine and its runs
# ---------------------------------------------------------------------------


def _sdk_process(client: Any) -> Any:
    # The CLI process the SDK spawned, where this SDK keeps it (no public handle);
    # None before it is spawned, or on an SDK that keeps it elsewhere.
    return getattr(getattr(client, "_transport", None), "_process", None)


async def _stop_process(process: Any) -> None:
    # SIGTERM lets the CLI end what it started (a hook's processes; it takes about
    # 1.5 s); one that has not exited after `STOP_GRACE_S` is killed.
    with contextlib.suppress(ProcessLookupError):
        process.terminate()
    with anyio.CancelScope(shield=True), anyio.move_on_after(STOP_GRACE_S):
        await process.wait()
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.kill()


async def _connect(client: Any) -> None:
    """``client.connect()``; a start given up on (cancelled) ends its CLI at once.

    The SDK answers the cancellation by closing the CLI's input and waiting 5 s
    for it to exit before it terminates it: a CLI hung at start (a hook that never
    ends, the initialize request never answered) would hold the failed start 5 s
    past the box's start timeout, and 10 s when it ignores SIGTERM. A watcher
    stops it the moment the start is cancelled (`_stop_process`: at most
    `STOP_GRACE_S`), so the SDK's wait ends with it.
    """
    connected = False
    settled = False
    failure: Exception | None = None

    async def stop_if_given_up() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            process = _sdk_process(client)
            if not settled and process is not None and process.returncode is None:
                logger.warning("Claude Code's start was given up on: stopping it")
                await _stop_process(process)

    try:
        async with anyio.create_task_group() as watch:
            watch.start_soon(stop_if_given_up)
            try:
                await client.connect()
                connected = True
            except Exception as error:
                # Kept to be raised as it is, not as a group of one.
                failure = error
            finally:
                settled = connected or failure is not None
                watch.cancel_scope.cancel()
    except BaseException:
        # Cancelled once connected (leaving the watch is a checkpoint): the client
        # was never handed to a run, so it is let go of here.
        if connected:
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await client.disconnect()
        raise
    if failure is not None:
        raise failure


# What Claude Code says when asked to resume a session it has no conversation of
# (2.1.332: "No conversation found with session ID: <id>").
NO_SUCH_SESSION = "No conversation found"
# How many lines from its top a transcript is looked through for a turn.
_TURN_SEARCH_LINES = 1000


class _NoSuchSession(EngineStartError):
    """The CLI refused to resume: it has no conversation of the session."""


def _holds_a_turn(path: Path) -> bool:
    """Whether the transcript at ``path`` holds a user or assistant record: a
    conversation the CLI can resume. Each line's head only is read, by the spec's
    own sniff (`beebox_spec.transcript.sniff_record_type`): a photo line is not read
    whole. The CLI writes a session's first prompt within its first few lines."""
    try:
        with path.open("rb") as file:
            for _ in range(_TURN_SEARCH_LINES):
                head = file.readline(SNIFF_CHARS)
                if not head:
                    return False
                # The rest of a long line is skipped, a block at a time.
                while not head.endswith(b"\n") and (rest := file.readline(64 * 1024)):
                    if rest.endswith(b"\n"):
                        break
                if sniff_record_type(head.decode("utf-8", "replace")) in ("user", "assistant"):
                    return True
    except OSError:
        return False
    return False


def _cli_problem(cli: Path) -> str | None:
    """What keeps ``cli`` from running, in words; None when it looks runnable."""
    if not cli.exists():
        return "does not exist"
    if not cli.is_file():
        return "is not a file"
    if not os.access(cli, os.X_OK):
        return "is not executable (chmod +x it)"
    return None


async def _single(message: JsonObject) -> AsyncIterator[JsonObject]:
    """One stream-json input message, as the async iterable the SDK's `query` takes."""
    yield message


class ClosingRuns:
    """An engine's runs whose CLI is exiting, by session id: a resume waits for them.

    A session's next run may start the moment its last one's stream ends, while
    that CLI is still exiting — flushing its transcript (a new session's first
    turn may not be on disk yet) and still able to append to it. The next CLI
    resuming that session starts only once the last one has exited: one writer a
    transcript, and a transcript that is there to resume.
    """

    def __init__(self) -> None:
        self._exiting: dict[str, list[anyio.Event]] = {}

    @contextmanager
    def exiting(self, session_id: str | None) -> Iterator[None]:
        """While the CLI of ``session_id`` exits (nothing to note for None)."""
        if session_id is None:
            yield
            return
        done = anyio.Event()
        self._exiting.setdefault(session_id, []).append(done)
        try:
            yield
        finally:
            done.set()
            waiting = self._exiting[session_id]
            waiting.remove(done)
            if not waiting:
                del self._exiting[session_id]

    async def wait(self, session_id: str) -> None:
        """Until no CLI of ``session_id`` is exiting (a checkpoint either way)."""
        for done in list(self._exiting.get(session_id, ())):
            await done.wait()
        await checkpoint()


class ClaudeRun:
    """One Claude Code conversation (a connected ``ClaudeSDKClient``)."""

    def __init__(
        self,
        client: Any,
        sdk: Any,
        session_id: str | None,
        closing_runs: ClosingRuns | None = None,
    ) -> None:
        self._client = client
        self._sdk = sdk
        self._closing_runs = closing_runs if closing_runs is not None else ClosingRuns()
        self._session_id = session_id
        self._closed = False
        self._close_requested = False
        # Set once the SDK client is let go of (`_let_go`): a second close waits for it.
        self._let_go_of = anyio.Event()
        self._consumed = False
        # The SDK's own message generator, and whether a read is waiting on it.
        self._sdk_stream: Any = None
        self._pulling = False
        # Turns sent whose result has not arrived: a close interrupts them first.
        self._turns_in_flight = 0
        # A close reads the CLI's output to its end (`_let_the_cli_end`); set when it ends.
        self._draining = False
        self._output_ended = anyio.Event()
        # One reader of the SDK's stream at a time: the pump, or a close whose pump has
        # gone (a session leaving). Uncontended, it costs no checkpoint.
        self._reading = anyio.Lock(fast_acquire=True)
        self.error: Exception | None = None

    @property
    def session_id(self) -> str | None:
        """The session id: the resumed one, then whatever the CLI announces."""
        return self._session_id

    @property
    def closed(self) -> bool:
        """True once the message stream has ended (closed, or the CLI went away)."""
        return self._closed

    def messages(self) -> AsyncIterator[JsonObject]:
        """The CLI's messages as raw stream-json dicts, until the run ends. Consumed once."""
        if self._consumed:
            raise InvariantError("a run's message stream is consumed once")
        self._consumed = True
        return PullIterator(self._next_message)

    async def _next_message(self) -> JsonObject:
        while True:
            # After close() nothing more is relayed, buffered or not; while the close
            # lets the CLI end, its output is read (and dropped) to its end.
            if self._closed or (self._close_requested and not self._draining):
                self._closed = True
                await checkpoint()
                raise StopAsyncIteration
            async with self._reading:
                if self._output_ended.is_set():
                    continue
                raw = await self._pull()
            if not self._close_was_requested():
                return raw

    async def _pull(self) -> JsonObject:
        # The SDK's next message, converted; its end (or failure) ends the run's stream.
        if self._sdk_stream is None:
            self._sdk_stream = self._client.receive_messages()
        self._pulling = True
        try:
            message = await self._sdk_stream.__anext__()
        except StopAsyncIteration:
            self._pulling = False
            self._output_ended.set()
            await self._went_away()
            raise
        except Exception as error:
            # The CLI died (or exited non-zero after an error result): the run is
            # over, and a dead run's stream ends. Kept and logged, not raised into
            # the session's pump.
            self._pulling = False
            self._output_ended.set()
            if not self._close_requested:
                self.error = error
                logger.warning("Claude Code run ended with an error: %s", error)
            await self._went_away()
            raise StopAsyncIteration from error
        self._pulling = False
        raw = raw_message_from_sdk(message, session_id=self._session_id, sdk=self._sdk)
        self._note_session_id(raw)
        if raw.get("type") == "result":
            self._turns_in_flight = max(0, self._turns_in_flight - 1)
        return raw

    async def _went_away(self) -> None:
        # The stream ended without a close: the CLI exited or died. What the SDK holds
        # for it (the process, its pipes, the message stream) is let go of here, as a
        # close would; nobody closes a dead run.
        self._closed = True
        if self._close_requested:
            return
        self._close_requested = True
        with anyio.CancelScope(shield=True), self._closing_runs.exiting(self._session_id):
            try:
                await self._end_if_alive()
            except Exception as error:
                logger.debug("ending a Claude Code run that broke its output failed: %s", error)
            await self._let_go()

    async def _let_go(self) -> None:
        # Disconnect the SDK client (it ends the CLI), whatever came before; once.
        if self._let_go_of.is_set():
            return
        with anyio.CancelScope(shield=True):
            try:
                await self._client.disconnect()
                # A read in progress ends on its own now. An idle SDK generator is
                # run to its end here (disconnect closed what it reads): closing it
                # instead would leave the SDK's inner generator to the collector.
                if self._sdk_stream is not None and not self._pulling:
                    await self._drain_sdk_stream()
            except Exception as error:
                # Letting go must not fail the caller: the process is gone either way.
                logger.warning("disconnecting from Claude Code failed: %s", error)
            finally:
                self._closed = True
                self._let_go_of.set()

    async def _let_the_cli_end(self) -> None:
        # The close's first part (the module doc): the CLI ends its turn and exits by
        # itself, its output read to the end, within `CLOSE_GRACE_S`.
        self._draining = True
        try:
            with anyio.move_on_after(CLOSE_GRACE_S):
                if self._turns_in_flight and not self._closed:
                    await self._client.interrupt()
                end_input = getattr(getattr(self._client, "_transport", None), "end_input", None)
                # An SDK without the transport's `end_input` leaves it to the disconnect.
                if end_input is None:
                    return
                await end_input()
                # Read here, or by the pump while it reads; each waits on the other.
                with contextlib.suppress(StopAsyncIteration):
                    while not self._output_ended.is_set():
                        async with self._reading:
                            if not self._output_ended.is_set():
                                await self._pull()
        finally:
            self._draining = False

    async def _end_if_alive(self) -> None:
        # A CLI whose output broke (not JSON) may live on: the SDK's disconnect would
        # give it 5 s to exit on its own, and the session learns of the end only
        # after. Its process is the SDK's (no public handle): this looks for it where
        # this SDK keeps it, and does nothing when it is not there.
        process = _sdk_process(self._client)
        if process is None or getattr(process, "returncode", 0) is not None:
            return
        logger.warning("Claude Code's output broke while it still ran: killing it")
        process.kill()
        # Read to its end: a pipe left unread keeps the process's transport open.
        stdout = getattr(process, "stdout", None)
        if stdout is not None:
            with anyio.move_on_after(CLOSE_GRACE_S):
                async for _ in stdout:
                    pass

    async def _drain_sdk_stream(self) -> None:
        try:
            async for _ in self._sdk_stream:
                pass
        except Exception:
            # Ending is all that is wanted here; how it ended does not matter.
            logger.debug("the SDK's message stream ended with an error", exc_info=True)

    def _close_was_requested(self) -> bool:
        # A method, not the attribute: close() may have run while the read waited.
        return self._close_requested

    def _note_session_id(self, raw: JsonObject) -> None:
        session_id = raw.get("session_id")
        # A reset message names the outgoing session; the next message names the new one.
        if raw.get("type") != "conversation_reset" and isinstance(session_id, str) and session_id:
            self._session_id = session_id

    async def send(self, content: TurnContent) -> None:
        """Send one user turn. Raises `anyio.ClosedResourceError` once the run is closed."""
        if self._closed or self._close_requested:
            await checkpoint()
            raise anyio.ClosedResourceError
        wire_content: str | list[JsonValue] = (
            content if isinstance(content, str) else [dict(block) for block in content]
        )
        message: JsonObject = {
            "type": "user",
            "message": {"role": "user", "content": wire_content},
            "parent_tool_use_id": None,
        }
        self._turns_in_flight += 1
        await self._client.query(_single(message))

    async def interrupt(self) -> None:
        """Ask the CLI to interrupt the turn in flight (nothing on a closed run)."""
        if self._closed or self._close_requested:
            await checkpoint()
            return
        await self._client.interrupt()

    async def close(self) -> None:
        """Let the CLI end by itself, then disconnect (the module doc). Nothing is
        relayed after this is called. Idempotent: a second close returns once the
        first has let the CLI go. The disconnect happens even when the interrupt
        fails or the close is cancelled."""
        if self._close_requested:
            await self._let_go_of.wait()
            return
        self._close_requested = True
        with self._closing_runs.exiting(self._session_id):
            try:
                if not self._output_ended.is_set():
                    await self._let_the_cli_end()
            except Exception as error:
                # The CLI may be gone already; the disconnect below ends it either way.
                logger.warning("Claude Code did not end by itself on close: %s", error)
            finally:
                await self._let_go()


# ClaudeAgentOptions fields the engine sets itself, refused in ``extra_options``.
_OPTIONS_OF_OUR_OWN: Final = frozenset(
    {
        "allowed_tools",
        "disallowed_tools",
        "permission_mode",
        "can_use_tool",
        "permission_prompt_tool_name",
        "cwd",
        "resume",
        "env",
        "stderr",
    }
)


class ClaudeEngine:
    """Starts `ClaudeRun`s over ``claude-agent-sdk``; see the module docstring.

    ``cli_path`` names the ``claude`` binary (default: the SDK's own search — its
    bundled CLI, then ``PATH``); ``env`` is added to the CLI's environment on every
    start (under a start's own ``StartOptions.env``): an API endpoint
    (``ANTHROPIC_BASE_URL``), a key, a config folder (``CLAUDE_CONFIG_DIR``);
    ``permission_mode`` (one of `PERMISSION_MODES`; None: the CLI's ``default``),
    ``allowed_tools`` and ``disallowed_tools`` (Claude Code permission rules, such as
    ``Bash(git status:*)``) and ``setting_sources`` are passed to the SDK as given;
    ``extra_options`` are further ``ClaudeAgentOptions`` fields (``max_turns``, …).
    A start whose options carry ``ask_permission`` asks it whatever Claude Code would
    ask a person (`beebox_impl.engine.claude_permissions`); without it, such a call
    is denied by the CLI.
    """

    def __init__(
        self,
        *,
        cli_path: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        permission_mode: str | None = None,
        allowed_tools: Sequence[str] = (),
        disallowed_tools: Sequence[str] = (),
        setting_sources: list[str] | None = None,
        extra_options: Mapping[str, object] | None = None,
    ) -> None:
        owned = sorted(set(extra_options or {}) & _OPTIONS_OF_OUR_OWN)
        if owned:
            raise InvalidArgument(
                f"give ClaudeEngine {', '.join(owned)} as its own argument(s), not in extra_options"
            )
        self._cli_path = cli_path
        self._env = dict(env or {})
        # Checked now: a mistyped mode is the host's error, not a failed start later.
        self._permission_mode = (
            None if permission_mode is None else permission_mode_of(permission_mode)
        )
        self._allowed_tools = list(allowed_tools)
        self._disallowed_tools = list(disallowed_tools)
        self._setting_sources = setting_sources
        self._extra_options = dict(extra_options or {})
        self._closing_runs = ClosingRuns()
        self._sdk: Any = None

    def agent_options(self, options: StartOptions) -> dict[str, object]:
        """The ``ClaudeAgentOptions`` fields a start uses (without the stderr hook)."""
        values: dict[str, object] = {"cwd": options.cwd, "env": {**self._env, **options.env}}
        # The text of a message reaches the page as it streams (live text).
        values["include_partial_messages"] = True
        if options.resume_session_id is not None:
            values["resume"] = options.resume_session_id
        elif options.system_prompt is not None:
            # A resumed session keeps the prompt it started with; only a new one gets it.
            values["system_prompt"] = options.system_prompt
        if options.model is not None:
            values["model"] = options.model
        if self._cli_path is not None:
            values["cli_path"] = self._cli_path
        if self._permission_mode is not None:
            values["permission_mode"] = self._permission_mode
        allowed, _whole = self._allowed_for(options)
        if allowed:
            values["allowed_tools"] = allowed
        if self._disallowed_tools:
            values["disallowed_tools"] = list(self._disallowed_tools)
        if self._setting_sources is not None:
            values["setting_sources"] = list(self._setting_sources)
        values.update(self._extra_options)
        return values

    def _asks(self, options: StartOptions) -> bool:
        # In bypassPermissions the CLI never asks: no callback (the SDK would warn).
        return options.ask_permission is not None and self._permission_mode != "bypassPermissions"

    def _allowed_for(self, options: StartOptions) -> tuple[list[str], frozenset[str]]:
        """The allowed-tools entries for the CLI, and the tools the callback allows
        whole (`beebox_impl.engine.claude_permissions.split_allowed_tools`)."""
        if not self._asks(options):
            return list(self._allowed_tools), frozenset()
        return split_allowed_tools(self._allowed_tools)

    def cli_transcript(self, options: StartOptions, session_id: str) -> Path | None:
        """Where the CLI started with ``options`` keeps ``session_id``'s transcript (None
        for an id that names no file); blocking (a long box path is looked up)."""
        environ = {**os.environ, **self._env, **options.env}
        home = Path(environ["HOME"]).expanduser() if environ.get("HOME") else Path.home()
        try:
            return transcript_in(
                project_dir(options.cwd, claude_projects_root(environ, home)), session_id
            )
        except InvalidSessionId:
            return None

    async def _resumable(self, options: StartOptions) -> StartOptions:
        # The CLI can resume only a session whose transcript it wrote (see the module doc).
        session_id = options.resume_session_id
        if session_id is None:
            return options
        # The last CLI of this session has exited (and written what it had) first.
        await self._closing_runs.wait(session_id)
        path = await anyio.to_thread.run_sync(self.cli_transcript, options, session_id)
        if path is not None and await anyio.to_thread.run_sync(_holds_a_turn, path):
            return options
        logger.warning(
            "Claude Code has no conversation of session %s (%s): starting a new session",
            session_id,
            path,
        )
        return dataclasses.replace(options, resume_session_id=None)

    async def prepare(self) -> None:
        """Import the SDK now, in a worker thread, so the first start does not wait for
        it: importing claude-agent-sdk takes 0.5–1 s (its MCP client alone is about
        half), and `bbx serve --engine claude` calls this as it starts. Raises
        `EngineStartError` when the SDK is not installed. Idempotent."""
        await self._load_sdk()

    async def _load_sdk(self) -> Any:
        # In a worker thread: an import run on the event loop holds every other task
        # (a first send waited 0.6 s for its answer, the HTTP adapter with it).
        if self._sdk is None:
            self._sdk = await anyio.to_thread.run_sync(load_sdk)
        return self._sdk

    async def start(self, options: StartOptions) -> ClaudeRun:
        """Connect a new client, or raise `EngineStartError` saying what went wrong."""
        sdk: Any = await self._load_sdk()
        if self._cli_path is not None:
            cli = Path(self._cli_path)
            problem = await anyio.to_thread.run_sync(_cli_problem, cli)
            if problem is not None:
                raise EngineStartError(
                    f"the Claude Code CLI at {cli} {problem}: give ClaudeEngine(cli_path=...) "
                    f"a claude binary that runs, or leave it out to use the one {INSTALL_HINT} "
                    "bundles"
                )
        options = await self._resumable(options)
        try:
            return await self._start_client(sdk, options)
        except _NoSuchSession as refused:
            # The transcript looked resumable, but the CLI has no such conversation.
            logger.warning("%s: starting a new session", refused)
            return await self._start_client(
                sdk, dataclasses.replace(options, resume_session_id=None)
            )

    async def _start_client(self, sdk: Any, options: StartOptions) -> ClaudeRun:
        stderr_tail: deque[str] = deque(maxlen=_STDERR_TAIL)

        def on_stderr(line: str) -> None:
            stderr_tail.append(line)
            logger.debug("claude stderr: %s", line)

        hooks: dict[str, object] = {"stderr": on_stderr}
        if self._asks(options) and options.ask_permission is not None:
            _allowed, whole = self._allowed_for(options)
            hooks["can_use_tool"] = can_use_tool_for(sdk, options.ask_permission, whole)
        client = sdk.ClaudeSDKClient(
            options=sdk.ClaudeAgentOptions(**self.agent_options(options), **hooks)
        )
        try:
            await _connect(client)
        except sdk.CLINotFoundError as error:
            raise EngineStartError(
                f"the Claude Code CLI is not available ({error}); install Claude Code, "
                "or give ClaudeEngine(cli_path=...)"
            ) from error
        except Exception as error:
            # Anything else that stops the CLI from starting (it exited, it did
            # not answer the handshake, the folder is missing) is a failed start.
            detail = f"; stderr: {' | '.join(stderr_tail)}" if stderr_tail else ""
            said = f"{error}{detail}"
            if options.resume_session_id is not None and NO_SUCH_SESSION in said:
                raise _NoSuchSession(said) from error
            raise EngineStartError(f"Claude Code did not start: {said}") from error
        return ClaudeRun(client, sdk, options.resume_session_id, closing_runs=self._closing_runs)
