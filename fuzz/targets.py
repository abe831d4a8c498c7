"""The fuzz targets: each is a function of one input's bytes that raises on a finding.

Every target is *differential* where the project has a second opinion: the
implementation is held to the executable spec (`beebox_spec`), so a finding is
a wrong answer as well as a crash. What each may raise is only what its callers
handle (a typed rejection); anything else escaping is a finding.

- `transcript`: the guarded line reader (`scan_line_records`) and the strip,
  against `read_transcript_lines`; history slices (`read_history`) against
  `history_page`/`history_tail` over `entries_from_lines`; the line lookup and
  the media fetch for the ids the input names, against `find_line_by_uuid` and
  `extract_media`.
- `media_ref`: `parse_media_ref` against the grammar written out independently,
  and the round trip through `encode_media_ref` and the transcript path.
- `media_extract`: `extract_media_from_line` (bytes, streaming) against the
  spec's `extract_media` (text, one regular expression).
- `card`: `parse_card` of the review's husk cards: `CardFormatError` or a card
  that renders back byte for byte, and a field write that changes that field only.
- `http` (`HttpTarget`): one connection's raw bytes through the server's own
  request handler, on a real box: it never raises, never answers 500/503, and
  without the token never answers anything of the box; and the first request's
  header block, where `parse_fields` accepts it, reads as the standard library's
  own parser reads it (the same fields, values without their surrounding spaces).

Inputs are small; `expand` turns a two-byte macro (``\\xfe`` then n) into
(n + 1) × 2,048 bytes of base64 text, so a mutation of a few bytes can build a
line over the 256 KiB oversize mark (``\\xfe`` never occurs in UTF-8); an input
expands to at most `MAX_EXPANDED` bytes, so the harness's memory is bounded.
"""

from __future__ import annotations

import atexit
import base64
import functools
import http.client
import io
import json
import os
import re
import socket
import tempfile
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from importlib.resources import files
from pathlib import Path
from typing import Final, cast

import anyio.lowlevel
from anyio.from_thread import BlockingPortal, start_blocking_portal
from ruamel.yaml.comments import TaggedScalar

import beebox_impl.web
from beebox_impl.box import Box, BoxPaths, init_box
from beebox_impl.engine.echo import EchoEngine
from beebox_impl.http.routes import StreamReply
from beebox_impl.http.server import (
    HttpLimits,
    MalformedFields,
    _App,
    _Handler,
    _Server,
    parse_fields,
)
from beebox_impl.review.cards import (
    FIELD_TITLE,
    CardFormatError,
    _with_fields,
    parse_card,
)
from beebox_impl.transcript import (
    MediaFound,
    PageSlice,
    TailSlice,
    TranscriptIndexCache,
    extract_media_from_line,
    fetch_media,
    find_media_line,
    read_history,
)
from beebox_impl.transcript.lines import scan_line_records
from beebox_impl.transcript.location import InvalidSessionId, project_dir, transcript_path
from beebox_impl.web import read_asset
from beebox_spec.entries import MAX_SESSION_ENTRIES
from beebox_spec.js_values import utf8_length, utf16_prefix
from beebox_spec.media import (
    MalformedMediaRef,
    encode_media_ref,
    extract_media,
    find_line_by_uuid,
    parse_media_ref,
)
from beebox_spec.transcript import (
    SNIFF_CHARS,
    entries_from_lines,
    history_page,
    history_tail,
    read_transcript_lines,
    split_transcript_lines,
)

__all__ = [
    "BLOCK_SIZES",
    "FUZZ_TOKEN",
    "MACRO",
    "TARGETS",
    "HttpTarget",
    "card",
    "expand",
    "media_extract",
    "media_ref",
    "transcript",
]

MACRO: Final = 0xFE
_MACRO_UNIT: Final = b"QUJD" * 512  # 2,048 bytes of base64 text
# The most an input expands to (a bit over two oversize lines).
MAX_EXPANDED: Final = 1024 * 1024
# The first byte of a transcript input picks the reader's block size.
BLOCK_SIZES: Final = (509, 4096, 65_536)
_SESSION: Final = "fuzz-session"
_UUID_VALUES: Final = re.compile(rb'"uuid":"([^"\\]{0,80})"')
# How many ids one transcript input looks up (each lookup is a pass over the file).
_MAX_LOOKUPS: Final = 6


