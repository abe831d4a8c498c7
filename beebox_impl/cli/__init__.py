"""`bbx`, the beebox command line.

Subcommands land with the parts of the box they drive:

- ``bbx phases`` prints the chat run phase table, generated from the spec;
- ``bbx chat sessions [--limit N] [--json]`` lists the box's chat sessions, newest
  first: id, title, last activity, entries and photos (`beebox_impl.cli.sessions`);
- ``bbx chat history [SESSION] [--tail N | --page OFFSET LIMIT] [--json]`` reads a
  session's history from its transcript, photos as references (no SESSION: the
  box's current chat);
- ``bbx chat media REF -o FILE`` writes the one photo a reference names;
- ``bbx init``, ``bbx serve``, ``bbx chat send`` make, run and talk to a box
  (`beebox_impl.cli.box`);
- ``bbx chat review status|run`` reviews the box's chats into their husk cards
  (`beebox_impl.review.command`).

A box is a folder (``--box``, default the current folder); its transcripts are
found where the box finds them (its own folder, where the echo engine writes, then
Claude Code's: `beebox_impl.transcript.location.transcript_roots`) and read in its
photo mode (its settings file's, every photo by reference by default). Data goes
to stdout. An error is one line on stderr starting ``bbx: `` (the box's own logged
warnings too), never a traceback; exit 1 for what failed or is not there, 2 for a
malformed request (`beebox_impl.cli.common`).

Each command imports what it uses, when it runs. The parser knows every command
by its name and one-line help, and adds a command's options only once the command
line names it (`build_parser`'s ``complete=False``, as `main` parses): their
defaults and choices come from the modules that run the command. So ``bbx --help``,
``bbx phases``, ``bbx chat history`` and ``bbx chat media`` import neither the box,
its HTTP server, sessions and engines, the review nor YAML, and start in a few
times what the interpreter takes (`tests/impl/test_cli_imports.py` pins the
modules; `bench/peers.py` measures the processes).

`main` runs a command line in the calling process and answers its exit status;
`program` is `bbx` as a process of its own (the console script), which ends a short
read without tearing the interpreter down (`tests/impl/test_cli_program.py`).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Final, NoReturn

from beebox_impl.cli.common import (
    EXIT_FAILED,
    EXIT_USAGE,
    add_box_option,
    counted,
    discard_stdout,
    fail,
    output_failed,
    write_output,
)

__all__ = [
    "DEFAULT_TAIL",
    "REVIEW_HELP",
    "build_parser",
    "is_short_read",
    "main",
    "program",
]

DEFAULT_TAIL: Final = 50
# Sessions `bbx chat sessions` lists unless --limit says otherwise, and at most.
DEFAULT_SESSIONS_LISTED: Final = 20
MAX_SESSIONS_LISTED: Final = 1000
# A process stopped by Ctrl-C exits as the shell would report it (128 + SIGINT).
EXIT_INTERRUPTED: Final = 130
# `bbx chat review`'s line in `bbx chat -h` (its own parser: `beebox_impl.review.command`).
REVIEW_HELP: Final = "the nightly chat review: title and summarise sessions that grew"

# What adds a command's options to its parser.
AddOptions = Callable[[argparse.ArgumentParser], None]


if TYPE_CHECKING:
    _SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    # Generic to type checkers only.
    _SubParsers = argparse._SubParsersAction


class _Commands(_SubParsers):
    """Subcommands whose options may wait until the command line names one.

    `add_command` makes a command's parser with its help; its options are added at
    once (``complete``) or kept aside until argparse reaches the command's name on
    the command line, just before the command's own arguments are parsed.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.complete = True
        self._waiting: dict[str, AddOptions] = {}

    def add_command(self, name: str, help: str, options: AddOptions) -> argparse.ArgumentParser:
        """Add the command ``name``; ``options`` adds its options to its parser."""
        parser = self.add_parser(name, help=help, formatter_class=help_formatter)
        if self.complete:
            options(parser)
        else:
            self._waiting[name] = options
        return parser

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        # ``values``: the command's name, then the arguments left for its parser.
        if isinstance(values, list) and values and values[0] in self._waiting:
            self._waiting.pop(values[0])(self.choices[values[0]])
        super().__call__(parser, namespace, values, option_string)


