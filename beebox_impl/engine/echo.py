"""The echo engine: the embedded default that lets a box run with no model at all.

Why: a box must work offline — for a first run, a demo, CI, and every test above
the engine — and "works" means more than answering. The rest of beebox reads the
conversation back from the transcript the engine writes (history, photos by
reference, review), never from the live stream. So `EchoEngine` answers every turn
deterministically *and* writes a real Claude-Code-format transcript, exactly where
Claude Code would (`beebox_impl.transcript.location.transcript_path`): what works
against it works against a real engine.

What a run does (`docs/sources.md#format-2` (§2–§4) for the file,
`docs/sources.md#format-8` (§8) for the stream):

- **Session id.** A new run takes a fresh id from ``new_id``; a resumed run keeps
  ``resume_session_id`` and appends to that session's file, its first line's
  ``parentUuid`` continuing from the file's last chain entry (as the CLI does since
  2.1). Resuming an id that has no file yet starts that file: lenient on purpose,
  so a box whose old transcript was cleaned up keeps working under its saved id.
- **A line cut short.** A process killed during a large write leaves part of its
  line at the file's end; a run that finds one there (`ends_mid_line`: at its
  start, and after an append of its own that failed) ends it with a line break
  before its first line, so its own lines stay whole and the cut one reads as
  one unreadable line, skipped.
- **Streaming input.** Nothing is emitted until the first turn arrives; then
  ``system/init`` (``session_id``, ``cwd``, ``model: "echo"``, ``tools: []``, …),
  as the CLI does in streaming-input mode.
- **A turn.** The answer is decided as the turn is taken in, and the user line
  and the answer's lines are appended to the transcript in one write (the
  answer's own line later, when it streams: see "Live text"). The answer:
  one ``assistant`` message (one text block, ``stop_reason: end_turn``) whose text
  says what was received — ``You said: "…"`` and, for images,
  ``and sent 2 images (image/png, 12.3 KB; image/jpeg, 1.1 MB)`` (decimal units,
  decoded sizes) — written to the transcript as an ``assistant`` line, then a
  ``result`` (``success``, the same text, ``total_cost_usd: 0``, ``num_turns: 1``,
  ``duration_ms`` from the injected clock). The live messages' uuids are the
  transcript lines' uuids (`docs/sources.md#format-8`). With
  ``replay_user_messages`` the user turn is also echoed as a ``user`` message with
  ``isReplay`` (``--replay-user-messages``).
- **Live text.** With ``include_partial_messages`` (the default, as the Claude
  engine asks the CLI; ``--include-partial-messages``) the answer streams as the
  CLI streams a message: ``stream_event`` messages of the Messages API's events —
  ``message_start``, ``content_block_start``, then its text in word-sized pieces
  (`answer_pieces`: a word and the space before it, at most `ECHO_MAX_PIECES`),
  each a ``content_block_delta`` said ``piece_delay`` seconds after the last
  (`ECHO_PIECE_DELAY` by default; ``sleep`` waits, injected) — then the
  complete ``assistant`` message, then ``content_block_stop``, ``message_delta``
  and ``message_stop``, then the ``result``, in the keys and order Claude Code
  2.1.332 says them. As the CLI writes a message once it is complete, the
  answer's line is then appended when its ``assistant`` message is said, not with
  the turn's other lines: a history read mid-stream holds the prompt, and the
  text so far is the live text alone. A close while the answer streams ends it
  there, its line unwritten, as a CLI killed mid-stream leaves it.
- **A tool turn.** A turn whose text starts with ``tool:`` (`ECHO_TOOL_PREFIX`)
  first calls the echo's one tool, ``Echo`` (it runs nothing: its result is the
  rest of the text), as the CLI writes a call: an ``assistant`` line holding the
  ``tool_use`` block (``stop_reason: tool_use``), a ``user`` line holding its
  ``tool_result`` (and ``toolUseResult``), then the answer as above; the stream
  says the same (``assistant``, ``user``, ``assistant``, ``result`` with
  ``num_turns: 2``). So an offline box shows a tool call and its result.
- **Interrupt.** ``interrupt()`` applies to the turn in flight: the oldest turn
  sent whose answer is not yet decided. That turn gets no assistant message; the
  transcript records ``[Request interrupted by user]`` after its user line (as the
  CLI writes it) and the stream ends the turn with a ``result`` of subtype
  ``error_during_execution``, ``is_error: true``, ``num_turns: 0``. An interrupt
  with no such turn does nothing; later turns are answered normally. A turn's
  answer is decided when the reader asks for the turn's first message, so a test
  that sends, interrupts, then reads sees the interrupted form every time, and one
  that has read the turn's first message sees the interrupt come too late.
- **Close** ends the stream at once: no message is delivered after ``close()``;
  turns not yet answered and messages not yet read are dropped (lines already
  written stay written).

Ordering guarantee — how a reader awaits the writes: every transcript line is
appended (one ``os.write`` with ``O_APPEND`` on a file created 0600, parent folders
created) *before* the message that reports it is emitted (a stream event reports
no line), so once a consumer has
received a turn's ``result``, the file holds that turn (written, not fsynced:
visible to every reader, not proof against a power cut). A turn's append of at
most `INLINE_APPEND_BYTES` (a text turn: a few KiB) is made on the event loop, after
a checkpoint; a larger one (photos) and the rest of the file work (placing a run,
reading a resumed transcript's tail) run in a worker thread
(``anyio.to_thread.run_sync``). The echo engine stands in for an agent that writes
its transcript from a process of its own, so what it costs the box's loop is an
artefact of the stand-in: a trip to a worker thread costs the loop about fifteen
times what appending a few KiB to the page cache does, and was the largest single
share of its time a send. A task waiting on a worker thread counts as blocked to
``wait_all_tasks_blocked``-style settling, so a settle could return while a line is
still being written; tests that settle that way with photos in their turns pass
``offload_io=False``, which does all the file work on the event loop, after a
checkpoint, so "every task is blocked" really means "every write is done".

The work of a run happens in the task that reads its message stream (the
session's pump): `send` only queues the turn, and the next read answers it — writes
its lines, then hands out its messages. So a run needs no task of its own, and it
answers at the pace the session reads. ``messages()`` is a plain async iterator,
not a generator: a pump that stops reading leaves nothing to finalize.

Lines are compact JSON (``separators=(",", ":")``, ``ensure_ascii=False``) with
the keys, in the order, Claude Code 2.1.332 writes for each kind of line the
history reads — a prompt, a photo prompt, an answer, a tool call, its result, the
interrupt notice (``tests/impl/engine/test_echo_shapes.py`` compares them with the
lines of `tests/corpus/claude-code`); the values the echo has no reading of are
plain (``version`` is `ECHO_VERSION`, ``entrypoint`` ``echo``, ``gitBranch``
empty, efforts ``none``). A prompt's images come first, then its text, as the CLI
writes them; image blocks are written as the CLI writes them,
``{"type":"image","source":{"type":"base64","media_type":…,"data":…}}``.
"""

