"""A box: one folder, its layout on disk, and the one composition root.

`docs/design.md#design-3` (§3, the layout) and `docs/design.md#design-4-embedding`
(§4, embedding: `Box.open(path, engine=…, clock=…)` and async methods on it; the
HTTP adapter is one consumer of that API, not the owner of any rule).

The layout `init_box` makes (idempotent; ``bbx init``)::

    <box>/
      _content/chat/web/                        husk cards
      _config/schedules/chat-review.scheduled-script.card   enabled: false
      _config/settings.yaml                     the box's settings (`beebox_impl.settings`)
      .beebox/box.sqlite3                       the database, with its schema
      .beebox/chat-review/                      the review's span journal lives here
      .beebox/cache/transcript-index/           shelved transcript indexes (a cache)
      .beebox/projects/                         the offline echo engine's transcripts
      .beebox/token                             HTTP bearer token, 0600
      .beebox/.gitignore                        ``*``: none of it belongs in git

Re-running it creates only what is missing: the token is never replaced (a
token file with looser permissions is tightened to 0600), the schedule card
is re-synced to its template except for the box-owned ``enabled``, every other
byte of it kept (`beebox_impl.review.schedule_card`), and the settings file and the
state folder's ``.gitignore``, the boxholder's to edit, are written only when
there is none.

`Box.open` builds everything a running box is, on the caller's event loop
(asyncio or trio): the database, the acceptance record, the whole-box
`ChatSession` (on the given engine — the offline `EchoEngine` by default — wrapped
so a send's photos reach it), the event hub and the chat services, the record of
permission decisions among them. Everything
hangs off the `Box`; there is no module state, and two boxes in one process do
not share anything.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Final

import anyio
import anyio.lowlevel
import anyio.to_thread
import sniffio

from beebox_impl.atomic import sync_folder, write_atomic
from beebox_impl.engine.bounded import (
    DEFAULT_START_TIMEOUT,
    BoundedStartEngine,
    check_start_timeout,
)
from beebox_impl.engine.echo import EchoEngine
from beebox_impl.engine.protocol import Engine
from beebox_impl.errors import BoxClosed, BoxInUse, NotABox, WrongThread
from beebox_impl.layout import state_dir
from beebox_impl.review.lock import LockHeldError, hold_lock_group
from beebox_impl.review.origin import local_origin
from beebox_impl.review.paths import husk_dir, schedule_card_path, state_path
from beebox_impl.review.schedule_card import install_review_schedule_card
from beebox_impl.services.attachments import PhotoEngine
from beebox_impl.services.bootstrap import Bootstrap, ChatBootstrapService, ChatStatus
from beebox_impl.services.box_events import BoxEvent, BoxEventHub, relay_chat_events
from beebox_impl.services.history import (
    ChatHistoryService,
    HistorySlice,
    keep_indexes_current,
)
from beebox_impl.services.husks import keep_husks, stamp_old_husks
from beebox_impl.services.permissions import ChatPermissionService, PermissionRecord
from beebox_impl.services.redelivery import TRANSCRIPT_TAIL, plan_redelivery
from beebox_impl.services.send import (
    BoxLoop,
    ChatSendService,
    LoopRunner,
    Sender,
    SendOutcome,
    SendRequest,
)
from beebox_impl.session.chat import ChatSession
from beebox_impl.session.chat_events import DEFAULT_EVENT_BUFFER, EventSubscription
from beebox_impl.session.clock import SessionClock, SystemClock
from beebox_impl.settings import BoxSettings, install_settings, load_box_settings
from beebox_impl.store.acceptance import AcceptanceStore
from beebox_impl.store.database import (
    BoxDatabase,
    SqliteQueueStore,
    create_database,
    database_path,
)
from beebox_impl.store.permissions import Answerer, PermissionDecision, PermissionDecisionStore
from beebox_impl.store.session_id import SessionIdFile, session_id_path
from beebox_impl.transcript import (
    IndexShelf,
    MediaFound,
    MediaMissing,
    TailSlice,
    TranscriptIndexCache,
)
from beebox_impl.transcript.location import InvalidSessionId, transcript_roots
from beebox_spec.entries import SessionEntry, SessionHistory
from beebox_spec.js_values import to_iso_timestamp
from beebox_spec.media import parse_media_ref
from beebox_spec.permissions import PermissionReply, PermissionRequest
from beebox_spec.transcript import PhotoMode

__all__ = [
    "TOKEN_BYTES",
    "Box",
    "BoxPaths",
    "NotABox",
    "init_box",
    "read_token",
]

_log = logging.getLogger(__name__)

# Random bytes in a new token (their hex is the token: no "-" to start it, which a
# command line would read as an option, and nothing a URL or a header must escape).
TOKEN_BYTES: Final = 32


@dataclass(frozen=True)
class BoxPaths:
    """Where a box keeps each thing (`docs/design.md#design-3`); ``root`` is absolute."""

    root: Path

    @property
    def state_dir(self) -> Path:
        return state_dir(self.root)

    @property
    def database(self) -> Path:
        return database_path(self.root)

    @property
    def token(self) -> Path:
        return self.state_dir / "token"

    @property
    def session_id(self) -> Path:
        return session_id_path(self.root)

    @property
    def review_state_dir(self) -> Path:
        return state_path(self.root).parent

    @property
    def husk_dir(self) -> Path:
        return husk_dir(self.root)

    @property
    def schedule_card(self) -> Path:
        return schedule_card_path(self.root)


def _refuse_on_the_loop(blocking: str, awaitable: str) -> None:
    # A blocking read on the event loop's thread would stall every task of the box.
    try:
        library = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        return
    raise WrongThread(
        f"Box.{blocking} blocks: call it from a thread of your own, or await Box.{awaitable} "
        f"on the {library} loop"
    )


def _write_new_token(path: Path) -> None:
    # O_EXCL: two `bbx init`s racing keep whichever token was written first.
    token = secrets.token_hex(TOKEN_BYTES)
    try:
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    with os.fdopen(handle, "w", encoding="ascii") as out:
        out.write(token + "\n")
        out.flush()
        os.fsync(out.fileno())
    sync_folder(path.parent)


def read_token(paths: BoxPaths) -> str:
    """The box's HTTP token (tightening a token file readable by others to 0600)."""
    again = "delete it and run `bbx init` again"
    status = paths.token.stat()
    # Looked at before the chmod: whatever else sits there is not ours to lock up.
    if not stat.S_ISREG(status.st_mode):
        raise NotABox(f"{paths.token} is not a file; {again}")
    mode = stat.S_IMODE(status.st_mode)
    if mode & 0o077:
        _log.warning("%s was readable by others (%o); setting it to 0600", paths.token, mode)
        paths.token.chmod(0o600)
    try:
        token = paths.token.read_text(encoding="ascii").strip()
    except UnicodeDecodeError:
        raise NotABox(f"{paths.token} is not a token (not ASCII); {again}") from None
    # An empty token would let an empty bearer in.
    if not token:
        raise NotABox(f"{paths.token} is empty; {again}")
    return token


