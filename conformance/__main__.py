"""`python -m conformance`: run vector files against beebox (see `conformance.runner`)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from conformance.runner import PACKAGED_VECTORS, RunReport, count_kinds, run_files
from conformance.serve import ServeFailed, served_box
from conformance.targets import HandlerTable
from conformance.targets.http import HttpHost, http_handlers, served_transcript_handlers
from conformance.targets.impl import impl_handlers
from conformance.targets.spec import SPEC_HANDLERS

BACKENDS = ("asyncio", "trio")


def targets(target: str, backend: str) -> dict[str, HandlerTable]:
    """The handler tables to run, by the name failure lines give them."""
    chosen: dict[str, HandlerTable] = {}
    if target in ("spec", "all"):
        chosen["spec"] = SPEC_HANDLERS
    if target in ("impl", "all"):
        for name in BACKENDS if backend == "all" else (backend,):
            chosen[f"impl/{name}"] = impl_handlers(name)
    return chosen


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
        choices=["spec", "impl", "all"],
        default="spec",
        help="what to check: the executable spec (beebox_spec), the implementation "
        "(beebox_impl), or both (default: spec)",
    )
    parser.add_argument(
        "--backend",
        choices=[*BACKENDS, "all"],
        default="all",
        help="the event loop the implementation's sessions run on (default: all)",
    )
    parser.add_argument(
        "--url", help="a live host's base URL: run its http/exchange vectors over HTTP"
    )
    parser.add_argument("--token", default="", help="the live host's token (with --url)")
    parser.add_argument(
        "--serve",
        action="store_true",
        help="also start `bbx serve` on a temporary box and run the vectors over HTTP",
    )
    parser.add_argument("--list", action="store_true", help="print the kinds and their case counts")
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show the implementation's warnings (start failures, …)",
    )
    args = parser.parse_args(argv)
    # Scenarios provoke failures on purpose; their warnings are noise unless asked for.
    logging.basicConfig(level=logging.WARNING if args.verbose else logging.ERROR)
    paths: list[Path] = args.paths or [PACKAGED_VECTORS]

    if args.list:
        counts = count_kinds(paths)
        for kind in sorted(counts):
            print(f"{kind}\t{counts[kind]}")
        print(f"{sum(counts.values())} cases in {len(counts)} kinds")
        return 0

    # A live host is its own target: --url runs the vectors against it alone.
    chosen = (
        {"http": http_handlers(args.url, args.token)}
        if args.url
        else targets(args.target, args.backend)
    )
    report = RunReport()
    with contextlib.ExitStack() as stack:
        if args.serve and not args.url:
            try:
                served = stack.enter_context(served_box())
            except ServeFailed as error:
                print(f"FAIL --serve: {error}")
                return 1
            host = HttpHost(served.url, served.token)
            chosen["serve"] = {
                **http_handlers(served.url, served.token),
                **served_transcript_handlers(host, served.write_transcript),
            }
        for name, handlers in chosen.items():
            report.merge(run_files(paths, handlers, name if len(chosen) > 1 else ""))
    for failure in report.failures or ():
        print(failure.render())
    for kind in sorted(report.skipped_kinds or ()):
        print(f"SKIP {kind}: not answered by every target yet")
    if report.passed + report.failed == 0:
        # A run that checked nothing must not read as a pass.
        print(f"FAIL {' '.join(map(str, paths))}: no vector cases found")
    print(report.closing_line())
    return 0 if report.failed == 0 and report.passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
