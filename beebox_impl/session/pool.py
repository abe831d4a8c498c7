"""`ChatSessionPool`: the chat threads' sessions, one active at a time, on anyio.

Checked by the stateful pool machine in ``tests/stateful/`` against a reference
built from `beebox_spec.thread_pool` (its thread-session `step` for every
session, and the pool's pure decisions `plan_send`, `record_after_success`,
`record_after_failure`, `should_rotate`). Spec sources:
`docs/sources.md#lifecycle-park-evict` ("Park and evict") and
`docs/sources.md#facts-3-4` (§3.4).

The rules
---------

A send on thread *t* (`ChatSessionPool.send`), one at a time (a lock):

1. **Plan** with `plan_send`: another thread's active session is parked first;
   *t*'s record is resumed unless `should_rotate` says it is due a fresh session
   (`MAX_MESSAGES` messages, or `MAX_AGE`).
2. **Park** waits for the active session to go idle (its turn's ``done`` or its
   run's close), at most `BUSY_TIMEOUT` on the injected clock, then parks it: the
   run is closed and the session id is kept in the thread's record, so the thread
   resumes that SDK session later (`record_after_park`).
3. **Busy** — the same thread's session mid-turn — is waited for the same way; if
   it is still busy after the timeout the send fails (`SessionBusyError`).
4. After the waits the send is planned again against the state now, and goes to
   *t*'s active session, or a new one resuming the planned session id.
5. **Settle.** A turn's ``done`` is a success: `record_after_success` bumps the
   record. A turn that failed on its own (its start failed, or its run closed
   under it) stops the session, clears it from active and deletes the record
   (`record_after_failure`). A turn whose session the pool itself let go of
   (parked, evicted or stopped) is reported unsuccessful and changes nothing more.
   Settlements are handled inside the session's step (a callback), so the records
   never depend on which waiting task wakes first.
6. **Close.** An active session whose run ends stops being the active one.
7. **Evict** stops the thread's session (forgetting its id) and deletes its record.
8. **Permission requests** (ours). Only the active session's run can be waiting
   on one (a parked or stopped session's requests were denied as it let go of
   its run): `pending_permissions` lists them, `answer_permission` answers one,
   and `subscribe_permissions` hears every session's ``permission-request`` and
   ``permission-ended`` events. A session waiting on an answer is busy: a send
   on another thread waits for it up to `BUSY_TIMEOUT`, then parks it (rule 2).

Records are kept in memory and written through one `StoreWriter`, in order; `send`
and `evict` return once the writes they caused are stored.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path

import anyio
from anyio.abc import TaskGroup
from anyio.lowlevel import checkpoint_if_cancelled

from beebox_impl.engine.protocol import Engine
from beebox_impl.session.chat_events import DEFAULT_EVENT_BUFFER, EventFanout, EventSubscription
from beebox_impl.session.clock import SessionClock, SystemClock
from beebox_impl.session.permissions import PermissionEvent
from beebox_impl.session.thread import (
    ChatThreadSession,
    PendingTurn,
    ResponseCallback,
    SessionBusyError,
    TurnSettlement,
)
from beebox_impl.session.writer import StoreWriter
from beebox_impl.store.protocols import ThreadRecordStore
from beebox_spec.js_values import to_iso_timestamp
from beebox_spec.permissions import (
    DEFAULT_TIMEOUT,
    PermissionNotPending,
    PermissionReply,
    PermissionRequest,
)
from beebox_spec.thread_pool import (
    BUSY_TIMEOUT,
    PoolPlan,
    ThreadRecord,
    plan_send,
    record_after_failure,
    record_after_success,
)

__all__ = ["ChatSessionPool", "PoolSendResult", "record_after_park"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PoolSendResult:
    """What a pool send came to: the replies delivered, and whether the turn finished.

    ``settlement`` is None when the turn never began (the thread stayed busy).
    """

    responses: tuple[str, ...]
    success: bool
    settlement: TurnSettlement | None


def record_after_park(
    record: ThreadRecord | None, session_id: str | None, now: datetime
) -> ThreadRecord | None:
    """The thread's record after its session was parked holding ``session_id``.

    Park keeps the id for resume (§3.4 "park, persist id"). A record already
    naming it is unchanged; otherwise (a new or rotated session parked before its
    first turn finished) a record of that session with no finished message yet
    replaces it. Not in `beebox_spec.thread_pool`: the spec states only that park
    keeps the id.
    """
    if session_id is None:
        return record
    if record is not None and record["sessionId"] == session_id:
        return record
    stamp = to_iso_timestamp(now)
    return ThreadRecord(sessionId=session_id, createdAt=stamp, lastUsedAt=stamp, messageCount=0)


class ChatSessionPool:
    """The threads' sessions (see the module doc). Open it with `ChatSessionPool.open`."""

    # The class of the sessions it makes (a subclass can pool a variant).
    session_class: type[ChatThreadSession] = ChatThreadSession

    def __init__(
        self,
        *,
        engine: Engine,
        box_root: Path,
        records: ThreadRecordStore,
        clock: SessionClock,
        task_group: TaskGroup,
        view_base_url: str | None = None,
        thread_prompt: str | None = None,
        model: str | None = None,
        permission_timeout: timedelta = DEFAULT_TIMEOUT,
    ) -> None:
        self._engine = engine
        self._box_root = box_root
        self._store = records
        self._clock = clock
        self._task_group = task_group
        self._view_base_url = view_base_url
        self._thread_prompt = thread_prompt
        self._model = model
        self._permission_timeout = permission_timeout
        self._permission_events = EventFanout[PermissionEvent]()
        self._records: dict[str, ThreadRecord] = {}
        self._active: ChatThreadSession | None = None
        self._active_thread: str | None = None
        # Sessions the pool parked, evicted or stopped: their turns' endings are not failures.
        self._let_go: weakref.WeakSet[ChatThreadSession] = weakref.WeakSet()
        self._lock = anyio.Lock()
        self._writer = StoreWriter("chat session pool")

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        *,
        engine: Engine,
        box_root: Path,
        records: ThreadRecordStore,
        clock: SessionClock | None = None,
        view_base_url: str | None = None,
        thread_prompt: str | None = None,
        model: str | None = None,
        permission_timeout: timedelta = DEFAULT_TIMEOUT,
    ) -> AsyncIterator[ChatSessionPool]:
        """The pool of a box, its records loaded; on exit the active run is closed."""
        pool: ChatSessionPool | None = None
        try:
            async with anyio.create_task_group() as task_group:
                pool = cls(
                    engine=engine,
                    box_root=box_root,
                    records=records,
                    clock=clock if clock is not None else SystemClock(),
                    task_group=task_group,
                    view_base_url=view_base_url,
                    thread_prompt=thread_prompt,
                    model=model,
                    permission_timeout=permission_timeout,
                )
                task_group.start_soon(pool._writer.run, name="chat session pool store writer")
                try:
                    pool._records = await records.load_all()
                    yield pool
                finally:
                    with anyio.CancelScope(shield=True):
                        await pool._writer.flush()
                    task_group.cancel_scope.cancel()
        finally:
            if pool is not None:
                if pool._active is not None:
                    with anyio.CancelScope(shield=True):
                        await pool._active.release()
                pool._permission_events.close()

    # --- Readings ------------------------------------------------------------------

    @property
    def active_thread(self) -> str | None:
        """The thread whose session is active, if any."""
        return self._active_thread

    @property
    def active_session(self) -> ChatThreadSession | None:
        return self._active

    @property
    def records(self) -> dict[str, ThreadRecord]:
        """Every thread's record (a copy)."""
        return dict(self._records)

    @property
    def pending_permissions(self) -> list[PermissionRequest]:
        """The active session's pending permission requests, in the order asked."""
        return [] if self._active is None else self._active.pending_permissions

    def subscribe_permissions(
        self, max_buffer: int = DEFAULT_EVENT_BUFFER
    ) -> EventSubscription[PermissionEvent]:
        """Hear every session's permission requests and their ends from now on."""
        return self._permission_events.subscribe(max_buffer)

    # --- Operations ------------------------------------------------------------------

    async def answer_permission(self, request_id: str, reply: PermissionReply) -> None:
        """Answer the pending request ``request_id`` (rule 8); raises
        `PermissionNotPending` if no session of the pool is waiting on it."""
        session = self._active
        if session is None or all(held["id"] != request_id for held in session.pending_permissions):
            await checkpoint_if_cancelled()
            raise PermissionNotPending(f"no pending permission request {request_id!r}")
        await session.answer_permission(request_id, reply)

    async def send(
        self, thread_ref: str, text: str, *, on_response: ResponseCallback | None = None
    ) -> PoolSendResult:
        """Send ``text`` on ``thread_ref`` and wait for the turn (see the module doc)."""
        await checkpoint_if_cancelled()
        async with self._lock:
            turn = await self._begin(thread_ref, text, on_response)
        if turn is None:
            await self._writer.flush()
            return PoolSendResult((), False, None)
        settlement = await turn.wait()
        # The record this turn changed is stored before the send reports back.
        await self._writer.flush()
        return PoolSendResult(tuple(turn.responses), settlement.outcome == "done", settlement)

    async def evict(self, thread_ref: str) -> None:
        """Registry eviction: stop the thread's session and delete its record."""
        await checkpoint_if_cancelled()
        async with self._lock:
            session = self._active if self._active_thread == thread_ref else None
            if session is not None:
                self._let_go_of(session)
            self._delete_record(thread_ref)
            if session is not None:
                await session.stop()
            await self._writer.flush()

    # --- Steps ---------------------------------------------------------------------

    async def _begin(
        self, thread_ref: str, text: str, on_response: ResponseCallback | None
    ) -> PendingTurn | None:
        """Rules 1–4, under the lock: the turn begun, or None when the thread stayed busy."""
        plan = self._plan(thread_ref)
        if plan.park_thread is not None:
            await self._park_active()
        elif self._active is not None and self._active.busy:
            await self._wait_for_idle(self._active)
        # The waits may have changed everything: plan against the state now.
        plan = self._plan(thread_ref)
        session = self._active if self._active_thread == thread_ref else None
        if session is None:
            session = self.session_class(
                engine=self._engine,
                box_root=self._box_root,
                task_group=self._task_group,
                session_id=plan.resume_session_id,
                view_base_url=self._view_base_url,
                system_prompt=self._thread_prompt,
                model=self._model,
                on_run_closed=self._session_closed,
                clock=self._clock,
                permission_timeout=self._permission_timeout,
                on_permission_event=self._permission_events.publish,
            )
            self._active, self._active_thread = session, thread_ref
        try:
            return await session.start_turn(
                text,
                on_response=on_response,
                on_settled=partial(self._turn_settled, thread_ref, session),
            )
        except SessionBusyError:
            _log.warning(
                "thread %s stayed busy for %s; stopping its session", thread_ref, BUSY_TIMEOUT
            )
            self._fail(thread_ref, session)
            await session.stop()
            return None

    def _plan(self, thread_ref: str) -> PoolPlan:
        """Rule 1: the spec's `plan_send` over the pool's state now."""
        return plan_send(self._active_thread, self._records, thread_ref, self._clock.now())

    async def _park_active(self) -> None:
        session, thread_ref = self._active, self._active_thread
        assert session is not None
        assert thread_ref is not None
        await self._wait_for_idle(session)
        # While we waited its run may have ended, or its turn failed: nothing left to park.
        if self._active is not session:
            return
        parked = record_after_park(
            self._records.get(thread_ref), session.session_id, self._clock.now()
        )
        if parked is not None and parked is not self._records.get(thread_ref):
            self._save_record(thread_ref, parked)
        self._let_go_of(session)
        await session.park()

    async def _wait_for_idle(self, session: ChatThreadSession) -> None:
        """Until ``session`` is idle, or `BUSY_TIMEOUT` has passed on the clock."""
        if not session.busy:
            return
        async with anyio.create_task_group() as waiting:

            async def time_out() -> None:
                await self._clock.sleep(BUSY_TIMEOUT.total_seconds())
                _log.warning("a thread session stayed busy for %s", BUSY_TIMEOUT)
                waiting.cancel_scope.cancel()

            waiting.start_soon(time_out)
            await session.wait_idle()
            waiting.cancel_scope.cancel()

    def _turn_settled(
        self, thread_ref: str, session: ChatThreadSession, settlement: TurnSettlement
    ) -> None:
        """Rule 5, inside the session's step."""
        if settlement.outcome == "done":
            session_id = session.session_id
            # A turn that finished without the SDK naming its session leaves nothing to resume.
            if session_id is None:
                return
            record = record_after_success(
                self._records.get(thread_ref), session_id, self._clock.now()
            )
            self._save_record(thread_ref, record)
            return
        if session in self._let_go:
            return
        self._fail(thread_ref, session)
        self._task_group.start_soon(session.stop, name="stop a failed thread session")

    def _fail(self, thread_ref: str, session: ChatThreadSession) -> None:
        self._let_go_of(session)
        self._records = record_after_failure(self._records, thread_ref)
        self._writer.submit(partial(self._store.delete, thread_ref))

    def _session_closed(self, session: ChatThreadSession) -> None:
        # Rule 6: a session whose run ended is no longer the active one.
        if self._active is session:
            self._active, self._active_thread = None, None

    def _let_go_of(self, session: ChatThreadSession) -> None:
        self._let_go.add(session)
        if self._active is session:
            self._active, self._active_thread = None, None

    def _save_record(self, thread_ref: str, record: ThreadRecord) -> None:
        self._records[thread_ref] = record
        self._writer.submit(partial(self._store.save, thread_ref, record))

    def _delete_record(self, thread_ref: str) -> None:
        self._records.pop(thread_ref, None)
        self._writer.submit(partial(self._store.delete, thread_ref))
