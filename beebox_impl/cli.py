"""`bbx`, the beebox command line.

Subcommands land with the parts of the box they drive:

- ``bbx phases`` prints the chat run phase table, generated from the spec;
- ``bbx chat sessions [--limit N] [--json]`` lists the box's chat sessions, newest
  first: id, title, last activity, entries and photos (`beebox_impl.cli_sessions`);
- ``bbx chat history [SESSION] [--tail N | --page OFFSET LIMIT] [--json]`` reads a
  session's history from its transcript, photos as references (no SESSION: the
  box's current chat);
- ``bbx chat media REF -o FILE`` writes the one photo a reference names;
- ``bbx init``, ``bbx serve``, ``bbx chat send`` make, run and talk to a box
  (`beebox_impl.cli_box`);
- ``bbx chat review status|run`` reviews the box's chats into their husk cards
  (`beebox_impl.review.command`).

A box is a folder (``--box``, default the current folder); its transcripts are
found where the box finds them (its own folder, where the echo engine writes, then
Claude Code's: `beebox_impl.transcript.location.transcript_roots`) and read in its
photo mode (its settings file's, every photo by reference by default). Data goes
to stdout. An error is one line on stderr starting ``bbx: `` (the box's own logged
warnings too), never a traceback; exit 1 for what failed or is not there, 2 for a
malformed request (`beebox_impl.cli_common`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Final, TextIO

from beebox_impl.cli_box import add_box_commands, run_box_command
from beebox_impl.cli_common import (
    EXIT_FAILED,
    EXIT_USAGE,
    add_box_option,
    box_refusal,
    counted,
    fail,
)
from beebox_impl.review.command import add_review_commands, run_review_command
from beebox_impl.settings import InvalidBoxSettings, load_box_settings
from beebox_impl.store.database import database_path
from beebox_impl.transcript import (
    IndexShelf,
    MediaFound,
    PageSlice,
    TailSlice,
    TranscriptIndexCache,
    fetch_media,
    read_history,
)
from beebox_impl.transcript.location import (
    InvalidSessionId,
    encode_project_dir,
    locate_transcript_named,
    transcript_roots,
)
from beebox_spec.entries import SessionContentBlock, SessionEntry, SessionHistory
from beebox_spec.media import MalformedMediaRef, parse_media_ref
from beebox_spec.phase_doc import render_markdown, render_text
from beebox_spec.transcript import InvalidHistorySlice

__all__ = ["build_parser", "main"]

DEFAULT_TAIL: Final = 50
# Sessions `bbx chat sessions` lists unless --limit says otherwise, and at most.
DEFAULT_SESSIONS_LISTED: Final = 20
MAX_SESSIONS_LISTED: Final = 1000
# A process stopped by Ctrl-C exits as the shell would report it (128 + SIGINT).
EXIT_INTERRUPTED: Final = 130


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `bbx` and its subcommands."""
    parser = argparse.ArgumentParser(prog="bbx", description="Run and inspect a beebox.")
    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", help="what to do (bbx COMMAND -h for its options)"
    )

    phases = commands.add_parser(
        "phases", help="print the chat run phase table and its legal transitions"
    )
    phases.add_argument("--markdown", action="store_true", help="print it as Markdown")

    chat = commands.add_parser(
        "chat", help="the box's chat: its sessions, history, photos, sends and review"
    )
    chat_commands = chat.add_subparsers(
        dest="chat_command",
        metavar="CHAT_COMMAND",
        required=True,
        help="what to do (bbx chat CHAT_COMMAND -h for its options)",
    )

    sessions = chat_commands.add_parser(
        "sessions", help="list the box's chat sessions, newest first"
    )
    sessions.add_argument(
        "--limit",
        type=counted(MAX_SESSIONS_LISTED),
        default=DEFAULT_SESSIONS_LISTED,
        metavar="N",
        help=f"the N newest (1-{MAX_SESSIONS_LISTED}; default {DEFAULT_SESSIONS_LISTED})",
    )
    sessions.add_argument("--json", action="store_true", help="print them as JSON")
    add_box_option(sessions)

    history = chat_commands.add_parser("history", help="print a session's history")
    history.add_argument(
        "session",
        nargs="?",
        help="the SDK session id, as `bbx chat sessions` lists it (default: the box's current"
        " chat)",
    )
    window = history.add_mutually_exclusive_group()
    window.add_argument(
        "--tail", type=int, metavar="N", help=f"the last N entries (default {DEFAULT_TAIL})"
    )
    window.add_argument(
        "--page", type=int, nargs=2, metavar=("OFFSET", "LIMIT"), help="LIMIT entries from OFFSET"
    )
    history.add_argument("--json", action="store_true", help="print the history as JSON")
    add_box_option(history)

    media = chat_commands.add_parser("media", help="write the photo a media reference names")
    media.add_argument("ref", help="<sessionId>/<entryUuid>/<index>, as history prints it")
    media.add_argument(
        "-o", "--output", required=True, metavar="FILE", help="where to write it (- for stdout)"
    )
    add_box_option(media)
    add_box_commands(commands, chat_commands)
    add_review_commands(chat_commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run `bbx` with ``argv`` (None: this process's own command line).

    The ``bbx`` script enters through `beebox_impl.script`, which restarts `bbx
    serve` before the imports and passes its arguments here.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    with _warnings_said_as_bbx():
        try:
            return _run(parser, args, owns_process=argv is None)
        except KeyboardInterrupt:
            return fail("interrupted", EXIT_INTERRUPTED)
        except InvalidBoxSettings as error:
            # The box's settings file, which a read follows (the photo mode) too.
            return fail(str(error))
        except BrokenPipeError:
            # The reader went away (`bbx chat history | head`): nobody to tell.
            _discard_stdout()
            return EXIT_FAILED


def _discard_stdout() -> None:
    # What is left in stdout's buffer would fail again as the interpreter exits.
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


class _SaidAsBbx(logging.Handler):
    """The box's own warnings, said on stderr as `bbx` says its errors (`fail`)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            fail(record.getMessage())
        except Exception:
            self.handleError(record)


@contextlib.contextmanager
def _warnings_said_as_bbx() -> Iterator[None]:
    # For as long as the command runs: a host that calls `main` keeps its logging as it was.
    package = logging.getLogger("beebox_impl")
    handler = _SaidAsBbx(logging.WARNING)
    package.addHandler(handler)
    try:
        yield
    finally:
        package.removeHandler(handler)


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace, *, owns_process: bool) -> int:
    if args.command == "phases":
        sys.stdout.write(render_markdown() if args.markdown else render_text())
        return 0
    if args.command == "chat" and args.chat_command == "sessions":
        return _chat_sessions(args)
    if args.command == "chat" and args.chat_command == "history":
        return _chat_history(args)
    if args.command == "chat" and args.chat_command == "media":
        return _chat_media(args)
    if args.command == "chat" and args.chat_command == "review":
        return run_review_command(args)
    # Without arguments this is the process's own command line (``python -m
    # beebox_impl.cli``), which `bbx serve` may restart; a host's `main([...])` never.
    handled = run_box_command(args, owns_process=owns_process)
    if handled is not None:
        return handled
    parser.print_help()
    return EXIT_USAGE


def _index_cache(box_root: Path) -> TranscriptIndexCache:
    """The index cache a command reads the box's transcripts through: in the box's
    photo mode (its settings file's: `InvalidBoxSettings`), as the box itself reads
    them, so the command shows what the page shows and no photo bytes in ``refs``."""
    photos = load_box_settings(box_root).history.photos
    # In a box, indexes are shelved in its state folder: the next command starts warm.
    state_directory = database_path(box_root).parent
    shelf = IndexShelf.in_box_state(state_directory) if state_directory.is_dir() else None
    return TranscriptIndexCache(capacity=1, shelf=shelf, photos=photos)


def _transcript_of(box_root: Path) -> Callable[[str], Path]:
    """Where the box's transcript of a session is, as the box finds it (its own folder,
    where the echo engine writes, then Claude Code's); `InvalidSessionId` for a bad id."""
    roots = transcript_roots(box_root, os.environ, Path.home())
    # The box's folder is resolved once (a path walk), not once a session.
    encoded = encode_project_dir(box_root)
    return lambda session_id: locate_transcript_named(encoded, session_id, roots)


def _chat_sessions(args: argparse.Namespace) -> int:
    # Imported here: the cards' YAML reader is not every command's.
    from beebox_impl.cli_sessions import list_sessions, write_sessions  # noqa: PLC0415

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
        json.dump(sessions, sys.stdout, ensure_ascii=False, indent=2)
        sys.stdout.write("\n")
    else:
        write_sessions(sessions, more, sys.stdout)
    return 0


def _current_session(box: Path) -> str | None:
    """The box's current chat session, or None having said why there is none."""
    from beebox_impl.cli_sessions import current_session_id  # noqa: PLC0415

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
        json.dump(history, sys.stdout, ensure_ascii=False, indent=2)
        sys.stdout.write("\n")
    else:
        _print_history(history, sys.stdout)
    return 0


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
    try:
        ref = parse_media_ref(args.ref)
        path = _transcript_of(args.box)(ref["sessionId"])
    except (MalformedMediaRef, InvalidSessionId) as error:
        return fail(f"malformed media reference: {error}", EXIT_USAGE)
    result = fetch_media(path, ref, cache=_index_cache(args.box))
    if not isinstance(result, MediaFound):
        return fail(f"no photo at {args.ref}: {result.reason}")
    if args.output == "-":
        sys.stdout.buffer.write(result.data)
        sys.stdout.buffer.flush()
    else:
        try:
            Path(args.output).write_bytes(result.data)
        except OSError as error:
            return fail(f"cannot write {args.output}: {error.strerror or error}")
        print(
            f"wrote {len(result.data)} bytes ({result.media_type}) to {args.output}",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
