"""Chat review benchmark: status and run on a big box, each beside its baseline.

Run: `python bench/review.py [--scale F] [--quick] [--keep DIR]` from the repository
root. It writes a box of 1,000 husks whose transcripts total about 2 GB, one of
them 200,000 entries long (`--scale 0.1` shrinks every size tenfold; `--quick` is
the CI smoke configuration: 60 husks, about 12 MB), then measures, each figure
beside the baseline it is judged against, in the same run:

1. the first run (every session read from the top) — for the record;
2. `status` on the unchanged box: time and transcript bytes read (the discovery
   counter, and the process's `rchar`), beside a loop that only stats every husk
   and transcript. Target: no transcript byte, at most 1 s for 1,000 husks;
3. after 10% of the sessions grew: `status`, and `run --reviewer extractive`,
   beside the parse floor — `json.loads` of every line of the grown
   transcripts, once. Target: at most 1.5x the floor. Printed with it, for
   information: what the spec's journal itself asks of each grown transcript
   when, as with `hashlib` here, a SHA-256 state cannot be kept between runs
   (its prefix hash covers every entry from the top, rendered: parse, make the
   entry and render it, with `beebox_spec` plainly, and hash);
4. peak RSS of the run on a corpus of a quarter the size and on this one (4x).
   Target: at most 64 MiB, and flat.

Every measured operation runs in a fresh child process (this script with
`--child`), so imports, caches and allocations of one figure cannot leak into
another. Peak RSS is Linux's `VmHWM`, reset through `/proc/self/clear_refs` just
before the operation, minus nothing: the whole process's peak is reported (the
interpreter and imports included), which is what the 64 MiB target is about.
Files are in the page cache (just written): these are CPU and copy figures, not
disk figures. It is a report, not a test: it exits 0 and prints MISSED when a
target is missed.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from beebox_impl.review.discovery import TranscriptLocator
    from beebox_impl.review.origin import MachineOrigin

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

ORIGIN = "bench-origin"
GROWN_FRACTION = 0.10
RSS_LIMIT_MIB = 64.0

_WORDS = (
    "trip",
    "route",
    "lodging",
    "budget",
    "Keene",
    "lake",
    "hiking",
    "canoe",
    "packing",
    "list",
    "weather",
    "July",
    "schedule",
    "ferry",
    "ticket",
    "museum",
    "dinner",
    "reservation",
    "parking",
    "permit",
    "trail",
    "map",
    "decided",
    "book",
    "confirm",
    "maybe",
    "question",
    "follow",
    "tomorrow",
    "plan",
    "cost",
    "cheaper",
    "option",
)


def _text(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(_WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words).capitalize() + "."


def _line(kind: str, session: str, entry: str, body: Any, stamp: str) -> str:
    record = {
        "parentUuid": None,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/user/box",
        "sessionId": session,
        "version": "2.0.0",
        "type": kind,
        "uuid": entry,
        "timestamp": stamp,
        "message": body,
    }
    return json.dumps(record, separators=(",", ":"))


def _exchanges(rng: random.Random, session: str, count: int, stamp: str) -> list[str]:
    """`count` user/assistant exchanges, one in four with a tool call and its result."""
    lines: list[str] = []
    for number in range(count):
        user = {"role": "user", "content": [{"type": "text", "text": _text(rng, 300)}]}
        lines.append(_line("user", session, str(uuid.uuid4()), user, stamp))
        blocks: list[dict[str, Any]] = [{"type": "text", "text": _text(rng, 900)}]
        if number % 4 == 0:
            tool_id = f"toolu_{number:08d}"
            blocks.append(
                {"type": "tool_use", "id": tool_id, "name": "Read", "input": {"path": "notes.md"}}
            )
            lines.append(
                _line(
                    "assistant",
                    session,
                    str(uuid.uuid4()),
                    {"role": "assistant", "model": "claude-sonnet-4-5", "content": blocks},
                    stamp,
                )
            )
            result = {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": tool_id, "content": _text(rng, 1500)}
                ],
            }
            lines.append(_line("user", session, str(uuid.uuid4()), result, stamp))
        else:
            lines.append(
                _line(
                    "assistant",
                    session,
                    str(uuid.uuid4()),
                    {"role": "assistant", "model": "claude-sonnet-4-5", "content": blocks},
                    stamp,
                )
            )
    return lines


def _write_lines(path: Path, lines: list[str], mode: str = "w") -> None:
    with path.open(mode, encoding="utf-8") as file:
        file.write("\n".join(lines) + "\n")


def build_box(folder: Path, husks: int, total_bytes: int, big_entries: int, seed: int) -> Path:
    """`husks` husks, transcripts of about `total_bytes` in all, one `big_entries` long."""
    from beebox_impl.review.cards import ensure_chat_husk  # noqa: PLC0415 - after sys.path
    from beebox_impl.review.origin import MachineOrigin  # noqa: PLC0415 - after sys.path
    from beebox_impl.transcript.location import transcript_path  # noqa: PLC0415 - after sys.path

    rng = random.Random(seed)
    box = folder / "box"
    projects = folder / "projects"
    box.mkdir(parents=True)
    projects.mkdir()
    origin = MachineOrigin(ORIGIN, "bench")
    stamp = "2026-07-01T10:00:00.000Z"
    sample = _exchanges(rng, "x", 40, stamp)
    bytes_per_exchange = sum(len(line) + 1 for line in sample) / 40
    big_exchanges = max(1, big_entries // 2)
    rest = max(0.0, total_bytes - big_exchanges * bytes_per_exchange * 1.25)
    per_session = max(4, int(rest / max(1, husks - 1) / bytes_per_exchange))
    old = (datetime.now(UTC) - timedelta(hours=3)).timestamp()
    for index in range(husks):
        session = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        path = transcript_path(box, session, projects)
        path.parent.mkdir(parents=True, exist_ok=True)
        count = big_exchanges if index == 0 else per_session
        with path.open("w", encoding="utf-8") as file:
            for start in range(0, count, 500):
                lines = _exchanges(rng, session, min(500, count - start), stamp)
                file.write("\n".join(lines) + "\n")
        ensure_chat_husk(box, session, origin=origin, created=datetime.now(UTC).date(), title=None)
        os.utime(path, (old, old))
    return box


def grow(box: Path, fraction: float, seed: int) -> list[Path]:
    """Append a night's conversation to `fraction` of the sessions; answers their transcripts."""
    from beebox_impl.review.cards import list_chat_husks  # noqa: PLC0415 - after sys.path
    from beebox_impl.transcript.location import transcript_path  # noqa: PLC0415 - after sys.path

    rng = random.Random(seed)
    husks = list_chat_husks(box)
    chosen = rng.sample(husks, max(1, int(len(husks) * fraction)))
    old = (datetime.now(UTC) - timedelta(hours=1)).timestamp()
    grown: list[Path] = []
    for husk in chosen:
        path = transcript_path(box, husk.session, box.parent / "projects")
        _write_lines(path, _exchanges(rng, husk.session, 8, "2026-07-02T10:00:00.000Z"), "a")
        os.utime(path, (old, old))
        grown.append(path)
    return grown


