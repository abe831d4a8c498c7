"""The chat's application services: what a send, a history read and a bootstrap do.

Each is a small class over the box's parts, called on the box's event loop; the
HTTP adapter, the CLI and embedding hosts all reach them through `beebox_impl.box.Box`.

- `send` — record the message (`beebox_impl.store.acceptance`), then hand it to
  the chat session; the strict request body;
- `history` — history slices and photos from the box's transcripts;
- `bootstrap` — history and the pending read (`beebox_spec.reconcile`) side by side;
- `events` — the box's one ordered stream of bus and turn events;
- `attachments` — how a send's photos travel with its turn to the engine;
- `redelivery` — the sends a box owes when it opens (recorded, never delivered).
"""

from __future__ import annotations

from beebox_impl.services.bootstrap import Bootstrap, ChatBootstrapService, ChatStatus
from beebox_impl.services.box_events import BoxEvent, BoxEventHub
from beebox_impl.services.history import DEFAULT_HISTORY_TAIL, ChatHistoryService, HistorySlice
from beebox_impl.services.send import (
    ChatSendService,
    Deduplicated,
    InvalidRequest,
    PhotosWaiting,
    Queued,
    Sender,
    SendFailed,
    SendOutcome,
    SendRequest,
    TurnStarted,
    parse_send_body,
)

__all__ = [
    "DEFAULT_HISTORY_TAIL",
    "Bootstrap",
    "BoxEvent",
    "BoxEventHub",
    "ChatBootstrapService",
    "ChatHistoryService",
    "ChatSendService",
    "ChatStatus",
    "Deduplicated",
    "HistorySlice",
    "InvalidRequest",
    "PhotosWaiting",
    "Queued",
    "SendFailed",
    "SendOutcome",
    "SendRequest",
    "Sender",
    "TurnStarted",
    "parse_send_body",
]
