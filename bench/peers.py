"""Whole-process benchmark: `bbx` beside the interpreter, the naive floor and the peer.

Run: `python bench/peers.py [--quick] [--reps K]` from the repository root (or
anywhere), in an environment where ``bbx`` is installed and, for the peer's rows,
``claude-code-log`` 1.7.0 too (``nox -s bench`` installs both; without the peer
its rows say n/a). It is a report, not a test: it exits 0 when a target is missed
and says MISSED. `--quick` (200 lines, 15 small photos, 2 rounds) is the CI smoke
configuration.

A person at a terminal feels the whole process: the interpreter's start, the
imports, the read, the output. So every figure here is one command run as a
process of its own, as a shell would run it, and its baseline is measured in the
same run:

- the interpreter's floor: ``python -c pass`` (same interpreter, same site);
- ``bbx --help`` and ``bbx phases``;
- for each of two transcripts made by `bench/generate_transcript.py` (2,000 lines
  text-only; 2,000 lines with 150 photos of ~1 MB, ~150 MB), each filed in a box
  made by ``bbx init`` where the box reads its own transcripts:
  ``bbx chat history SID --tail 200 --json`` with a cold index (the box's index
  shelf removed first: the first read of this transcript ever) and warm (the
  shelf a previous command left), ``--page 0 2000 --json`` warm, and for the
  photos ``bbx chat media REF -o FILE`` warm;
- the naive floor: ``json.loads`` of every line in a fresh interpreter;
- the peer people would pick instead, `claude-code-log`: its loader
  (``converter.load_transcript``, the parsed entries every view of it starts
  from) and its HTML export (``convert_jsonl_to_html``, no cache), each a fresh
  interpreter that imports it;
- `bbx serve`'s time to its first answered request: from the command's start
  (with its allocator restart) to the answer of ``GET /api/chat/bootstrap``.

Time: the wall time of the process, from spawn to exit, the median of K rounds.
The rounds interleave every command (after one untimed warm-up round that also
leaves the index shelves warm and the bytecode cache filled), so a change in the
machine's load falls on every figure alike; the peer's export, seconds long, has
fewer rounds of its own after them. Stdout goes to /dev/null in timed runs. Every
process runs from bytecode, as an installed package does (`child_environment`).

Peak RSS: GNU time's maximum resident set size (``/usr/bin/time -f %M``: of the
process, or of its largest worker where it starts some, as the peer's export does)
of one more run of each command, whose output is also checked (entry counts and
totals against the generator's, a photo's SHA-256, the peer's entry count, the size
of its page); n/a without GNU time. A child's `ru_maxrss` seen from this script
would start at this script's own high-water mark (Linux carries it across exec),
hence GNU time as the small parent. Files are in the page cache (just written): CPU
and memory figures, not disk.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import http.client
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import Final, Literal, TypeAlias

from generate_transcript import GeneratedTranscript, generate_transcript
from report import Row, load_average, print_table

TAIL: Final = 200
PAGE: Final = (0, 2000)
# The floor rows: what a command stands on, beebox excepted (`floor_command`).
FLOOR: Final = "history's imports, beebox's own excepted"
PHASES_FLOOR: Final = "phases's imports, beebox's own excepted"
GNU_TIME: Final = Path("/usr/bin/time")
COMMAND_TIMEOUT_S: Final = 600.0
SERVE_TIMEOUT_S: Final = 60.0

# Targets (the issue's): whole process, against baselines measured in this run.
HELP_VS_PYTHON: Final = 3.0
HISTORY_VS_PYTHON: Final = 5.0
MEDIA_VS_PYTHON: Final = 5.0
PEER_LOADER_VS_TAIL: Final = {"text": 3.0, "photos": 8.0}
RSS_LIMIT_MIB: Final = 40.0
# Flat in the transcript's size: the 150 MB transcript's peak within this of the 4 MB one's.
RSS_FLAT_MIB: Final = 4.0
SERVE_FIRST_ANSWER_S: Final = 1.0

Status: TypeAlias = Literal["ok", "MISSED", "info", "n/a", "WRONG", "ERROR"]
Kind: TypeAlias = Literal["text", "photos"]

PEER_LOADER: Final = """
import sys
from pathlib import Path
from claude_code_log.converter import load_transcript
print(len(load_transcript(Path(sys.argv[1]), silent=True)))
"""
PEER_EXPORT: Final = """
import sys
from pathlib import Path
from claude_code_log.converter import convert_jsonl_to_html
print(convert_jsonl_to_html(Path(sys.argv[1]), Path(sys.argv[2]), use_cache=False, silent=True))
"""
# What a `bbx` command loads besides beebox's own modules: run it (warm) and print the
# names; the floor command then imports just those.
MODULES_LOADED: Final = """
import contextlib, io, json, sys
from beebox_impl.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    main(sys.argv[1:])
print(json.dumps(sorted(sys.modules)))
"""
IMPORT_ONLY: Final = """
import importlib, sys
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except ImportError:
        pass
