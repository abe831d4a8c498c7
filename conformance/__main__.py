"""`python -m conformance`: run vector files against beebox (see `conformance.runner`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from conformance.runner import PACKAGED_VECTORS, count_kinds, run_files
from conformance.targets.spec import SPEC_HANDLERS


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m conformance",
        description="Run beebox conformance vectors (files or folders) against a target.",
    )
    parser.add_argument(
        "paths",
        nargs="*",
        type=Path,
        metavar="PATH",
        help="vector files or folders (default: the packaged vectors)",
    )
    parser.add_argument(
        "--target",
        choices=["spec"],
        default="spec",
        help="what to check: the executable spec (beebox_spec)",
    )
    parser.add_argument("--list", action="store_true", help="print the kinds and their case counts")
    args = parser.parse_args(argv)
    paths: list[Path] = args.paths or [PACKAGED_VECTORS]

    if args.list:
        counts = count_kinds(paths)
        for kind in sorted(counts):
            print(f"{kind}\t{counts[kind]}")
        print(f"{sum(counts.values())} cases in {len(counts)} kinds")
        return 0

    report = run_files(paths, SPEC_HANDLERS)
    for failure in report.failures or ():
        print(failure.render())
    if report.passed + report.failed == 0:
        # A run that checked nothing must not read as a pass.
        print(f"FAIL {' '.join(map(str, paths))}: no vector cases found")
    print(report.closing_line())
    return 0 if report.failed == 0 and report.passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
