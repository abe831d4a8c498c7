"""Deliberately broken pools and thread sessions: each breaks one rule of
`beebox_spec.thread_pool` (or of the pool's waiting, which the spec leaves to us).

Thread-session mutants are pooled through a `ChatSessionPool` subclass whose
`session_class` is the mutant. `tests/mutants/test_mutants_are_caught.py` runs the
pool machine against every one and expects it to fail.
"""

from __future__ import annotations

from dataclasses import replace

from beebox_impl.session.pool import ChatSessionPool
from beebox_impl.session.thread import ChatThreadSession, PendingTurn, ThreadRun
from beebox_spec.sdk_messages import AdaptedMessage
from beebox_spec.thread_pool import REMINDER, PoolPlan

__all__ = ["POOL_MUTANTS"]


class ParksWithoutWaiting(ChatSessionPool):
    """Parks the active session at once, cutting off the turn it is in the middle of."""

    async def _wait_for_idle(self, session: ChatThreadSession) -> None:
        return None


class ForgetsTheReminder(ChatSessionPool):
    """Its sessions never append the reminder to a resumed session's turns."""

    class _Session(ChatThreadSession):
        def _begin_turn(self, pending: PendingTurn) -> tuple[ThreadRun | None, int | None]:
            pending.text = pending.text.replace(REMINDER, "")
            if self._first_turn is not None:
                self._first_turn = self._first_turn.replace(REMINDER, "")
            return super()._begin_turn(pending)

    session_class = _Session


class AbandonedStartStillSends(ChatSessionPool):
    """Its sessions, parked or stopped while starting, still send the turn once the run opens."""

    class _Session(ChatThreadSession):
        def _run_opened(self, handle: ThreadRun) -> str | None:
            if self._start_abandoned:
                self._start_abandoned = False
            return super()._run_opened(handle)

    session_class = _Session


class EvictionKeepsTheRecord(ChatSessionPool):
    """Eviction stops the session but leaves the thread's record, so it resumes anyway."""

    def _delete_record(self, thread_ref: str) -> None:
        return None


class FailureKeepsTheRecord(ChatSessionPool):
    """A failed turn leaves the thread's record in place."""

    def _fail(self, thread_ref: str, session: ChatThreadSession) -> None:
        self._let_go_of(session)


class NeverRotates(ChatSessionPool):
    """Resumes a thread's session however many messages it carried, however old it is."""

    def _plan(self, thread_ref: str) -> PoolPlan:
        plan = super()._plan(thread_ref)
        record = self._records.get(thread_ref)
        if plan.rotated and record is not None:
            return replace(plan, resume_session_id=record["sessionId"], rotated=False)
        return plan


class RefusingThreadRunLeftOpen(ChatSessionPool):
    """A thread run that refused a turn is left open, the turn in flight for good."""

    class _Session(ChatThreadSession):
        def _close_refusing_run(self, handle: ThreadRun, error: Exception) -> None:
            return None

    session_class = _Session


class ParkLeavesAsksWaiting(ChatSessionPool):
    """Its sessions park and stop without denying what the run waits on."""

    class _Session(ChatThreadSession):
        def _deny_permissions_of(self, handle: ThreadRun) -> None:
            return None

    session_class = _Session


class SubAgentRepliesReachTheThread(ChatSessionPool):
    """Its sessions read a sub-agent's messages as the main conversation's, as the
    original read them: a sub-agent's ``<chat-response>`` is delivered to the thread."""

    class _Session(ChatThreadSession):
        def _handle_message(self, handle: ThreadRun, message: AdaptedMessage) -> None:
            if message["type"] == "assistant":
                message = {**message, "parent_tool_use_id": None}
            super()._handle_message(handle, message)

    session_class = _Session


POOL_MUTANTS: dict[str, type[ChatSessionPool]] = {
    mutant.__name__: mutant
    for mutant in (
        ParksWithoutWaiting,
        ForgetsTheReminder,
        AbandonedStartStillSends,
        EvictionKeepsTheRecord,
        FailureKeepsTheRecord,
        NeverRotates,
        RefusingThreadRunLeftOpen,
        ParkLeavesAsksWaiting,
        SubAgentRepliesReachTheThread,
    )
}