from __future__ import annotations

import json
import math
import os
import unicodedata
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import ParamSpec, TypeVar

import anyio
from anyio.lowlevel import checkpoint

from beebox_impl.engine.mailbox import Mailbox, PullIterator
from beebox_impl.engine.messages import (
    assistant_message,
    init_message,
    result_message,
    stream_event_message,
    tool_result_message,
    user_replay_message,
    zero_usage,
)
from beebox_impl.engine.protocol import EngineStartError, StartOptions, TurnContent
from beebox_impl.ids import new_uuid4
from beebox_impl.transcript.location import InvalidSessionId, transcript_path
from beebox_spec.entries import JsonObject, JsonValue
from beebox_spec.errors import InvariantError
from beebox_spec.js_values import to_iso_timestamp
from beebox_spec.media import image_blocks

__all__ = [
    "ECHO_MAX_PIECES",
    "ECHO_MODEL",
    "ECHO_PIECE_DELAY",
    "ECHO_TOOL",
    "ECHO_TOOL_PREFIX",
    "ECHO_VERSION",
    "INLINE_APPEND_BYTES",
    "INTERRUPTED_TEXT",
    "EchoEngine",
    "EchoRun",
    "answer_pieces",
    "describe_turn",
    "ends_mid_line",
    "iso_timestamp",
]

P = ParamSpec("P")
T = TypeVar("T")

# The model name the echo engine reports, in the stream and in the transcript.
ECHO_MODEL = "echo"
# The `version` of the lines it writes (the CLI writes its own version there).
ECHO_VERSION = "1.0.0-echo"
# The `entrypoint` of the lines it writes (the CLI writes how it was started there).
ECHO_ENTRYPOINT = "echo"
# A turn whose text starts so calls the echo's one tool first (module doc).
ECHO_TOOL_PREFIX = "tool:"
# That tool's name; it runs nothing, its result is the text after the prefix.
ECHO_TOOL = "Echo"
# What the CLI appends to the transcript when a turn is interrupted.
INTERRUPTED_TEXT = "[Request interrupted by user]"
# The `errors` of an interrupted turn's result.
INTERRUPTED_ERROR = "interrupted by the user"
# How long the echo waits before each piece of a streamed answer, by default: an
# answer shows as it streams, and a box's tests are not held up.
ECHO_PIECE_DELAY = 0.02
# The most pieces an answer streams in: a long one goes in longer pieces.
ECHO_MAX_PIECES = 20

