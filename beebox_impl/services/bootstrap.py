"""`chat.bootstrap`: what a page that has just loaded needs, both records side by side.

Spec sources: `docs/sources.md#facts-2-3` (§2.3, the output union) and §2.2
(`readAcceptedMessages`: the pending read), `docs/sources.md#history-two-records`
("Two records").

The answer carries the **transcript** (``history``: durable) and the
**acceptance record** (``pending``: owed) separately; nothing here compares
them — the client joins them with `reconcile_pending`. The kinds:

- ``empty`` — no session asked for and the chat has none yet: ``pending`` holds
  the session-less sends (a message that opened a new chat, before the engine
  assigned its id);
- ``unavailable`` — a session with no transcript here
  (``reason: "missing-local-transcript"``);
- ``resumable`` — the session's history slice, and ``pending`` baselined
  against exactly those entries.

The pending read is `beebox_spec.reconcile.read_accepted_messages` over the last
`ACCEPTED_SCAN_LIMIT` ``chat-user-message`` rows, with the box's clock. ``label``
is the husk's editorial title, which this box does not write yet: null.
``status`` is the whole-box chat's state (ours: the original's is not recorded).
``liveText`` (ours) is the text so far of the assistant message the chat is
streaming now (`ChatSession.live_text`; `beebox_spec.sdk_messages`, "Live
text"), so a page opened or reloaded mid-turn shows it; null when none is, and
for a session other than the chat's. It is read last: text that has become a
complete message by then is in ``history``, not here as well.
"""

from __future__ import annotations

from typing import Literal, TypedDict

from beebox_impl.services.history import ChatHistoryService, HistorySlice
from beebox_impl.session.chat import ChatSession
from beebox_impl.session.clock import SessionClock
from beebox_impl.store.acceptance import CHAT_SETTLED, CHAT_USER_MESSAGE, AcceptanceStore
from beebox_spec.entries import PendingMessage, SessionHistory
from beebox_spec.permissions import PermissionRequest
from beebox_spec.reconcile import (
    ACCEPTED_SCAN_LIMIT,
    HistoryMarker,
    accepted_row_from_bus,
    read_accepted_messages,
)

__all__ = ["Bootstrap", "ChatBootstrapService", "ChatStatus"]


class ChatStatus(TypedDict):
    """The whole-box chat's state: phase, busy, running, and how many texts are queued."""

    phase: str
    busy: bool
    running: bool
    queued: int


class Bootstrap(TypedDict):
    """`chat.bootstrap`'s answer (§2.3); ``reason`` and ``huskPath`` only when unavailable."""

    kind: Literal["empty", "unavailable", "resumable"]
    sessionId: str | None
    history: SessionHistory | None
    label: str | None
    status: ChatStatus
    pending: list[PendingMessage]
    # The chat's pending permission requests (`beebox_spec.permissions`), oldest first.
    permissions: list[PermissionRequest]
    # The text so far of the assistant message being streamed now (ours), or None.
    liveText: str | None


class UnavailableBootstrap(Bootstrap):
    reason: Literal["missing-local-transcript", "deletion-in-progress"]
    huskPath: str | None


class ChatBootstrapService:
    """Answers `chat.bootstrap` for the whole-box chat."""

    def __init__(
        self,
        *,
        session: ChatSession,
        history: ChatHistoryService,
        acceptance: AcceptanceStore,
        clock: SessionClock,
    ) -> None:
        self._session = session
        self._history = history
        self._acceptance = acceptance
        self._clock = clock

    def live_text(self, session_id: str | None) -> str | None:
        """The chat's live text, when ``session_id`` is the chat's session."""
        if session_id != self._session.session_id:
            return None
        return self._session.live_text

    def status(self) -> ChatStatus:
        """The chat's state now."""
        return {
            "phase": self._session.phase.value,
            "busy": self._session.busy,
            "running": self._session.running,
            "queued": len(self._session.queue),
        }

    async def pending(
        self, session_id: str | None, viewer_email: str | None, history: list[HistoryMarker]
    ) -> list[PendingMessage]:
        """The sends accepted for ``session_id`` that may still be owed (§2.2)."""
        rows = await self._acceptance.recent_events(CHAT_USER_MESSAGE, ACCEPTED_SCAN_LIMIT)
        settles = await self._acceptance.recent_events(CHAT_SETTLED, 1)
        accepted = [accepted_row_from_bus(row.row_id, row.payload) for row in rows]
        return read_accepted_messages(
            accepted,
            session_id,
            self._clock.now(),
            viewer_email,
            history,
            settled_through=settles[-1].row_id if settles else 0,
        )

    async def bootstrap(
        self, *, session: str | None, window: HistorySlice, viewer_email: str | None = None
    ) -> Bootstrap:
        """The bootstrap of ``session`` (None: the chat's own session, if it has one).

        Raises `InvalidSessionId` for a session id that could not name a transcript.
        """
        session_id = session if session is not None else self._session.session_id
        status = self.status()
        if session_id is None:
            return {
                "kind": "empty",
                "sessionId": None,
                "history": None,
                "label": None,
                "status": status,
                "pending": await self.pending(None, viewer_email, []),
                "permissions": self._session.pending_permissions,
                "liveText": self.live_text(None),
            }
        if not await self._history.has_transcript(session_id):
            unavailable: UnavailableBootstrap = {
                "kind": "unavailable",
                "sessionId": session_id,
                "history": None,
                "label": None,
                "status": status,
                "reason": "missing-local-transcript",
                "huskPath": None,
                "pending": await self.pending(session_id, viewer_email, []),
                "permissions": self._session.pending_permissions,
                "liveText": self.live_text(session_id),
            }
            return unavailable
        history = await self._history.history(session_id, window)
        markers: list[HistoryMarker] = [
            {"uuid": entry["uuid"], "timestamp": entry["timestamp"]} for entry in history["entries"]
        ]
        return {
            "kind": "resumable",
            "sessionId": session_id,
            "history": history,
            "label": None,
            "status": status,
            "pending": await self.pending(session_id, viewer_email, markers),
            "permissions": self._session.pending_permissions,
            "liveText": self.live_text(session_id),
        }
