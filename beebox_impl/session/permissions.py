"""`PermissionDesk`: a session's pending permission requests, on anyio.

Both sessions keep their runs' asks here (the whole-box chat's rule 10 in
`beebox_spec.chat_session`, the thread session's rule 7 in
`beebox_spec.thread_pool`); every change is one of `beebox_spec.permissions`'
rules, applied to the spec's own value of what is pending, and its effects are
carried out in the spec's order: the answers to the runs, the ends reported
(`PermissionEnded`), a new request announced (`PermissionRequested`) with its
timeout armed on the session's clock. Each report goes to the session's
listeners and, inside the step, to the session's ``on_permission_event`` hook
(a box's record of decisions: it must not miss one, nor see them out of order).

An ask is a coroutine of the run's (its start's ``ask_permission``): it waits
until the request ends and returns the answer, or None if the request ended
unanswered (withdrawn, or its run ended). Cancelled while waiting, it is the
run taking its ask back (`beebox_spec.permissions.withdraw`).

The session decides what the spec's rules need to know and the desk cannot:
whether the asking run is one it is closing (its ask is denied at once), and
when to deny a run's requests (stop, park) or drop them (the run ended).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TypeAlias

import anyio
from anyio.abc import TaskGroup

from beebox_impl.session.chat_events import PermissionEnded, PermissionRequested
from beebox_impl.session.clock import SessionClock
from beebox_spec.permissions import (
    PendingPermission,
    PermissionReply,
    PermissionRequest,
    PermissionStep,
    answer,
    ask,
    deny_run,
    drop_run,
    time_out,
    withdraw,
)

__all__ = ["PermissionDesk", "PermissionEvent"]

_log = logging.getLogger(__name__)

# What a desk tells its session's listeners.
PermissionEvent: TypeAlias = PermissionRequested | PermissionEnded


@dataclass(eq=False)
class _Ask:
    """A run's ask, waiting for its request to end."""

    request: PermissionRequest
    # Set when the request ended: answered (``reply``), or unanswered (None).
    ended: anyio.Event = field(default_factory=anyio.Event)
    reply: PermissionReply | None = None
    # Its timeout's scope, cancelled when the request ends first.
    timer: anyio.CancelScope = field(default_factory=anyio.CancelScope)


class PermissionDesk:
    """A session's pending requests (see the module doc). Call it on the session's loop."""

    def __init__(
        self,
        *,
        task_group: TaskGroup,
        clock: SessionClock,
        timeout: timedelta,
        publish: Callable[[PermissionEvent], None],
        on_event: Callable[[PermissionEvent], None] | None = None,
    ) -> None:
        self._task_group = task_group
        self._clock = clock
        self._timeout = timeout
        self._publish = publish
        self._on_event = on_event
        # The spec's value: the pending requests, in the order asked.
        self._pending: tuple[PendingPermission, ...] = ()
        self._asks: dict[str, _Ask] = {}

    @property
    def pending(self) -> tuple[PendingPermission, ...]:
        """The pending requests (id and asking run), in the order asked."""
        return self._pending

    @property
    def pending_requests(self) -> list[PermissionRequest]:
        """What each pending request shows, in the order asked."""
        return [self._asks[held.id].request for held in self._pending]

    async def ask(
        self, run: int, request: PermissionRequest, *, run_closing: bool
    ) -> PermissionReply | None:
        """Run ``run`` asks ``request``: wait for its end (see the module doc)."""
        waiting = self._asks[request["id"]] = _Ask(request)
        try:
            self._apply(ask(self._pending, run, request, run_closing=run_closing))
            await waiting.ended.wait()
        except BaseException:
            # Cancelled before the request ended: the run took its ask back.
            if not waiting.ended.is_set():
                self._apply(withdraw(self._pending, run, request["id"]))
            raise
        finally:
            self._asks.pop(request["id"], None)
        return waiting.reply

    def answer(self, request_id: str, reply: PermissionReply) -> None:
        """A person's answer; raises `PermissionNotPending` if the request is not."""
        self._apply(answer(self._pending, request_id, reply))

    def deny_run(self, run: int) -> None:
        """The session is closing run ``run``: deny what it waits on, and say so."""
        self._apply(deny_run(self._pending, run))

    def drop_run(self, run: int) -> None:
        """Run ``run`` ended: its pending requests end unanswered."""
        self._apply(drop_run(self._pending, run))

    def _apply(self, changed: PermissionStep) -> None:
        self._pending = changed.pending
        for given in changed.answers:
            self._end_ask(given.request_id, given.reply)
        for end in changed.ended:
            # Ended unanswered (withdrawn, its run ended), the ask returns None.
            self._end_ask(end.id, None)
            self._tell(PermissionEnded(end))
        if changed.announce is not None:
            waiting = self._asks[changed.announce["id"]]
            self._tell(PermissionRequested(changed.announce))
            self._task_group.start_soon(
                self._time_out, waiting, name=f"permission request {changed.announce['id']} timeout"
            )

    def _tell(self, event: PermissionEvent) -> None:
        self._publish(event)
        if self._on_event is not None:
            try:
                self._on_event(event)
            except Exception as error:
                # A host's hook failing must not leave a request half ended.
                _log.warning("a permission event hook failed: %r", error)

    def _end_ask(self, request_id: str, reply: PermissionReply | None) -> None:
        waiting = self._asks.get(request_id)
        if waiting is not None and not waiting.ended.is_set():
            waiting.reply = reply
            waiting.ended.set()
            waiting.timer.cancel()

    async def _time_out(self, waiting: _Ask) -> None:
        # Unanswered after the timeout: denied (the spec's rule 3).
        with waiting.timer:
            await self._clock.sleep(self._timeout.total_seconds())
            self._apply(time_out(self._pending, waiting.request["id"]))