def init_box(path: Path) -> BoxPaths:
    """Create a box's layout (`docs/design.md#design-3`) at ``path``; idempotent (module doc)."""
    paths = BoxPaths(path.expanduser().resolve())
    for folder in (paths.root, paths.state_dir, paths.review_state_dir, paths.husk_dir):
        folder.mkdir(parents=True, exist_ok=True)
    paths.state_dir.chmod(0o700)
    # Only when missing: `Box.open` runs this too, and then opens the database itself.
    if not paths.database.exists():
        create_database(paths.root)
    _write_new_token(paths.token)
    _write_state_gitignore(paths.state_dir)
    install_review_schedule_card(paths.root)
    install_settings(paths.root)
    return paths


# The state folder's `.gitignore`: a box made inside a git checkout (`bbx serve` in
# a clone) must not offer its token, its database or its caches to `git add`.
STATE_GITIGNORE: Final = """\
# Written by `bbx init`. This folder is the box's machine-local state: the HTTP
# token (a secret), the database (the chat's record), caches and the offline
# engine's transcripts. None of it belongs in version control.
*
"""


def _write_state_gitignore(state_dir: Path) -> None:
    path = state_dir / ".gitignore"
    # Only when missing: the boxholder may have edited it.
    if not path.exists():
        write_atomic(path, STATE_GITIGNORE.encode())


# The lock group an open `Box` holds on its folder (`beebox_impl.review.lock`: an
# `flock`, dropped by the kernel with the process however it ends).
BOX_LOCK_GROUP: Final = "box"