"""
NAIVE: Final = """
import json, sys
with open(sys.argv[1], "rb") as lines:
    print(sum(1 for line in lines if json.loads(line) is not None))
"""


@dataclass(frozen=True)
class Config:
    """One benchmark configuration."""

    name: str
    entries: int
    photos: int
    photo_chars: int
    rounds: int
    slow_rounds: int  # the peer's HTML export
    serve_rounds: int


FULL: Final = Config(
    "full", entries=2000, photos=150, photo_chars=1_000_000, rounds=7, slow_rounds=3, serve_rounds=5
)
QUICK: Final = Config(
    "quick", entries=200, photos=15, photo_chars=20_000, rounds=2, slow_rounds=1, serve_rounds=1
)


@dataclass
class Command:
    """One process to measure, and how to check what it did."""

    name: str
    argv: list[str]
    slow: bool = False
    # Run untimed before each timed run (the cold read's removed shelf).
    before: Callable[[], None] | None = None
    # What the output must be: None when right, else what is wrong.
    check: Callable[[bytes], str | None] | None = None
    times: list[float] = field(default_factory=list)
    rss_kib: int | None = None
    error: str | None = None  # it failed (an exit code other than 0)
    wrong: str | None = None  # it answered, but not what the generator wrote

    @property
    def median(self) -> float | None:
        return statistics.median(self.times) if self.times else None


@dataclass(frozen=True)
class Box:
    """A box made by ``bbx init`` holding one generated transcript where it reads its own."""

    kind: Kind
    root: Path
    made: GeneratedTranscript
    shelf: Path


# ---------------------------------------------------------------------------------
# Running processes
# ---------------------------------------------------------------------------------


def child_environment(scratch: Path) -> dict[str, str]:
    """This environment, with a home of its own, no transcript folder of the user's, and
    bytecode cached in ``scratch``.

    An installed package runs from bytecode (pip compiles it as it installs); a
    checkout run with ``PYTHONDONTWRITEBYTECODE`` compiles every module from source in
    every process, which took most of a `bbx` command's time. Every command here, the
    baselines and the peer's alike, reads and writes its bytecode in one cache of the
    run's own (``PYTHONPYCACHEPREFIX``), filled by the warm-up round.
    """
    dropped = {"BBX_CLAUDE_PROJECTS_DIR", "CLAUDE_CONFIG_DIR", "PYTHONDONTWRITEBYTECODE"}
    environment = {key: value for key, value in os.environ.items() if key not in dropped}
    home = scratch / "home"
    home.mkdir(exist_ok=True)
    return {**environment, "HOME": str(home), "PYTHONPYCACHEPREFIX": str(scratch / "pycache")}


def bbx_command() -> list[str]:
    """The ``bbx`` script of this interpreter's environment, as a person runs it."""
    script = Path(sys.executable).with_name("bbx")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "beebox_impl"]


