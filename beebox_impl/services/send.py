"""`chat.send`: record a message, then hand it to the chat session.

Spec sources: `docs/sources.md#history-two-records` ("Two records of a message":
*being recorded is being accepted*) and `docs/sources.md#facts-2-1` (§2.1,
`POST /api/chat/send`).

The flow of `ChatSendService.send`, top to bottom:

1. **Dedup in flight.** A request whose ``messageId`` another request of this box
   is still handling waits for that request and answers with *its* outcome,
   whether either runs on the loop (`ChatSendService.send`) or in a host's thread
   (`ChatSendService.send_from_thread`).
2. **Attribution.** The sender, when there is one, is named in the message's
   opening tag (`beebox_spec.attribution.inject_user_attr`).
3. **Record.** The ``chat-user-message`` bus row, the photos and the id's claim
   are committed in one transaction (`AcceptanceStore.record_user_message`); an
   id already claimed answers `Deduplicated` and changes nothing. The bus event is
   published once the row is on disk. From a host's thread a send without photos
   is committed in that thread, and the loop is crossed once, for the hand-over.
4. **Hand over**, in one step (`ChatSession.send_or_enqueue`): a session that
   takes the turn starts it, its run in the background if it has none (answer
   `TurnStarted` with a fresh ``turnId``, also published as ``chat-turn``); one
   that refuses it (busy, or in the close window) queues the text (answer
   `Queued`), with no await between refusal and queueing for a turn to end in.
   From a host's thread, a send the session says belongs in the queue
   (`ChatSession.queues_sends`: it is busy, or texts already wait) has its
   queue row written by the record's own
   transaction (rule 6 of `beebox_impl.store.acceptance`), and is answered
   `Queued` as soon as that commits: its hand-over is started on the loop and
   not waited for (as the original answers from its own busy check, with no
   hop). One commit and no wait for the loop before the answer; the text is in
   the persisted queue whatever happens to the hand-over. On the loop the text
   is queued, then the queue drains if the session can take a send
   (`ChatSession.enqueue_then_drain`): should the turn have ended meanwhile, the
   text rides a drained turn at once, behind what was queued before it.
   At most `MAX_UNAWAITED_HAND_OVERS` such hand-overs wait for the loop; past
   that a thread waits for its own, so a loop that falls behind holds the
   threads back instead of gathering work. If
   the open run fails the send (it is dying), the text is queued for the fresh
   run its close starts: a recorded message is never dropped.

5. **Photos wait within a bound** (ours). A drain joins every queued send into
   one turn, photos and all; past `MAX_WAITING_PHOTO_BYTES` of photos that
   turn's transcript line would be too large for any of them to be fetched back.
   So a send with photos is refused before it is recorded (`PhotosWaiting`, HTTP
   429 with ``Retry-After``) when photos already wait for the next turn (the
   session's `waiting_texts`, and sends admitted but not yet handed over) and its
   own would take them past the bound. A send alone is never refused for its size
   (its photos are the turn's only ones, as in the original); the client sends
   it again, with the same ``messageId``, once the turn in flight has ended.

Any failure after the record answers `SendFailed` (HTTP 500) to this request
and to every request waiting on its id; the claim stays, so a retry with the
same id answers ``{deduplicated: true}`` — the message is in the record.

The request body (`parse_send_body`) is strict: ``message`` (a string),
``messageId`` (optional, 1–200 characters) and ``images`` (optional list of
``{"mediaType", "data"}``, ``data`` base64, ``mediaType`` one the media route can
serve); any other field is refused by name.
"""

from __future__ import annotations

import base64
import binascii
import logging
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Protocol, TypeAlias, TypeVar, cast

import anyio
import anyio.lowlevel

from beebox_impl.ids import new_uuid4
from beebox_impl.services.attachments import handed_text, split_photo_markers, without_markers
from beebox_impl.services.box_events import BoxEventHub, ChatTurnData, ChatUserMessageData
from beebox_impl.session.chat import ChatSession
from beebox_impl.session.clock import SessionClock
from beebox_impl.store.acceptance import AcceptanceStore, AlreadyClaimed, Attachment, Recorded
from beebox_spec.attribution import inject_user_attr
from beebox_spec.entries import JsonObject, JsonValue
from beebox_spec.errors import Rejection
from beebox_spec.js_values import to_iso_timestamp
from beebox_spec.media import SERVABLE_MEDIA_TYPES