@asynccontextmanager
async def _holding_box_lock(root: Path) -> AsyncIterator[None]:
    """Hold the box's lock for the block, or raise `BoxInUse` at once (never wait)."""
    held = contextlib.ExitStack()
    try:
        await anyio.to_thread.run_sync(
            held.enter_context, hold_lock_group(root, BOX_LOCK_GROUP, "an open Box")
        )
    except LockHeldError as error:
        raise BoxInUse(
            f"{root} is open in another Box ({error.holder or 'holder unknown'}): "
            "one box folder is one open Box at a time",
            error.holder,
        ) from None
    try:
        yield
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(held.close)


def _sole_error(group: BaseExceptionGroup[BaseException]) -> Exception | None:
    """The one error a group (of groups) holds, or None when it holds more, or only
    a cancellation (which must travel as it is)."""
    if len(group.exceptions) != 1:
        return None
    (error,) = group.exceptions
    if isinstance(error, BaseExceptionGroup):
        return _sole_error(error)
    return error if isinstance(error, Exception) else None


def is_box(path: Path) -> bool:
    """Does ``path`` hold a box (its token file)?"""
    return BoxPaths(path.expanduser().resolve()).token.is_file()


async def _queue_owed_sends(
    acceptance: AcceptanceStore,
    history: ChatHistoryService,
    session_id_store: SessionIdFile,
    queue: SqliteQueueStore,
    clock: SessionClock,
) -> None:
    """`beebox_impl.services.redelivery`: delivered queue rows retired, owed sends first."""

    async def read_tail(session_id: str) -> list[SessionEntry]:
        try:
            window = await history.history(session_id, TailSlice(tail=TRANSCRIPT_TAIL))
        except InvalidSessionId:
            # A saved id that names no transcript: none of it is delivered there.
            return []
        return window["entries"]

    plan = await plan_redelivery(
        acceptance=acceptance,
        session_id=await session_id_store.load(),
        read_tail=read_tail,
        queued=await queue.load(),
        now=clock.now(),
    )
    if plan.delivered_rows:
        await queue.delete(plan.delivered_rows)
        _log.info(
            "%d queued message(s) were delivered before the box went down", len(plan.delivered_rows)
        )
    await acceptance.unmark_undelivered(plan.unmarked)
    if plan.owed:
        await queue.put_first([send.turn_text for send in plan.owed])
        _log.warning("sending again %d message(s) recorded but never delivered", len(plan.owed))
    # Their turns' results unmark them, as a send's does.
    for send in (*plan.owed, *plan.queued):
        acceptance.deliveries.expect(send.row_id, send.turn_text)


async def _history_service(
    paths: BoxPaths, roots: tuple[Path, ...], photos: PhotoMode
) -> ChatHistoryService:
    """The chat's history over the transcripts under ``roots``, read in photo mode
    ``photos``, its indexes shelved in the box's state folder."""
    shelf = IndexShelf.in_box_state(paths.state_dir)
    # A process killed mid-save left its temporary file: nobody else will.
    await anyio.to_thread.run_sync(shelf.remove_leftovers)
    cache = TranscriptIndexCache(shelf=shelf, photos=photos)
    return ChatHistoryService(paths.root, roots, cache)


@asynccontextmanager
async def _delivery_news_recorded(acceptance: AcceptanceStore) -> AsyncIterator[None]:
    """On exit, after the chat session (entered within) has closed and said how its
    last turns ended: the sends those turns delivered are unmarked, so the next open
    checks against the transcript only what a crash may have cut
    (`beebox_impl.services.redelivery`)."""
    try:
        yield
    finally:
        with anyio.CancelScope(shield=True):
            await acceptance.record_delivery_news()