# ---------------------------------------------------------------------------
# Children: one measured operation each
# ---------------------------------------------------------------------------


def _proc_value(path: str, key: str) -> int:
    for line in Path(path).read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1])
    return 0


def _child(op: str, box: Path, extra: list[str]) -> dict[str, Any]:
    from beebox_impl.review.discovery import box_transcript_locator  # noqa: PLC0415 - after sys.path
    from beebox_impl.review.origin import MachineOrigin  # noqa: PLC0415 - after sys.path

    # Every child loads the review before the clock starts, whichever operation it times.
    for module in ("beebox_impl.review.reviewers", "beebox_impl.review.run"):
        importlib.import_module(module)

    origin = MachineOrigin(ORIGIN, "bench")
    locate = box_transcript_locator(box, box.parent / "projects")
    operations: dict[str, Callable[[], dict[str, Any]]] = {
        "status": partial(_status, box, origin, locate),
        "run": partial(_run, box, origin, locate),
        "stat-baseline": partial(_stat_baseline, box),
        "parse-floor": partial(_parse_floor, extra),
        "prefix-floor": partial(_prefix_floor, extra),
    }
    if op not in operations:
        raise SystemExit(f"unknown child op {op}")
    rchar_before = _proc_value("/proc/self/io", "rchar")
    Path("/proc/self/clear_refs").write_text("5")
    start = time.perf_counter()
    result = operations[op]()
    result["seconds"] = time.perf_counter() - start
    result["peak_rss_mib"] = _proc_value("/proc/self/status", "VmHWM") / 1024
    result["rchar"] = _proc_value("/proc/self/io", "rchar") - rchar_before
    return result


