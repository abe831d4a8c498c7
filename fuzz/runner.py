"""Run one fuzz target under atheris (libFuzzer) for a bounded time.

``python fuzz/fuzz_<target>.py [--seconds N] [--runs N] [--seed S] [--dir DIR]``:
writes the target's seeds (`fuzz.seeds`) to ``DIR/seeds``, fuzzes with
``DIR/corpus`` as the growing corpus, and leaves any crashing input in
``DIR/artifacts`` (default ``DIR``: ``$BBX_FUZZ_DIR/<target>``, else under the
system's temporary folder). Every loaded module is instrumented (the standard
library's HTTP parsing and JSON included). libFuzzer prints its final stats
(runs, coverage, peak RSS); the exit status is non-zero when it found something.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["main"]


def _target(name: str, scratch: Path) -> Callable[[bytes], None]:
    from fuzz.targets import TARGETS, HttpTarget  # noqa: PLC0415

    chosen = TARGETS[name]
    if chosen is not None:
        return chosen
    return HttpTarget(scratch)


def main(name: str, argv: list[str] | None = None) -> int:
    """Fuzz target ``name`` as ``argv`` asks (see the module doc)."""
    parser = argparse.ArgumentParser(prog=f"fuzz_{name}")
    parser.add_argument("--seconds", type=int, default=600, help="time budget (default 600)")
    parser.add_argument("--runs", type=int, default=-1, help="stop after N inputs (-1: no cap)")
    parser.add_argument("--seed", type=int, default=1, help="libFuzzer's random seed")
    parser.add_argument("--dir", type=Path, default=None, help="corpus/artifact folder")
    parser.add_argument("--rss-limit-mb", type=int, default=2048)
    parser.add_argument("libfuzzer", nargs="*", help="extra libFuzzer flags (after --)")
    args = parser.parse_args(argv)
    base = Path(os.environ.get("BBX_FUZZ_DIR", Path(tempfile.gettempdir()) / "beebox-fuzz"))
    folder: Path = args.dir or base / name
    seeds, corpus, artifacts = folder / "seeds", folder / "corpus", folder / "artifacts"
    for path in (corpus, artifacts):
        path.mkdir(parents=True, exist_ok=True)

    import atheris  # type: ignore[import-not-found, import-untyped, unused-ignore]  # noqa: PLC0415

    from fuzz.seeds import write_seeds  # noqa: PLC0415

    count = write_seeds(name, seeds)
    print(f"fuzz {name}: {count} seeds in {seeds}", file=sys.stderr)
    scratch = Path(tempfile.mkdtemp(prefix=f"bbx-fuzz-{name}-"))
    target = _target(name, scratch)
    atheris.instrument_all()
    flags = [
        f"-max_total_time={args.seconds}",
        f"-runs={args.runs}",
        f"-seed={args.seed}",
        f"-rss_limit_mb={args.rss_limit_mb}",
        "-timeout=30",
        "-max_len=65536",
        "-print_final_stats=1",
        f"-artifact_prefix={artifacts}/",
        *args.libfuzzer,
    ]
    atheris.Setup([sys.argv[0], *flags, str(corpus), str(seeds)], target)
    atheris.Fuzz()
    return 0
