"""A scripted engine for tests: the test decides every start, message and close.

Why: the session tests (unit, stateful, conformance, mutants) must drive a
session through every interleaving the spec names — a start that hangs in
`starting`, a start that fails, a result that arrives after a close, a run that
dies on its own — and compare what the session did with what the spec model did.
A real engine decides those things itself; this one lets the test decide.

How a test drives it:

- ``engine.start(options)`` records ``options`` in `ScriptedEngine.starts` and, in
  the default ``"wait"`` mode, waits until the test calls
  `ScriptedEngine.accept_start` (the start returns a new `ScriptedRun`) or
  `ScriptedEngine.fail_start` (it raises `EngineStartError`). Waiting starts are
  answered oldest first. So a test can observe the session in ``starting``.
  Mode ``"accept"`` answers every start at once with a run; ``"fail"`` fails it.
- A started run is appended to `ScriptedEngine.runs` (so ``runs`` lists exactly
  the runs the engine reported started, in order: a failed start is never there).
- ``await engine.wait_start_requested()`` waits until a start is waiting (for
  tests that do not settle); ``engine.waiting_starts`` counts them.
- The run records what the session did to it: ``sent`` (every turn, in order),
  ``interrupts`` (a count), ``close_calls``. ``send`` on a run that has ended or
  was closed raises `anyio.ClosedResourceError`, as a real run's would.
  ``run.refuse_next_send(error)`` makes the next ``send`` raise ``error`` instead,
  the run staying open (a run that refuses a turn: say, its photos could not be
  read); the refused turn is not recorded.
- The test makes the run speak with ``await run.emit(raw)`` (build ``raw`` with
  `beebox_impl.engine.messages`), and end on its own with ``await run.end()``:
  what was emitted before the end is still delivered, then the stream ends and
  ``run.closed`` turns true when the reader reaches that end. Emitting to a run
  that is over delivers nothing and answers False. ``*_nowait`` variants do the
  same without a checkpoint, for synchronous test code.
- The test makes the run ask its session before a tool runs with ``await
  run.ask(request)`` (it calls the start's ``ask_permission`` and waits for the
  answer, which it keeps in ``run.answers``: None until it comes, and for good
  if the request ends unanswered; a run started without one is denied at once,
  as a real engine denies); ``run.withdraw(request_id)`` takes an ask back (a
  cancelled ask), as a CLI does when its turn is interrupted.
- ``await run.close()`` — the session closing the run — ends the stream at once:
  whatever was emitted but not yet consumed is dropped (counted in ``dropped``),
  as the conformance convention says ("closing a run ends its message stream at
  once").

Only anyio primitives are used (an event per wait, behind `Mailbox`), nothing
sleeps, and nothing runs in a thread: the engine behaves the same on asyncio and
trio, and a test can settle by waiting until every task is blocked — a session
task waiting in ``start`` or on the message stream is blocked on an event only
the test sets.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

import anyio
from anyio.lowlevel import checkpoint

from beebox_impl.engine.mailbox import Mailbox, PullIterator
from beebox_impl.engine.protocol import EngineStartError, StartOptions, TurnContent
from beebox_spec.entries import JsonObject
from beebox_spec.errors import InvariantError
from beebox_spec.permissions import PermissionReply, PermissionRequest

__all__ = ["ScriptedEngine", "ScriptedRun", "StartMode"]

# How `ScriptedEngine.start` answers: wait for the test, accept at once, fail at once.
StartMode: TypeAlias = Literal["wait", "accept", "fail"]

# The reason a start fails with when the test gives none.
DEFAULT_FAILURE_REASON = "scripted start failure"


class ScriptedRun:
    """One run of a `ScriptedEngine`: records what it is told, says what the test emits."""

    def __init__(self, options: StartOptions) -> None:
        self.options = options
        self.sent: list[TurnContent] = []
        self.interrupts = 0
        self.close_calls = 0
        # Messages emitted but never delivered because the run was closed first.
        self.dropped = 0
        # Unbounded: `emit` never waits for the consumer, so a test can emit
        # while the session's pump is busy elsewhere without deadlocking itself.
        self._mailbox: Mailbox[JsonObject] = Mailbox()
        self._closed = False
        self._ended = False
        self._consumed = False
        self._refusal: Exception | None = None
        # Each ask's answer, by request id (None: withdrawn before an answer came).
        self.answers: dict[str, PermissionReply | None] = {}
        self._asking: dict[str, anyio.CancelScope] = {}

    @property
    def closed(self) -> bool:
        """True once the stream has ended: closed by the session, or its end consumed."""
        return self._closed

    @property
    def ended(self) -> bool:
        """True once the test ended the run (`end`) or the session closed it."""
        return self._ended or self._closed

    def messages(self) -> AsyncIterator[JsonObject]:
        """The emitted messages, in order, until the run ends or is closed. Consumed once."""
        if self._consumed:
            raise InvariantError("a run's message stream is consumed once")
        self._consumed = True
        return PullIterator(self._next_message, self._mailbox.take_ready)

    async def _next_message(self) -> JsonObject:
        try:
            return await self._mailbox.get()
        except anyio.EndOfStream:
            # The consumer saw the end: the stream is over.
            self._closed = True
            raise StopAsyncIteration from None

    async def send(self, content: TurnContent) -> None:
        """Record one turn. Raises `anyio.ClosedResourceError` on a closed run, and the
        error given to `refuse_next_send` once after that call."""
        await checkpoint()
        # A real run cannot take a turn once its stream is over; neither can this one.
        if self.ended:
            raise anyio.ClosedResourceError
        if self._refusal is not None:
            refusal, self._refusal = self._refusal, None
            raise refusal
        self.sent.append(content)

    def refuse_next_send(self, error: Exception | None = None) -> None:
        """The next `send` raises ``error`` (a `RuntimeError` by default); the run stays open."""
        self._refusal = error if error is not None else RuntimeError("the run refused the turn")

    async def interrupt(self) -> None:
        """Count one interrupt (the test decides what, if anything, the run says next)."""
        await checkpoint()
        self.interrupts += 1

    async def close(self) -> None:
        """End the stream at once, dropping what was not yet consumed. Idempotent."""
        await checkpoint()
        self.close_nowait()

    def close_nowait(self) -> None:
        """`close` without the checkpoint."""
        self.close_calls += 1
        if self._closed:
            return
        self._closed = True
        # Closing means no further message reaches the session, buffered or not.
        self.dropped += self._mailbox.clear()
        self._mailbox.close()

    async def emit(self, message: JsonObject) -> bool:
        """Queue ``message`` for the session; False (and nothing sent) if the run has ended."""
        delivered = self.emit_nowait(message)
        await checkpoint()
        return delivered

    def emit_nowait(self, message: JsonObject) -> bool:
        """`emit` without the checkpoint."""
        # A message for a run that is over goes nowhere; the test can see that.
        if self.ended:
            return False
        self._mailbox.put(message)
        return True

    async def ask(self, request: PermissionRequest) -> PermissionReply | None:
        """Ask the session before a tool runs; the answer (None: withdrawn), kept in
        ``answers``."""
        ask_permission = self.options.ask_permission
        if ask_permission is None:
            # Nobody to ask: denied, as a real engine denies such a call.
            await checkpoint()
            self.answers[request["id"]] = PermissionReply("deny", "no one to ask")
            return self.answers[request["id"]]
        self.answers[request["id"]] = None
        with anyio.CancelScope() as asking:
            self._asking[request["id"]] = asking
            self.answers[request["id"]] = await ask_permission(request)
        del self._asking[request["id"]]
        return self.answers[request["id"]]

    def withdraw(self, request_id: str) -> None:
        """Take the ask ``request_id`` back, if it is still waiting."""
        asking = self._asking.get(request_id)
        if asking is not None:
            asking.cancel()

    async def end(self) -> None:
        """The run ends on its own: what was emitted is delivered, then the stream ends."""
        self.end_nowait()
        await checkpoint()

    def end_nowait(self) -> None:
        """`end` without the checkpoint. Idempotent."""
        self._ended = True
        self._mailbox.close()


@dataclass
class _PendingStart:
    """A start waiting for the test's answer."""

    options: StartOptions
    answered: anyio.Event = field(default_factory=anyio.Event)
    run: ScriptedRun | None = None
    failure: str | None = None