def expand(data: bytes) -> bytes:
    """``data`` with every ``\\xfe n`` macro replaced by (n + 1) × 2,048 base64 bytes."""
    if MACRO not in data:
        return data
    out = bytearray()
    position = 0
    while (found := data.find(MACRO, position)) != -1:
        out += data[position:found]
        count = data[found + 1] + 1 if found + 1 < len(data) else 1
        # Past MAX_EXPANDED bytes a macro adds nothing: memory stays bounded per input.
        room = max(0, MAX_EXPANDED - len(out)) // len(_MACRO_UNIT)
        out += _MACRO_UNIT * min(count, room)
        position = found + 2
    out += data[position:]
    return bytes(out)


# --- transcript -------------------------------------------------------------------


@functools.cache
def _scratch() -> Path:
    # One file per process, rewritten per input: tmpfs when the machine has one.
    folder = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
    path = folder / f"bbx-fuzz-{os.getpid()}.jsonl"
    atexit.register(path.unlink, missing_ok=True)
    return path


def transcript(data: bytes) -> None:
    """The reader, the strip, the entries and the lookups agree with the spec."""
    if not data:
        return
    block_size = BLOCK_SIZES[data[0] % len(BLOCK_SIZES)]
    body = expand(data[1:])
    file_lines = split_transcript_lines(body)
    expected = read_transcript_lines(file_lines)
    records = list(scan_line_records(io.BytesIO(body), block_size=block_size))
    assert len(records) == len(expected), (len(records), len(expected))
    for record, line, raw in zip(records, expected, file_lines, strict=True):
        assert record.line_number == line["lineNumber"]
        assert record.kind == line["kind"], (record.line_number, record.kind)
        if line["kind"] == "parseable":
            assert (record.text, record.media_stripped) == (line["text"], line["mediaStripped"])
        else:
            assert record.head == utf16_prefix(line["raw"], SNIFF_CHARS)
        assert record.utf8_bytes == utf8_length(raw)
        assert body[record.offset : record.offset + record.length].decode("utf-8", "replace") == raw

    path = _scratch()
    path.write_bytes(body)
    entries = entries_from_lines(_SESSION, file_lines)
    cache = TranscriptIndexCache(block_size=block_size)
    whole = read_history(path, _SESSION, PageSlice(0, MAX_SESSION_ENTRIES), cache=cache)
    assert whole == history_page(_SESSION, entries, 0, MAX_SESSION_ENTRIES)
    # Warm: the index is reused, only the tail's lines are read again.
    tail = read_history(path, _SESSION, TailSlice(3), cache=cache)
    assert tail == history_tail(_SESSION, entries, 3)

    named = sorted({match.decode("utf-8", "replace") for match in _UUID_VALUES.findall(body)})
    for uuid in named[:_MAX_LOOKUPS]:
        lookup = find_line_by_uuid(file_lines, uuid)
        assert find_media_line(path, uuid, cache=cache) == lookup, uuid
        try:
            ref = parse_media_ref(f"{_SESSION}/{uuid}/0")
        except MalformedMediaRef:
            continue
        served = fetch_media(path, ref, cache=cache)
        if not lookup["found"]:
            assert not isinstance(served, MediaFound)
            assert served.reason == lookup["reason"]
            continue
        extracted = extract_media(file_lines[lookup["lineNumber"] - 1], 0)
        if extracted["ok"]:
            assert isinstance(served, MediaFound), (uuid, served)
            assert (served.media_type, served.data) == (extracted["mediaType"], extracted["data"])
        else:
            assert not isinstance(served, MediaFound), uuid
            assert served.reason == extracted["reason"]


# --- media references --------------------------------------------------------------

# The grammar written out again, apart from the spec's own regular expressions.
_ID_CHARACTERS: Final = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
)


def _grammar_accepts(raw: str) -> bool:
    parts = raw.split("/")
    if len(parts) != 3:
        return False
    session, uuid, index = parts
    for name in (session, uuid):
        if not 1 <= len(name) <= 64 or not set(name) <= _ID_CHARACTERS:
            return False
    return 1 <= len(index) <= 3 and all(character in "0123456789" for character in index)


_BOX_ROOT: Final = Path("/nonexistent/fuzz-box")
_PROJECTS: Final = Path("/nonexistent/projects")


def media_ref(data: bytes) -> None:
    """`parse_media_ref` accepts exactly the grammar, and what it accepts names one file."""
    raw = data.decode("utf-8", "replace")
    try:
        ref = parse_media_ref(raw)
    except MalformedMediaRef:
        assert not _grammar_accepts(raw), raw
        return
    assert _grammar_accepts(raw), raw
    session, uuid, index = raw.split("/")
    assert (ref["sessionId"], ref["entryUuid"], ref["index"]) == (session, uuid, int(index))
    assert parse_media_ref(encode_media_ref(ref)) == ref
    try:
        path = transcript_path(_BOX_ROOT, ref["sessionId"], _PROJECTS)
    except InvalidSessionId as error:
        raise AssertionError(f"a parsed reference's session id was refused: {raw!r}") from error
    # The file is directly in the box's project folder: no way out of it.
    assert path.parent == project_dir(_BOX_ROOT, _PROJECTS)
    assert path.name == f"{ref['sessionId']}.jsonl"