# The chain entries of a transcript (`docs/sources.md#format-2`); a resumed file
# continues from the last one of these that is not a sub-agent's.
_CHAIN_TYPES = frozenset({"user", "assistant", "system", "progress", "attachment"})
# How much of the file the backward scan reads at a time.
_TAIL_BLOCK = 64 * 1024
# A turn's lines up to this size are appended on the loop (module doc).
INLINE_APPEND_BYTES = 64 * 1024


# ---------------------------------------------------------------------------
# What the echo says
# ---------------------------------------------------------------------------


def _format_size(size: int) -> str:
    """Bytes in decimal units, one decimal place above a kilobyte (``12.3 KB``)."""
    if size < 1000:
        return f"{size} B"
    if size < 999_950:
        return f"{size / 1000:.1f} KB"
    return f"{size / 1_000_000:.1f} MB"


def _describe_image(block: JsonObject) -> str:
    source = block.get("source")
    if not isinstance(source, dict):
        return "no source"
    media_type = source.get("media_type")
    kind = media_type if isinstance(media_type, str) and media_type else "unknown type"
    data = source.get("data")
    if source.get("type") != "base64" or not isinstance(data, str):
        return f"{kind}, not inline"
    # Decoded length without decoding: the data ends at the first `=`, each base64
    # character is 6 bits (the spec's `decode_base64_payload` reading).
    size = len(data.split("=", 1)[0]) * 3 // 4
    return f"{kind}, {_format_size(size)}"


def describe_turn(content: TurnContent) -> str:
    """The echo's answer: what the turn said, and which images it carried."""
    if isinstance(content, str):
        texts = [content]
        images: list[JsonObject] = []
    else:
        texts = [
            text
            for block in content
            if block.get("type") == "text" and isinstance(text := block.get("text"), str)
        ]
        blocks: list[JsonValue] = list(content)
        images = image_blocks(blocks)
    said = f'You said: "{chr(10).join(texts)}"'
    if not images:
        return said
    noun = "image" if len(images) == 1 else "images"
    sent = f"sent {len(images)} {noun} ({'; '.join(_describe_image(i) for i in images)})"
    return f"{said} and {sent}" if texts else f"You {sent}"


def answer_pieces(text: str, most: int = ECHO_MAX_PIECES) -> list[str]:
    """``text`` in the pieces it streams in: words, each with the space before it,
    joined into at most ``most`` pieces of as many words each; none of no text."""
    words = text.split(" ")
    spaced = [words[0], *(" " + word for word in words[1:])]
    size = math.ceil(len(spaced) / most)
    pieces = ["".join(spaced[at : at + size]) for at in range(0, len(spaced), size)]
    # A piece of no text is no delta (an empty text; a text of spaces alone is one).
    return [piece for piece in pieces if piece]


# ---------------------------------------------------------------------------
# The transcript file
# ---------------------------------------------------------------------------


def _aware(moment: datetime) -> datetime:
    # A naive time is taken as UTC (a test's clock may be naive).
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def iso_timestamp(moment: datetime) -> str:
    """`to_iso_timestamp`, with a naive time taken as UTC (a test's clock may be naive)."""
    return to_iso_timestamp(_aware(moment))


def _transcript_block(block: JsonObject) -> JsonObject:
    """A content block as the CLI writes it: image sources in the CLI's key order."""
    source = block.get("source")
    if block.get("type") != "image" or not isinstance(source, dict):
        return dict(block)
    if source.get("type") != "base64":
        return dict(block)
    ordered_source: JsonObject = {
        "type": "base64",
        "media_type": source.get("media_type"),
        "data": source.get("data"),
    }
    ordered_source.update(source)
    ordered: JsonObject = {"type": "image", "source": ordered_source}
    ordered.update({key: value for key, value in block.items() if key != "source"})
    return ordered


def _transcript_content(content: TurnContent) -> str | list[JsonValue]:
    if isinstance(content, str):
        return content
    # Claude Code writes a prompt's images before its text.
    images = [block for block in content if block.get("type") == "image"]
    others = [block for block in content if block.get("type") != "image"]
    return [_transcript_block(block) for block in (*images, *others)]


