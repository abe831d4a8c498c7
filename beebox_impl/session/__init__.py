"""The chat sessions on anyio: the whole-box chat and the threads' pool.

- `ChatSession` (`chat`) — the whole-box chat with its persisted mid-turn queue;
  checked against `beebox_spec.chat_session`.
- `ChatThreadSession` (`thread`) and `ChatSessionPool` (`pool`) — one session per
  external chat thread, one active at a time; checked against
  `beebox_spec.thread_pool`.
- `pump_chat_run` (`pump`) — the one loop both read their runs through, with the
  one `beebox_spec.sdk_messages.adapt_sdk_message`.
- `events` — what listeners hear, delivered without waiting on them;
  `clock` — injected time (`SystemClock`, `ManualClock`).
"""

from __future__ import annotations

from beebox_impl.session.chat import QUEUE_SEPARATOR, ChatRun, ChatSession, FeatureDeltaHook
from beebox_impl.session.chat_events import (
    DEFAULT_EVENT_BUFFER,
    ChatEvent,
    ChatResponse,
    Closed,
    Done,
    EventFanout,
    EventSubscription,
    Message,
    PermissionEnded,
    PermissionRequested,
    SessionIdAssigned,
    SessionStarted,
    StartFailed,
    Task,
    ThreadSessionEvent,
    TurnDelta,
    TurnText,
)
from beebox_impl.session.clock import ManualClock, SessionClock, SystemClock
from beebox_impl.session.pool import ChatSessionPool, PoolSendResult, record_after_park
from beebox_impl.session.pump import PumpCounters, pump_chat_run
from beebox_impl.session.thread import (
    ChatThreadSession,
    PendingTurn,
    SessionBusyError,
    ThreadRun,
    TurnSettlement,
)

__all__ = [
    "DEFAULT_EVENT_BUFFER",
    "QUEUE_SEPARATOR",
    "ChatEvent",
    "ChatResponse",
    "ChatRun",
    "ChatSession",
    "ChatSessionPool",
    "ChatThreadSession",
    "Closed",
    "Done",
    "EventFanout",
    "EventSubscription",
    "FeatureDeltaHook",
    "ManualClock",
    "Message",
    "PendingTurn",
    "PermissionEnded",
    "PermissionRequested",
    "PoolSendResult",
    "PumpCounters",
    "SessionBusyError",
    "SessionClock",
    "SessionIdAssigned",
    "SessionStarted",
    "StartFailed",
    "SystemClock",
    "Task",
    "ThreadRun",
    "ThreadSessionEvent",
    "TurnDelta",
    "TurnSettlement",
    "TurnText",
    "pump_chat_run",
    "record_after_park",
]
