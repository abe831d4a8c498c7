"""Deliberately broken `ChatSession`s: each breaks one rule of `beebox_spec.chat_session`.

Each is a subclass overriding one step half of the real session, so the break is
exactly one rule wide. `tests/mutants/test_mutants_are_caught.py` runs the
ChatSession machine against every one and expects it to fail.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from datetime import timedelta
from typing import Any

from beebox_impl.session.chat import (
    ChatRun,
    ChatSession,
    _Plan,
    _QueuedText,
    _SendTurn,
    _StartRun,
    _Turn,
)
from beebox_impl.session.chat_events import Closed, Done, StartFailed, TurnText
from beebox_spec.lifecycle import (
    IDLE,
    Ready,
    Starting,
    Stopping,
    Streaming,
    after_turn_result,
    lifecycle_run,
    next_lifecycle,
)
from beebox_spec.sdk_messages import AdaptedMessage, assistant_text

__all__ = ["CHAT_MUTANTS"]


class StopDrainsTheQueue(ChatSession):
    """Stop keeps the queue, and the close handler drains it even after a deliberate stop."""

    def _begin_stop(self) -> ChatRun | None:
        queue = list(self._queue)
        handle = super()._begin_stop()
        self._queue = queue
        return handle

    def _run_ended(self, handle: ChatRun) -> _Plan:
        self._require_current(handle, "closed")
        intentional = isinstance(self._lifecycle, Stopping)
        self._lifecycle = next_lifecycle(self._lifecycle, IDLE)
        self._events.publish(Closed(0 if intentional else None))
        return self._begin_drain()


class FirstTurnLeavesTheQueue(ChatSession):
    """What was queued while the run started is not on its first turn (the original's code)."""

    def _run_opened(self, handle: ChatRun) -> _SendTurn:
        ready = next_lifecycle(self._lifecycle, Ready(handle))
        entries = tuple(self._first_turn)
        self._first_turn, self._first_turn_drained = [], False
        self._lifecycle = next_lifecycle(ready, Streaming(handle))
        self._turn_text = ""
        self._turn = _Turn(entries)
        return _SendTurn(handle, self._turn)


class SecondRunInTheCloseWindow(ChatSession):
    """A send in the close window starts a second run instead of being refused."""

    def _begin_send(self, entries: Sequence[_QueuedText], *, drained: bool) -> tuple[bool, _Plan]:
        handle = lifecycle_run(self._lifecycle)
        if handle is not None and handle.close_requested and not self.busy:
            # The bug: a raw phase write, around next_lifecycle, onto a session with a run.
            self._lifecycle = Starting()
            self._runs_started += 1
            self._first_turn = list(entries)
            self._first_turn_drained = drained
            return True, _StartRun(self._runs_started, self._session_id)
        return super()._begin_send(entries, drained=drained)


class BusyFlipsAfterFeatureDeltas(ChatSession):
    """The feature deltas are applied while the session still reads busy."""

    def _turn_finished(self) -> _Plan:
        if self._turn_text:
            self._feature_deltas(self._turn_text)
        self._lifecycle = after_turn_result(self._lifecycle)
        self._events.publish(Done())
        if self._turn_text:
            self._events.publish(TurnText(self._turn_text))
        return self._begin_drain()


class RestartDropsTheQueue(ChatSession):
    """Restart clears the queue, so the close handler has nothing to drain."""

    def _begin_restart(self) -> ChatRun | None:
        handle = super()._begin_restart()
        if handle is not None:
            self._queue = []
        return handle


class FailedDrainDropsItsTexts(ChatSession):
    """A drain whose fresh run fails to start loses the drained texts."""

    def _run_failed_to_open(self, reason: str) -> StartFailed:
        self._first_turn_drained = False
        if len(self._first_turn) != 1:
            self._first_turn = self._first_turn[:1]
        return super()._run_failed_to_open(reason)


class StopKeepsTheRows(ChatSession):
    """Stop clears the queue in memory but not its persisted rows."""

    async def _finish_stop(self, handle: ChatRun) -> None:
        await self._close_run(handle)


class RefusedDrainIsDropped(ChatSession):
    """A drained turn its run refused is closed with the run, not put back in the queue."""

    def _turn_refused(self, plan: _SendTurn) -> ChatRun | None:
        plan.turn.returns_if_refused = False
        return super()._turn_refused(plan)


class RefusingRunLeftOpen(ChatSession):
    """A run that refused a turn is left open, streaming a turn nobody took."""

    def _close_refusing_run(self, plan: _SendTurn) -> None:
        return None


class ResetForgetsForAMoment(ChatSession):
    """A reset forgets the session id, and the run it stopped gives it back."""

    def _take_session_id(self, handle: ChatRun, message: AdaptedMessage) -> str | None:
        self._forgotten_run = None
        return super()._take_session_id(handle, message)


class StopLeavesAsksWaiting(ChatSession):
    """Stop, reset and restart close the run without denying what it waits on: its
    requests end unanswered with the run, the turn left hanging on a missing answer."""

    def _deny_permissions_of(self, handle: ChatRun) -> None:
        return None


class ClosingRunAskIsAnnounced(ChatSession):
    """An ask by a run the session is closing is shown to a person (who cannot
    answer in time) instead of denied at once."""

    def _closing(self, handle: ChatRun) -> bool:
        return False


class ClosingRunStreamsLiveText(ChatSession):
    """A run the session asked to close still streams its text: a stopped turn's
    text goes on growing on the page."""

    def _partial_message(self, handle: ChatRun, message: AdaptedMessage) -> None:
        asked, handle.close_requested = handle.close_requested, False
        try:
            super()._partial_message(handle, message)
        finally:
            handle.close_requested = asked


class LiveTextOutlivesItsRun(ChatSession):
    """A run that dies mid-message leaves its text so far behind, shown as live."""

    def _run_ended(self, handle: ChatRun) -> _Plan:
        live_text = self._live_text
        plan = super()._run_ended(handle)
        self._live_text = live_text
        return plan


class SubAgentTextIsTheTurns(ChatSession):
    """A sub-agent's complete message is read as the main conversation's, as the
    original read it: its text joins the turn's, and it drops the live text."""

    def _on_message(self, handle: ChatRun, message: AdaptedMessage) -> Awaitable[None] | None:
        later = super()._on_message(handle, message)
        if message["type"] == "assistant" and message["parent_tool_use_id"] is not None:
            self._turn_text += assistant_text({**message, "parent_tool_use_id": None})
            self._live_text = None
        return later


class TimedOutAskStaysPending(ChatSession):
    """A request nobody answers waits for ever: its timeout is never reached."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**{**options, "permission_timeout": timedelta(days=36500)})


CHAT_MUTANTS: dict[str, type[ChatSession]] = {
    mutant.__name__: mutant
    for mutant in (
        StopDrainsTheQueue,
        FirstTurnLeavesTheQueue,
        SecondRunInTheCloseWindow,
        BusyFlipsAfterFeatureDeltas,
        RestartDropsTheQueue,
        FailedDrainDropsItsTexts,
        StopKeepsTheRows,
        RefusedDrainIsDropped,
        RefusingRunLeftOpen,
        ResetForgetsForAMoment,
        StopLeavesAsksWaiting,
        ClosingRunAskIsAnnounced,
        ClosingRunStreamsLiveText,
        LiveTextOutlivesItsRun,
        SubAgentTextIsTheTurns,
        TimedOutAskStaysPending,
    )
}
