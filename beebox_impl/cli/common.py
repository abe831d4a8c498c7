"""What every `bbx` command shares: the ``--box`` option, exit codes, how an error
is said, and how output is written.

An error is one line on stderr that starts ``bbx: `` (`fail`), and the exit code
says what kind: `EXIT_FAILED` (1) for what went wrong or is not there,
`EXIT_USAGE` (2) for a request that is malformed, as argparse exits for its own.
Light on imports: every command loads it, the box's modules only when a command
asks whether a folder is a box (`box_refusal`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
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
    "discard_stdout",
    "fail",
    "output_failed",
    "write_output",
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


def write_output(output: str | bytes) -> int:
    """Write a command's output (text, or the bytes of a photo) to stdout, all of it
    now: 0, or `EXIT_FAILED` having said why it could not be written (a full disk, a
    device gone, no stdout at all). A reader that went away (`BrokenPipeError`) is
    the caller's to end on, as every command does."""
    stdout = sys.stdout
    if stdout is None:
        return fail("there is no standard output to write to")
    try:
        descriptor: int | None = stdout.fileno()
    except (OSError, ValueError, AttributeError):
        descriptor = None  # a stdout with no file under it: a host's or a test's
    try:
        if descriptor is None:
            _write_through(stdout, output)
        else:
            stdout.flush()
            data = output if isinstance(output, bytes) else _encoded_for(stdout, output)
            _write_all(descriptor, data)
    except BrokenPipeError:
        raise
    except OSError as error:
        return output_failed(error)
    return 0


def output_failed(error: OSError) -> int:
    """Say that stdout could not be written, as every command says it: `EXIT_FAILED`."""
    return fail(f"cannot write the output: {error.strerror or error}")


def _encoded_for(stdout: TextIO, text: str) -> bytes:
    # As stdout's own text layer would encode it (on POSIX it translates no newline).
    return text.encode(stdout.encoding or "utf-8", stdout.errors or "strict")


def _write_all(descriptor: int, data: bytes) -> None:
    # `os.write` until every byte is out. One large write through stdout's buffered
    # layer, to a pipe whose reader leaves during it, stops where the kernel cut it
    # and reports nothing: the rest is lost, the exit status 0 (CPython 3.11). The
    # write after a cut one says EPIPE.
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]


def _write_through(stdout: TextIO, output: str | bytes) -> None:
    if isinstance(output, bytes):
        stdout.buffer.write(output)
        stdout.buffer.flush()
    else:
        stdout.write(output)
        stdout.flush()


def discard_stdout() -> None:
    """Send what is left of stdout nowhere: what its buffer holds would fail again as
    the interpreter exits, where nobody could be told."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)


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
