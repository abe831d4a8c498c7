"""`python -m beebox_spec`: print the chat phase table and its legal transitions."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from beebox_spec.phase_doc import render_markdown, render_text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m beebox_spec",
        description="Print the chat run phase table and transitions, generated from the spec.",
    )
    parser.add_argument("--markdown", action="store_true", help="print docs/phases.md instead")
    args = parser.parse_args(argv)
    sys.stdout.write(render_markdown() if args.markdown else render_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