def timed_run(command: Command, environment: dict[str, str], cwd: Path) -> float:
    """One run of ``command``: its wall time; a failure is recorded on it."""
    if command.before is not None:
        command.before()
    started = time.perf_counter()
    done = subprocess.run(
        command.argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=environment,
        cwd=cwd,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        command.error = f"exit {done.returncode}: {done.stderr.decode(errors='replace')[-300:]}"
    return elapsed


def measured_run(command: Command, environment: dict[str, str], cwd: Path) -> None:
    """One more run under GNU time: the peak RSS, and the output checked."""
    if command.before is not None:
        command.before()
    with tempfile.TemporaryDirectory(prefix="peers-rss-") as scratch:
        report = Path(scratch) / "rss"
        wrapper = [str(GNU_TIME), "-f", "%M", "-o", str(report)] if GNU_TIME.is_file() else []
        done = subprocess.run(
            [*wrapper, *command.argv],
            capture_output=True,
            env=environment,
            cwd=cwd,
            timeout=COMMAND_TIMEOUT_S,
            check=False,
        )
        if wrapper and report.is_file():
            command.rss_kib = int(report.read_text().split()[-1])
    if done.returncode != 0:
        command.error = f"exit {done.returncode}: {done.stderr.decode(errors='replace')[-300:]}"
    elif command.check is not None:
        command.wrong = command.check(done.stdout)


def measure(
    commands: Sequence[Command], config: Config, environment: dict[str, str], cwd: Path, say: Say
) -> None:
    """A warm-up round, ``config.rounds`` timed rounds, then the RSS and checks.

    The slow commands (seconds each, gigabytes for the peer's export) have rounds of
    their own after the others', so the memory they leave to reclaim lands on no
    other figure.
    """
    for command in commands:
        timed_run(command, environment, cwd)
    fast = [command for command in commands if not command.slow]
    slow = [command for command in commands if command.slow]
    for rounds, group in ((config.rounds, fast), (config.slow_rounds, slow)):
        for round_number in range(rounds if group else 0):
            say(
                f"round {round_number + 1} of {rounds}{' (slow commands)' if group is slow else ''}"
            )
            for command in group:
                command.times.append(timed_run(command, environment, cwd))
    say("peak RSS and checks")
    for command in commands:
        measured_run(command, environment, cwd)


def first_answer_seconds(box: Path, environment: dict[str, str], cwd: Path) -> float:
    """`bbx serve`'s time from its start to the answer of its first request."""
    started = time.perf_counter()
    server = subprocess.Popen(
        [*bbx_command(), "serve", "--box", str(box), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=environment,
        cwd=cwd,
        text=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        url, token = parse_serving_line(line)
        parts = urllib.parse.urlsplit(url)
        connection = http.client.HTTPConnection(parts.netloc, timeout=SERVE_TIMEOUT_S)
        connection.request(
            "GET", "/api/chat/bootstrap", headers={"Authorization": f"Bearer {token}"}
        )
        response = connection.getresponse()
        response.read()
        elapsed = time.perf_counter() - started
        connection.close()
        if response.status != 200:
            raise RuntimeError(f"GET /api/chat/bootstrap answered {response.status}")
        return elapsed
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=SERVE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def parse_serving_line(line: str) -> tuple[str, str]:
    """The base URL and token `bbx serve` prints (`beebox_impl.cli.box.parse_serving_line`)."""
    # Imported here: the box's modules, only for the one measure that serves.
    from beebox_impl.cli.box import parse_serving_line as parse  # noqa: PLC0415

    parsed = parse(line)
    if parsed is None:
        raise RuntimeError(f"bbx serve printed {line!r}, not its serving line")
    return parsed


# ---------------------------------------------------------------------------------
# The boxes and the commands
# ---------------------------------------------------------------------------------


def make_box(
    kind: Kind, config: Config, directory: Path, environment: dict[str, str], cwd: Path
) -> Box:
    """``bbx init`` a box and file a generated transcript where the box reads its own."""
    from beebox_impl.layout import state_dir  # noqa: PLC0415
    from beebox_impl.transcript import IndexShelf  # noqa: PLC0415
    from beebox_impl.transcript.location import box_projects_root, transcript_path  # noqa: PLC0415

    root = directory / f"box-{kind}"
    subprocess.run(
        [*bbx_command(), "init", str(root)],
        check=True,
        env=environment,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
    )
    made = generate_transcript(
        directory / f"made-{kind}",
        entries=config.entries,
        photos=config.photos if kind == "photos" else 0,
        photo_chars=config.photo_chars,
    )
    filed = transcript_path(root.resolve(), made.session_id, box_projects_root(root.resolve()))
    filed.parent.mkdir(parents=True, exist_ok=True)
    made.path.rename(filed)
    shelf = IndexShelf.in_box_state(state_dir(root)).directory
    return Box(kind, root, dataclasses.replace(made, path=filed), shelf)


def history_check(made: GeneratedTranscript, shown: int) -> Callable[[bytes], str | None]:
    def check(out: bytes) -> str | None:
        history = json.loads(out)
        expected = (made.history_total, min(shown, made.history_total))
        found = (history["total"], len(history["entries"]))
        return None if found == expected else f"total, entries {found}, not {expected}"

    return check


def count_check(expected: int | None, what: str) -> Callable[[bytes], str | None]:
    def check(out: bytes) -> str | None:
        count = int(out.split()[-1]) if out.split() else 0
        if (expected is None and count > 0) or count == expected:
            return None
        return f"{count} {what}, not {expected if expected is not None else 'some'}"

    return check


def page_check(page: Path, made: GeneratedTranscript) -> Callable[[bytes], str | None]:
    # The page shows every message (and in it every photo): not much smaller than the file.
    def check(_out: bytes) -> str | None:
        if page.stat().st_size > made.size_bytes // 4:
            return None
        return f"a page of {page.stat().st_size} bytes for a {made.size_bytes}-byte transcript"

    return check


def box_commands(box: Box, scratch: Path) -> list[Command]:
    bbx = bbx_command()
    made = box.made
    session = made.session_id
    where = ["--box", str(box.root)]
    kind = box.kind
    commands = [
        Command(
            f"{kind}: history --tail {TAIL}, cold index",
            [*bbx, "chat", "history", session, "--tail", str(TAIL), "--json", *where],
            before=lambda: shutil.rmtree(box.shelf, ignore_errors=True),
            check=history_check(made, TAIL),
        ),
        Command(
            f"{kind}: history --tail {TAIL}, warm",
            [*bbx, "chat", "history", session, "--tail", str(TAIL), "--json", *where],
            check=history_check(made, TAIL),
        ),
        Command(
            f"{kind}: history --page {PAGE[0]} {PAGE[1]}, warm",
            [*bbx, "chat", "history", session, "--page", *map(str, PAGE), "--json", *where],
            check=history_check(made, PAGE[1]),
        ),
    ]
    if made.photos:
        photo = made.middle_photo
        written = scratch / f"photo-{kind}"

        def photo_check(_out: bytes) -> str | None:
            digest = hashlib.sha256(written.read_bytes()).hexdigest()
            return None if digest == photo.sha256 else "the photo written is not the one sent"

        commands.append(
            Command(
                f"{kind}: media REF -o FILE, warm",
                [*bbx, "chat", "media", f"{session}/{photo.uuid}/0", "-o", str(written), *where],
                check=photo_check,
            )
        )
    commands.append(
        Command(
            f"{kind}: naive json.loads of every line",
            [sys.executable, "-c", NAIVE, str(made.path)],
            check=count_check(made.line_count, "lines"),
        )
    )
    if peer_installed():
        commands.append(
            Command(
                f"{kind}: peer's loader",
                [sys.executable, "-c", PEER_LOADER, str(made.path)],
                check=count_check(None, "entries"),
            )
        )
        exported = scratch / f"{kind}.html"
        commands.append(
            Command(
                f"{kind}: peer's HTML export",
                [sys.executable, "-c", PEER_EXPORT, str(made.path), str(exported)],
                slow=True,
                # A page already there of its version is kept, not made again: each
                # run is a first export.
                before=lambda: exported.unlink(missing_ok=True),
                check=page_check(exported, made),
            )
        )
    return commands


def floor_command(
    name: str, arguments: list[str], environment: dict[str, str], cwd: Path
) -> Command:
    """Python importing what ``bbx arguments`` loads (run warm), beebox's own modules
    excepted: the standard library and dependencies it stands on, and nothing it does."""
    argv = [sys.executable, "-c", MODULES_LOADED, *arguments]
    for _warm_up in range(2):
        done = subprocess.run(argv, capture_output=True, check=True, env=environment, cwd=cwd)
    loaded = json.loads(done.stdout)
    theirs = [
        module for module in loaded if module != "__main__" and not module.startswith("beebox")
    ]
    return Command(name, [sys.executable, "-c", IMPORT_ONLY, *theirs])


def install_kind() -> str:
    """How beebox is installed here: an editable install runs its finder in every
    interpreter's start, ``python -c pass`` included, which hides what imports cost."""
    from importlib.metadata import PackageNotFoundError, distribution  # noqa: PLC0415

    try:
        direct = distribution("beebox").read_text("direct_url.json")
    except PackageNotFoundError:
        return "not installed (run from a checkout)"
    editable = bool(direct and json.loads(direct).get("dir_info", {}).get("editable"))
    return (
        "editable (every interpreter starts its finder: not a person's install)"
        if editable
        else "installed as `pip install .` installs it"
    )


def peer_installed() -> bool:
    return find_spec("claude_code_log") is not None


# ---------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    return f"{seconds:.2f} s" if seconds >= 1 else f"{seconds * 1000:.1f} ms"


def _mib(kib: int | None) -> str:
    return "n/a" if kib is None else f"{kib / 1024:.1f} MiB"


def _figure(command: Command | None) -> str:
    if command is None:
        return "n/a"
    return f"{_ms(command.median)}, {_mib(command.rss_kib)}"


def _broken(*commands: Command | None) -> Status | None:
    """Why these figures cannot be judged: a command not run here, failed, or wrong."""
    for command in commands:
        if command is None:
            return "n/a"
        if command.error is not None or not command.times:
            return "ERROR"
        if command.wrong is not None:
            return "WRONG"
    return None


def build_rows(found: dict[str, Command], boxes: Sequence[Box], serve: list[float]) -> list[Row]:
    rows: list[Row] = []
    python = found["python -c pass"]
    floor = f"python -c pass {_figure(python)}"

    def against_python(name: str, most: float) -> None:
        command = found.get(name)
        broken = _broken(command, python)
        if broken is not None or command is None:
            rows.append(Row(name, _figure(command), floor, "—", f"≤ {most:g}×", broken or "n/a"))
            return
        ratio = (command.median or 0) / (python.median or 1)
        status: Status = "ok" if ratio <= most else "MISSED"
        rows.append(Row(name, _figure(command), floor, f"{ratio:.2f}×", f"≤ {most:g}×", status))

    def info(name: str, baseline_name: str) -> None:
        command, baseline = found.get(name), found.get(baseline_name)
        broken = _broken(command, baseline)
        ratio = "—"
        if broken is None and command is not None and baseline is not None:
            ratio = f"{(command.median or 0) / (baseline.median or 1):.2f}×"
        baseline_text = f"{baseline_name} {_figure(baseline)}"
        status: Status = broken if broken in ("WRONG", "ERROR") else "info"
        rows.append(Row(name, _figure(command), baseline_text, ratio, "(info)", status))

    info(PHASES_FLOOR, "python -c pass")
    info(FLOOR, "python -c pass")
    against_python("bbx --help", HELP_VS_PYTHON)
    against_python("bbx phases", HELP_VS_PYTHON)
    info("bbx phases", PHASES_FLOOR)
    for box in boxes:
        kind = box.kind
        tail = f"{kind}: history --tail {TAIL}, warm"
        against_python(tail, HISTORY_VS_PYTHON)
        peer = f"{kind}: peer's loader"
        ours, theirs = found.get(tail), found.get(peer)
        broken = _broken(ours, theirs)
        most = PEER_LOADER_VS_TAIL[kind]
        target = f"≥ {most:g}× faster"
        if broken is None and ours is not None and theirs is not None:
            faster = (theirs.median or 0) / (ours.median or 1)
            status: Status = "ok" if faster >= most else "MISSED"
            rows.append(
                Row(f"{tail} vs peer", _figure(ours), f"{peer} {_figure(theirs)}",
                    f"{faster:.2f}× faster", target, status)
            )  # fmt: skip
        else:
            rows.append(
                Row(f"{tail} vs peer", _figure(ours), f"{peer} {_figure(theirs)}", "—", target,
                    broken or "n/a")
            )  # fmt: skip
        if box.made.photos:
            against_python(f"{kind}: media REF -o FILE, warm", MEDIA_VS_PYTHON)
        info(f"{kind}: history --tail {TAIL}, cold index", "python -c pass")
        info(f"{kind}: history --page {PAGE[0]} {PAGE[1]}, warm", "python -c pass")
        info(f"{kind}: naive json.loads of every line", "python -c pass")
        info(f"{kind}: history --tail {TAIL}, warm", f"{kind}: naive json.loads of every line")
        info(f"{kind}: history --tail {TAIL}, warm", FLOOR)
        info(f"{kind}: peer's HTML export", f"{kind}: history --page {PAGE[0]} {PAGE[1]}, warm")
    rows.extend(rss_rows(found, boxes))
    rows.append(serve_row(serve, python))
    return rows


def rss_rows(found: dict[str, Command], boxes: Sequence[Box]) -> list[Row]:
    """Every bbx read's peak at most the limit; the big transcript's as the small one's."""
    reads = {
        box.kind: [c for name, c in found.items() if name.startswith(f"{box.kind}: ")
                   and not name.startswith((f"{box.kind}: peer", f"{box.kind}: naive"))]
        for box in boxes
    }  # fmt: skip
    every = [command for commands in reads.values() for command in commands]
    if not every or any(command.rss_kib is None for command in every):
        return [
            Row("peak RSS of every bbx read", "n/a", "—", "—", f"≤ {RSS_LIMIT_MIB:g} MiB", "n/a")
        ]
    top = max(every, key=lambda command: command.rss_kib or 0)
    status: Status = "ok" if (top.rss_kib or 0) / 1024 <= RSS_LIMIT_MIB else "MISSED"
    rows = [
        Row("peak RSS of every bbx read", f"{_mib(top.rss_kib)} ({top.name})", "—", "—",
            f"≤ {RSS_LIMIT_MIB:g} MiB", status)
    ]  # fmt: skip
    if "text" in reads and "photos" in reads:
        small = max(command.rss_kib or 0 for command in reads["text"])
        big = max(command.rss_kib or 0 for command in reads["photos"])
        grew = (big - small) / 1024
        flat: Status = "ok" if grew <= RSS_FLAT_MIB else "MISSED"
        rows.append(
            Row("peak RSS, photos transcript vs text-only", _mib(big), f"text-only {_mib(small)}",
                f"{grew:+.1f} MiB", f"≤ +{RSS_FLAT_MIB:g} MiB", flat)
        )  # fmt: skip
    return rows


def serve_row(serve: list[float], python: Command) -> Row:
    target = f"< {SERVE_FIRST_ANSWER_S:g} s"
    name = "bbx serve: start to first answered request"
    if not serve:
        return Row(name, "—", f"python -c pass {_figure(python)}", "—", target, "ERROR")
    figure = statistics.median(serve)
    ratio = f"{figure / (python.median or 1):.1f}×"
    status: Status = "ok" if figure < SERVE_FIRST_ANSWER_S else "MISSED"
    return Row(name, _ms(figure), f"python -c pass {_figure(python)}", ratio, target, status)


Say: TypeAlias = Callable[[str], None]


def main(argv: list[str] | None = None) -> int:
    """Measure, print; exit 0 whatever the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small configuration for CI smoke")
    parser.add_argument("--reps", type=int, default=None, help="timed rounds (default: 7)")
    args = parser.parse_args(argv)
    config = QUICK if args.quick else FULL
    if args.reps:
        config = dataclasses.replace(config, rounds=args.reps)
    started = time.perf_counter()

    def say(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f} s] {message}", file=sys.stderr, flush=True)

    load_before = load_average()
    print(
        f"beebox whole-process benchmark ({config.name}): each figure one process, the median "
        f"of {config.rounds} interleaved rounds ({config.slow_rounds} for the peer's export) "
        "after a warm-up round; peak RSS by GNU time, one more run"
    )
    peer = "claude-code-log " + (_peer_version() if peer_installed() else "not installed: n/a")
    print(
        f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs; "
        f"bbx: {' '.join(bbx_command())}, {install_kind()}; peer: {peer}"
    )
    with tempfile.TemporaryDirectory(prefix="beebox-peers-") as tmp:
        directory = Path(tmp)
        environment = child_environment(directory)
        boxes = []
        for kind in ("text", "photos"):
            say(f"writing the {kind} transcript and its box …")
            boxes.append(make_box(kind, config, directory, environment, directory))
        for box in boxes:
            size = box.made.size_bytes / 2**20
            print(
                f"{box.kind}: {box.made.line_count:,} lines, {len(box.made.photos)} photos, "
                f"{size:.1f} MiB, {box.made.history_total} history entries"
            )
        commands = [
            Command("python -c pass", [sys.executable, "-c", "pass"]),
            Command("bbx --help", [*bbx_command(), "--help"]),
            Command("bbx phases", [*bbx_command(), "phases"]),
            floor_command(PHASES_FLOOR, ["phases"], environment, directory),
            floor_command(
                FLOOR,
                [
                    "chat",
                    "history",
                    boxes[0].made.session_id,
                    "--tail",
                    str(TAIL),
                    "--json",
                    "--box",
                    str(boxes[0].root),
                ],
                environment,
                directory,
            ),
        ]
        for box in boxes:
            commands.extend(box_commands(box, directory))
        measure(commands, config, environment, directory, say)
        say("bbx serve …")
        serve: list[float] = []
        for _ in range(config.serve_rounds):
            try:
                serve.append(first_answer_seconds(boxes[0].root, environment, directory))
            except (OSError, RuntimeError, http.client.HTTPException) as error:
                say(f"bbx serve: {error}")
                break
    print(
        f"load average (1 min): {load_before} at the start, {load_average()} at the end "
        "(other processes' load makes absolute figures noisy; the ratios are of one run)"
    )
    print()
    found = {command.name: command for command in commands}
    for command in commands:
        for problem in (command.error, command.wrong):
            if problem is not None:
                say(f"{command.name}: {problem}")
    print_table(build_rows(found, boxes, serve))
    say(f"done in {time.perf_counter() - started:.0f} s")
    return 0


def _peer_version() -> str:
    from importlib.metadata import version  # noqa: PLC0415

    return version("claude-code-log")


if __name__ == "__main__":
    raise SystemExit(main())