def _status(box: Path, origin: MachineOrigin, locate: TranscriptLocator) -> dict[str, Any]:
    """`status`: discovery and the cap."""
    from beebox_impl.review.run import plan_review  # noqa: PLC0415 - after sys.path

    plan = plan_review(box, origin=origin, now=datetime.now(UTC), locate=locate)
    return {
        "qualified": len(plan.discovery.qualified),
        "transcript_bytes": plan.discovery.transcript_bytes_read,
    }


def _run(box: Path, origin: MachineOrigin, locate: TranscriptLocator) -> dict[str, Any]:
    """`run --reviewer extractive` over every qualified session."""
    from beebox_impl.review.reviewers import ExtractiveReviewer  # noqa: PLC0415 - after sys.path
    from beebox_impl.review.run import run_chat_review  # noqa: PLC0415 - after sys.path

    summary = run_chat_review(
        box,
        ExtractiveReviewer(),
        origin=origin,
        clock=lambda: datetime.now(UTC),
        locate=locate,
        max_sessions=10**9,
        warn=lambda _message: None,
    )
    return {"reviewed": summary.reviewed, "clipped": len(summary.clipped)}


def _stat_baseline(box: Path) -> dict[str, Any]:
    """The baseline of `status`: a stat of every husk and every transcript."""
    from beebox_impl.review.cards import iter_husk_paths  # noqa: PLC0415 - after sys.path

    count = 0
    for path in iter_husk_paths(box):
        os.stat(path)
        count += 1
    for path in (box.parent / "projects").rglob("*.jsonl"):
        os.stat(path)
    return {"husks": count}


def _parse_floor(names: list[str]) -> dict[str, Any]:
    """The floor of a run over grown transcripts: `json.loads` of their every line."""
    lines = 0
    for name in names:
        with open(name, "rb") as file:
            for line in file:
                json.loads(line)
                lines += 1
    return {"lines": lines}


def _prefix_floor(names: list[str]) -> dict[str, Any]:
    """What the spec's journal asks of every review of a grown transcript: its prefix
    hash covers every entry from the top, each rendered, so each line is parsed, made
    an entry and rendered (`beebox_spec`, plainly)."""
    from beebox_spec.review.journal import prefix_hash  # noqa: PLC0415 - after sys.path
    from beebox_spec.transcript import entry_from_record  # noqa: PLC0415 - after sys.path

    hashed = 0
    for name in names:
        entries = []
        with open(name, "rb") as file:
            for line in file:
                record = json.loads(line)
                entry = entry_from_record(record, None) if isinstance(record, dict) else None
                if entry is not None:
                    entries.append(entry)
        prefix_hash(entries, len(entries) - 1)
        hashed += len(entries)
    return {"entries": hashed}


