"""`chat.history` and the media route's read: transcripts of the box, read off the loop.

Spec sources: `docs/sources.md#facts-2-4` (§2.4, history shapes: tail or page,
``total``; a session with no readable log reads as empty) and §1.7 (one photo by reference,
read only from the box's own transcripts).

The reading itself is `beebox_impl.transcript` (proven equal to the spec); this
service finds the file under the box's projects roots
(`beebox_impl.transcript.location.locate_transcript`, which refuses an id that is
not the reference grammar's), in the worker thread, and runs the blocking read in a
worker thread (or, through `read_history` / `read_media`, in the caller's own thread
when it is already a worker: the HTTP adapter's handler threads read without a hop
through the event loop), and keeps one `TranscriptIndexCache` for the box so a
second read of a long transcript costs what its slice costs. With the box's
`IndexShelf` behind the cache, and `keep_indexes_current` bringing the chat's index
up to date after the turns end (reading only the bytes they appended), even the
first read after a restart, or of a chat nobody has opened since it grew, costs what
its slice costs: only a transcript the box has never seen is read whole.

A sub-agent's history (``agent``: the work a Task or Agent call started, which
Claude Code 2.x writes to a transcript of its own beside the session's) is read the
same way, from the file `locate_sub_agent_transcript` finds; a session with no
such sub-agent is `SubAgentNotFound`, not an empty history: the page asks for one
only because a call named it.
"""

from __future__ import annotations

import logging
import os
import threading
from functools import partial
from pathlib import Path
from typing import ClassVar, Final

import anyio
import anyio.to_thread

from beebox_impl.session.chat import ChatSession
from beebox_impl.session.chat_events import (
    ChatEvent,
    Done,
    EventSubscription,
    follow_event_batches,
)
from beebox_impl.transcript import (
    MediaFound,
    MediaMissing,
    PageSlice,
    TailSlice,
    TranscriptIndexCache,
    fetch_session_media,
    read_history,
)
from beebox_impl.transcript.lines import open_transcript
from beebox_impl.transcript.location import (
    InvalidSessionId,
    encode_project_dir,
    locate_sub_agent_transcript,
    locate_transcript_named,
)
from beebox_spec.entries import SessionHistory
from beebox_spec.errors import InvalidArgument, Rejection
from beebox_spec.media import MediaRef

__all__ = [
    "DEFAULT_HISTORY_TAIL",
    "INDEX_PASS_INTERVAL",
    "MAX_CONCURRENT_READS",
    "ChatHistoryService",
    "HistorySlice",
    "SubAgentNotFound",
    "index_current",
    "keep_indexes_current",
]

_log = logging.getLogger(__name__)

# After a turn's indexing pass, the next waits at least this long (seconds): turns
# ending meanwhile share it (`keep_indexes_current`).
INDEX_PASS_INTERVAL: Final = 0.05

# What a history request without a slice reads (the CLI's default too).
DEFAULT_HISTORY_TAIL = 50

HistorySlice = TailSlice | PageSlice


class SubAgentNotFound(Rejection):
    """The session has no transcript for the sub-agent asked for."""

    status_hint: ClassVar[int] = 404

    @property
    def public_message(self) -> str:
        return "No such sub-agent"


# How many transcript reads (history slices, photos, index passes) run at once.
# Each holds its buffers (a photo's line pieces and decoded bytes, up to megabytes)
# while it runs; more than a few at once buy no speed on a GIL-bound interpreter,
# only a higher high-water mark of memory when many clients ask together.
MAX_CONCURRENT_READS: Final = 4


