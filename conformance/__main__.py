"""`python -m conformance`: run vector files against beebox (see `conformance.runner`)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from beebox_impl.settings import DEFAULT_PHOTO_MODE
from beebox_spec.transcript import PHOTO_MODES
from conformance.runner import ALLOW_WRITES, PACKAGED_VECTORS, RunReport, count_kinds, run_files
from conformance.serve import ServeFailed, served_box
from conformance.targets import HandlerTable
from conformance.targets.http import HttpHost, http_handlers, served_transcript_handlers
from conformance.targets.impl import impl_handlers
from conformance.targets.impl_session import missing_backend_package
from conformance.targets.spec import SPEC_HANDLERS

BACKENDS = ("asyncio", "trio")


def targets(target: str, backend: str) -> dict[str, HandlerTable | str]:
    """The handler tables to run, by the name failure lines give them; in place of
    one that cannot run here, why (one failure, not one per case)."""
    chosen: dict[str, HandlerTable | str] = {}
    if target in ("spec", "all"):
        chosen["spec"] = SPEC_HANDLERS
    if target in ("impl", "all"):
        for name in BACKENDS if backend == "all" else (backend,):
            missing = missing_backend_package(name)
            chosen[f"impl/{name}"] = (
                impl_handlers(name)
                if missing is None
                else f"the {name} backend needs the package {missing!r}, which is not "
                f"installed (pip install {missing})"
            )
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.allow_writes and not args.url:
        # --serve's box is the run's own and always written; nothing else is a box.
        parser.error(f"{ALLOW_WRITES} applies only to a live box (--url)")
    # Scenarios provoke failures on purpose; their warnings are noise unless asked for.
    logging.basicConfig(level=logging.WARNING if args.verbose else logging.ERROR)
    paths: list[Path] = args.paths or [PACKAGED_VECTORS]

    if args.list:
        _print_kinds(paths)
        return 0

    # A live host is its own target: --url runs the vectors against it alone.
    chosen: dict[str, HandlerTable | str] = (
        {"http": http_handlers(args.url, args.token)}
        if args.url
        else targets(args.target, args.backend)
    )
    try:
        reports = _run_targets(
            paths,
            chosen,
            serve=args.serve and not args.url,
            # Someone's live box is written to only when asked; a --serve box is the run's own.
            read_only=bool(args.url) and not args.allow_writes,
        )
    except ServeFailed as error:
        print(f"FAIL --serve: {error}")
        return 1
    return _print_reports(reports, paths)


def _parser() -> argparse.ArgumentParser:
    """The command line `main` reads."""
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
        "--url",
        help="a live host's base URL: run its http/exchange vectors over HTTP; the cases "
        f"that write to the box (a reset, a send, a photo) are skipped unless {ALLOW_WRITES}",
    )
    parser.add_argument("--token", default="", help="the live host's token (with --url)")
    parser.add_argument(
        ALLOW_WRITES,
        action="store_true",
        help="with --url, also run the cases that write to the live box: they reset its "
        "chat, stop and restart it, and send messages and photos",
    )
    parser.add_argument(
        "--serve",
        action="store_true",
        help="also start `bbx serve` on a temporary box and run every vector over HTTP, "
        "writes included",
    )
    parser.add_argument("--list", action="store_true", help="print the kinds and their case counts")
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show the implementation's warnings (start failures, …)",
    )
    return parser


def _print_kinds(paths: list[Path]) -> None:
    """``--list``: each vector kind under ``paths`` with its case count, then the totals."""
    counts = count_kinds(paths)
    for kind in sorted(counts):
        print(f"{kind}\t{counts[kind]}")
    print(f"{sum(counts.values())} cases in {len(counts)} kinds")


def _run_targets(
    paths: list[Path],
    chosen: dict[str, HandlerTable | str],
    *,
    serve: bool,
    read_only: bool,
) -> dict[str, RunReport]:
    """Each chosen target's report on the vectors under ``paths`` (a target that cannot
    run here, one failure); with ``serve``, also the run's own `bbx serve` boxes'
    (`ServeFailed` when one does not start)."""
    reports: dict[str, RunReport] = {}
    with contextlib.ExitStack() as stack:
        if serve:
            chosen["serve"] = _served_handlers(stack)
        for name, handlers in chosen.items():
            if isinstance(handlers, str):
                reports[name] = RunReport(failed=1, not_run=handlers)
                continue
            named = name if len(chosen) > 1 else ""
            reports[name] = run_files(paths, handlers, named, read_only=read_only)
    return reports


def _served_handlers(stack: contextlib.ExitStack) -> HandlerTable:
    """The http/* handlers over `bbx serve` boxes that ``stack`` stops on exit."""
    # One box a photo mode: a box reads every transcript in its own.
    served = {mode: stack.enter_context(served_box(mode)) for mode in PHOTO_MODES}
    default = served[DEFAULT_PHOTO_MODE]
    return {
        **http_handlers(default.url, default.token),
        **served_transcript_handlers(
            {
                mode: (HttpHost(box.url, box.token), box.write_transcript)
                for mode, box in served.items()
            }
        ),
    }


def _print_reports(reports: dict[str, RunReport], paths: list[Path]) -> int:
    """Print the failures, what did not run, the skipped writes, each target's summary
    and the closing line; the exit status (0 only when something passed and nothing
    failed)."""
    report = RunReport()
    for one in reports.values():
        report.merge(one)
    for failure in report.failures or ():
        print(failure.render())
    for name, one in reports.items():
        if one.not_run is not None:
            print(f"FAIL {name}: not run: {one.not_run}")
    for skipped in report.skipped_writes:
        print(skipped.render())
    for name, one in reports.items():
        print(one.summary(name))
    if report.passed + report.failed == 0:
        # A run that checked nothing must not read as a pass.
        print(f"FAIL {' '.join(map(str, paths))}: no vector cases found")
    print(report.closing_line())
    return 0 if report.failed == 0 and report.passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