def measure(op: str, box: Path, extra: list[str] | None = None) -> dict[str, Any]:
    """Run one operation in a fresh child; answers its figures."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    arguments = [sys.executable, __file__, "--child", op, str(box)]
    if extra:
        list_file = box.parent / f"{op}-files.txt"
        list_file.write_text("\n".join(extra))
        arguments.append(str(list_file))
    done = subprocess.run(arguments, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"child {op} failed:\n{done.stderr}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def _verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def _mib(path: Path) -> float:
    return sum(file.stat().st_size for file in path.rglob("*.jsonl")) / 2**20


def bench(folder: Path, husks: int, total_bytes: int, big_entries: int) -> list[str]:
    """Build the corpora, measure, and answer the report's lines."""
    report: list[str] = []
    small = build_box(folder / "quarter", husks, total_bytes // 4, big_entries // 4, seed=2)
    box = build_box(folder / "full", husks, total_bytes, big_entries, seed=1)
    corpus = _mib(box.parent / "projects")
    report.append(
        f"corpus: {husks} husks, {corpus:,.0f} MiB of transcripts, the longest "
        f"{big_entries:,} entries"
    )
    small_first = measure("run", small)
    first = measure("run", box)
    report.append(
        f"first run (all read from the top): {first['seconds']:.1f} s, "
        f"{first['reviewed']} reviewed, {first['clipped']} past the per-run page"
    )
    floor_all = measure(
        "parse-floor", box, [str(p) for p in (box.parent / "projects").rglob("*.jsonl")]
    )
    report.append(f"  baseline json.loads of every line: {floor_all['seconds']:.1f} s")

    status = measure("status", box)
    stats = measure("stat-baseline", box)
    report.append(
        f"status, nothing changed: {status['seconds']:.3f} s, transcript bytes read "
        f"{status['transcript_bytes']} (process rchar {status['rchar']:,} B) | baseline "
        f"stat loop {stats['seconds']:.3f} s | target 0 B and <= 1 s: "
        f"{_verdict(status['transcript_bytes'] == 0 and status['seconds'] <= 1.0)}"
    )

    grown = grow(box, GROWN_FRACTION, seed=3)
    floor = measure("parse-floor", box, [str(path) for path in grown])
    prefix_floor = measure("prefix-floor", box, [str(path) for path in grown])
    report.append(
        f"  the spec's prefix-hash work over the grown transcripts (parse, entry, render, "
        f"hash every entry; info): {prefix_floor['seconds']:.2f} s, "
        f"{prefix_floor['seconds'] / floor['seconds']:.2f}x the parse floor"
    )
    grown_status = measure("status", box)
    grown_run = measure("run", box)
    for label, figures in (("status", grown_status), ("run --reviewer extractive", grown_run)):
        ratio = figures["seconds"] / floor["seconds"]
        report.append(
            f"{label}, {len(grown)} grown: {figures['seconds']:.2f} s | baseline parse "
            f"floor {floor['seconds']:.2f} s ({floor['lines']:,} lines) | {ratio:.2f}x, "
            f"target <= 1.5x: {_verdict(ratio <= 1.5)}"
        )
    small_grown = grow(small, GROWN_FRACTION, seed=4)
    del small_grown
    small_run = measure("run", small)
    peak = max(first["peak_rss_mib"], grown_run["peak_rss_mib"])
    small_peak = max(small_first["peak_rss_mib"], small_run["peak_rss_mib"])
    report.append(
        f"peak RSS of a run: {small_peak:.1f} MiB at 1x ({_mib(small.parent / 'projects'):,.0f} "
        f"MiB), {peak:.1f} MiB at 4x | target <= {RSS_LIMIT_MIB:.0f} MiB and flat: "
        f"{_verdict(peak <= RSS_LIMIT_MIB and peak <= small_peak * 1.25)}"
    )
    return report


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        op, box = sys.argv[2], Path(sys.argv[3])
        extra = Path(sys.argv[4]).read_text().split("\n") if len(sys.argv) > 4 else []
        print(json.dumps(_child(op, box, [name for name in extra if name])))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every size by F")
    parser.add_argument("--quick", action="store_true", help="the CI smoke configuration")
    parser.add_argument("--keep", type=Path, help="build the boxes here and keep them")
    args = parser.parse_args()
    if args.quick:
        husks, total, big = 60, 12 * 2**20, 6_000
    else:
        husks = 1000
        total = int(2 * 2**30 * args.scale)
        big = int(200_000 * args.scale)
    folder = args.keep or Path(tempfile.mkdtemp(prefix="bbx-review-bench-"))
    try:
        for line in bench(folder, husks, total, big):
            print(line, flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