__all__ = [
    "MAX_MESSAGE_ID_CHARS",
    "MAX_UNAWAITED_HAND_OVERS",
    "MAX_WAITING_PHOTO_BYTES",
    "BoxLoop",
    "ChatSendService",
    "Deduplicated",
    "InvalidRequest",
    "LoopRunner",
    "PhotosWaiting",
    "Queued",
    "SendFailed",
    "SendOutcome",
    "SendRequest",
    "Sender",
    "TurnStarted",
    "parse_send_body",
]

# Ours: a message id is a client's token, not a document.
MAX_MESSAGE_ID_CHARS: Final = 200
# Ours: the photos (decoded bytes) queued sends may gather into one turn. A drain
# joins every queued send into one turn; past ~12 MiB of photos its transcript line
# (base64, a third larger) passes the media route's 16 MiB line limit and none of
# them could be fetched back (and a model API refuses a request that large).
MAX_WAITING_PHOTO_BYTES: Final = 10 * 1024 * 1024
# Ours: queued sends answered from threads whose hand-overs the loop has not yet
# run. Past it a thread waits for the loop as a turn's send does (module doc, 4).
MAX_UNAWAITED_HAND_OVERS: Final = 64
T = TypeVar("T")

_log = logging.getLogger(__name__)

_SEND_FIELDS: Final = ("message", "messageId", "images")
_IMAGE_FIELDS: Final = ("mediaType", "data")


class InvalidRequest(Rejection):
    """A request body, a query or a send the box refuses; the message names the field."""


@dataclass(frozen=True, slots=True)
class Sender:
    """Who sent a message, when the host knows (named in the message's opening tag)."""

    email: str
    name: str


@dataclass(frozen=True, slots=True)
class SendRequest:
    """One send: the text, the client's message id, the photos (decoded).

    The send's rules live here, so `Box.send` and ``POST /api/chat/send`` (whose
    body `parse_send_body` reads into one of these) refuse the same sends with the
    same words (`InvalidRequest`, naming the field): the text is Unicode; a
    message id is 1–`MAX_MESSAGE_ID_CHARS` characters; each photo is of a type the
    media route serves back as itself (`SERVABLE_MEDIA_TYPES`) and holds bytes; and
    a send says or shows something.
    """

    message: str
    message_id: str | None = None
    images: tuple[Attachment, ...] = ()

    def __post_init__(self) -> None:
        # Text the box records, the engine writes and every reply carries must be
        # Unicode text: half a surrogate pair (JSON lets "\\ud800" through) is not.
        _check_unicode("message", self.message)
        if self.message_id is not None:
            # Ours: a message id is a client's token, not a document.
            if not 0 < len(self.message_id) <= MAX_MESSAGE_ID_CHARS:
                raise InvalidRequest(
                    f'"messageId" must be a string of 1-{MAX_MESSAGE_ID_CHARS} characters'
                )
            _check_unicode("messageId", self.message_id)
        for position, image in enumerate(self.images):
            where = f"images[{position}]"
            # Only a type the media route would serve back as itself.
            if image.media_type not in SERVABLE_MEDIA_TYPES:
                allowed = ", ".join(sorted(SERVABLE_MEDIA_TYPES))
                raise InvalidRequest(f'"{where}.mediaType" must be one of {allowed}')
            if not image.data:
                raise InvalidRequest(f'"{where}.data" must be a non-empty base64 string')
        # A send must say or show something.
        if not self.message and not self.images:
            raise InvalidRequest('"message" must not be empty')


def _check_unicode(name: str, value: str) -> None:
    if value.isascii():
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidRequest(
            f'"{name}" holds half a surrogate pair at character {error.start}: not Unicode text'
        ) from None


@dataclass(frozen=True, slots=True)
class Deduplicated:
    """The id was claimed already: nothing recorded, nothing sent."""

    def body(self) -> JsonObject:
        return {"deduplicated": True}


@dataclass(frozen=True, slots=True)
class Queued:
    """Recorded, and queued for the session's next turn."""

    def body(self) -> JsonObject:
        return {"queued": True}


