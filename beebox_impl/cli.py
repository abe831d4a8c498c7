"""`bbx`, the beebox command line.

Subcommands land with the parts of the box they drive:

- ``bbx phases`` prints the chat run phase table, generated from the spec;
- ``bbx chat history SESSION [--tail N | --page OFFSET LIMIT] [--json]`` reads a
  session's history from its transcript, photos as references;
- ``bbx chat media REF -o FILE`` writes the one photo a reference names;
- ``bbx init``, ``bbx serve``, ``bbx chat send`` make, run and talk to a box
  (`beebox_impl.cli_box`);
- ``bbx chat review status|run`` reviews the box's chats into their husk cards
  (`beebox_impl.review.command`).

A box is a folder (``--box``, default the current folder); its transcripts are
found where the engine writes them (`beebox_impl.transcript.location`). Errors go
to stderr with a non-zero exit; data goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from beebox_impl.cli_box import add_box_commands, run_box_command
from beebox_impl.review.command import add_review_commands, run_review_command
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
    projects_root,
    transcript_path,
)
from beebox_spec.entries import SessionContentBlock, SessionEntry, SessionHistory
from beebox_spec.media import MalformedMediaRef, parse_media_ref
from beebox_spec.phase_doc import render_markdown, render_text
from beebox_spec.transcript import InvalidHistorySlice

__all__ = ["build_parser", "main"]

# Exit codes: 0 done, 1 the thing asked for is not there, 2 the request is malformed.
EXIT_NOT_FOUND = 1
EXIT_USAGE = 2
DEFAULT_TAIL = 50


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `bbx` and its subcommands."""
    parser = argparse.ArgumentParser(prog="bbx", description="Run and inspect a beebox.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    phases = commands.add_parser(
        "phases", help="print the chat run phase table and its legal transitions"
    )
    phases.add_argument("--markdown", action="store_true", help="print it as Markdown")

    chat = commands.add_parser("chat", help="the box's chat: history and photos")
    chat_commands = chat.add_subparsers(dest="chat_command", metavar="CHAT_COMMAND", required=True)

    history = chat_commands.add_parser("history", help="print a session's history")
    history.add_argument("session", help="the SDK session id")
    window = history.add_mutually_exclusive_group()
    window.add_argument(
        "--tail", type=int, metavar="N", help=f"the last N entries (default {DEFAULT_TAIL})"
    )
    window.add_argument(
        "--page", type=int, nargs=2, metavar=("OFFSET", "LIMIT"), help="LIMIT entries from OFFSET"
    )
    history.add_argument("--json", action="store_true", help="print the history as JSON")
    _add_box_option(history)

    media = chat_commands.add_parser("media", help="write the photo a media reference names")
    media.add_argument("ref", help="<sessionId>/<entryUuid>/<index>, as history prints it")
    media.add_argument(
        "-o", "--output", required=True, metavar="FILE", help="where to write it (- for stdout)"
    )
    _add_box_option(media)
    add_box_commands(commands, chat_commands)
    add_review_commands(chat_commands)
    return parser


def _add_box_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--box", type=Path, default=Path.cwd(), metavar="DIR", help="the box folder (default: .)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run `bbx` with ``argv`` (None: this process's own command line).

    The ``bbx`` script enters through `beebox_impl.script`, which restarts `bbx
    serve` before the imports and passes its arguments here.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "phases":
        sys.stdout.write(render_markdown() if args.markdown else render_text())
        return 0
    if args.command == "chat" and args.chat_command == "history":
        return _chat_history(args)
    if args.command == "chat" and args.chat_command == "media":
        return _chat_media(args)
    if args.command == "chat" and args.chat_command == "review":
        return run_review_command(args)
    # Without arguments this is the process's own command line (``python -m
    # beebox_impl.cli``), which `bbx serve` may restart; a host's `main([...])` never.
    handled = run_box_command(args, owns_process=argv is None)
    if handled is not None:
        return handled
    parser.print_help()
    return EXIT_USAGE


def _projects_root() -> Path:
    return projects_root(os.environ, Path.home())


def _index_cache(box_root: Path) -> TranscriptIndexCache:
    # In a box, indexes are shelved in its state folder: the next command starts warm.
    state_directory = database_path(box_root).parent
    shelf = IndexShelf.in_box_state(state_directory) if state_directory.is_dir() else None
    return TranscriptIndexCache(capacity=1, shelf=shelf)


def _chat_history(args: argparse.Namespace) -> int:
    try:
        path = transcript_path(args.box, args.session, _projects_root())
        tail = DEFAULT_TAIL if args.tail is None else args.tail
        window = PageSlice(*args.page) if args.page else TailSlice(tail)
    except (InvalidSessionId, InvalidHistorySlice) as error:
        print(f"bbx: {error}", file=sys.stderr)
        return EXIT_USAGE
    # A session with no readable transcript reads as empty; at a terminal, say why.
    if not path.is_file():
        print(f"bbx: no transcript for session {args.session} at {path}", file=sys.stderr)
        return EXIT_NOT_FOUND
    history = read_history(path, args.session, window, cache=_index_cache(args.box))
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
        path = transcript_path(args.box, ref["sessionId"], _projects_root())
    except (MalformedMediaRef, InvalidSessionId) as error:
        print(f"bbx: malformed media reference: {error}", file=sys.stderr)
        return EXIT_USAGE
    result = fetch_media(path, ref, cache=_index_cache(args.box))
    if not isinstance(result, MediaFound):
        print(f"bbx: no photo at {args.ref}: {result.reason}", file=sys.stderr)
        return EXIT_NOT_FOUND
    if args.output == "-":
        sys.stdout.buffer.write(result.data)
        sys.stdout.buffer.flush()
    else:
        Path(args.output).write_bytes(result.data)
        print(
            f"wrote {len(result.data)} bytes ({result.media_type}) to {args.output}",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