class ScriptedEngine:
    """An `Engine` whose every outcome the test decides (see the module docstring)."""

    def __init__(self, start_mode: StartMode = "wait", fail_reason: str = DEFAULT_FAILURE_REASON):
        self.start_mode: StartMode = start_mode
        self.fail_reason = fail_reason
        self.starts: list[StartOptions] = []
        self.runs: list[ScriptedRun] = []
        self._pending: deque[_PendingStart] = deque()
        # Made by the first wait, so an engine can be built outside an event loop.
        self._start_requested: anyio.Event | None = None

    @property
    def waiting_starts(self) -> int:
        """How many starts wait for `accept_start` / `fail_start`."""
        return len(self._pending)

    @property
    def last_run(self) -> ScriptedRun:
        """The most recently started run (a test's usual subject)."""
        if not self.runs:
            raise InvariantError("no run has started")
        return self.runs[-1]

    async def start(self, options: StartOptions) -> ScriptedRun:
        """Open a run when the test says so, or raise `EngineStartError` when it says no."""
        self.starts.append(options)
        if self.start_mode == "accept":
            await checkpoint()
            return self._new_run(options)
        if self.start_mode == "fail":
            await checkpoint()
            raise EngineStartError(self.fail_reason)
        pending = _PendingStart(options)
        self._pending.append(pending)
        if self._start_requested is not None:
            self._start_requested.set()
        try:
            await pending.answered.wait()
        except BaseException:
            # The starter was cancelled. Unanswered: the test cannot answer it
            # any more. Answered with a run: nobody will ever use that run, so
            # it is closed (it stays in `runs`: the engine did report it).
            if pending in self._pending:
                self._pending.remove(pending)
            if pending.run is not None:
                pending.run.close_nowait()
            raise
        if pending.failure is not None:
            raise EngineStartError(pending.failure)
        assert pending.run is not None, "an answered start has a run or a failure"
        return pending.run

    def accept_start(self) -> ScriptedRun:
        """Answer the oldest waiting start with a new run, and return that run."""
        pending = self._take_pending()
        pending.run = self._new_run(pending.options)
        pending.answered.set()
        return pending.run

    def fail_start(self, reason: str | None = None) -> None:
        """Answer the oldest waiting start with `EngineStartError(reason)`."""
        pending = self._take_pending()
        pending.failure = reason if reason is not None else self.fail_reason
        pending.answered.set()

    async def wait_start_requested(self) -> StartOptions:
        """Wait until a start is waiting for an answer; its options (oldest first)."""
        await checkpoint()
        while not self._pending:
            self._start_requested = anyio.Event()
            await self._start_requested.wait()
        return self._pending[0].options

    def _take_pending(self) -> _PendingStart:
        if not self._pending:
            raise InvariantError("no start is waiting for an answer")
        return self._pending.popleft()

    def _new_run(self, options: StartOptions) -> ScriptedRun:
        run = ScriptedRun(options)
        self.runs.append(run)
        return run