@dataclass(frozen=True, slots=True)
class TurnStarted:
    """Recorded, and taken as a turn (its run starting in the background)."""

    turn_id: str

    def body(self) -> JsonObject:
        return {"turnId": self.turn_id}


@dataclass(frozen=True, slots=True)
class SendFailed:
    """Something failed after the record; the message is recorded (HTTP 500)."""

    error: str

    def body(self) -> JsonObject:
        return {"error": self.error}


@dataclass(frozen=True, slots=True)
class PhotosWaiting:
    """Not recorded: the next turn already gathers as many photos as one turn may
    carry (HTTP 429; the client sends it again, same ``messageId``, once it has run)."""

    retry_after_seconds: int = 5

    def body(self) -> JsonObject:
        return {
            "error": "Too many photos are waiting for the chat's next turn: "
            "send this one again when the current turn has ended"
        }


SendOutcome: TypeAlias = Deduplicated | Queued | TurnStarted | SendFailed | PhotosWaiting


def _field_list(body: dict[str, JsonValue], allowed: tuple[str, ...], where: str) -> None:
    for name in body:
        # Strict: a field the box does not know is a client bug, said by name.
        if name not in allowed:
            raise InvalidRequest(f'unexpected field "{where}{name}"')


def _parse_image(position: int, value: JsonValue) -> Attachment:
    where = f"images[{position}]"
    if not isinstance(value, dict):
        raise InvalidRequest(f'"{where}" must be an object')
    _field_list(value, _IMAGE_FIELDS, f"{where}.")
    for name in _IMAGE_FIELDS:
        if name not in value:
            raise InvalidRequest(f'missing field "{where}.{name}"')
    media_type, data = value["mediaType"], value["data"]
    if not isinstance(media_type, str):
        allowed = ", ".join(sorted(SERVABLE_MEDIA_TYPES))
        raise InvalidRequest(f'"{where}.mediaType" must be one of {allowed}')
    if not isinstance(data, str) or not data:
        raise InvalidRequest(f'"{where}.data" must be a non-empty base64 string')
    try:
        decoded = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequest(f'"{where}.data" is not valid base64') from None
    return Attachment(media_type, decoded)


def parse_send_body(body: JsonValue) -> SendRequest:
    """The send request a JSON body holds, or `InvalidRequest` naming the field.

    This reads the body's shape (an object of known fields, of JSON types that can
    be a send, base64 that decodes); what a send may be is `SendRequest`'s to say.
    """
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object")
    _field_list(body, _SEND_FIELDS, "")
    if "message" not in body:
        raise InvalidRequest('missing field "message"')
    message = body["message"]
    if not isinstance(message, str):
        raise InvalidRequest('"message" must be a string')
    message_id = body.get("messageId")
    if message_id is not None and not isinstance(message_id, str):
        raise InvalidRequest(f'"messageId" must be a string of 1-{MAX_MESSAGE_ID_CHARS} characters')
    raw_images = body.get("images", [])
    if not isinstance(raw_images, list):
        raise InvalidRequest('"images" must be a list')
    images = tuple(_parse_image(position, value) for position, value in enumerate(raw_images))
    return SendRequest(message, message_id, images)


class LoopRunner(Protocol):
    """Runs an async function on the box's event loop from another thread and returns
    its result (`anyio.from_thread.run` with the loop's token, a `BlockingPortal`'s
    ``call``; an exchange's ``run``)."""

    def __call__(self, function: Callable[..., Coroutine[Any, Any, T]], /, *args: Any) -> T: ...


@dataclass(frozen=True)
class BoxLoop:
    """The box's event loop as a host's thread reaches it without waiting for it
    (`Box.open` makes it, with the loop's token)."""

    token: anyio.lowlevel.EventLoopToken

    def call_soon(self, function: Callable[..., object], /, *args: Any) -> None:
        """Run ``function(*args)`` on the loop's thread soon, in the order of these
        calls, from any other thread; returns at once (`anyio.RunFinishedError` when
        the loop is gone). ``function`` must not raise: nobody would hear it."""
        self.token.backend_class.run_sync_soon(function, args, self.token.native_token)