# --- media extraction --------------------------------------------------------------


def media_extract(data: bytes) -> None:
    """The streaming byte extraction serves what the spec's regular expression serves."""
    if not data:
        return
    index = data[0] % 4
    line = expand(data[1:])
    served = extract_media_from_line(line, index)
    expected = extract_media(line.decode("utf-8", "replace"), index)
    if expected["ok"]:
        assert isinstance(served, MediaFound), served
        assert (served.media_type, served.data) == (expected["mediaType"], expected["data"])
    else:
        assert not isinstance(served, MediaFound), served
        assert served.reason == expected["reason"]


# --- husk cards ----------------------------------------------------------------------

_FUZZ_TITLE: Final = "A title the fuzzer wrote"


def card(data: bytes) -> None:
    """A card parses or is `CardFormatError`; it renders back; a write changes one field
    and reads back, or is refused (`CardFormatError`) and writes nothing."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return  # read_card's callers handle a card that is not UTF-8 (it is skipped)
    try:
        parsed = parse_card(text)
    except CardFormatError:
        return
    assert parsed.render() == text
    for name in list(parsed.fields.keys())[:8]:
        if isinstance(name, str):
            parsed.text(name)
    try:
        written = _with_fields(parsed, {FIELD_TITLE: _FUZZ_TITLE})
    except CardFormatError:
        return
    again = parse_card(written)
    assert again.text(FIELD_TITLE) == _FUZZ_TITLE, written
    assert again.body == parsed.body
    before, after = _plain(parsed.fields), _plain(again.fields)
    assert isinstance(before, dict)
    assert isinstance(after, dict)
    for name, value in before.items():
        if name != FIELD_TITLE:
            assert after.get(name) == value, (name, written)


def _plain(value: object) -> object:
    # What a YAML value says, without ruamel's node types (a TaggedScalar has no ==).
    if isinstance(value, TaggedScalar):
        return ("!tagged", str(value.tag), value.value)
    if isinstance(value, Mapping):
        return {
            repr(_plain(key)) if not isinstance(key, str) else key: _plain(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


# --- HTTP -------------------------------------------------------------------------------

FUZZ_TOKEN: Final = "fuzz-token-" + "T" * 32
# What only an authorized request may be shown: the box's own data (a mark the
# public page's files also hold is dropped: `_authorized_only`).
_AUTHORIZED_ONLY: Final = (
    b'"openapi"',
    b'"turnId"',
    b'"queued"',
    b'"deduplicated"',
    b'"entries"',
    b'"ok":true',
    b'"sessions":',
    b'"sessionId":',
    b'"status":{',
    b"retry: 3000",
    b": subscribed",
)
_STATUS: Final = re.compile(rb"(?:^|\r\n\r\n|\n)HTTP/1\.[01] (\d{3}) ")
# A photo in the fuzz box's transcript: a fetch through the token serves it.
_PHOTO_MARK: Final = b"PHOTO-OF-THE-FUZZ-BOX"


def _authorized_only() -> tuple[bytes, ...]:
    public = [
        asset.data
        for resource in files(beebox_impl.web).iterdir()
        if (asset := read_asset(resource.name)) is not None
    ]
    return tuple(mark for mark in _AUTHORIZED_ONLY if not any(mark in data for data in public))


class _FakeServer:
    """What `_Handler` reads of its server: the app, the lock, the handler registry."""

    def __init__(self, app: _App) -> None:
        self.app = app
        self._lock = threading.Lock()
        self.handlers: set[_Handler] = set()


class _Handler1(_Handler):
    # An event stream here ends after its first poll: the server is "stopping" while
    # it runs, so one input never waits on a stream (keep-alive is fuzzed otherwise).
    def _send_stream(self, reply: StreamReply) -> None:
        self.server.app.stopping.set()
        try:
            super()._send_stream(reply)
        finally:
            self.server.app.stopping.clear()


def _write_fuzz_transcript(paths: BoxPaths, projects: Path) -> None:
    photo = base64.b64encode(_PHOTO_MARK * 100).decode("ascii")
    line = {
        "type": "user",
        "uuid": "u-photo",
        "sessionId": _SESSION,
        "timestamp": "2026-01-01T00:00:00Z",
        "message": {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": photo},
                },
            ],
        },
    }
    folder = project_dir(paths.root, projects)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{_SESSION}.jsonl").write_text(json.dumps(line, separators=(",", ":")) + "\n")


class HttpTarget:
    """A real box on its own event loop, and `_Handler` run per input over a socket pair.

    Each input is one client connection's bytes: the client side sends it, half
    closes, and reads everything the server says; the handler runs in the calling
    thread (so coverage and tracebacks are the fuzzer's), reaching the box through
    the loop exactly as `serve_box` does.
    """

    def __init__(self, folder: Path, limits: HttpLimits | None = None) -> None:
        self.folder = folder
        paths = init_box(folder / "box")
        paths.token.unlink()
        paths.token.write_text(FUZZ_TOKEN + "\n")
        paths.token.chmod(0o600)
        projects = folder / "projects"
        _write_fuzz_transcript(paths, projects)
        self._portal_context = start_blocking_portal("asyncio")
        self.portal: BlockingPortal = self._portal_context.__enter__()
        clock = _utc_now
        self._box_context = self.portal.wrap_async_context_manager(
            Box.open(paths.root, engine=EchoEngine(projects, clock), projects_root=projects)
        )
        self.box = self._box_context.__enter__()
        chosen = limits or HttpLimits(
            max_body_bytes=256 * 1024,
            header_timeout=2.0,
            body_timeout=2.0,
            write_timeout=5.0,
            linger_seconds=0.05,
            sse_heartbeat_seconds=0.0,
        )
        self.app = _App(self.box, self.portal.call(_loop_token), chosen)
        self.app.port = 8765
        self._server = cast(_Server, _FakeServer(self.app))
        self._marks = (*_authorized_only(), _PHOTO_MARK)

    def close(self) -> None:
        self._box_context.__exit__(None, None, None)
        self._portal_context.__exit__(None, None, None)

    def exchange(self, data: bytes, *, hang_up: bool = False) -> bytes:
        """Everything the server answers to a connection that sends ``data``; with
        ``hang_up`` the client closes once it has sent, so every write of the server
        meets a closed connection (and the answer is empty)."""
        client, served = socket.socketpair()
        answer = bytearray()

        def talk() -> None:
            with client:
                client.settimeout(30)
                try:
                    client.sendall(data)
                    client.shutdown(socket.SHUT_WR)
                except OSError:
                    pass  # the server closed first (a 413, a 431): read what it said
                while not hang_up:
                    try:
                        chunk = client.recv(65536)
                    except OSError:
                        return
                    if not chunk:
                        return
                    answer.extend(chunk)

        thread = threading.Thread(target=talk, name="fuzz client")
        thread.start()
        if hang_up:
            thread.join()  # gone before the server reads a byte
        try:
            _Handler1(served, ("127.0.0.1", 1), self._server)
        finally:
            served.close()
            thread.join()
        return bytes(answer)

    def __call__(self, data: bytes) -> None:
        head = _first_head(data)
        if head is not None:
            _fields_as_the_standard_library_reads_them(head)
        answer = self.exchange(data)
        statuses = [int(status) for status in _STATUS.findall(answer)]
        # A route that raised is a 500; a full server would be 503 (one connection here).
        assert not {500, 503} & set(statuses), answer[:400]
        if FUZZ_TOKEN.encode() not in data:
            leaked = [mark for mark in self._marks if mark in answer]
            assert not leaked, (leaked, answer[:400])


def _first_head(data: bytes) -> bytes | None:
    """The header block of the first request in ``data`` (the lines after its request
    line, up to and with the blank line), as the handler reads it; None if unfinished."""
    _line, newline, rest = data.partition(b"\n")
    if not newline:
        return None
    lines = io.BytesIO(rest).readlines()
    for count, line in enumerate(lines, 1):
        if line in (b"\r\n", b"\n"):
            return b"".join(lines[:count])
    return None


def _fields_as_the_standard_library_reads_them(head: bytes) -> None:
    try:
        ours = parse_fields(head)
    except MalformedFields:
        return
    try:
        standard = http.client.parse_headers(io.BufferedReader(io.BytesIO(head)))
    except http.client.HTTPException:
        return  # past the standard library's own bounds (100 fields, 64 KiB lines)
    expected = [(name, value.strip(" \t")) for name, value in standard.items()]
    assert ours.items() == expected, (head[:400], ours.items(), expected)


async def _loop_token() -> anyio.lowlevel.EventLoopToken:
    return anyio.lowlevel.current_token()


def _utc_now() -> datetime:
    return datetime.now(UTC)


TARGETS: Final[dict[str, Callable[[bytes], None] | None]] = {
    "transcript": transcript,
    "media_ref": media_ref,
    "media_extract": media_extract,
    "card": card,
    # Built on first use: it opens a box (`HttpTarget`).
    "http": None,
}