def _tool_text(content: TurnContent) -> str | None:
    """What the echo's tool is called with, when the turn asks for it (module doc)."""
    text = (
        content
        if isinstance(content, str)
        else "\n".join(
            part
            for block in content
            if block.get("type") == "text" and isinstance(part := block.get("text"), str)
        )
    )
    if not text.startswith(ECHO_TOOL_PREFIX):
        return None
    return text[len(ECHO_TOOL_PREFIX) :].strip()


def _encode_line(line: JsonObject) -> bytes:
    """One compact JSON line. A lone surrogate cannot be UTF-8: that line is escaped."""
    text = json.dumps(line, separators=(",", ":"), ensure_ascii=False)
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(line, separators=(",", ":")) + "\n").encode("ascii")


def _append(path: Path, data: bytes) -> None:
    """Append whole lines in one write: O_APPEND, the file created 0600, its folders created."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o600)
    except FileNotFoundError:
        # The folders only when missing: a `mkdir` every turn cost a failed system
        # call and its exception on the loop.
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, flags, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def _chain_uuid(raw: bytes) -> str | None:
    """The line's uuid if it is a main-chain entry, else None."""
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("type") not in _CHAIN_TYPES:
        return None
    if record.get("isSidechain") is True:
        return None
    uuid = record.get("uuid")
    return uuid if isinstance(uuid, str) and uuid else None


def last_chain_uuid(path: Path) -> str | None:
    """The uuid of the file's last main-chain entry, read backward from the end.

    None when the file is missing or holds no chain entry. Reading from the end
    makes a resume cost the last turn, not the whole conversation.
    """
    return _read_tail(path)[0]


def ends_mid_line(path: Path) -> bool:
    """Whether the file's last line is cut short: not empty, and no line break at its end.

    A process killed in the middle of a large write leaves part of its line (the
    kernel stops copying at a fatal signal). Appended to directly, the next line
    would join it as one line no reader can parse, and its turn would be lost
    from the conversation.
    """
    return _read_tail(path, chain=False)[1]