def help_formatter(prog: str) -> argparse.HelpFormatter:
    """argparse's help formatter, as wide as the terminal, without importing shutil.

    argparse makes a formatter for every option it adds (to check its metavar), and
    left to find the width itself the formatter imports shutil, with the archive
    modules shutil brings: ~2 ms of every command's start, help or not. The width is
    found as `shutil.get_terminal_size` finds it: ``COLUMNS``, else the terminal of
    stdout, else 80.
    """
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0 and sys.__stdout__ is not None:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (ValueError, OSError):
            columns = 0
    return argparse.HelpFormatter(prog, width=(columns or 80) - 2)


def _commands(
    parser: argparse.ArgumentParser, *, complete: bool, dest: str, metavar: str, required: bool
) -> _Commands:
    commands = parser.add_subparsers(
        action=_Commands,
        dest=dest,
        metavar=metavar,
        required=required,
        help=f"what to do ({parser.prog} {metavar} -h for its options)",
    )
    assert isinstance(commands, _Commands)
    commands.complete = complete
    return commands


def build_parser(*, complete: bool = True) -> argparse.ArgumentParser:
    """The argument parser of `bbx` and its subcommands.

    ``complete=False`` adds a command's options only when the command line names
    the command (what `main` parses with): a command's options are imported from
    the module that runs it, so naming one command imports nothing of the others.
    True adds every option at once, for a reader of the whole tree.
    """
    parser = argparse.ArgumentParser(
        prog="bbx", description="Run and inspect a beebox.", formatter_class=help_formatter
    )
    commands = _commands(
        parser, complete=complete, dest="command", metavar="COMMAND", required=False
    )
    commands.add_command(
        "phases", "print the chat run phase table and its legal transitions", _phases_options
    )
    commands.add_command(
        "chat",
        "the box's chat: its sessions, history, photos, sends and review",
        partial(_chat_commands, complete=complete),
    )
    commands.add_command("init", "make a folder a box (idempotent)", partial(_box_options, "init"))
    commands.add_command(
        "serve",
        "serve a box over HTTP (the folder is made a box if it is not one)",
        partial(_box_options, "serve"),
    )
    return parser


def _chat_commands(chat: argparse.ArgumentParser, *, complete: bool) -> None:
    commands = _commands(
        chat, complete=complete, dest="chat_command", metavar="CHAT_COMMAND", required=True
    )
    commands.add_command(
        "sessions", "list the box's chat sessions, newest first", _sessions_options
    )
    commands.add_command("history", "print a session's history", _history_options)
    commands.add_command("media", "write the photo a media reference names", _media_options)
    commands.add_command(
        "permissions",
        "how the agent's permission requests ended, newest first",
        partial(_box_options, "chat permissions"),
    )
    commands.add_command(
        "send",
        "send a message to a running box; print its turn and session ids",
        partial(_box_options, "chat send"),
    )
    commands.add_command("review", REVIEW_HELP, _review_options)


def _phases_options(phases: argparse.ArgumentParser) -> None:
    phases.add_argument("--markdown", action="store_true", help="print it as Markdown")


def _sessions_options(sessions: argparse.ArgumentParser) -> None:
    sessions.add_argument(
        "--limit",
        type=counted(MAX_SESSIONS_LISTED),
        default=DEFAULT_SESSIONS_LISTED,
        metavar="N",
        help=f"the N newest (1-{MAX_SESSIONS_LISTED}; default {DEFAULT_SESSIONS_LISTED})",
    )
    sessions.add_argument("--json", action="store_true", help="print them as JSON")
    add_box_option(sessions)


def _history_options(history: argparse.ArgumentParser) -> None:
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


def _media_options(media: argparse.ArgumentParser) -> None:
    media.add_argument("ref", help="<sessionId>/<entryUuid>/<index>, as history prints it")
    media.add_argument(
        "-o", "--output", required=True, metavar="FILE", help="where to write it (- for stdout)"
    )
    add_box_option(media)


