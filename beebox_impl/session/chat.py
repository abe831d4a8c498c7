"""`ChatSession`: the whole-box chat, its SDK run and its mid-turn queue, on anyio.

Checked against `beebox_spec.chat_session` (the pure model: state + event →
state + effects) by the stateful tests in ``tests/stateful/``; every phase write
goes through `beebox_spec.lifecycle.next_lifecycle`, and the busy and running
readings are the spec's `is_busy` and `has_open_run`. Spec sources:
`docs/sources.md#lifecycle-contract` ("The contract") and `docs/sources.md#facts-3-2`
(§3.2); `docs/design.md#design-5-persisted-queue` (§5) for the persisted queue.

The rules (numbered as in `beebox_spec.chat_session`)
-----------------------------------------------------

1. **Send.** `send` refuses (returns False) while busy — a turn in flight or a run
   starting — and in the close window (the session asked to close its run and the
   close has not come back yet); the caller `enqueue`\\ s instead. With an open
   run the turn goes onto it (``ready → streaming``). From ``idle`` it moves to
   ``starting``, starts the run in the background and returns True at once: the
   text is committed as the run's first turn. Only ``idle`` may start a run, so a
   second, concurrent run is impossible by construction.
2. **Start.** When the run opens its first turn is sent at once: the starting text
   and everything queued meanwhile, joined with `QUEUE_SEPARATOR`. When it fails
   the phase returns to ``idle``, listeners hear `StartFailed`, and texts that
   came from the queue go back to its head. Nothing else is held (there is no
   lock to release): the phase is the only guard.
3. **Enqueue** appends to the queue, whatever the phase, and returns once the row
   is persisted (or, drained into a turn that went out before its row was
   written, once it needs no row; or at once, when the caller wrote the row).
4. **Drain.** After a turn's ``result``, and after an unexpected run death, the
   whole queue goes out as one turn (onto the run, or a fresh run). A drain that
   would be refused leaves the queue alone.
5. **Result.** Busy flips off first (`after_turn_result`), then `Done`, then
   `TurnText` and the feature deltas, then the drain.
6. **Stop vs restart.** `stop` moves to ``stopping``, clears the queue (and its
   rows) and closes the run; the close handler reads ``stopping`` as intentional
   and does not drain. `restart` only closes the run, so the close handler drains
   into a fresh run. `reset_session` is `stop` plus forgetting the session id.
7. **Session id.** An SDK message carrying an id other than the one held is saved
   (``.beebox/chat-session-id.json``) and announced; a run starts by resuming the
   id held when it was asked for.
8. **A refused turn** (ours). A run whose ``send`` raises on the turn in flight is
   closed as `restart` closes it (unless its close is asked for already): nothing
   else would ever end that turn, and the session would stay busy for good. A
   turn a drain sent onto that open run goes back to the head of the queue, rows
   and all, and the close handler drains it into a fresh run; its end is told by
   the turn that carries it next. Should the run's close have come first (a
   restart between the drain and its send; the spec's steps have no such gap),
   it goes back all the same: ahead of a fresh run's drained first turn, or into
   the queue, drained at once if nothing else will. A fresh run's first turn, a
   caller's own turn (the caller hears the error) and a turn a stop found in
   flight stay where they are: their turn ends with the run, undelivered.
10. **Permission requests** (ours). The run's asks (its start's
   ``ask_permission``) wait in a `PermissionDesk` until answered
   (`answer_permission`), timed out on the session's clock (``permission_timeout``,
   10 minutes by default), withdrawn, or ended with the run. `stop`,
   `reset_session`, `restart` and a refused turn's close deny them before the
   close; an ask of a run the session is closing is denied at once. Listeners
   hear `PermissionRequested` and `PermissionEnded`; ``on_permission_event``
   hears them inside the step (the box's record of decisions).
11. **Live text** (ours). A run's ``stream_event`` messages are pieces of the
   message in progress, not messages: each moves the live text
   (`beebox_spec.sdk_messages.live_text_after`) and a text delta is published as
   `TurnDelta`, never as `Message`; the complete message, the turn's result and
   the run's end drop it, and a run the session asked to close streams none
   (`live_text` reads None). It is kept in memory only: no store, no record.

How it runs
-----------

Each caller operation takes effect when it is called, before it first yields
(`checkpoint_if_cancelled` first; a cancel-shielded checkpoint last when the call
has not yielded otherwise, so every call still yields at least once), so
operations take effect in the order they are made and a cancelled caller changes
nothing. Each event is handled in two halves: every state change of the step happens at
once, with no await in between (so another task never sees half a step), and
then its I/O is performed in the spec's order — the turn onto the engine first,
store writes after. Store writes go through one writer task in submission order,
so the rows on disk are in the order of the queue in memory (a row a caller wrote
itself, ``queued_row``, was written when the caller wrote it: two such sends in
flight at once, neither answered yet, may be on disk in the other order). The run's
messages are read by `pump_chat_run` in a task of the session's task group, one
at a time; the start of a run is another such task. `ChatSession.open` owns the
task group.

The persisted queue (`docs/design.md#design-5-persisted-queue`): `enqueue` writes
the row before returning, unless its caller wrote it (``queued_row``: the box's
send writes it in the transaction that records the send, when `queues_sends` says
it will be queued, and from a handler thread hands it over with `enqueue_then_drain`);
the rows of a turn are deleted once the turn is sent, and those of drained texts
kept (so they go back to the queue) when its run fails to start (the caller's
text of a failed start goes, row and all, as rule 2 drops it); `stop` deletes
every row; a
session opened on a box with rows drains them into a fresh run at once. Delivery
is at least once: a crash between sending a turn and deleting its rows sends
those texts again after the restart, which beats losing them. The writes wait in
the session's `StoreWriter` and those waiting together go as one store write
(`_write_queue`): a text drained into a turn that went out before its row was
written is never written (the store ends as it would have), and an enqueue
fails with its batch's write, the deletions in it included.

``on_turn_end`` (ours; the box's `DeliveryLedger`) hears the texts of every turn
as it ends: with its result (the engine has them in its transcript) or with its
run. It hears a turn that had queue rows only once their deletion is written (it
goes through the writer behind it), so a send it counts delivered has no row left
to send it again after a crash.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from pathlib import Path

import anyio
from anyio.abc import TaskGroup
from anyio.lowlevel import cancel_shielded_checkpoint, checkpoint_if_cancelled

from beebox_impl.engine.protocol import Engine, Run, StartOptions
from beebox_impl.session.chat_events import (
    DEFAULT_EVENT_BUFFER,
    ChatEvent,
    Closed,
    Done,
    EventFanout,
    EventSubscription,
    Message,
    SessionIdAssigned,
    StartFailed,
    Task,
    TurnDelta,
    TurnText,
)
from beebox_impl.session.clock import SessionClock, SystemClock
from beebox_impl.session.permissions import PermissionDesk, PermissionEvent
from beebox_impl.session.pump import PumpCounters, pump_chat_run
from beebox_impl.session.writer import StoreWriter
from beebox_impl.store.protocols import QueueStore, SessionIdStore
from beebox_spec.chat_session import QUEUE_SEPARATOR, combine_queued_texts, starts_a_turn
from beebox_spec.errors import InvariantError
from beebox_spec.lifecycle import (
    IDLE,
    Lifecycle,
    Ready,
    Starting,
    Stopping,
    Streaming,
    accepts_send,
    after_turn_result,
    has_open_run,
    lifecycle_run,
    next_lifecycle,
    session_is_busy,
)
from beebox_spec.permissions import (
    DEFAULT_TIMEOUT,
    STOPPED_MESSAGE,
    PermissionReply,
    PermissionRequest,
)
from beebox_spec.phases import Phase
from beebox_spec.sdk_messages import (
    AdaptedMessage,
    accumulate_assistant_text,
    live_text_after,
    text_delta,
)

__all__ = ["QUEUE_SEPARATOR", "ChatRun", "ChatSession", "FeatureDeltaHook", "TurnEndHook"]

_log = logging.getLogger(__name__)

# Called with a finished turn's text, after busy flipped off (rule 5).
FeatureDeltaHook = Callable[[str], None]
# Called with the texts a turn carried when it ends: True when with its result (the
# engine has them in its transcript), False when its run ended first (ours; the box's
# `DeliveryLedger.turn_ended`).
TurnEndHook = Callable[[tuple[str, ...], bool], None]


@dataclass(eq=False, slots=True)
class ChatRun:
    """One engine run as a session holds it.

    ``number`` counts the runs the session asked for, from 1; ``close_requested``
    turns true when the session asks to close it: from then on it takes no turns
    (the close window), while its message stream is still ending.
    """

    number: int
    run: Run
    close_requested: bool = False


@dataclass(eq=False, slots=True)
class _QueuedText:
    """A text waiting for a turn.

    ``persisted`` texts have a queue row (``row_id`` once it is written): those of
    `ChatSession.enqueue`, written by the session's writer, and those whose caller
    wrote the row itself (``queued_row``). A caller's `send` is never persisted.
    """

    text: str
    persisted: bool = False
    row_id: int | None = None


@dataclass(frozen=True, slots=True)
class _Delivered:
    """A turn's texts went out to the engine: their queue rows are to go."""

    entries: tuple[_QueuedText, ...]