@asynccontextmanager
async def _background_work(
    session: ChatSession,
    events: BoxEventHub,
    history: ChatHistoryService,
    box_root: Path,
    clock: SessionClock,
) -> AsyncIterator[None]:
    """For as long as the block runs: the husk keeper, the relay of the chat's events
    to ``events``, and the transcript indexer, each on a subscription to ``session``
    taken before this machine's older husks are stamped (so none misses an event).
    On exit they stop, and what the indexer read is shelved."""
    relayed = session.subscribe()
    turns = session.subscribe()
    husk_turns = session.subscribe()
    origin = local_origin(os.environ)
    stamped = await anyio.to_thread.run_sync(
        stamp_old_husks, box_root, origin, history.transcript_path
    )
    if stamped:
        _log.info("stamped this machine's origin on %d older husks", stamped)
    async with anyio.create_task_group() as task_group:
        task_group.start_soon(
            partial(
                keep_husks,
                session,
                husk_turns,
                box_root=box_root,
                origin=origin,
                transcript_path_for=history.transcript_path,
                now=clock.now,
            ),
            name="husk keeper",
        )
        task_group.start_soon(relay_chat_events, session, events, relayed, name="box event relay")
        task_group.start_soon(
            keep_indexes_current,
            session,
            history,
            turns,
            name="transcript indexer",
        )
        try:
            yield
        finally:
            task_group.cancel_scope.cancel()
            # What the indexer read since it last shelved: the next open starts warm.
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(history.cache.shelve_all)


