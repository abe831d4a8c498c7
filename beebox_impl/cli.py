"""`bbx`, the beebox command line.

Subcommands land with the parts of the box they drive; today the box's rules exist
as the executable specification, and ``bbx phases`` prints its chat phase table.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from beebox_spec.phase_doc import render_markdown, render_text


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `bbx` and its subcommands."""
    parser = argparse.ArgumentParser(prog="bbx", description="Run and inspect a beebox.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    phases = commands.add_parser(
        "phases", help="print the chat run phase table and its legal transitions"
    )
    phases.add_argument("--markdown", action="store_true", help="print it as Markdown")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `bbx` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "phases":
        sys.stdout.write(render_markdown() if args.markdown else render_text())
        return 0
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