@dataclass(frozen=True, slots=True)
class _TurnEndTold:
    """A turn ended: ``on_turn_end`` hears it once the deletions before it are written."""

    hook: TurnEndHook
    texts: tuple[str, ...]
    delivered: bool


_QueueChange = _QueuedText | _Delivered | _TurnEndTold


@dataclass(eq=False, slots=True)
class _Turn:
    """A turn taken, until `on_turn_end` has heard how it ended.

    The end is told once the turn has ended (``ended``: True with its result) and
    its send is done (``send_done``: its queue rows' deletion submitted, or kept
    for a retry), through the store writer when it had rows: the box may count a
    send delivered only once no queue row is left to send it again.
    """

    entries: tuple[_QueuedText, ...]
    send_done: bool = False
    ended: bool | None = None
    # A drain's turn onto an open run: refused, it goes back to the queue (rule 8).
    # A stop takes that away: it cleared the queue the turn would go back to.
    returns_if_refused: bool = False

    @property
    def texts(self) -> tuple[str, ...]:
        # A list made, then a tuple: quicker than a generator, and this runs every turn.
        return tuple([entry.text for entry in self.entries])


@dataclass(frozen=True, slots=True)
class _SendTurn:
    """I/O half of a step: send ``turn`` on ``handle``."""

    handle: ChatRun
    turn: _Turn

    @property
    def text(self) -> str:
        return combine_queued_texts(self.turn.texts)