@dataclass(eq=False)
class _InFlight:
    """A request in flight with a message id, and how its duplicates hear its answer.

    ``done`` is set once ``outcome`` is final; duplicates in threads wait on it.
    Duplicates on the loop wait on ``loop_done`` (made by the first of them), which
    is set on the loop: a waiter there holds no worker thread, whose tokens the
    owner's own disk work may need. Both are read and made under the service's lock.
    """

    done: threading.Event = field(default_factory=threading.Event)
    outcome: SendOutcome = field(default_factory=lambda: SendFailed("send did not finish"))
    loop_done: anyio.Event | None = None


@dataclass(frozen=True, slots=True)
class _QueuedSend:
    """A send recorded with its queue row (rule 6), to be handed over on the loop."""

    request: SendRequest
    message: str
    payload: JsonObject
    recorded: Recorded
    queued_row: int


@dataclass(frozen=True, slots=True)
class _Running:
    """Another request with this message id is in flight: wait for its answer."""

    entry: _InFlight


async def _set_event(event: anyio.Event) -> None:
    event.set()


class ChatSendService:
    """The box's send (see the module doc): `send` on the box's event loop, or
    `send_from_thread` from a thread of the host's own."""

    def __init__(
        self,
        *,
        session: ChatSession,
        acceptance: AcceptanceStore,
        events: BoxEventHub,
        clock: SessionClock,
        new_turn_id: Callable[[], str] = new_uuid4,
        loop: BoxLoop | None = None,
    ) -> None:
        """``loop``: where a thread hands a queued send over without waiting for it
        (module doc, 4); without one, it waits."""
        self._session = session
        self._acceptance = acceptance
        self._events = events
        self._clock = clock
        self._new_turn_id = new_turn_id
        # Shared by the loop and the host's threads: guarded by the lock.
        self._in_flight: dict[str, _InFlight] = {}
        self._in_flight_lock = threading.Lock()
        # Photo bytes per recorded send (bus row), as far as learned; and the photo
        # bytes of sends admitted but not yet handed to the session. Loop only.
        self._photo_bytes: dict[int, int] = {}
        self._admitted_photo_bytes = 0
        self._loop = loop
        # Taken by a thread that answers before its hand-over has run; given back
        # once the hand-over is over.
        self._unawaited_hand_overs = threading.BoundedSemaphore(MAX_UNAWAITED_HAND_OVERS)

    async def send(self, request: SendRequest, sender: Sender | None = None) -> SendOutcome:
        """Record ``request`` and hand it to the session; see the module doc."""
        claim = self._claim_in_flight(request.message_id)
        if isinstance(claim, _Running):
            # Rule 1: a concurrent duplicate gets the in-flight request's own answer.
            with self._in_flight_lock:
                answered = claim.entry.done.is_set()
                if not answered and claim.entry.loop_done is None:
                    claim.entry.loop_done = anyio.Event()
                loop_done = claim.entry.loop_done
            if not answered and loop_done is not None:
                await loop_done.wait()
            return claim.entry.outcome
        try:
            outcome = await self._send(request, sender)
        except BaseException:
            self._wake_loop_waiters(self._release_in_flight(request.message_id, claim, None))
            raise
        self._wake_loop_waiters(self._release_in_flight(request.message_id, claim, outcome))
        return outcome

    def send_from_thread(
        self, request: SendRequest, sender: Sender | None, run_on_loop: LoopRunner
    ) -> SendOutcome:
        """`send`, called from a thread that is not the loop's (an HTTP handler thread).

        A send without photos is recorded in the calling thread
        (`AcceptanceStore.record_user_message_blocking`) and crosses to the loop
        once, to be handed over; one with photos runs `send` on the loop whole (the
        photo bound reads the session's queue).
        """
        claim = self._claim_in_flight(request.message_id)
        if isinstance(claim, _Running):
            # Rule 1, as in `send`.
            claim.entry.done.wait()
            return claim.entry.outcome
        try:
            if request.images:
                outcome = run_on_loop(self._send, request, sender)
            else:
                outcome = self._record_in_thread(request, sender, run_on_loop)
        except BaseException:
            self._wake_loop_waiters_from_thread(
                self._release_in_flight(request.message_id, claim, None), run_on_loop
            )
            raise
        self._wake_loop_waiters_from_thread(
            self._release_in_flight(request.message_id, claim, outcome), run_on_loop
        )
        return outcome

    def _claim_in_flight(self, message_id: str | None) -> _InFlight | _Running | None:
        # Rule 1: the first request with an id owns it until it has its answer.
        if message_id is None:
            return None
        with self._in_flight_lock:
            running = self._in_flight.get(message_id)
            if running is not None:
                return _Running(running)
            mine = self._in_flight[message_id] = _InFlight()
            return mine

    def _release_in_flight(
        self, message_id: str | None, mine: _InFlight | None, outcome: SendOutcome | None
    ) -> anyio.Event | None:
        """Publish ``outcome`` to the duplicates (the default when it failed) and wake
        those in threads; the event that wakes those on the loop, if any wait."""
        if message_id is None or mine is None:
            return None
        if outcome is not None:
            mine.outcome = outcome
        with self._in_flight_lock:
            del self._in_flight[message_id]
            mine.done.set()
            return mine.loop_done

    @staticmethod
    def _wake_loop_waiters(loop_done: anyio.Event | None) -> None:
        if loop_done is not None:
            loop_done.set()

    def _wake_loop_waiters_from_thread(
        self, loop_done: anyio.Event | None, run_on_loop: LoopRunner
    ) -> None:
        if loop_done is None:
            return
        try:
            run_on_loop(_set_event, loop_done)
        except Exception as error:
            # The loop is gone (the box is closing): its tasks, the waiters, go with it.
            _log.warning("could not wake the duplicates of a send on the loop: %r", error)

    async def _send(self, request: SendRequest, sender: Sender | None) -> SendOutcome:
        mine = sum(len(photo.data) for photo in request.images)
        if not mine:
            return await self._record_and_hand_over(request, sender)
        # Rule 5: photos wait for the next turn only while that turn stays under the bound.
        await self._learn_waiting_photo_bytes()
        waiting = self._waiting_photo_bytes() + self._admitted_photo_bytes
        if waiting and waiting + mine > MAX_WAITING_PHOTO_BYTES:
            return PhotosWaiting()
        self._admitted_photo_bytes += mine
        try:
            return await self._record_and_hand_over(request, sender)
        finally:
            self._admitted_photo_bytes -= mine

    def _waiting_rows(self) -> list[int]:
        return [row for text in self._session.waiting_texts for row in split_photo_markers(text)[1]]

    async def _learn_waiting_photo_bytes(self) -> None:
        # Rows queued before this process started (a drained crash) are looked up once.
        while unknown := [row for row in self._waiting_rows() if row not in self._photo_bytes]:
            photos = await self._acceptance.attachments_of(unknown)
            for row in unknown:
                self._photo_bytes[row] = sum(len(photo.data) for photo in photos.get(row, ()))

    def _waiting_photo_bytes(self) -> int:
        rows = self._waiting_rows()
        # Forget what no longer waits (the map would grow with every send otherwise).
        for gone in self._photo_bytes.keys() - set(rows):
            del self._photo_bytes[gone]
        return sum(self._photo_bytes.get(row, 0) for row in rows)

    def _message(
        self, request: SendRequest, sender: Sender | None, now: datetime
    ) -> tuple[str, JsonObject]:
        """Rule 2 and the bus row's payload: the message as recorded, and the payload."""
        text = without_markers(request.message)
        message = text if sender is None else inject_user_attr(text, sender.email, sender.name)
        payload: JsonObject = {
            "sessionId": self._session.session_id,
            "message": message,
            "user": None if sender is None else {"email": sender.email, "name": sender.name},
            "timestamp": to_iso_timestamp(now),
        }
        return message, payload

    async def _record_and_hand_over(
        self, request: SendRequest, sender: Sender | None
    ) -> SendOutcome:
        now = self._clock.now()
        message, payload = self._message(request, sender, now)
        recorded = await self._acceptance.record_user_message(
            payload, message_id=request.message_id, now=now, attachments=request.images
        )
        return await self._after_record(request, message, payload, recorded)

    def _record_in_thread(
        self, request: SendRequest, sender: Sender | None, run_on_loop: LoopRunner
    ) -> SendOutcome:
        # `_record_and_hand_over`, with the record made in this thread (no photos here).
        now = self._clock.now()
        message, payload = self._message(request, sender, now)
        # Rule 4: a send the session will queue is queued by the record's own
        # transaction (the hint may be stale by the hand-over; either way is safe).
        queue_text = message if self._session.queues_sends else None
        recorded = self._acceptance.record_user_message_blocking(
            payload, message_id=request.message_id, now=now, queue_text=queue_text
        )
        try:
            if (
                isinstance(recorded, Recorded)
                and recorded.queue_row_id is not None
                and self._hand_over_unawaited(
                    _QueuedSend(request, message, payload, recorded, recorded.queue_row_id)
                )
            ):
                return Queued()
            return run_on_loop(self._after_record, request, message, payload, recorded)
        except Exception as error:
            # The loop is gone (the box is closing): recorded, so pending shows it.
            return SendFailed(str(error) or type(error).__name__)

    def _hand_over_unawaited(self, send: _QueuedSend) -> bool:
        """Module doc, 4: have the loop hand a queued send over, not waiting for it;
        False when the caller must wait for its hand-over instead."""
        loop = self._loop
        if loop is None or not self._unawaited_hand_overs.acquire(blocking=False):
            return False
        try:
            loop.call_soon(self._hand_over_now, send)
        except BaseException:
            self._unawaited_hand_overs.release()
            raise
        return True

    def _hand_over_now(self, send: _QueuedSend) -> None:
        # On the loop, in the order the threads asked, with no await: a send answered
        # after this one cannot reach the session first. (It must not raise: trio
        # would end the run.)
        try:
            turn_text = self._announce(send.request, send.message, send.payload, send.recorded)
            self._session.enqueue_then_drain(turn_text, queued_row=send.queued_row)
        except Exception as error:
            # The session is closing: the text's queue row waits on disk.
            _log.warning(
                "a queued send (bus row %d) was not handed to the chat (%r); its queue"
                " row keeps it for the chat's next open",
                send.recorded.row_id,
                error,
            )
        finally:
            self._unawaited_hand_overs.release()

    async def _after_record(
        self,
        request: SendRequest,
        message: str,
        payload: JsonObject,
        recorded: Recorded | AlreadyClaimed,
    ) -> SendOutcome:
        """Rules 3–4 once the record is written: answer a duplicate, or publish and hand over."""
        if isinstance(recorded, AlreadyClaimed):
            return Deduplicated()
        turn_text = self._announce(request, message, payload, recorded)
        try:
            return await self._hand_over(turn_text, recorded.row_id, recorded.queue_row_id)
        except Exception as error:
            # Recorded but not handed over: the record (pending) still shows it.
            return SendFailed(str(error) or type(error).__name__)

    def _announce(
        self, request: SendRequest, message: str, payload: JsonObject, recorded: Recorded
    ) -> str:
        """A recorded send's event and its expected delivery; the text the session gets."""
        # The payload `_message` made (sessionId, message, user, timestamp), and its row.
        recorded_data = cast(ChatUserMessageData, {"id": recorded.row_id, **payload})
        self._events.publish("chat-user-message", recorded_data)
        if request.images:
            self._photo_bytes[recorded.row_id] = sum(len(photo.data) for photo in request.images)
        turn_text = handed_text(message, recorded.row_id, bool(request.images))
        # Before the hand-over: the turn may end before it returns.
        self._acceptance.deliveries.expect(recorded.row_id, turn_text)
        return turn_text

    async def _hand_over(self, turn_text: str, row_id: int, queued_row: int | None) -> SendOutcome:
        try:
            # One step: a turn ending between a refused send and an enqueue would
            # otherwise strand the text in the queue of an idle session.
            accepted = await self._session.send_or_enqueue(turn_text, queued_row=queued_row)
        except anyio.ClosedResourceError:
            raise
        except Exception:
            # The open run is dying; queued, the text rides the fresh run its close starts.
            # The dying run's turn ends undelivered and takes the ledger's expectation
            # with it: the fresh run's turn is the one to deliver it. (A queue row the
            # record wrote is still there: the failed turn kept it.)
            self._acceptance.deliveries.expect(row_id, turn_text)
            await self._session.enqueue(turn_text, queued_row=queued_row)
            return Queued()
        if not accepted:
            return Queued()
        turn_id = self._new_turn_id()
        started: ChatTurnData = {"turnId": turn_id, "id": row_id}
        self._events.publish("chat-turn", started)
        return TurnStarted(turn_id)