def _box_options(command: str, parser: argparse.ArgumentParser) -> None:
    # Imported once the command line names one of its commands: the whole box.
    from beebox_impl.cli.box import add_box_options  # noqa: PLC0415

    add_box_options(command, parser)


def _review_options(review: argparse.ArgumentParser) -> None:
    from beebox_impl.review.command import add_review_options  # noqa: PLC0415

    add_review_options(review)


def main(argv: Sequence[str] | None = None) -> int:
    """Run `bbx` with ``argv`` (None: this process's own command line); its exit status."""
    parser = build_parser(complete=False)
    args = parser.parse_args(argv)
    return _run_command(parser, args)


def program() -> NoReturn:
    """`bbx` as a process of its own: the console script and ``python -m beebox_impl``.

    What `main` does, then exit. A short read (`is_short_read`) runs without the
    cycle collector and ends the process as soon as its output is out, without
    tearing the interpreter down: it starts no thread, logs nothing and leaves no
    file open, so the teardown would only free, one by one, the modules and objects
    the process is about to give back whole — about a tenth of a warm read's time
    (`bench/peers.py`; mypy ends its runs so too). Every other command exits as
    Python does.
    """
    parser = build_parser(complete=False)
    args = parser.parse_args()
    if not is_short_read(args):
        sys.exit(_run_command(parser, args))
    # The read makes no reference cycles worth finding before the process ends.
    gc.disable()
    status = _run_command(parser, args)
    # What stdout's buffer still holds goes now: no teardown will flush it.
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:
        status = EXIT_FAILED
    except OSError as error:
        status = output_failed(error)
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stderr.flush()
    os._exit(status)


def is_short_read(args: argparse.Namespace) -> bool:
    """Whether ``args`` name a command `program` ends at once: `phases`, or a read of
    a named transcript (`chat history SESSION`, `chat media REF`)."""
    return args.command == "phases" or _reads_a_named_transcript(args)


def _run_command(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    try:
        return _run(parser, args)
    except KeyboardInterrupt:
        return fail("interrupted", EXIT_INTERRUPTED)
    except BrokenPipeError:
        # The reader went away (`bbx chat history | head`): nobody to tell.
        discard_stdout()
        return EXIT_FAILED


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    # Each branch imports the module that runs its command, and only that one.
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    if args.command == "phases":
        # The spec's table alone: no box, nothing logged.
        from beebox_spec.phase_doc import render_markdown, render_text  # noqa: PLC0415

        return write_output(render_markdown() if args.markdown else render_text())
    if _reads_a_named_transcript(args):
        # What such a read could not do (shelve its index) it says itself
        # (`IndexShelf`'s ``warn``), and it logs nothing else a person must see.
        from beebox_impl.cli.transcripts import run_transcript_command  # noqa: PLC0415

        return run_transcript_command(args)
    # A box's other commands: its logged warnings are said as `bbx:` lines. Imported
    # only here: ``--help``, a malformed command line, `phases` and a read need no
    # logging (a few milliseconds of every start).
    from beebox_impl.cli.box_warnings import warnings_said_as_bbx  # noqa: PLC0415

    with warnings_said_as_bbx():
        return _run_box_command(parser, args)


def _reads_a_named_transcript(args: argparse.Namespace) -> bool:
    # `chat media REF`, and `chat history SESSION`; a history of the current chat
    # reads the box's session file first, which logs what it cannot read.
    if args.command != "chat":
        return False
    return args.chat_command == "media" or (
        args.chat_command == "history" and args.session is not None
    )


def _run_box_command(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.command == "chat" and args.chat_command in ("history", "media", "sessions"):
        from beebox_impl.cli.transcripts import run_transcript_command  # noqa: PLC0415

        return run_transcript_command(args)
    if args.command == "chat" and args.chat_command == "review":
        from beebox_impl.review.command import run_review_command  # noqa: PLC0415

        return run_review_command(args)
    from beebox_impl.cli.box import run_box_command  # noqa: PLC0415

    handled = run_box_command(args)
    if handled is not None:
        return handled
    parser.print_help()
    return EXIT_USAGE
