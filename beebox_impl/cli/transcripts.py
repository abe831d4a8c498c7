"""The `bbx` commands that read a box's transcripts: ``chat history``, ``chat media``
and ``chat sessions``.

A box's transcripts are found where the box finds them (its own folder, where the
echo engine writes, then Claude Code's: `beebox_impl.transcript.location.transcript_roots`)
and read in its photo mode (its settings file's, every photo by reference by
default), through the index shelf in its state folder, so the next command starts
warm. ``history`` and ``media`` import the transcript reader and the settings, and
nothing of the box that serves (`tests/impl/test_cli_imports.py`); ``sessions``
also reads the page's husk cards (`beebox_impl.cli.sessions`).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from beebox_impl.cli import DEFAULT_TAIL
from beebox_impl.cli.common import (
    EXIT_FAILED,
    EXIT_USAGE,
    box_refusal,
    fail,
    write_output,
)
from beebox_impl.layout import state_dir
from beebox_impl.settings import InvalidBoxSettings, load_box_settings
from beebox_impl.transcript.history import PageSlice, TailSlice, read_history
from beebox_impl.transcript.index import TranscriptIndexCache
from beebox_impl.transcript.location import (
    InvalidSessionId,
    encode_project_dir,
    locate_transcript_named,
    transcript_roots,
)
from beebox_impl.transcript.persist import IndexShelf
from beebox_spec.entries import SessionContentBlock, SessionEntry, SessionHistory
from beebox_spec.media import MalformedMediaRef, parse_media_ref
from beebox_spec.transcript import InvalidHistorySlice

__all__ = ["run_transcript_command"]


def run_transcript_command(args: argparse.Namespace) -> int:
    """Run ``bbx chat history``, ``media`` or ``sessions``, as ``args`` name it."""
    run = {"history": _chat_history, "media": _chat_media, "sessions": _chat_sessions}
    try:
        return run[args.chat_command](args)
    except InvalidBoxSettings as error:
        # The box's settings file, which a read follows (the photo mode) too.
        return fail(str(error))


def _index_cache(box_root: Path) -> TranscriptIndexCache:
    """The index cache a command reads the box's transcripts through: in the box's
    photo mode (its settings file's: `InvalidBoxSettings`), as the box itself reads
    them, so the command shows what the page shows and no photo bytes in ``refs``."""
    photos = load_box_settings(box_root).history.photos
    # In a box, indexes are shelved in its state folder: the next command starts warm.
    state_directory = state_dir(box_root)
    shelf = (
        IndexShelf.in_box_state(state_directory, warn=_say_warning)
        if state_directory.is_dir()
        else None
    )
    return TranscriptIndexCache(capacity=1, shelf=shelf, photos=photos)


def _say_warning(message: str) -> None:
    # As the box's other warnings are said (`beebox_impl.cli.box_warnings`), without
    # loading `logging` for a read (`beebox_impl.logs`).
    fail(message)


def _transcript_of(box_root: Path) -> Callable[[str], Path]:
    """Where the box's transcript of a session is, as the box finds it (its own folder,
    where the echo engine writes, then Claude Code's); `InvalidSessionId` for a bad id."""
    roots = transcript_roots(box_root, os.environ, Path.home())
    # The box's folder is resolved once (a path walk), not once a session.
    encoded = encode_project_dir(box_root)
    return lambda session_id: locate_transcript_named(encoded, session_id, roots)


def _chat_sessions(args: argparse.Namespace) -> int:
    # Imported here: the cards' YAML reader is not every command's.
    from beebox_impl.cli.sessions import list_sessions, write_sessions  # noqa: PLC0415

    refusal = box_refusal(args.box)
    if refusal is not None:
        return fail(refusal)
    box_root = args.box.expanduser().resolve()
    try:
        sessions, more = list_sessions(
            box_root,
            transcript_of=_transcript_of(box_root),
            cache=_index_cache(box_root),
            limit=args.limit,
        )
    except OSError as error:
        return fail(f"cannot list the sessions of {box_root}: {error}")
    if args.json:
        return write_output(json.dumps(sessions, ensure_ascii=False, indent=2) + "\n")
    table = io.StringIO()
    write_sessions(sessions, more, table)
    return write_output(table.getvalue())


def _current_session(box: Path) -> str | None:
    """The box's current chat session, or None having said why there is none."""
    from beebox_impl.cli.sessions import current_session_id  # noqa: PLC0415

    refusal = box_refusal(box)
    if refusal is not None:
        fail(refusal)
        return None
    session_id = current_session_id(box.expanduser().resolve())
    if session_id is None:
        fail(
            f"the box at {box} has no chat session yet: `bbx chat send TEXT` starts one,"
            " `bbx chat sessions` lists the others"
        )
    return session_id


def _chat_history(args: argparse.Namespace) -> int:
    session_id = args.session if args.session is not None else _current_session(args.box)
    if session_id is None:
        return EXIT_FAILED
    try:
        path = _transcript_of(args.box)(session_id)
        tail = DEFAULT_TAIL if args.tail is None else args.tail
        window = PageSlice(*args.page) if args.page else TailSlice(tail)
    except (InvalidSessionId, InvalidHistorySlice) as error:
        return fail(str(error), EXIT_USAGE)
    # A session with no readable transcript reads as empty; at a terminal, say why.
    if not path.is_file():
        return fail(f"no transcript for session {session_id} at {path}")
    history = read_history(path, session_id, window, cache=_index_cache(args.box))
    if args.json:
        return write_output(json.dumps(history, ensure_ascii=False, indent=2) + "\n")
    text = io.StringIO()
    _print_history(history, text)
    return write_output(text.getvalue())


def _print_history(history: SessionHistory, out: TextIO) -> None:
    entries = history["entries"]
    out.write(f"session {history['sessionId']}: {history['total']} entries")
    if entries:
        out.write(f", showing {len(entries)}")
    out.write("\n")
    for entry in entries:
        out.write("\n" + _entry_header(entry) + "\n")
        for block in entry["content"]:
            line = _block_text(block)
            if line:
                out.write(line + "\n")


def _entry_header(entry: SessionEntry) -> str:
    who = entry.get("user") or entry["type"]
    return f"── {who} · {entry['timestamp'] or 'no time'} · {entry['uuid'] or 'no uuid'}"


def _block_text(block: SessionContentBlock) -> str:
    match block["type"]:
        case "text" | "thinking":
            prefix = "(thinking) " if block["type"] == "thinking" else ""
            return prefix + block.get("text", "")
        case "tool_use":
            summary = block.get("inputSummary", "")
            return f"→ {block.get('toolName', '?')}" + (f": {summary}" if summary else "")
        case "tool_result":
            return f"← {block.get('resultSummary', '')}"
        case "image":
            if "imageRef" in block:
                return f"[photo: bbx chat media {block['imageRef']} -o FILE]"
            return "[image]"


def _chat_media(args: argparse.Namespace) -> int:
    # Imported here: the photo fetch is this command's alone.
    from beebox_impl.transcript.media import MediaFound, fetch_session_media  # noqa: PLC0415

    try:
        ref = parse_media_ref(args.ref)
        path = _transcript_of(args.box)(ref["sessionId"])
    except (MalformedMediaRef, InvalidSessionId) as error:
        return fail(f"malformed media reference: {error}", EXIT_USAGE)
    result = fetch_session_media(path, ref, cache=_index_cache(args.box))
    if not isinstance(result, MediaFound):
        return fail(f"no photo at {args.ref}: {result.reason}")
    if args.output == "-":
        return write_output(result.data)
    try:
        Path(args.output).write_bytes(result.data)
    except OSError as error:
        return fail(f"cannot write {args.output}: {error.strerror or error}")
    print(f"wrote {len(result.data)} bytes ({result.media_type}) to {args.output}", file=sys.stderr)
    return 0