def _read_tail(path: Path, *, chain: bool = True) -> tuple[str | None, bool]:
    """`last_chain_uuid` (when ``chain``) and `ends_mid_line`, from one open of the file."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return None, False
    with handle:
        position = handle.seek(0, os.SEEK_END)
        if position == 0:
            return None, False
        handle.seek(position - 1)
        cut_short = handle.read(1) != b"\n"
        partial = b""
        while chain and position > 0:
            step = min(_TAIL_BLOCK, position)
            position -= step
            handle.seek(position)
            pieces = (handle.read(step) + partial).split(b"\n")
            # Unless this is the file's start, the first piece may be cut: keep it
            # to be completed by the next (earlier) block.
            partial = pieces.pop(0) if position > 0 else b""
            for raw in reversed(pieces):
                uuid = _chain_uuid(raw) if raw.strip() else None
                if uuid is not None:
                    return uuid, cut_short
    return None, cut_short


@dataclass(frozen=True)
class _Placement:
    """Where a run's transcript goes, where its chain continues from, and whether
    the file ends inside a line (`ends_mid_line`)."""

    cwd: str
    path: Path
    parent_uuid: str | None
    cut_short: bool


def _place(box: Path, session_id: str, root: Path) -> _Placement:
    # The CLI records its canonical working directory (realpath, NFC).
    cwd = unicodedata.normalize("NFC", os.path.realpath(box))
    path = transcript_path(box, session_id, root)
    return _Placement(cwd, path, *_read_tail(path))


class _FileWork:
    """Runs blocking file work in a worker thread, or on the loop after a checkpoint."""

    def __init__(self, offload: bool) -> None:
        self._offload = offload

    async def run(self, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        if self._offload:
            return await anyio.to_thread.run_sync(lambda: function(*args, **kwargs))
        await checkpoint()
        return function(*args, **kwargs)

    async def append(self, path: Path, data: bytes) -> None:
        """`_append`: on the loop when ``data`` is small (module doc), else as `run`."""
        if len(data) > INLINE_APPEND_BYTES:
            await self.run(_append, path, data)
            return
        await checkpoint()
        _append(path, data)


# ---------------------------------------------------------------------------
# The engine and its runs
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Turn:
    number: int
    content: TurnContent


@dataclass(frozen=True)
class _Saying:
    """A message to say: ``delay`` seconds after the last one, once ``lines`` are
    appended (a streamed answer's line, written as its message is said); the chain's
    last uuid before those lines is ``chained_from``, where it goes back to should
    they not be written."""

    message: JsonObject
    delay: float = 0.0
    lines: bytes = b""
    chained_from: str | None = None

    @property
    def ready(self) -> bool:
        """Whether it can be said now, with no wait and no write."""
        return not self.delay and not self.lines


@dataclass(frozen=True)
class _Streaming:
    """How a run streams its answers (None in its place: it does not)."""

    piece_delay: float
    sleep: Callable[[float], Awaitable[None]]


class EchoRun:
    """One echo conversation; see the module docstring for what it says and writes."""

    def __init__(
        self,
        *,
        session_id: str,
        placement: _Placement,
        clock: Callable[[], datetime],
        new_id: Callable[[], str],
        files: _FileWork,
        replay_user_messages: bool,
        streaming: _Streaming | None = None,
    ) -> None:
        self._session_id = session_id
        self._cwd = placement.cwd
        self._path = placement.path
        self._parent_uuid = placement.parent_uuid
        # The file ends inside a line (a write cut short): the next append ends it
        # first. None: unknown since an append failed, looked at before the next.
        self._cut_short: bool | None = placement.cut_short
        self._clock = clock
        self._new_id = new_id
        self._files = files
        self._replay = replay_user_messages
        self._streaming = streaming
        self._inbox: Mailbox[_Turn] = Mailbox()
        # Messages of answered turns not yet read.
        self._outbox: deque[_Saying] = deque()
        self._turns_sent = 0
        # The number of the last turn whose answer is decided: too late to interrupt.
        self._answers_decided = 0
        self._interrupted: set[int] = set()
        self._announced = False
        self._closed = False
        self._consumed = False

    @property
    def session_id(self) -> str:
        """The run's session id (new, or the resumed one)."""
        return self._session_id

    @property
    def transcript_path(self) -> Path:
        """The transcript file this run appends to."""
        return self._path

    @property
    def closed(self) -> bool:
        """True once the message stream has ended (closed, or its consumer left)."""
        return self._closed

    def messages(self) -> AsyncIterator[JsonObject]:
        """The run's messages; a turn is answered when they are read. Consumed once."""
        if self._consumed:
            raise InvariantError("a run's message stream is consumed once")
        self._consumed = True
        return PullIterator(self._next_message, self._take_said)

    async def send(self, content: TurnContent) -> None:
        """Queue one turn. Raises `anyio.ClosedResourceError` once the run is closed."""
        await checkpoint()
        if self._closed:
            raise anyio.ClosedResourceError
        self._turns_sent += 1
        self._inbox.put(_Turn(self._turns_sent, content))

    async def interrupt(self) -> None:
        """Interrupt the turn in flight (the oldest whose answer is not decided), if any."""
        await checkpoint()
        if not self._closed and self._answers_decided < self._turns_sent:
            self._interrupted.add(self._answers_decided + 1)

    async def close(self) -> None:
        """End the stream at once; unanswered turns and unread messages are dropped.

        Idempotent.
        """
        await checkpoint()
        self._closed = True
        self._inbox.clear()
        self._inbox.close()
        self._outbox.clear()

    def _take_said(self) -> JsonObject | None:
        # A message already said (its line written), if one waits with nothing to wait
        # for or write first; close() drops them.
        if self._outbox and self._outbox[0].ready:
            return self._outbox.popleft().message
        return None

    async def _next_message(self) -> JsonObject:
        await checkpoint()
        while not self._outbox:
            # After close() nothing more is said.
            if self._over():
                raise StopAsyncIteration
            try:
                turn = await self._inbox.get()
            except anyio.EndOfStream:
                self._closed = True
                raise StopAsyncIteration from None
            await self._answer(turn)
        saying = self._outbox[0]
        if saying.delay and self._streaming is not None:
            await self._streaming.sleep(saying.delay)
        if saying.lines and not self._over():
            await self._write_streamed(saying)
        # A close while it waited or wrote drops the rest (a line written stays written).
        if self._over():
            raise StopAsyncIteration
        return self._outbox.popleft().message

    async def _write_streamed(self, saying: _Saying) -> None:
        """A streamed answer's line, as its message is said; not written, the turn says
        nothing more and the chain goes back to where it was before the line."""
        try:
            await self._write(saying.lines)
        except BaseException:
            self._parent_uuid = saying.chained_from
            self._outbox.clear()
            raise

    async def _answer(self, turn: _Turn) -> None:
        """Write the turn's lines, then queue its messages (its lines before its messages).

        The answer is decided as the turn is taken in, and both of its lines leave in
        one append (one write, and for a turn with photos one trip to a worker thread,
        not one a line).
        """
        started = self._clock()
        parent_before, announced_before = self._parent_uuid, self._announced
        user_uuid = self._new_id()
        prompt = _Prompt(self._new_id(), turn.number)
        content = _transcript_content(turn.content)
        lines = [self._chained(user_uuid, self._prompt_line(user_uuid, content, started, prompt))]
        said: list[_Saying] = []
        if not self._announced:
            self._announced = True
            said.append(
                _Saying(
                    init_message(
                        self._session_id,
                        uuid=self._new_id(),
                        cwd=self._cwd,
                        model=ECHO_MODEL,
                        tools=[],
                        version=ECHO_VERSION,
                    )
                )
            )
        if self._replay:
            replayed = user_replay_message(content, session_id=self._session_id, uuid=user_uuid)
            said.append(_Saying(replayed))
        # From here the answer is decided: an interrupt now is too late for this turn.
        self._answers_decided = turn.number
        if turn.number in self._interrupted:
            self._interrupted.discard(turn.number)
            answer_lines, answer = self._answer_interrupted(started, prompt)
        else:
            answer_lines, answer = self._answer_echo(turn.content, started, prompt)
        lines.extend(answer_lines)
        try:
            await self._write(b"".join(lines))
        except BaseException:
            # Not written: the next lines hang where these would have, and the
            # init message is still to be said.
            self._parent_uuid, self._announced = parent_before, announced_before
            raise
        # A run closed during the write says nothing more (its lines stay written).
        if self._over():
            return
        self._outbox.extend(said)
        self._outbox.extend(answer)

    async def _write(self, data: bytes) -> None:
        """Append ``data`` (whole lines), a line the file was left inside ended first."""
        if self._cut_short is None:
            self._cut_short = await self._files.run(ends_mid_line, self._path)
        if self._cut_short:
            # The cut line ends as a line of its own (unreadable, skipped by readers),
            # not as the start of this write's first line.
            data = b"\n" + data
        try:
            await self._files.append(self._path, data)
        except BaseException:
            # Part of it may be written: the next append looks at the file's end first.
            self._cut_short = None
            raise
        self._cut_short = False

    def _answer_echo(
        self, content: TurnContent, started: datetime, prompt: _Prompt
    ) -> tuple[list[bytes], list[_Saying]]:
        lines: list[bytes] = []
        said: list[_Saying] = []
        tool_text = _tool_text(content)
        if tool_text is not None:
            lines, tool_said = self._call_the_tool(tool_text, prompt)
            said = [_Saying(message) for message in tool_said]
        reply = describe_turn(content)
        assistant_uuid = self._new_id()
        message_id = "msg_" + self._new_id().replace("-", "")
        assistant = assistant_message(
            reply,
            session_id=self._session_id,
            uuid=assistant_uuid,
            message_id=message_id,
            model=ECHO_MODEL,
            stop_reason="end_turn",
            usage=zero_usage(),
        )
        request_id = "req_" + self._new_id().replace("-", "")
        line = self._assistant_line(assistant_uuid, assistant["message"], request_id)
        result = result_message(
            session_id=self._session_id,
            uuid=self._new_id(),
            result=reply,
            num_turns=2 if tool_text is not None else 1,
            duration_ms=self._elapsed_ms(started),
            stop_reason="end_turn",
            usage=zero_usage(),
        )
        chained_from = self._parent_uuid
        answer_line = self._chained(assistant_uuid, line)
        if self._streaming is None:
            lines.append(answer_line)
            return lines, [*said, _Saying(assistant), _Saying(result)]
        before, after = self._stream_events(reply, message_id, self._streaming.piece_delay)
        spoken = _Saying(assistant, lines=answer_line, chained_from=chained_from)
        return lines, [*said, *before, spoken, *after, _Saying(result)]

    def _stream_events(
        self, reply: str, message_id: str, delay: float
    ) -> tuple[list[_Saying], list[_Saying]]:
        """The stream events said before the answer's complete message, and after it
        (the module doc's "Live text")."""

        def event(body: JsonObject, timing: JsonObject | None = None) -> _Saying:
            said = stream_event_message(
                body,
                session_id=self._session_id,
                uuid=self._new_id(),
                message_id=message_id,
                timing=timing,
            )
            # Each piece of text is said a moment after the last.
            return _Saying(said, delay=delay if body["type"] == "content_block_delta" else 0.0)

        start: JsonObject = {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": ECHO_MODEL,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        block: JsonObject = {"type": "text", "text": ""}
        pieces: list[JsonObject] = [
            {"type": "text_delta", "text": piece} for piece in answer_pieces(reply)
        ]
        ended: JsonObject = {"stop_reason": "end_turn", "stop_sequence": None}
        before = [
            event(
                {"type": "message_start", "message": start},
                {"ttft_ms": 0, "thinking_display": "updates"},
            ),
            event({"type": "content_block_start", "index": 0, "content_block": block}),
            *(event({"type": "content_block_delta", "index": 0, "delta": d}) for d in pieces),
        ]
        after = [
            event({"type": "content_block_stop", "index": 0}),
            event({"type": "message_delta", "delta": ended, "usage": {"output_tokens": 0}}),
            event({"type": "message_stop"}),
        ]
        return before, after

    def _call_the_tool(self, text: str, prompt: _Prompt) -> tuple[list[bytes], list[JsonObject]]:
        """The `Echo` tool's call and its result: their lines and their messages."""
        call_uuid, result_uuid = self._new_id(), self._new_id()
        tool_use_id = "toolu_" + self._new_id().replace("-", "")[:24]
        call_block: JsonObject = {
            "type": "tool_use",
            "id": tool_use_id,
            "name": ECHO_TOOL,
            "input": {"text": text},
        }
        call = assistant_message(
            "",
            session_id=self._session_id,
            uuid=call_uuid,
            message_id="msg_" + self._new_id().replace("-", ""),
            model=ECHO_MODEL,
            stop_reason="tool_use",
            usage=zero_usage(),
            block=call_block,
        )
        request_id = "req_" + self._new_id().replace("-", "")
        # Chained now: the result hangs under its call.
        call_line = self._chained(
            call_uuid, self._assistant_line(call_uuid, call["message"], request_id, tool=True)
        )
        result_block: JsonObject = {
            "tool_use_id": tool_use_id,
            "type": "tool_result",
            "content": text,
            "is_error": False,
        }
        record: JsonObject = {
            "stdout": text,
            "stderr": "",
            "interrupted": False,
            "isImage": False,
            "noOutputExpected": False,
        }
        result = tool_result_message(
            result_block, session_id=self._session_id, uuid=result_uuid, tool_use_result=record
        )
        result_line = self._tool_result_line(
            result_uuid, result_block, record, source=call_uuid, prompt=prompt
        )
        return [call_line, self._chained(result_uuid, result_line)], [call, result]

    def _answer_interrupted(
        self, started: datetime, prompt: _Prompt
    ) -> tuple[list[bytes], list[_Saying]]:
        marker_uuid = self._new_id()
        marker: list[JsonValue] = [{"type": "text", "text": INTERRUPTED_TEXT}]
        line = self._notice_line(marker_uuid, marker, self._clock(), prompt)
        result = result_message(
            session_id=self._session_id,
            uuid=self._new_id(),
            subtype="error_during_execution",
            is_error=True,
            num_turns=0,
            duration_ms=self._elapsed_ms(started),
            usage=zero_usage(),
            errors=[INTERRUPTED_ERROR],
        )
        return [self._chained(marker_uuid, line)], [_Saying(result)]

    def _over(self) -> bool:
        # A method, not the attribute: close() may have run at any await.
        return self._closed

    def _elapsed_ms(self, started: datetime) -> int:
        return max(0, round((self._clock() - started).total_seconds() * 1000))

    def _chained(self, uuid: str, line: JsonObject) -> bytes:
        # Encoded now: the next line hangs under this one.
        self._parent_uuid = uuid
        return _encode_line(line)

    # The lines, with the keys in the order Claude Code 2.1.332 writes them (module doc).

    def _head(self) -> JsonObject:
        return {"parentUuid": self._parent_uuid, "isSidechain": False}

    def _tail(self) -> JsonObject:
        return {
            "userType": "external",
            "entrypoint": ECHO_ENTRYPOINT,
            "cwd": self._cwd,
            "sessionId": self._session_id,
            "version": ECHO_VERSION,
            "gitBranch": "",
        }

    def _prompt_line(
        self, uuid: str, content: str | list[JsonValue], at: datetime, prompt: _Prompt
    ) -> JsonObject:
        line = self._head()
        line.update(
            {
                "promptId": prompt.prompt_id,
                "type": "user",
                "message": {"role": "user", "content": content},
                "uuid": uuid,
                "timestamp": iso_timestamp(at),
            }
        )
        photos = len(image_blocks(content)) if isinstance(content, list) else 0
        if photos:
            pasted: list[JsonValue] = list(range(1, photos + 1))
            line["imagePasteIds"] = pasted
        line.update(
            {
                "permissionMode": "default",
                "promptSource": "sdk",
                "sentAtMs": int(_aware(at).timestamp() * 1000),
                "rowSource": "local",
                "turnOrigin": "sdk",
                "turnPosition": {"promptIndex": 0, "turnIndex": prompt.turn_index},
            }
        )
        line.update(self._tail())
        return line

    def _notice_line(
        self, uuid: str, content: list[JsonValue], at: datetime, prompt: _Prompt
    ) -> JsonObject:
        # What the CLI itself writes in a user's place (the interrupt notice).
        line = self._head()
        line.update(
            {
                "promptId": prompt.prompt_id,
                "type": "user",
                "message": {"role": "user", "content": content},
                "rowSource": "harness",
                "uuid": uuid,
                "timestamp": iso_timestamp(at),
            }
        )
        line.update(self._tail())
        return line

    def _tool_result_line(
        self,
        uuid: str,
        block: JsonObject,
        record: JsonObject,
        *,
        source: str,
        prompt: _Prompt,
    ) -> JsonObject:
        line = self._head()
        line.update(
            {
                "promptId": prompt.prompt_id,
                "type": "user",
                "message": {"role": "user", "content": [block]},
                "uuid": uuid,
                "timestamp": iso_timestamp(self._clock()),
                "toolUseResult": record,
                "sandboxed": False,
                "sourceToolAssistantUUID": source,
                "permissionDecision": {
                    "decision": "accept",
                    "source": "config",
                    "reasonType": "rule",
                    "ruleSource": ECHO_ENTRYPOINT,
                },
            }
        )
        line.update(self._tail())
        return line

    def _assistant_line(
        self, uuid: str, body: JsonValue, request_id: str, *, tool: bool = False
    ) -> JsonObject:
        line = self._head()
        message = dict(body) if isinstance(body, dict) else {}
        message["stop_details"] = None
        line["message"] = message
        if tool:
            line["toolInputStreamMs"] = 0
        line.update(
            {
                "apiBlockIndex": 0,
                "requestId": request_id,
                "requestRef": self._new_id(),
                "requestedModel": ECHO_MODEL,
                "promptCacheRequested": "none",
                "type": "assistant",
                "uuid": uuid,
                "timestamp": iso_timestamp(self._clock()),
                "effort": "none",
                "perTurnEffort": "none",
                "madeBy": "model",
            }
        )
        line.update(self._tail())
        return line


@dataclass(frozen=True)
class _Prompt:
    """The prompt a turn's lines belong to: its id, and its place among the run's turns."""

    prompt_id: str
    turn_index: int


class EchoEngine:
    """Starts `EchoRun`s; see the module docstring.

    ``projects_root`` is where transcripts are filed
    (`beebox_impl.transcript.location.projects_root`); ``clock`` gives the time of
    every line and duration; ``new_id`` gives session ids, line and message uuids
    (a uuid4 string by default). ``offload_io=False`` does file work on the event
    loop, for tests that settle by waiting until every task is blocked.
    ``replay_user_messages`` echoes each turn as a ``user`` message.
    ``include_partial_messages`` streams each answer (the module doc's "Live
    text"), a piece every ``piece_delay`` seconds, waited with ``sleep``.
    """

    def __init__(
        self,
        projects_root: Path,
        clock: Callable[[], datetime],
        new_id: Callable[[], str] = new_uuid4,
        *,
        offload_io: bool = True,
        replay_user_messages: bool = False,
        include_partial_messages: bool = True,
        piece_delay: float = ECHO_PIECE_DELAY,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        self._projects_root = projects_root
        self._clock = clock
        self._new_id = new_id
        self._files = _FileWork(offload_io)
        self._replay = replay_user_messages
        self._streaming = _Streaming(piece_delay, sleep) if include_partial_messages else None

    async def start(self, options: StartOptions) -> EchoRun:
        """Open a run on a new session, or on ``options.resume_session_id``."""
        session_id = options.resume_session_id or self._new_id()
        try:
            placement = await self._files.run(_place, options.cwd, session_id, self._projects_root)
        except InvalidSessionId as error:
            raise EngineStartError(f"echo engine: {error}") from error
        except OSError as error:
            raise EngineStartError(f"echo engine: cannot read the transcript: {error}") from error
        return EchoRun(
            session_id=session_id,
            placement=placement,
            clock=self._clock,
            new_id=self._new_id,
            files=self._files,
            replay_user_messages=self._replay,
            streaming=self._streaming,
        )
