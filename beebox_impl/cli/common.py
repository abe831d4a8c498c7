"""What every `bbx` command shares: the ``--box`` option, exit codes, and how an error
is said.

An error is one line on stderr that starts ``bbx: `` (`fail`), and the exit code
says what kind: `EXIT_FAILED` (1) for what went wrong or is not there,
`EXIT_USAGE` (2) for a request that is malformed, as argparse exits for its own.
Light on imports: every command loads it, the box's modules only when a command
asks whether a folder is a box (`box_refusal`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, TextIO

from beebox_spec.errors import BeeboxError

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "EXIT_FAILED",
    "EXIT_USAGE",
    "CommandRefused",
    "add_box_option",
    "box_refusal",
    "counted",
    "fail",
]

EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2


class CommandRefused(BeeboxError):
    """What a command will not do with what it was given; the message is its `bbx:` line."""


def add_box_option(parser: argparse.ArgumentParser) -> None:
    """``--box DIR``, default the current folder."""
    # Here, not at the top: ``bbx --help`` and ``bbx phases`` name no box.
    from pathlib import Path  # noqa: PLC0415

    parser.add_argument(
        "--box",
        type=Path,
        default=Path.cwd(),
        metavar="DIR",
        help="the box folder (default: the current folder)",
    )


def counted(most: int) -> Callable[[str], int]:
    """An argparse type: a whole number from 1 to ``most`` (a usage error otherwise)."""

    def count(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if not 1 <= value <= most:
            raise argparse.ArgumentTypeError(f"a count from 1 to {most}, not {text!r}")
        return value

    return count


def fail(message: str, code: int = EXIT_FAILED, *, stream: TextIO | None = None) -> int:
    """Say ``message`` as every `bbx` error is said (one line on stderr, ``bbx: ``
    first); answers ``code``, for the command to return."""
    # A message of several lines (a YAML parser's, with its excerpt) is one line here.
    one_line = " ".join(part.strip() for part in message.splitlines() if part.strip())
    print(f"bbx: {one_line}", file=sys.stderr if stream is None else stream)
    return code


def box_refusal(folder: Path) -> str | None:
    """Why ``folder`` is not a box a command can read (None: it is one)."""
    # Imported here: the box's module brings the whole box, which most commands never open.
    from beebox_impl.box import is_box  # noqa: PLC0415

    path = folder.expanduser()
    if not path.exists():
        return f"{folder} is not a box: there is no such folder"
    if not path.is_dir():
        return f"{folder} is not a box: it is not a folder"
    if not is_box(folder):
        return f"{folder} is not a box: run `bbx init {folder}`"
    return None