class Box:
    """An open box. Get one with ``async with Box.open(path) as box:``."""

    def __init__(
        self,
        *,
        paths: BoxPaths,
        token: str,
        clock: SessionClock,
        database: BoxDatabase,
        acceptance: AcceptanceStore,
        events: BoxEventHub,
        session: ChatSession,
        history: ChatHistoryService,
        permissions: ChatPermissionService,
        settings: BoxSettings,
        loop: BoxLoop | None = None,
    ) -> None:
        self._closed = False
        self.paths = paths
        self.settings = settings
        self._permission_service = permissions
        self.token = token
        self.clock = clock
        self._database = database
        self._acceptance = acceptance
        self._events = events
        self._session = session
        self._history_service = history
        self._send_service = ChatSendService(
            session=session,
            acceptance=acceptance,
            events=events,
            clock=clock,
            loop=loop,
        )
        self._bootstrap_service = ChatBootstrapService(
            session=session, history=history, acceptance=acceptance, clock=clock
        )

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        path: Path,
        *,
        engine: Engine | None = None,
        clock: SessionClock | None = None,
        projects_root: Path | None = None,
        create: bool = True,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        permission_timeout: timedelta | None = None,
        photos: PhotoMode | None = None,
    ) -> AsyncIterator[Box]:
        """Open the box at ``path`` on the running event loop.

        ``engine`` defaults to the offline `EchoEngine`; ``clock`` to the system
        clock. ``projects_root`` says where transcripts live; by default
        ``BBX_CLAUDE_PROJECTS_DIR`` when set, else both the box's own
        ``.beebox/projects``, where the echo engine writes (never Claude Code's
        folder, where its made-up sessions would show in Claude Code's list), and
        Claude Code's ``$CLAUDE_CONFIG_DIR/projects`` or ``~/.claude/projects``
        (`beebox_impl.transcript.location.transcript_roots`). ``photos`` is the
        history's photo mode (default: the settings file's, itself ``refs``: every
        photo by reference). ``create=False``
        refuses a folder that is not a box yet (`NotABox`) instead of
        running `init_box` on it. A run the engine has not started within
        ``start_timeout`` seconds fails to start (`BoundedStartEngine`). Sends the
        box recorded but never delivered — a turn in flight when it last went
        down — go first in the queue the chat drains as it opens
        (`beebox_impl.services.redelivery`). A permission request nobody answers
        is denied after ``permission_timeout`` (default: the box's settings file,
        `beebox_impl.settings`, whose default is 10 minutes); a settings file beebox
        cannot read fails the open (`InvalidBoxSettings`, saying where). On exit the
        chat session closes (its queue stays on disk for the next open; what its
        run waited on is denied) and the database is closed.
        """
        # Refused before anything is opened or created.
        check_start_timeout(start_timeout)
        if not create and not await anyio.to_thread.run_sync(is_box, path):
            raise NotABox(f"{path} is not a box: run `bbx init {path}`")
        paths = await anyio.to_thread.run_sync(init_box, path)
        # One open Box a folder: two would share its chat, its queue and its record.
        async with _holding_box_lock(paths.root):
            opened = cls._open_locked(
                paths,
                engine=engine,
                clock=clock,
                projects_root=projects_root,
                start_timeout=start_timeout,
                permission_timeout=permission_timeout,
                photos=photos,
            )
            try:
                async with opened as box:
                    yield box
            except BaseExceptionGroup as group:
                # The box's task groups wrap what the block raised; a host's
                # ``except BeeboxError`` around the block must see the error itself.
                sole = _sole_error(group)
                if sole is None:
                    raise
                raise sole from None

    @classmethod
    @asynccontextmanager
    async def _open_locked(
        cls,
        paths: BoxPaths,
        *,
        engine: Engine | None,
        clock: SessionClock | None,
        projects_root: Path | None,
        start_timeout: float,
        permission_timeout: timedelta | None,
        photos: PhotoMode | None,
    ) -> AsyncIterator[Box]:
        # `open`, once the folder is a box and this Box holds its lock.
        token = await anyio.to_thread.run_sync(read_token, paths)
        settings = await anyio.to_thread.run_sync(load_box_settings, paths.root)
        clock = clock if clock is not None else SystemClock()
        roots = (
            (projects_root,)
            if projects_root is not None
            else transcript_roots(paths.root, os.environ, Path.home())
        )
        # The first root is where the echo engine writes: the box's own, or where told.
        engine = engine if engine is not None else EchoEngine(roots[0], clock.now)
        async with await BoxDatabase.open(paths.root) as database:
            acceptance = AcceptanceStore(database)
            events = BoxEventHub()
            history = await _history_service(
                paths, roots, photos if photos is not None else settings.history.photos
            )
            session_id_store = SessionIdFile(paths.session_id)
            # Sends recorded but never delivered go first in the queue the session drains.
            await _queue_owed_sends(
                acceptance, history, session_id_store, database.chat_queue, clock
            )
            async with (
                _delivery_news_recorded(acceptance),
                PermissionRecord.kept(PermissionDecisionStore(database), clock) as record,
                ChatSession.open(
                    engine=PhotoEngine(
                        BoundedStartEngine(engine, start_timeout), acceptance.attachments_of
                    ),
                    box_root=paths.root,
                    queue_store=database.chat_queue,
                    session_id_store=session_id_store,
                    on_turn_end=acceptance.deliveries.turn_ended,
                    clock=clock,
                    permission_timeout=(
                        permission_timeout
                        if permission_timeout is not None
                        else settings.permissions.timeout
                    ),
                    on_permission_event=record.on_event,
                ) as session,
                _background_work(session, events, history, paths.root, clock),
            ):
                box = cls(
                    paths=paths,
                    token=token,
                    clock=clock,
                    database=database,
                    acceptance=acceptance,
                    events=events,
                    session=session,
                    history=history,
                    permissions=ChatPermissionService(session=session, record=record),
                    settings=settings,
                    loop=BoxLoop(anyio.lowlevel.current_token()),
                )
                try:
                    yield box
                finally:
                    # From here every method refuses (`BoxClosed`), before the
                    # chat and the database it would use go.
                    box._closed = True
                    events.close()

    def _check_open(self) -> None:
        # Every method refuses once the `async with Box.open(...)` block has ended.
        if self._closed:
            raise BoxClosed(f"the box at {self.paths.root} is closed")

    @property
    def root(self) -> Path:
        """The box's folder (absolute)."""
        return self.paths.root

    @property
    def session_id(self) -> str | None:
        """The chat's current session id: None until the engine names one, and again
        after a `reset` (the next turn starts a new session)."""
        self._check_open()
        return self._session.session_id

    # --- The chat -----------------------------------------------------------------

    async def send(self, request: SendRequest, sender: Sender | None = None) -> SendOutcome:
        """`chat.send`: record, then hand to the session (`beebox_impl.services.send`)."""
        self._check_open()
        return await self._send_service.send(request, sender)

    def send_from_thread(
        self, request: SendRequest, run_on_loop: LoopRunner, sender: Sender | None = None
    ) -> SendOutcome:
        """`send`, blocking, from any thread but the event loop's (`RuntimeError` there).

        For a host's own worker threads (the HTTP adapter's handlers), with
        ``run_on_loop`` to reach the box's loop (`anyio.from_thread.run` with the
        loop's token, or `BlockingPortal.call`): the record is committed in the
        calling thread, and the loop is crossed once, for the hand-over to the
        session, where `send` from a thread would cross to the loop, on to a database
        thread and back.
        """
        self._check_open()
        _refuse_on_the_loop("send_from_thread", "send")
        return self._send_service.send_from_thread(request, sender, run_on_loop)

    async def history(
        self, session_id: str, window: HistorySlice, *, agent: str | None = None
    ) -> SessionHistory:
        """`chat.history`: a slice of ``session_id``'s transcript, or with ``agent`` of
        that sub-agent's (as `read_history` says, with its errors)."""
        self._check_open()
        return await self._history_service.history(session_id, window, agent=agent)

    def read_history(
        self, session_id: str, window: HistorySlice, *, agent: str | None = None
    ) -> SessionHistory:
        """`history`, blocking, from any thread but the event loop's (`RuntimeError` there).

        For a host's own worker threads (the HTTP adapter's handlers): the read is
        file work and a thread-safe index cache, so it needs no hop through the loop.
        With ``agent``, the slice is of that sub-agent's transcript (the work a Task or
        Agent call of the session started, named by the call's `agentId`): raises
        `InvalidAgentId` for an id that is not one, `SubAgentNotFound` when the
        session has no such sub-agent.
        """
        self._check_open()
        _refuse_on_the_loop("read_history", "history")
        return self._history_service.read_history(session_id, window, agent=agent)

    async def bootstrap(
        self,
        *,
        session: str | None = None,
        window: HistorySlice,
        viewer_email: str | None = None,
    ) -> Bootstrap:
        """`chat.bootstrap`: history and pending side by side."""
        self._check_open()
        return await self._bootstrap_service.bootstrap(
            session=session, window=window, viewer_email=viewer_email
        )

    async def media(self, ref: str) -> MediaFound | MediaMissing:
        """The photo a reference names, in its session's transcript or a sub-agent's (whose
        history names the session); raises `MalformedMediaRef` for a bad one."""
        self._check_open()
        return await self._history_service.media(parse_media_ref(ref))

    def read_media(self, ref: str) -> MediaFound | MediaMissing:
        """`media`, blocking, from any thread but the event loop's (as `read_history`)."""
        self._check_open()
        _refuse_on_the_loop("read_media", "media")
        return self._history_service.read_media(parse_media_ref(ref))

    def status(self) -> ChatStatus:
        """The whole-box chat's state."""
        self._check_open()
        return self._bootstrap_service.status()

    async def stop(self) -> None:
        """Stop the chat's run and clear its queue."""
        self._check_open()
        await self._settle("stop")
        await self._session.stop()

    async def restart(self) -> None:
        """Close the chat's run; its queue drains into a fresh one."""
        self._check_open()
        await self._session.restart()

    async def reset(self) -> None:
        """Stop, and start a new SDK session next time."""
        self._check_open()
        await self._settle("reset")
        await self._session.reset_session()

    async def _settle(self, reason: str) -> None:
        # Recorded first: what the stop drops must not come back after a crash, and a
        # crash right after this line leaves it dropped, as the person asked.
        now = self.clock.now()
        await self._acceptance.record_settled(
            {"reason": reason, "timestamp": to_iso_timestamp(now)}, now=now
        )

    def end_event_streams(self) -> None:
        """End every subscription's stream now (each `async for` over one finishes):
        for a host shutting down whose server waits for its open streams before it
        closes the box. A subscription taken after it is not ended by it."""
        self._check_open()
        self._events.close()

    def subscribe(self, max_buffer: int = DEFAULT_EVENT_BUFFER) -> EventSubscription[BoxEvent]:
        """The box's events (bus and turn events) from now on."""
        self._check_open()
        return self._events.subscribe(max_buffer)

    # --- Permission requests (`beebox_impl.services.permissions`) ---------------------

    def pending_permissions(self) -> list[PermissionRequest]:
        """The chat's pending permission requests, oldest first (each also announced as
        a ``permission-request`` event)."""
        self._check_open()
        return self._permission_service.pending()

    async def answer_permission(
        self, request_id: str, reply: PermissionReply, *, by: Answerer = "host"
    ) -> None:
        """Answer a pending request; the agent goes on at once. Raises
        `PermissionAlreadyEnded` (answered, timed out or stopped already) or
        `PermissionNotFound` (no such request)."""
        self._check_open()
        await self._permission_service.answer(request_id, reply, by=by)

    async def permission_decisions(self, limit: int = 100) -> list[PermissionDecision]:
        """How the last ``limit`` requests ended (who answered, when, the tool and its
        input), newest first."""
        self._check_open()
        return await self._permission_service.decisions(limit)
