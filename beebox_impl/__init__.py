"""beebox_impl — the production implementation of beebox, and its public API.

Structured concurrency on anyio (asyncio or trio), files, SQLite, the stdlib HTTP
adapter and the `bbx` command line. It takes its tables, grammar and pure rules
from `beebox_spec` and is proven equal to it by the test suites.

**The contract is the names below** (`__all__`, pinned by
`tests/impl/test_public_api.py`; `docs/embedding.md` says what each does, returns
and raises)::

    from beebox_impl import Box, SendRequest, Attachment, TailSlice, PageSlice

The modules they live in stay importable, but are not the contract: they move as
the implementation does. The names are loaded on first use (PEP 562's module
`__getattr__`), so ``import beebox_impl.cli`` — a `bbx` command that only reads a
transcript — does not import the box, its server and its engines through this
package (issue 38); type checkers read the imports under `TYPE_CHECKING`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from beebox_impl.lazy import lazy_names

if TYPE_CHECKING:
    from beebox_impl.box import Box, BoxPaths, init_box, is_box
    from beebox_impl.engine.claude import ClaudeEngine
    from beebox_impl.engine.echo import EchoEngine
    from beebox_impl.engine.permission_modes import InvalidPermissionMode
    from beebox_impl.engine.protocol import Engine, EngineStartError, StartOptions
    from beebox_impl.errors import (
        BoxClosed,
        BoxInUse,
        BoxStateError,
        NotABox,
        SchemaTooNew,
        WrongThread,
    )
    from beebox_impl.http.server import HttpLimits, RemoteBindRefused, RunningServer, serve_box
    from beebox_impl.review.lock import LockHeldError
    from beebox_impl.services.bootstrap import Bootstrap, ChatStatus
    from beebox_impl.services.box_events import (
        BOX_EVENT_NAMES,
        BoxEvent,
        BoxEventName,
        BoxEventOf,
        ChatTurnData,
        ChatUserMessageData,
        CloseData,
        MessageData,
        NoData,
        PermissionEndedData,
        PermissionRequestData,
        SenderData,
        SessionIdData,
        StartFailedData,
        TurnErrorData,
        TurnTextData,
    )
    from beebox_impl.services.history import HistorySlice
    from beebox_impl.services.permissions import PermissionAlreadyEnded, PermissionNotFound
    from beebox_impl.services.send import (
        Deduplicated,
        InvalidRequest,
        LoopRunner,
        PhotosWaiting,
        Queued,
        Sender,
        SendFailed,
        SendOutcome,
        SendRequest,
        TurnStarted,
    )
    from beebox_impl.session.chat_events import EventSubscription
    from beebox_impl.session.clock import ManualClock, SessionClock, SystemClock
    from beebox_impl.session.pool import ChatSessionPool
    from beebox_impl.settings import BoxSettings, InvalidBoxSettings
    from beebox_impl.store.acceptance import Attachment
    from beebox_impl.store.permissions import Answerer, PermissionDecision
    from beebox_impl.transcript.history import PageSlice, TailSlice
    from beebox_impl.transcript.location import InvalidSessionId
    from beebox_impl.transcript.media import MediaFound, MediaMissing
    from beebox_spec.entries import SessionContentBlock, SessionEntry, SessionHistory
    from beebox_spec.errors import BeeboxError, InvalidArgument, InvariantError, Rejection
    from beebox_spec.media import MalformedMediaRef
    from beebox_spec.permissions import PermissionReply, PermissionRequest
    from beebox_spec.thread_pool import SessionBusyError
    from beebox_spec.transcript import InvalidHistorySlice, PhotoMode

__all__ = [
    "BOX_EVENT_NAMES",
    "Answerer",
    "Attachment",
    "BeeboxError",
    "Bootstrap",
    "Box",
    "BoxClosed",
    "BoxEvent",
    "BoxEventName",
    "BoxEventOf",
    "BoxInUse",
    "BoxPaths",
    "BoxSettings",
    "BoxStateError",
    "ChatSessionPool",
    "ChatStatus",
    "ChatTurnData",
    "ChatUserMessageData",
    "ClaudeEngine",
    "CloseData",
    "Deduplicated",
    "EchoEngine",
    "Engine",
    "EngineStartError",
    "EventSubscription",
    "HistorySlice",
    "HttpLimits",
    "InvalidArgument",
    "InvalidBoxSettings",
    "InvalidHistorySlice",
    "InvalidPermissionMode",
    "InvalidRequest",
    "InvalidSessionId",
    "InvariantError",
    "LockHeldError",
    "LoopRunner",
    "MalformedMediaRef",
    "ManualClock",
    "MediaFound",
    "MediaMissing",
    "MessageData",
    "NoData",
    "NotABox",
    "PageSlice",
    "PermissionAlreadyEnded",
    "PermissionDecision",
    "PermissionEndedData",
    "PermissionNotFound",
    "PermissionReply",
    "PermissionRequest",
    "PermissionRequestData",
    "PhotoMode",
    "PhotosWaiting",
    "Queued",
    "Rejection",
    "RemoteBindRefused",
    "RunningServer",
    "SchemaTooNew",
    "SendFailed",
    "SendOutcome",
    "SendRequest",
    "Sender",
    "SenderData",
    "SessionBusyError",
    "SessionClock",
    "SessionContentBlock",
    "SessionEntry",
    "SessionHistory",
    "SessionIdData",
    "StartFailedData",
    "StartOptions",
    "SystemClock",
    "TailSlice",
    "TurnErrorData",
    "TurnStarted",
    "TurnTextData",
    "WrongThread",
    "init_box",
    "is_box",
    "serve_box",
]

# Where each public name lives: the module `__getattr__` imports on first use.
_HOMES: dict[str, str] = {
    "Box": "beebox_impl.box",
    "BoxPaths": "beebox_impl.box",
    "init_box": "beebox_impl.box",
    "is_box": "beebox_impl.box",
    "ClaudeEngine": "beebox_impl.engine.claude",
    "InvalidPermissionMode": "beebox_impl.engine.permission_modes",
    "EchoEngine": "beebox_impl.engine.echo",
    "Engine": "beebox_impl.engine.protocol",
    "EngineStartError": "beebox_impl.engine.protocol",
    "StartOptions": "beebox_impl.engine.protocol",
    "BoxClosed": "beebox_impl.errors",
    "BoxInUse": "beebox_impl.errors",
    "BoxStateError": "beebox_impl.errors",
    "NotABox": "beebox_impl.errors",
    "SchemaTooNew": "beebox_impl.errors",
    "WrongThread": "beebox_impl.errors",
    "HttpLimits": "beebox_impl.http.server",
    "RemoteBindRefused": "beebox_impl.http.server",
    "RunningServer": "beebox_impl.http.server",
    "serve_box": "beebox_impl.http.server",
    "LockHeldError": "beebox_impl.review.lock",
    "Bootstrap": "beebox_impl.services.bootstrap",
    "ChatStatus": "beebox_impl.services.bootstrap",
    "BOX_EVENT_NAMES": "beebox_impl.services.box_events",
    "BoxEvent": "beebox_impl.services.box_events",
    "BoxEventName": "beebox_impl.services.box_events",
    "BoxEventOf": "beebox_impl.services.box_events",
    "ChatTurnData": "beebox_impl.services.box_events",
    "ChatUserMessageData": "beebox_impl.services.box_events",
    "CloseData": "beebox_impl.services.box_events",
    "MessageData": "beebox_impl.services.box_events",
    "NoData": "beebox_impl.services.box_events",
    "PermissionEndedData": "beebox_impl.services.box_events",
    "PermissionRequestData": "beebox_impl.services.box_events",
    "SenderData": "beebox_impl.services.box_events",
    "SessionIdData": "beebox_impl.services.box_events",
    "StartFailedData": "beebox_impl.services.box_events",
    "TurnErrorData": "beebox_impl.services.box_events",
    "TurnTextData": "beebox_impl.services.box_events",
    "HistorySlice": "beebox_impl.services.history",
    "PermissionAlreadyEnded": "beebox_impl.services.permissions",
    "PermissionNotFound": "beebox_impl.services.permissions",
    "Deduplicated": "beebox_impl.services.send",
    "InvalidRequest": "beebox_impl.services.send",
    "LoopRunner": "beebox_impl.services.send",
    "PhotosWaiting": "beebox_impl.services.send",
    "Queued": "beebox_impl.services.send",
    "SendFailed": "beebox_impl.services.send",
    "SendOutcome": "beebox_impl.services.send",
    "SendRequest": "beebox_impl.services.send",
    "Sender": "beebox_impl.services.send",
    "TurnStarted": "beebox_impl.services.send",
    "ManualClock": "beebox_impl.session.clock",
    "SessionClock": "beebox_impl.session.clock",
    "SystemClock": "beebox_impl.session.clock",
    "EventSubscription": "beebox_impl.session.chat_events",
    "ChatSessionPool": "beebox_impl.session.pool",
    "BoxSettings": "beebox_impl.settings",
    "InvalidBoxSettings": "beebox_impl.settings",
    "Attachment": "beebox_impl.store.acceptance",
    "Answerer": "beebox_impl.store.permissions",
    "PermissionDecision": "beebox_impl.store.permissions",
    "PageSlice": "beebox_impl.transcript.history",
    "TailSlice": "beebox_impl.transcript.history",
    "InvalidSessionId": "beebox_impl.transcript.location",
    "MediaFound": "beebox_impl.transcript.media",
    "MediaMissing": "beebox_impl.transcript.media",
    "SessionContentBlock": "beebox_spec.entries",
    "SessionEntry": "beebox_spec.entries",
    "SessionHistory": "beebox_spec.entries",
    "BeeboxError": "beebox_spec.errors",
    "InvalidArgument": "beebox_spec.errors",
    "InvariantError": "beebox_spec.errors",
    "Rejection": "beebox_spec.errors",
    "MalformedMediaRef": "beebox_spec.media",
    "PermissionReply": "beebox_spec.permissions",
    "PermissionRequest": "beebox_spec.permissions",
    "SessionBusyError": "beebox_spec.thread_pool",
    "InvalidHistorySlice": "beebox_spec.transcript",
    "PhotoMode": "beebox_spec.transcript",
}


__getattr__, __dir__ = lazy_names(__name__, globals(), _HOMES)
