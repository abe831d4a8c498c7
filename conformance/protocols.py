"""What each public check needs of the thing under test (`conformance.checks`).

Every ``check_*`` takes a factory; these protocols say what the factory returns.
The pure rules are named and typed as `beebox_spec` names and types them, so the
spec module itself is an implementation (``check_reconcile(lambda:
beebox_spec.reconcile)``) and a host's own module or object of the same shape is
another. Parameters are positional-only: a host names its own. Transcript
reading, engines and sessions have no such spec module; their protocols say what
a host's reader, engine or session must offer.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Literal, Protocol, TypedDict

from beebox_impl.engine.protocol import Engine
from beebox_impl.store.protocols import QueueStore, SessionIdStore
from beebox_spec.entries import JsonValue, PendingMessage, SessionContentBlock, SessionEntry
from beebox_spec.media import ExtractResult, LineLookup, MediaEntryRef, MediaRef
from beebox_spec.phases import Phase
from beebox_spec.reconcile import ReconcileResult
from beebox_spec.review.husk import TitleOwner
from beebox_spec.review.journal import JournalBoundary, ResolvedSpan

__all__ = [
    "ChatSessionFactory",
    "ChatSessionUnderTest",
    "ContentTransformer",
    "EngineFactory",
    "LifecycleTable",
    "LineReading",
    "MediaRefCodec",
    "Reconciler",
    "ReviewRules",
    "SpanJournal",
    "ThreadSessionFactory",
    "ThreadSessionUnderTest",
    "TranscriptReader",
]


class MediaRefCodec(Protocol):
    """The photo reference grammar (`beebox_spec.media` is one)."""

    def parse_media_ref_or_none(self, text: str, /) -> MediaRef | None: ...

    def encode_media_ref(self, ref: MediaRef, /) -> str: ...


class ContentTransformer(Protocol):
    """Raw message content as history blocks, minting photo references (`beebox_spec.media`)."""

    def transform_content(
        self, content: JsonValue, media_ref: MediaEntryRef | None, /
    ) -> Sequence[SessionContentBlock]: ...


class LineReading(TypedDict):
    """How a reader classified one line of a transcript file."""

    lineNumber: int
    kind: Literal["parseable", "oversize"]
    mediaStripped: bool


class TranscriptReader(Protocol):
    """Reads transcript files: lines, history entries, a photo's line, a photo's bytes."""

    def read_lines(self, path: Path, /) -> Sequence[LineReading]:
        """Every line of the file, classified, in file order."""
        ...

    def read_entries(self, path: Path, session_id: str, /) -> Sequence[SessionEntry]:
        """The history entries the file holds (at most `MAX_SESSION_ENTRIES`)."""
        ...

    def find_line(self, path: Path, uuid: str, /) -> LineLookup:
        """The line whose own top-level ``uuid`` is ``uuid``."""
        ...

    def extract_media(self, line: bytes, index: int, /) -> ExtractResult:
        """The ``index``-th image of one line (its UTF-8 bytes), decoded."""
        ...


class Reconciler(Protocol):
    """The client-side join of the two records (`beebox_spec.reconcile` is one)."""

    def reconcile_pending(
        self,
        server_messages: Sequence[SessionEntry],
        pending_messages: Sequence[PendingMessage],
        /,
    ) -> ReconcileResult: ...

    def merge_accepted_into_pending(
        self, pending: Sequence[PendingMessage], accepted: Sequence[PendingMessage], /
    ) -> Sequence[PendingMessage]: ...


class SpanJournal(Protocol):
    """The review's span journal rules (`beebox_spec.review.journal` is one)."""

    def prefix_hash(self, entries: Sequence[SessionEntry], end_index: int, /) -> str: ...

    def resolve_span(
        self, entries: Sequence[SessionEntry], applied: JournalBoundary | None, limit: int, /
    ) -> ResolvedSpan: ...


class ReviewRules(Protocol):
    """The review's text rules (`conformance.targets.spec_review.SpecReviewRules` is one)."""

    def elide_middle(self, text: str, max_chars: int, /) -> str: ...

    def resolve_title_owner(
        self,
        stored_owner: TitleOwner,
        stored_hash: str | None,
        live_title: str | None,
        snippet_title: str | None,
        /,
    ) -> TitleOwner: ...

    def has_credential(self, text: str, /) -> bool: ...


class LifecycleTable(Protocol):
    """The legal-transition table and its readings (`beebox_spec.phases` is one)."""

    def is_legal_transition(self, source: Phase, target: Phase, /) -> bool: ...

    def is_running(self, phase: Phase, /) -> bool: ...

    def is_busy(self, phase: Phase, /, *, was_busy: bool) -> bool: ...


class EngineFactory(Protocol):
    """Makes the engine under test for a box folder.

    With ``start_fails`` true, every start of the engine must fail (a host points
    its engine at a missing binary, an unusable folder, …); otherwise starts succeed.
    """

    def __call__(self, box_root: Path, /, *, start_fails: bool) -> Engine: ...


class ChatSessionUnderTest(Protocol):
    """What a scenario reads and calls on a whole-box chat session."""

    @property
    def phase(self) -> str: ...

    @property
    def busy(self) -> bool: ...

    @property
    def running(self) -> bool: ...

    @property
    def queue(self) -> Sequence[str]: ...

    async def send(self, text: str, /) -> bool: ...

    async def enqueue(self, text: str, /) -> None: ...

    async def stop(self) -> None: ...

    async def restart(self) -> None: ...

    async def reset_session(self) -> None: ...


class ChatSessionFactory(Protocol):
    """Opens a chat session on the given engine and stores (`ChatSession.open` is one)."""

    def __call__(
        self,
        *,
        engine: Engine,
        box_root: Path,
        queue_store: QueueStore,
        session_id_store: SessionIdStore,
    ) -> AbstractAsyncContextManager[ChatSessionUnderTest]: ...


class ThreadSessionUnderTest(Protocol):
    """What a scenario reads and calls on a chat thread's session."""

    @property
    def phase(self) -> str: ...

    @property
    def busy(self) -> bool: ...

    @property
    def running(self) -> bool: ...

    async def start_turn(self, text: str, /) -> object: ...

    async def park(self) -> object: ...

    async def stop(self) -> None: ...


class ThreadSessionFactory(Protocol):
    """Opens a thread session on the given engine (`ChatThreadSession.open` is one)."""

    def __call__(
        self, *, engine: Engine, box_root: Path
    ) -> AbstractAsyncContextManager[ThreadSessionUnderTest]: ...