@dataclass(frozen=True, slots=True)
class _StartRun:
    """I/O half of a step: start run ``number``, resuming ``resume_session_id``."""

    number: int
    resume_session_id: str | None


_Plan = _SendTurn | _StartRun | None


def _call_turn_end_hook(hook: TurnEndHook, texts: tuple[str, ...], delivered: bool) -> None:
    try:
        hook(texts, delivered)
    except Exception as error:
        # As with the feature deltas: the turn's end goes on.
        _log.warning("reporting the end of a turn failed: %r", error)


class ChatSession:
    """The whole-box chat session. Open it with `ChatSession.open`; see the module doc."""

    def __init__(
        self,
        *,
        engine: Engine,
        box_root: Path,
        queue_store: QueueStore,
        session_id_store: SessionIdStore,
        task_group: TaskGroup,
        model: str | None = None,
        apply_feature_deltas: FeatureDeltaHook | None = None,
        on_turn_end: TurnEndHook | None = None,
        clock: SessionClock | None = None,
        permission_timeout: timedelta = DEFAULT_TIMEOUT,
        on_permission_event: Callable[[PermissionEvent], None] | None = None,
    ) -> None:
        self._engine = engine
        self._box_root = box_root
        self._queue_store = queue_store
        self._session_id_store = session_id_store
        self._task_group = task_group
        self._model = model
        self._apply_feature_deltas = apply_feature_deltas
        self._on_turn_end = on_turn_end
        self._lifecycle: Lifecycle[ChatRun] = IDLE
        self._session_id: str | None = None
        # Rule 9: the run a reset found, whose messages assign no id, until its close.
        self._forgotten_run: ChatRun | None = None
        self._queue: list[_QueuedText] = []
        self._first_turn: list[_QueuedText] = []
        self._first_turn_drained = False
        self._turn_text = ""
        # Rule 11: the text so far of the assistant message in progress.
        self._live_text: str | None = None
        # The turn in flight, for `on_turn_end`.
        self._turn: _Turn | None = None
        self._runs_started = 0
        self._closed = False
        self._events = EventFanout[ChatEvent]()
        # Rule 10: the runs' pending permission requests.
        self._permissions = PermissionDesk(
            task_group=task_group,
            clock=clock if clock is not None else SystemClock(),
            timeout=permission_timeout,
            publish=self._events.publish,
            on_event=on_permission_event,
        )
        self._writer = StoreWriter("chat session")
        self.counters = PumpCounters()

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        *,
        engine: Engine,
        box_root: Path,
        queue_store: QueueStore,
        session_id_store: SessionIdStore,
        model: str | None = None,
        apply_feature_deltas: FeatureDeltaHook | None = None,
        on_turn_end: TurnEndHook | None = None,
        clock: SessionClock | None = None,
        permission_timeout: timedelta = DEFAULT_TIMEOUT,
        on_permission_event: Callable[[PermissionEvent], None] | None = None,
    ) -> AsyncIterator[ChatSession]:
        """Open the box's chat: load its session id and queue; a non-empty queue (left by
        a crash) drains into a fresh run at once. On exit the session's tasks are
        cancelled and its run is closed; the queue rows stay for the next open."""
        session: ChatSession | None = None
        try:
            async with anyio.create_task_group() as task_group:
                session = cls(
                    engine=engine,
                    box_root=box_root,
                    queue_store=queue_store,
                    session_id_store=session_id_store,
                    task_group=task_group,
                    model=model,
                    apply_feature_deltas=apply_feature_deltas,
                    on_turn_end=on_turn_end,
                    clock=clock,
                    permission_timeout=permission_timeout,
                    on_permission_event=on_permission_event,
                )
                task_group.start_soon(session._writer.run, name="chat session store writer")
                try:
                    await session._load()
                    yield session
                finally:
                    session._closed = True
                    with anyio.CancelScope(shield=True):
                        await session._writer.flush()
                    task_group.cancel_scope.cancel()
        finally:
            if session is not None:
                with anyio.CancelScope(shield=True):
                    await session._release_run()
                session._events.close()

    # --- Readings ------------------------------------------------------------------

    @property
    def lifecycle(self) -> Lifecycle[ChatRun]:
        """The current lifecycle value (phase, and the run it holds)."""
        return self._lifecycle

    @property
    def phase(self) -> Phase:
        return self._lifecycle.phase

    @property
    def busy(self) -> bool:
        """`isBusy()`: a turn in flight, or a run starting (`beebox_spec.lifecycle`)."""
        return session_is_busy(self._lifecycle)

    @property
    def running(self) -> bool:
        """`isRunning()`: the session holds a run it has not asked to close."""
        return has_open_run(self._lifecycle, close_requested=self._close_requested())

    def _close_requested(self) -> bool:
        # The close window: the session asked its run to close (the handle says so).
        handle = lifecycle_run(self._lifecycle)
        return handle is not None and handle.close_requested

    @property
    def live_text(self) -> str | None:
        """The text so far of the assistant message being streamed now (rule 11); None
        when none is, and once the session has asked its run to close."""
        return None if self._close_requested() else self._live_text

    @property
    def queue(self) -> tuple[str, ...]:
        """The texts waiting for the next turn, oldest first."""
        return tuple(entry.text for entry in self._queue)

    @property
    def waiting_texts(self) -> tuple[str, ...]:
        """The texts the next turn will carry besides a caller's own: a starting run's
        first turn and the queue (a drain joins the queue; a start joins both)."""
        return tuple(entry.text for entry in (*self._first_turn, *self._queue))

    @property
    def session_id(self) -> str | None:
        """The SDK session id the next run resumes (None: a new session)."""
        return self._session_id

    @property
    def runs_started(self) -> int:
        """How many runs the session has asked the engine for."""
        return self._runs_started

    @property
    def pending_permissions(self) -> list[PermissionRequest]:
        """The pending permission requests, in the order asked (rule 10)."""
        return self._permissions.pending_requests

    def subscribe(self, max_buffer: int = DEFAULT_EVENT_BUFFER) -> EventSubscription[ChatEvent]:
        """Listen to the session's events from now on (see `beebox_impl.session.chat_events`)."""
        return self._events.subscribe(max_buffer)

    # --- Caller operations -----------------------------------------------------------

    async def send(self, text: str) -> bool:
        """Send ``text`` as a turn; False when refused (busy, or the close window).

        From ``idle`` it returns True once the text is committed as the first turn of
        the run it starts; a start that then fails is heard as `StartFailed`. Onto an
        open run, an error of the engine's ``send`` is raised to the caller (the run
        is dying; its close handler follows).
        """
        await self._enter()
        accepted, plan = self._begin_send((_QueuedText(text),), drained=False)
        await self._dispatch_send(plan)
        return accepted

    async def send_or_enqueue(self, text: str, *, queued_row: int | None = None) -> bool:
        """Send ``text`` as a turn or, when the session refuses it, queue it: one step.

        True when it went out as a turn (as `send`), False when it was queued (as
        `enqueue`: returns once persisted). A caller that awaited `send` and then
        `enqueue` would leave a gap in which the turn in flight could end and the
        session go idle, stranding the text in the queue until the next send; here
        the refusal and the queueing happen with no await between them.

        ``queued_row``: the caller has already written ``text``'s row to the queue
        store, with this id, in a transaction of its own (`queues_sends` said the
        session would queue it; a send's acceptance record does so, saving a
        second commit). Queued, nothing more is written. Taken as a turn after all
        (the session moved on meanwhile), the row goes once the turn is sent, as a
        drained turn's rows do.
        """
        await self._enter()
        entry = _QueuedText(text, persisted=queued_row is not None, row_id=queued_row)
        accepted, plan = self._begin_send((entry,), drained=False)
        if accepted:
            await self._dispatch_send(plan)
            return True
        await self._enqueue_text(text, queued_row)
        return False

    def enqueue_then_drain(self, text: str, *, queued_row: int) -> None:
        """Queue ``text``, its row written by the caller, then drain as after a turn's
        end (spec rule 3, ours): from the loop's thread, with no await (a callback a
        handler thread scheduled, for a send it answered queued).

        A session that can take a send (the turn ended before the text got here)
        sends the queue, this text last, as one drained turn at once (its send in a
        task of the session's); otherwise the text waits in the queue. Either way,
        whatever comes after it queues behind it. Raises `anyio.ClosedResourceError`
        once the session is closed.
        """
        self._refuse_if_closed()
        self._queue.append(_QueuedText(text, persisted=True, row_id=queued_row))
        self._drain_in_a_task()

    @property
    def queues_sends(self) -> bool:
        """Whether a send now belongs in the queue: `send_or_enqueue` would queue it
        (busy, or the close window), or texts already wait there (an idle session's,
        after a start that failed or a stop) and a send handed over with
        `enqueue_then_drain` joins them, so they go first.

        Readable from any thread, as a hint: the caller may write the text's queue
        row itself, with its own record of the text (``queued_row``). By the time
        the text reaches the session the answer may have changed; that costs a row
        written and deleted, or one the session writes, never a text lost or queued
        twice.
        """
        return bool(self._queue) or not self._can_accept_send()

    async def _dispatch_send(self, plan: _Plan) -> None:
        if isinstance(plan, _SendTurn):
            # A caller's turn that cannot reach the engine is the caller's to hear about
            # (its row, if the caller wrote one, stays for the caller to queue again).
            # The engine's send checkpoints (engine protocol): the call has yielded.
            try:
                await plan.handle.run.send(plan.text)
                self._delete_rows(plan.turn.entries)
            except Exception:
                self._close_refusing_run(plan)
                raise
            finally:
                self._send_done(plan.turn)
            return
        # Starting a run (or refusing) does not yield: `_perform` only spawns the start.
        await self._perform(plan)
        await self._leave()

    async def enqueue(self, text: str, *, queued_row: int | None = None) -> None:
        """Queue ``text`` for the next turn; returns once it is persisted.

        ``queued_row``: the id of the row the caller has already written for it
        (as in `send_or_enqueue`); nothing more is written.
        """
        await self._enter()
        await self._enqueue_text(text, queued_row)

    async def _enqueue_text(self, text: str, queued_row: int | None) -> None:
        entry = _QueuedText(text, persisted=True, row_id=queued_row)
        self._queue.append(entry)
        if queued_row is not None:
            # Its row is the caller's, written already: nothing to wait for.
            await self._leave()
            return
        written = self._writer.submit_batch(self._write_queue, entry)
        try:
            await written.wait()
        except Exception:
            # Not persisted means not accepted: take it back unless a turn already took it.
            if entry in self._queue:
                self._queue.remove(entry)
            raise
        # No `_leave`: waiting on the write has yielded (an event's wait always does).

    async def stop(self) -> None:
        """Stop: close the run, clear the queue; the close handler will not drain."""
        await self._enter()
        handle = self._begin_stop()
        if handle is not None:
            await self._finish_stop(handle)
        await self._leave()

    async def restart(self) -> None:
        """Close the run, keeping the phase: the close handler drains into a fresh run."""
        await self._enter()
        handle = self._begin_restart()
        if handle is None:
            _log.info("restart: no open run")
        else:
            await self._close_run(handle)
        await self._leave()

    async def reset_session(self) -> None:
        """`stop` and forget the saved session id, for good: the run it finds gives no id
        back (rule 9)."""
        await self._enter()
        self._forgotten_run = lifecycle_run(self._lifecycle)
        handle = self._begin_stop()
        self._session_id = None
        forgotten = self._writer.submit(self._session_id_store.forget)
        if handle is not None:
            await self._finish_stop(handle)
        await forgotten.wait()
        await self._leave()

    async def answer_permission(self, request_id: str, reply: PermissionReply) -> None:
        """Rule 10: answer the pending request ``request_id``; its run goes on at once.
        Raises `PermissionNotPending` for a request that is not pending."""
        await checkpoint_if_cancelled()
        self._permissions.answer(request_id, reply)
        await cancel_shielded_checkpoint()

    async def _ask_permission(
        self, run_number: int, request: PermissionRequest
    ) -> PermissionReply | None:
        """Rule 10: run ``run_number`` asks ``request`` (its start's ``ask_permission``)
        and waits: the answer, or None if the request ended unanswered (its run
        ended). Cancelled, the run took its ask back."""
        handle = lifecycle_run(self._lifecycle)
        if handle is None or handle.number != run_number or self._closed:
            # A run the session has let go of (a late ask of a closed run): nobody is
            # left to answer. The spec's engine never asks so; a real one may race.
            await checkpoint_if_cancelled()
            return PermissionReply("deny", STOPPED_MESSAGE)
        return await self._permissions.ask(run_number, request, run_closing=self._closing(handle))

    def _closing(self, handle: ChatRun) -> bool:
        """Whether the session is closing the run (its close asked for)."""
        return handle.close_requested or isinstance(self._lifecycle, Stopping)

    def _deny_permissions_of(self, handle: ChatRun) -> None:
        # Rule 10: a run the session closes is denied what it still waits on, first.
        self._permissions.deny_run(handle.number)

    async def interrupt(self) -> None:
        """Interrupt the turn in flight; the run stays open. Failures are logged."""
        await self._enter()
        handle = lifecycle_run(self._lifecycle)
        if handle is None or handle.close_requested:
            _log.info("interrupt: no open run")
        else:
            try:
                await handle.run.interrupt()
            except Exception as error:
                _log.warning("interrupt failed: %r", error)
        await self._leave()

    # --- The state halves of the steps (no await inside) -------------------------

    def _can_accept_send(self) -> bool:
        # Rule 1 (`beebox_spec.chat_session.can_accept_send`), on the lifecycle.
        return accepts_send(self._lifecycle, close_requested=self._close_requested())

    def _begin_send(self, entries: Sequence[_QueuedText], *, drained: bool) -> tuple[bool, _Plan]:
        """Rule 1: take ``entries`` as one turn, or refuse."""
        if not self._can_accept_send():
            return False, None
        handle = lifecycle_run(self._lifecycle)
        if handle is not None:
            self._lifecycle = next_lifecycle(self._lifecycle, Streaming(handle))
            self._turn_text = ""
            self._turn = _Turn(tuple(entries), returns_if_refused=drained)
            return True, _SendTurn(handle, self._turn)
        self._lifecycle = next_lifecycle(self._lifecycle, Starting())
        self._runs_started += 1
        self._first_turn = list(entries)
        self._first_turn_drained = drained
        return True, _StartRun(self._runs_started, self._session_id)

    def _begin_drain(self) -> _Plan:
        """Rule 4: the whole queue as one turn, unless that send would be refused."""
        if not self._queue or not self._can_accept_send():
            return None
        entries, self._queue = self._queue, []
        _accepted, plan = self._begin_send(entries, drained=True)
        return plan

    def _begin_stop(self) -> ChatRun | None:
        """Rule 6: ``stopping``, queue cleared; returns the run to close (None: no-op)."""
        state = self._lifecycle
        if not self.running or not isinstance(state, Ready | Streaming):
            return None
        handle = state.run
        self._lifecycle = next_lifecycle(
            state, Stopping(handle, was_busy=isinstance(state, Streaming))
        )
        self._queue = []
        if self._turn is not None:
            self._turn.returns_if_refused = False
        self._deny_permissions_of(handle)
        handle.close_requested = True
        return handle

    def _begin_restart(self) -> ChatRun | None:
        """Rule 6: mark the open run closing and leave the phase alone."""
        handle = lifecycle_run(self._lifecycle)
        if handle is None or handle.close_requested:
            return None
        self._deny_permissions_of(handle)
        handle.close_requested = True
        return handle

    def _run_opened(self, handle: ChatRun) -> _SendTurn:
        """Rule 2: ``starting → ready → streaming`` with the first turn."""
        ready = next_lifecycle(self._lifecycle, Ready(handle))
        entries = (*self._first_turn, *self._queue)
        self._first_turn, self._first_turn_drained, self._queue = [], False, []
        self._lifecycle = next_lifecycle(ready, Streaming(handle))
        self._turn_text = ""
        self._turn = _Turn(entries)
        return _SendTurn(handle, self._turn)

    def _run_failed_to_open(self, reason: str) -> StartFailed:
        """Rule 2: back to ``idle``; drained texts go back to the head of the queue."""
        self._lifecycle = next_lifecycle(self._lifecycle, IDLE)
        first_turn, drained = self._first_turn, self._first_turn_drained
        self._first_turn, self._first_turn_drained = [], False
        if drained:
            self._queue = [*first_turn, *self._queue]
            return StartFailed(reason, None)
        (caller_text,) = first_turn
        # The caller's text was to be the run's first turn: that turn ends undelivered,
        # and a row the caller wrote for it goes, as the text does.
        self._delete_rows(first_turn)
        self._turn = _Turn((caller_text,), send_done=True)
        self._turn_ended(delivered=False)
        return StartFailed(reason, caller_text.text)

    def _turn_refused(self, plan: _SendTurn) -> ChatRun | None:
        """Rule 8: a drained turn back to the head of the queue; the run to close (None:
        its close is asked for already, or the turn ended before its send raised)."""
        turn, handle = plan.turn, plan.handle
        if self._turn is not turn or lifecycle_run(self._lifecycle) is not handle:
            if turn.ended is False and turn.returns_if_refused:
                self._return_unsent(turn)
            return None
        if turn.returns_if_refused:
            # Never told: the turn that carries these texts next tells their end.
            self._turn = None
            self._queue = [*turn.entries, *self._queue]
        if handle.close_requested:
            return None
        self._deny_permissions_of(handle)
        handle.close_requested = True
        return handle

    def _return_unsent(self, turn: _Turn) -> None:
        """Rule 8 when the run's close came first (a restart between a drain and its
        send): the close handler has drained already, so the turn goes back now, into
        a fresh run's drained first turn, or the queue, drained if nothing will."""
        if isinstance(self._lifecycle, Stopping):
            # A stop of the fresh run cleared the queue these would go back to.
            return
        # Never told, as above.
        turn.ended = None
        if isinstance(self._lifecycle, Starting) and self._first_turn_drained:
            self._first_turn = [*turn.entries, *self._first_turn]
            return
        self._queue = [*turn.entries, *self._queue]
        self._drain_in_a_task()

    def _drain_in_a_task(self) -> None:
        """Rule 4 with no await: the drain's state now, its start or send in a task."""
        plan = self._begin_drain()
        if plan is not None:
            self._task_group.start_soon(self._perform, plan, name="chat drain")

    def _take_session_id(self, handle: ChatRun, message: AdaptedMessage) -> str | None:
        """Rule 7: the id to save when ``message`` carries a new one; rule 9: none from
        the run a reset found."""
        session_id = message.get("session_id")
        if not isinstance(session_id, str) or not session_id or session_id == self._session_id:
            return None
        if handle is self._forgotten_run:
            return None
        self._session_id = session_id
        return session_id

    def _turn_finished(self) -> _Plan:
        """Rule 5, in its order: busy off, done, turn text and features, drain."""
        self._lifecycle = after_turn_result(self._lifecycle)
        self._turn_ended(delivered=True)
        self._events.publish(Done())
        # The next turn's text starts empty, a turn the CLI starts itself too.
        turn_text, self._turn_text = self._turn_text, ""
        if turn_text:
            self._events.publish(TurnText(turn_text))
            self._feature_deltas(turn_text)
        return self._begin_drain()

    def _run_ended(self, handle: ChatRun) -> _Plan:
        """Rule 6's close handler: ``idle``; drain unless this was a deliberate stop."""
        self._require_current(handle, "closed")
        intentional = isinstance(self._lifecycle, Stopping)
        # Rule 10: what the run still asked ends with it, unanswered.
        self._permissions.drop_run(handle.number)
        self._lifecycle = next_lifecycle(self._lifecycle, IDLE)
        self._forgotten_run = None
        # Rule 11: the run's live text goes with it.
        self._live_text = None
        self._turn_ended(delivered=False)
        self._events.publish(Closed(0 if intentional else None))
        if intentional:
            return None
        return self._begin_drain()

    def _require_current(self, handle: ChatRun, what: str) -> None:
        # The session never lets go of a run before its close: anything else is a bug.
        if lifecycle_run(self._lifecycle) is not handle:
            raise InvariantError(f"run {handle.number} {what} while {self._lifecycle.phase}")

    def _turn_ended(self, *, delivered: bool) -> None:
        turn, self._turn = self._turn, None
        if turn is None:
            return
        turn.ended = delivered
        if turn.send_done:
            self._tell_turn_end(turn)

    def _tell_turn_end(self, turn: _Turn) -> None:
        """`_Turn`: tell ``on_turn_end``, behind the deletion of the turn's rows if any."""
        hook, delivered = self._on_turn_end, turn.ended
        if hook is None or delivered is None:
            return
        texts = turn.texts
        if not any(entry.persisted for entry in turn.entries):
            _call_turn_end_hook(hook, texts, delivered)
            return
        # In the queue writes' batch: a tell between two writes must not split them.
        self._writer.submit_batch(self._write_queue, _TurnEndTold(hook, texts, delivered))

    def _feature_deltas(self, turn_text: str) -> None:
        if self._apply_feature_deltas is None:
            return
        try:
            self._apply_feature_deltas(turn_text)
        except Exception as error:
            # A listener's failure must not take the turn's end (and the drain) with it.
            _log.warning("applying feature deltas failed: %r", error)

    # --- The I/O halves ------------------------------------------------------------

    async def _enter(self) -> None:
        # A cancelled caller changes nothing; otherwise the call takes effect before it
        # first yields, so calls take effect in the order they are made (see `_leave`).
        await checkpoint_if_cancelled()
        self._refuse_if_closed()

    def _refuse_if_closed(self) -> None:
        if self._closed:
            raise anyio.ClosedResourceError("the chat session is closed")

    async def _leave(self) -> None:
        # Every call yields at least once, whether or not it did I/O: a call that has
        # not yielded yet ends here. A cancellation arriving now must not pretend the
        # call did not happen.
        await cancel_shielded_checkpoint()

    async def _load(self) -> None:
        self._session_id = await self._session_id_store.load()
        rows = await self._queue_store.load()
        self._queue = [_QueuedText(row.text, persisted=True, row_id=row.row_id) for row in rows]
        if rows:
            _log.info("draining %d queued message(s) left from before", len(rows))
        await self._perform(self._begin_drain())

    async def _perform(self, plan: _Plan) -> None:
        if isinstance(plan, _StartRun):
            self._task_group.start_soon(
                self._start_run, plan.number, plan.resume_session_id, name="chat run start"
            )
        elif isinstance(plan, _SendTurn):
            await self._send_turn(plan)

    async def _send_turn(self, plan: _SendTurn) -> None:
        turn = plan.turn
        try:
            await plan.handle.run.send(plan.text)
        except Exception as error:
            _log.warning("run %d refused a turn: %r", plan.handle.number, error)
            self._close_refusing_run(plan)
        else:
            self._delete_rows(turn.entries)
        self._send_done(turn)

    def _close_refusing_run(self, plan: _SendTurn) -> None:
        # Rule 8. In a task: the pump may be the one sending (a drain after a result),
        # and a run's close ends the stream that pump reads.
        handle = self._turn_refused(plan)
        if handle is not None:
            self._task_group.start_soon(
                self._close_run, handle, name=f"chat run {handle.number} close (turn refused)"
            )

    def _send_done(self, turn: _Turn) -> None:
        turn.send_done = True
        # The turn may have ended (its result read) while its send was returning.
        if turn.ended is not None:
            self._tell_turn_end(turn)

    def _delete_rows(self, entries: Sequence[_QueuedText]) -> None:
        if any(entry.persisted for entry in entries):
            self._writer.submit_batch(self._write_queue, _Delivered(tuple(entries)))

    async def _write_queue(self, changes: Sequence[_QueueChange]) -> None:
        """Consecutive queue writes, in order, as one store write (`StoreWriter.submit_batch`):
        each `_QueuedText` an enqueue to persist, each `_Delivered` a turn whose rows go,
        each `_TurnEndTold` a turn's end to tell once those deletions are written.

        Enqueues, deliveries and turn ends alternate while a chat is busy; as one
        write, a burst of them costs one transaction, not one each behind one
        another. A text enqueued and delivered within the batch is never written:
        the store would end as it is. The rest go in any order: a delivered row was
        written by an earlier batch (or by the caller that queued it), and a new
        row's id is past every id there has been. The ends are told after the
        write, and also when it fails (its error is the writes' to hear; the rows
        then stay, and a restart sends them again).
        """
        delivered_in_order = [
            entry
            for change in changes
            if isinstance(change, _Delivered)
            for entry in change.entries
        ]
        delivered = set(delivered_in_order)
        appended = [
            change
            for change in changes
            if isinstance(change, _QueuedText) and change not in delivered
        ]
        # Read the ids now: an earlier batch has written every one of these rows.
        gone = [entry.row_id for entry in delivered_in_order if entry.row_id is not None]
        try:
            row_ids = await self._queue_store.update(gone, [entry.text for entry in appended])
        finally:
            for change in changes:
                if isinstance(change, _TurnEndTold):
                    _call_turn_end_hook(change.hook, change.texts, change.delivered)
        for entry, row_id in zip(appended, row_ids, strict=True):
            entry.row_id = row_id

    async def _start_run(self, number: int, resume_session_id: str | None) -> None:
        options = StartOptions(
            cwd=self._box_root,
            resume_session_id=resume_session_id,
            model=self._model,
            ask_permission=partial(self._ask_permission, number),
        )
        try:
            run = await self._engine.start(options)
        except Exception as error:
            _log.warning("starting chat run %d failed: %r", number, error)
            self._events.publish(self._run_failed_to_open(str(error) or type(error).__name__))
            return
        handle = ChatRun(number, run)
        first_turn = self._run_opened(handle)
        self._task_group.start_soon(self._pump, handle, name=f"chat run {number} pump")
        await self._send_turn(first_turn)

    async def _pump(self, handle: ChatRun) -> None:
        await pump_chat_run(
            handle.run,
            on_message=partial(self._on_message, handle),
            on_close=partial(self._on_close, handle),
            counters=self.counters,
        )

    def _on_message(self, handle: ChatRun, message: AdaptedMessage) -> Awaitable[None] | None:
        """Rules 5 and 7 for one message; what is left to do is returned (a drain)."""
        self._require_current(handle, "sent a message")
        new_session_id = self._take_session_id(handle, message)
        if new_session_id is not None:
            self._writer.submit(partial(self._session_id_store.save, new_session_id))
            self._events.publish(SessionIdAssigned(new_session_id))
        if message["type"] == "task":
            self._events.publish(Task(message))
            return None
        # Rule 12: the agent began a turn of its own (a background sub-agent finished).
        if isinstance(self._lifecycle, Ready) and starts_a_turn(message):
            self._lifecycle = next_lifecycle(self._lifecycle, Streaming(handle))
        if message["type"] == "stream_event":
            self._partial_message(handle, message)
            return None
        self._turn_text = accumulate_assistant_text(self._turn_text, message)
        self._live_text = live_text_after(self._live_text, message)
        self._events.publish(Message(message))
        if message["type"] != "result":
            return None
        if message["is_error"]:
            _log.warning("the turn ended in an error result (%s)", message["subtype"])
        plan = self._turn_finished()
        # Usually nothing to drain: no coroutine to make and run then (once a turn).
        return None if plan is None else self._perform(plan)

    def _partial_message(self, handle: ChatRun, message: AdaptedMessage) -> None:
        """Rule 11: a stream event moves the live text; a text delta is published."""
        # A run the session asked to close streams no live text.
        if handle.close_requested:
            return
        first = self._live_text is None
        self._live_text = live_text_after(self._live_text, message)
        delta = text_delta(message)
        if delta is not None:
            self._events.publish(TurnDelta(delta, first))

    async def _on_close(self, handle: ChatRun) -> None:
        await self._perform(self._run_ended(handle))

    async def _finish_stop(self, handle: ChatRun) -> None:
        cleared = self._writer.submit(self._queue_store.clear)
        await self._close_run(handle)
        await cleared.wait()

    async def _close_run(self, handle: ChatRun) -> None:
        try:
            await handle.run.close()
        except Exception as error:
            _log.warning("closing run %d failed: %r", handle.number, error)

    async def _release_run(self) -> None:
        """On exit: close the run the session holds, without reacting to its end (its
        asks are denied first, as a stop denies them)."""
        handle = lifecycle_run(self._lifecycle)
        if handle is not None:
            self._permissions.deny_run(handle.number)
            handle.close_requested = True
            await self._close_run(handle)