class ChatHistoryService:
    """History slices and photos of one box's transcripts.

    At most `max_concurrent_reads` of its reads run at once, whichever thread asks
    (the HTTP adapter's handler threads, or worker threads for the async methods);
    the others wait their turn. The async methods first wait on the loop for one of
    as many worker threads, so a burst of them never fills the loop's shared pool
    of worker threads with threads that only wait.
    """

    def __init__(
        self,
        box_root: Path,
        projects_roots: tuple[Path, ...],
        cache: TranscriptIndexCache | None = None,
        *,
        max_concurrent_reads: int = MAX_CONCURRENT_READS,
    ) -> None:
        if max_concurrent_reads < 1:
            raise InvalidArgument("max_concurrent_reads must be at least 1")
        if not projects_roots:
            raise InvalidArgument("a box's transcripts need at least one projects root")
        self._box_root = box_root
        self._projects_roots = projects_roots
        self._encoded_box: str | None = None
        self.cache = cache if cache is not None else TranscriptIndexCache()
        self._max_concurrent_reads = max_concurrent_reads
        self._reading = threading.BoundedSemaphore(max_concurrent_reads)
        # The async methods' own bound, on the loop: their waiting happens there
        # (cancellable, and not holding a thread of the loop's shared worker pool).
        self._loop_readers: anyio.CapacityLimiter | None = None

    def _loop_limiter(self) -> anyio.CapacityLimiter:
        # Made on first use: a limiter belongs to the running loop.
        if self._loop_readers is None:
            self._loop_readers = anyio.CapacityLimiter(self._max_concurrent_reads)
        return self._loop_readers

    def transcript_path(self, session_id: str) -> Path:
        """Where ``session_id``'s transcript is; raises `InvalidSessionId` for a bad id.

        Blocking (it may look at the files): call it off the loop.
        """
        # The box's folder is resolved (symlinks, NFC) once: it is a path walk, and
        # every read and every indexing pass asks.
        if self._encoded_box is None:
            self._encoded_box = encode_project_dir(self._box_root)
        return locate_transcript_named(self._encoded_box, session_id, self._projects_roots)

    def read_history(
        self, session_id: str, window: HistorySlice, *, agent: str | None = None
    ) -> SessionHistory:
        """`history`, blocking: for a caller already in a worker thread."""
        path = self.transcript_path(session_id)
        if agent is not None:
            found = locate_sub_agent_transcript(path, agent)
            if found is None:
                raise SubAgentNotFound(f"session {session_id!r} has no sub-agent {agent!r}")
            path = found
        with self._reading:
            return read_history(path, session_id, window, cache=self.cache)

    async def history(
        self, session_id: str, window: HistorySlice, *, agent: str | None = None
    ) -> SessionHistory:
        """The slice of ``session_id``'s history (empty when it has no readable
        transcript), or of its sub-agent ``agent``'s (`SubAgentNotFound` when it has
        none: `InvalidAgentId` for an id that is not one)."""
        return await anyio.to_thread.run_sync(
            partial(self.read_history, session_id, window, agent=agent),
            limiter=self._loop_limiter(),
        )

    async def has_transcript(self, session_id: str) -> bool:
        """Is there a transcript file for ``session_id``?"""

        def exists() -> bool:
            return os.path.isfile(self.transcript_path(session_id))

        return await anyio.to_thread.run_sync(exists)

    async def index_transcript(self, session_id: str) -> None:
        """Bring ``session_id``'s index up to date (and shelve it), reading what is new."""

        def index() -> None:
            with self._reading:
                index_current(self.transcript_path(session_id), self.cache)

        await anyio.to_thread.run_sync(index, limiter=self._loop_limiter())

    def read_media(self, ref: MediaRef) -> MediaFound | MediaMissing:
        """`media`, blocking: for a caller already in a worker thread."""
        path = self.transcript_path(ref["sessionId"])
        with self._reading:
            # Its sub-agents' photos too: their history is read under its id.
            return fetch_session_media(path, ref, cache=self.cache)

    async def media(self, ref: MediaRef) -> MediaFound | MediaMissing:
        """The photo ``ref`` names, or why there is none."""
        return await anyio.to_thread.run_sync(self.read_media, ref, limiter=self._loop_limiter())


def index_current(path: Path, cache: TranscriptIndexCache) -> None:
    """Build or extend the index of the transcript at ``path``, if there is one."""
    try:
        file = open_transcript(path)
    except OSError:
        return
    if file is None:
        return
    with file:
        cache.index_for(path, file)


async def keep_indexes_current(
    session: ChatSession,
    history: ChatHistoryService,
    events: EventSubscription[ChatEvent],
    *,
    pass_interval: float = INDEX_PASS_INTERVAL,
) -> None:
    """Index the chat's transcript at start, then what each turn appends to it.

    ``events`` is a subscription taken before this task started. At start, the
    chat the page opens is indexed before anyone asks for it: a box opened over a
    transcript no box has indexed (the shelf gone, the box new to an old chat)
    makes its one pass over every line here, not in the first history request. A
    turn's end is when its lines are on disk (the engine writes them before its
    ``result``); indexing then costs the turn's bytes, and the next history read,
    in this process or (through the shelf) the next one, finds the index current.

    A pass runs as soon as a turn ends, then none for ``pass_interval`` seconds:
    the turns that end meanwhile share the next pass. A chat of a person's pace is
    indexed after every turn; a burst of sends (each pass costs a worker-thread
    trip and a file read, about as much as the rest of the turn) pays for a few
    passes a second, not one a turn. A read in between is never stale: it extends
    the index itself.
    """

    async def index_current_chat() -> None:
        session_id = session.session_id
        if session_id is None:
            return
        try:
            await history.index_transcript(session_id)
        except InvalidSessionId:
            _log.debug("not indexing session %r: not a transcript id", session_id)

    missed = False

    def note_missed() -> None:
        nonlocal missed
        missed = True

    async def index_after_turns(batch: list[ChatEvent]) -> None:
        nonlocal missed
        if missed or any(isinstance(event, Done) for event in batch):
            missed = False
            await index_current_chat()
            await anyio.sleep(pass_interval)

    await index_current_chat()
    # Fallen a whole buffer behind, it subscribes again: its next pass (or the next
    # read) reads what was missed.
    await follow_event_batches(
        session.subscribe, events, index_after_turns, on_overflow=note_missed
    )
