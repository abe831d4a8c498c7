"""Faults: kill -9 under load, a full disk, a misbehaving engine (issue 9 §3), with figures.

Three parts, each on a fresh box in a temporary folder, loopback only:

``kill`` — `bbx serve` is SIGKILLed at a random moment, ``--cycles`` times (200
by default), while clients send messages (every fourth with a photo), each send
retried against whichever server is up until it is answered. After each kill,
with the server down: SQLite's ``PRAGMA integrity_check`` passes, every send
answered 200 so far is in the bus exactly once, no id has two rows. After each
restart: no temporary file of ours is left in the box. At the end the box is
served once more until its queue is empty: every text answered ``{queued: true}``
reached a turn (it is in the transcript), every text answered ``{turnId}`` did
too (a turn in flight at a kill is sent again when the box opens,
`beebox_impl.services.redelivery`), and the persisted queue is empty; texts the
transcripts hold twice (sent again after the engine had written them) are counted.

``disk`` — the box and its transcripts on a 2 MiB tmpfs (mounted when this runs
as root and may mount; otherwise a file-size limit, ``RLIMIT_FSIZE``, stands in):
sends with photos until the disk is full and past it. Every send answered 200
is recorded exactly once (checked after a restart with room), every refusal is
a 5xx, the server answers reads throughout and exits cleanly.

``engine`` — the Claude engine over the SDK against `tests/reliability/faulty_claude.py`:
a run that dies mid-turn with a text queued behind it, a run that writes
garbage, and a start that hangs (bounded by the box's start timeout, here
`HANG_START_TIMEOUT_S`). Each cycle checks that the queue drains into a fresh
run and the next send is answered by a fresh run; the hang's time to recover is
reported.

Run it: ``python bench/faults.py`` (everything; ~15 minutes), ``--quick`` (20
kill cycles, one engine cycle each, no hang), ``--only kill|disk|engine``,
``--cycles N``, ``--json FILE``.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import http.client
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from anyio.from_thread import BlockingPortal

    from beebox_impl.box import Box

REPO = Path(__file__).resolve().parents[1]
FAULTY = REPO / "tests" / "reliability" / "faulty_claude.py"
PHOTO = base64.b64encode(random.Random(3).randbytes(24 * 1024)).decode("ascii")
# Our temporary files: ``*.tmp`` and mkstemp's ``.<name>.<8 random>``.
TEMPORARY = re.compile(r"(\.tmp$)|(^\.[^/]+\.[a-z0-9_]{8}$)")


# --- a `bbx serve` child ---------------------------------------------------------------


@dataclass
class Serve:
    process: subprocess.Popen[bytes]
    port: int
    token: str


def start(box: Path, projects: Path, log: Path, prefix: list[str] | None = None) -> Serve:
    environment = {**os.environ, "BBX_CLAUDE_PROJECTS_DIR": str(projects)}
    command = [sys.executable, "-m", "beebox_impl", "serve", "--box", str(box), "--port", "0"]
    with log.open("ab") as errors:
        process = subprocess.Popen(
            [*(prefix or []), *command], stdout=subprocess.PIPE, stderr=errors, env=environment
        )
    assert process.stdout is not None
    line = process.stdout.readline().decode()
    if not line.startswith("beebox serving "):
        process.kill()
        tail = log.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"bbx serve did not start: {line!r}; its log ends:\n{tail}")
    address, _, token = line.rsplit(" at ", 1)[1].strip().partition("/?token=")
    return Serve(process, int(address.rsplit(":", 1)[1]), token)


def finish(serve: Serve, *, kill: bool) -> int:
    serve.process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
    code = serve.process.wait(timeout=120)
    if serve.process.stdout is not None:
        serve.process.stdout.close()
    return code


def request(
    port: int, token: str, method: str, path: str, body: Any = None, *, timeout: float = 10
) -> tuple[int, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = {"Authorization": f"Bearer {token}"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        connection.request(method, path, body=data, headers=headers)
        answer = connection.getresponse()
        raw = answer.read()
        return answer.status, json.loads(raw) if raw.startswith(b"{") else raw
    finally:
        connection.close()


def bus_rows(box: Path) -> tuple[Counter[str], str, int]:
    """Texts in the bus (each send's text is its id), the integrity check, queued rows."""
    with contextlib.closing(sqlite3.connect(box / ".beebox" / "box.sqlite3")) as database:
        rows = database.execute("SELECT payload FROM bus_events").fetchall()
        (integrity,) = database.execute("PRAGMA integrity_check").fetchone()
        (queued,) = database.execute("SELECT count(*) FROM chat_queue").fetchone()
    return Counter(json.loads(payload)["message"] for (payload,) in rows), str(integrity), queued


def texts_in_transcripts(projects: Path) -> Counter[str]:
    """How often the transcripts hold each user text (a drained turn's texts each on its own)."""
    said: Counter[str] = Counter()
    for path in projects.rglob("*.jsonl"):
        with path.open("rb") as file:
            for line in file:
                if b'"type":"user"' not in line:
                    continue
                try:
                    content = json.loads(line)["message"]["content"]
                except (ValueError, KeyError, TypeError):
                    continue
                blocks = (
                    content if isinstance(content, list) else [{"type": "text", "text": content}]
                )
                for block in blocks:
                    if isinstance(block, dict) and block.get("type") == "text":
                        said.update(str(block.get("text", "")).split("\n\n"))
    return said


def temporary_files(box: Path) -> list[str]:
    return sorted(
        str(path.relative_to(box)) for path in box.rglob("*") if TEMPORARY.search(path.name)
    )


# --- kill -9 under load ----------------------------------------------------------------


@dataclass
class Ledger:
    answered: dict[str, dict[str, Any]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    unanswered_tries: int = 0


@dataclass
class _KillRun:
    """One kill -9 run: the server up now, the clients' ledger, and what went wrong."""

    box: Path
    projects: Path
    log: Path
    current: Serve
    address_lock: threading.Lock = field(default_factory=threading.Lock)
    ledger: Ledger = field(default_factory=Ledger)
    stop: threading.Event = field(default_factory=threading.Event)
    failures: list[str] = field(default_factory=list)
    leftovers: Counter[str] = field(default_factory=Counter)

    def client(self, number: int) -> None:
        """Send texts until stopped (every fourth with a photo), each until answered 200."""
        sent = 0
        while not self.stop.is_set():
            text = f"c{number}-m{sent}"
            body: dict[str, Any] = {"message": text, "messageId": text}
            if sent % 4 == 0:
                body["images"] = [{"mediaType": "image/png", "data": PHOTO}]
            self._send_until_answered(text, body)
            sent += 1

    def _send_until_answered(self, text: str, body: dict[str, Any]) -> None:
        # Each try goes to whichever server is up.
        while not self.stop.is_set():
            with self.address_lock:
                port, token = self.current.port, self.current.token
            try:
                status, answer = request(port, token, "POST", "/api/chat/send", body, timeout=5)
            except (OSError, http.client.HTTPException):
                status, answer = 0, None
            if status == 200:
                with self.ledger.lock:
                    self.ledger.answered.setdefault(text, answer)
                return
            with self.ledger.lock:
                self.ledger.unanswered_tries += 1
            time.sleep(0.02)

    def kill_and_restart(self, cycle: int) -> int:
        """Kill -9 the server, check what it recorded, start it again; how many sends
        had been answered by the kill."""
        with self.address_lock:
            finish(self.current, kill=True)
        with self.ledger.lock:
            answered = dict(self.ledger.answered)
        per_text, integrity, _ = bus_rows(self.box)
        if integrity != "ok":
            self.failures.append(f"cycle {cycle}: integrity {integrity}")
        if per_text and max(per_text.values()) > 1:
            self.failures.append(f"cycle {cycle}: a text twice in the bus")
        # Answered ids read before the check: every one of them must be in the bus once.
        lost = [text for text in answered if per_text[text] != 1]
        if lost:
            self.failures.append(f"cycle {cycle}: answered but not recorded once: {lost[:5]}")
        # What the killed server left; the restarted one must remove it as it opens
        # (a temporary file of its own, mid-save as we look, is not a leftover).
        left_by_the_killed = set(temporary_files(self.box))
        fresh = start(self.box, self.projects, self.log)
        with self.address_lock:
            self.current = fresh
        for name in left_by_the_killed & set(temporary_files(self.box)):
            self.leftovers[name] += 1
        return len(answered)

    def drain(self) -> tuple[dict[str, Any], int]:
        """Served once more until the chat is idle with nothing queued: its last
        status, and the server's exit code."""
        with self.address_lock:
            serve = self.current
        deadline = time.monotonic() + 120
        status: dict[str, Any] = {}
        while time.monotonic() < deadline:
            code, answer = request(serve.port, serve.token, "GET", "/api/chat/bootstrap?tail=1")
            status = answer["status"] if code == 200 else {}
            if status and not status["busy"] and status["queued"] == 0:
                break
            time.sleep(0.2)
        return status, finish(serve, kill=False)

    def final_figures(self) -> dict[str, Any]:
        """What the drained box holds of every answered send (its misses in `failures`)."""
        per_text, integrity, queued_rows = bus_rows(self.box)
        said = texts_in_transcripts(self.projects)
        answers = self.ledger.answered
        queued_texts = [text for text, answer in answers.items() if answer == {"queued": True}]
        turn_texts = [text for text, answer in answers.items() if "turnId" in answer]
        queued_lost = [t for t in queued_texts if said[t] == 0]
        turns_lost = [t for t in turn_texts if said[t] == 0]
        if queued_lost:
            self.failures.append(f"queued texts that never reached a turn: {queued_lost[:5]}")
        # A turn in flight at a kill is sent again when the box opens (at least once).
        if turns_lost:
            self.failures.append(f"started turns that never reached a transcript: {turns_lost[:5]}")
        if queued_rows:
            self.failures.append(f"{queued_rows} rows left in the persisted queue")
        return {
            "sends_answered_200": len(answers),
            "answered_queued": len(queued_texts),
            "answered_turn": len(turn_texts),
            "answered_deduplicated": sum(
                1 for a in answers.values() if a == {"deduplicated": True}
            ),
            "tries_without_answer": self.ledger.unanswered_tries,
            "bus_rows": sum(per_text.values()),
            "recorded_twice": sum(1 for count in per_text.values() if count > 1),
            "answered_not_recorded": sum(1 for text in answers if per_text[text] != 1),
            "queued_not_drained": len(queued_lost),
            "turn_texts_missing_from_transcript": len(turns_lost),
            # Sent again after a kill that came after the engine had written it down.
            "answered_texts_said_twice": sum(1 for text in answers if said[text] > 1),
            "persisted_queue_rows_at_end": queued_rows,
            "integrity_final": integrity,
            "temporary_files_left_after_restart": dict(self.leftovers),
        }


def kill_cycles(folder: Path, cycles: int, clients: int, seed: int) -> dict[str, Any]:
    box, projects, log = folder / "box", folder / "projects", folder / "serve.log"
    run = _KillRun(box, projects, log, start(box, projects, log))
    chooser = random.Random(seed)
    threads = [threading.Thread(target=run.client, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    started = time.monotonic()
    for cycle in range(cycles):
        time.sleep(chooser.uniform(0.05, 0.6))
        answered = run.kill_and_restart(cycle)
        if cycle % 20 == 19:
            print(f"  kill cycle {cycle + 1}/{cycles}: {answered} answered", file=sys.stderr)
    run.stop.set()
    for thread in threads:
        thread.join(timeout=60)
    minutes = (time.monotonic() - started) / 60
    status, exit_code = run.drain()
    return {
        "cycles": cycles,
        "clients": clients,
        "minutes": round(minutes, 1),
        **run.final_figures(),
        "final_exit_code": exit_code,
        "final_status": status,
        "failures": run.failures,
    }


# --- a full disk ----------------------------------------------------------------------


@contextlib.contextmanager
def small_disk(folder: Path, size: str) -> Iterator[tuple[Path, list[str], str]]:
    """A folder on a ``size`` tmpfs when mountable; else a folder and a file-size limit."""
    mount = folder / "tmpfs"
    mount.mkdir()
    mounted = False
    if os.geteuid() == 0:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
            capture_output=True,
            check=False,
        )
        mounted = done.returncode == 0
    try:
        if mounted:
            yield mount, [], f"tmpfs {size}"
        else:
            limit = 2 * 1024 * 1024
            shim = (
                "import os, resource, signal, sys;"
                "signal.signal(signal.SIGXFSZ, signal.SIG_IGN);"
                f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}));"
                "os.execv(sys.argv[1], sys.argv[1:])"
            )
            yield mount, [sys.executable, "-c", shim], f"RLIMIT_FSIZE {limit} bytes"
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(mount)], check=False)


def disk_full(folder: Path, sends: int) -> dict[str, Any]:
    with small_disk(folder, "2m") as (disk, prefix, how):
        box, projects = disk / "box", disk / "projects"
        log = folder / "serve-disk.log"
        serve = start(box, projects, log, prefix)
        statuses: dict[str, int] = {}
        reads_ok = 0
        for number in range(sends):
            text = f"full-{number}"
            body = {
                "message": text,
                "messageId": text,
                "images": [{"mediaType": "image/png", "data": PHOTO * 4}],
            }
            try:
                statuses[text] = request(
                    serve.port, serve.token, "POST", "/api/chat/send", body, timeout=60
                )[0]
            except (OSError, http.client.HTTPException):
                statuses[text] = 0
            read, _ = request(
                serve.port, serve.token, "GET", "/api/chat/bootstrap?tail=1", timeout=60
            )
            reads_ok += read == 200
        exit_code = finish(serve, kill=False)
        # Room again (the tmpfs emptied of what is not ours to keep: nothing; the limit lifted).
        if prefix:
            again = start(box, projects, log)
            finish(again, kill=False)
        per_text, integrity, _ = bus_rows(box)
    answered = Counter(statuses.values())
    wrong = [t for t, s in statuses.items() if s == 200 and per_text[t] != 1]
    return {
        "how": how,
        "sends": sends,
        "answers": {str(status): count for status, count in sorted(answered.items())},
        "answered_200_not_recorded_once": len(wrong),
        "refusals_not_5xx": sum(
            count for status, count in answered.items() if status != 200 and not 500 <= status < 600
        ),
        "reads_answered_200": reads_ok,
        "integrity": integrity,
        "exit_code_while_full": exit_code,
    }


# --- the engine misbehaving -------------------------------------------------------------


# The box's start timeout in the engine part: well over the stand-in CLI's real start.
HANG_START_TIMEOUT_S: Final = 10.0


def engine_faults(folder: Path, cycles: int, hang: bool) -> dict[str, Any]:
    # In-process: the box needs the Claude engine pointed at the faulty CLI.
    from anyio.from_thread import start_blocking_portal  # noqa: PLC0415

    from beebox_impl.box import Box  # noqa: PLC0415
    from beebox_impl.engine import ClaudeEngine  # noqa: PLC0415
    from beebox_impl.http.server import serve_box  # noqa: PLC0415

    script = folder / "bin" / "claude"
    script.parent.mkdir()
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAULTY}" "$@"\n')
    script.chmod(0o755)
    plan = folder / "plan"
    modes = [mode for _ in range(cycles) for mode in ("die", "ok", "garbage", "ok")]
    if hang:
        modes += ["hang", "ok"]
    plan.write_text("\n".join(modes) + "\n")
    os.environ["FAULTY_CLAUDE_PLAN"] = str(plan)
    results: dict[str, Any] = {"die": [], "garbage": [], "hang": None, "failures": []}
    with (
        start_blocking_portal("asyncio") as portal,
        portal.wrap_async_context_manager(
            Box.open(
                folder / "box",
                engine=ClaudeEngine(cli_path=script),
                projects_root=folder / "p",
                start_timeout=HANG_START_TIMEOUT_S,
            )
        ) as box,
        portal.wrap_async_context_manager(serve_box(box, port=0)) as running,
    ):
        faulty = _FaultyEngineBox(box, portal, running.port, folder / "plan.turns", results)
        for cycle in range(cycles):
            results["die"].append(_die_cycle(faulty, cycle, folder / "plan.die"))
            faulty.restart()
            results["garbage"].append(_garbage_cycle(faulty, cycle))
            faulty.restart()
        if hang:
            results["hang"] = _hung_start(faulty)
    results["cycles"] = cycles
    results["starts"] = len((folder / "plan.starts").read_text().splitlines())
    return results


def _wait(condition: Callable[[], bool], timeout: float) -> float:
    """Seconds until ``condition`` holds (`TimeoutError` after ``timeout``)."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise TimeoutError("gave up waiting")
        time.sleep(0.02)
    return time.monotonic() - started


@dataclass
class _FaultyEngineBox:
    """The box on the faulty CLI, served: what to send it, and the turns the CLI took
    (its plan's ``.turns`` file); a send not answered 200 goes to ``results``' failures."""

    box: Box
    portal: BlockingPortal
    port: int
    turns_file: Path
    results: dict[str, Any]

    def turns(self) -> list[tuple[int, str]]:
        """Each text the CLI took, with the number of the start whose run took it."""
        # A drained queue is one turn of texts joined by blank lines: one entry each.
        if not self.turns_file.exists():
            return []
        return [
            (int(turn["start"]), text)
            for turn in map(json.loads, self.turns_file.read_text().splitlines())
            for text in str(turn["text"]).split("\n\n")
        ]

    def send(self, text: str) -> Any:
        status, answer = request(
            self.port,
            self.box.token,
            "POST",
            "/api/chat/send",
            {"message": text, "messageId": text},
            timeout=60,
        )
        if status != 200:
            self.results["failures"].append(f"{text}: {status}")
        return answer

    def idle(self) -> bool:
        status = self.box.status()
        return not status["busy"] and status["queued"] == 0

    def stopped(self) -> bool:
        return not self.box.status()["running"]

    def start_of(self, text: str) -> int | None:
        return next((number for number, said in self.turns() if said == text), None)

    def turned(self, text: str) -> Callable[[], bool]:
        return lambda: self.start_of(text) is not None

    def restart(self) -> None:
        """Close the run (the box's restart) and wait until it has."""
        self.portal.call(self.box.restart)
        _wait(self.stopped, 30)


def _die_cycle(faulty: _FaultyEngineBox, cycle: int, die: Path) -> dict[str, Any]:
    """The CLI dies mid-turn (told by the file ``die``): a text queued behind the turn
    drains into a fresh run."""
    first, behind = f"d{cycle}-first", f"d{cycle}-queued"
    faulty.send(first)
    _wait(faulty.turned(first), 30)
    queued = faulty.send(behind)
    started = time.monotonic()
    die.touch()
    _wait(faulty.turned(behind), 60)
    _wait(faulty.idle, 60)
    die.unlink()
    return {
        "queued": queued == {"queued": True},
        "drained_into_a_fresh_run": faulty.start_of(behind) != faulty.start_of(first),
        "recovered_s": round(time.monotonic() - started, 2),
    }


def _garbage_cycle(faulty: _FaultyEngineBox, cycle: int) -> dict[str, Any]:
    """The CLI writes garbage: the run is closed, the next send starts a fresh one."""
    faulty.send(f"g{cycle}-first")
    started = time.monotonic()
    _wait(lambda: faulty.idle() and faulty.stopped(), 60)
    after = f"g{cycle}-after"
    faulty.send(after)
    _wait(faulty.turned(after), 60)
    _wait(faulty.idle, 60)
    return {
        "fresh_run": faulty.start_of(after) != faulty.start_of(f"g{cycle}-first"),
        "recovered_s": round(time.monotonic() - started, 2),
    }


def _hung_start(faulty: _FaultyEngineBox) -> dict[str, Any]:
    """A start that hangs fails after the box's start timeout, its texts kept queued;
    the next send starts a fresh run."""
    faulty.send("h-first")
    started = time.monotonic()
    _wait(lambda: faulty.box.status()["phase"] == "starting", 30)
    faulty.send("h-queued")
    _wait(lambda: faulty.box.status()["phase"] != "starting", 180)
    hung_for = time.monotonic() - started
    after_failure = dict(faulty.box.status())
    after = faulty.send("h-after")
    _wait(faulty.turned("h-after"), 60)
    _wait(faulty.idle, 60)
    return {
        "start_failed_after_s": round(hung_for, 1),
        "status_after_the_failed_start": after_failure,
        "next_send": after,
        "texts_in_the_fresh_run": [t for _, t in faulty.turns() if t.startswith("h-")],
        "turn_texts": [
            json.loads(line)["text"] for line in faulty.turns_file.read_text().splitlines()
        ][-1:],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cycles", type=int, default=200, help="kill -9 cycles (default 200)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--engine-cycles", type=int, default=10)
    parser.add_argument("--seed", type=int, default=9)
    parser.add_argument(
        "--quick", action="store_true", help="20 kill cycles, 1 engine cycle, no hang"
    )
    parser.add_argument("--only", choices=["kill", "disk", "engine"])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    cycles = 20 if args.quick else args.cycles
    engine_cycles = 1 if args.quick else args.engine_cycles
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bbx-faults-") as root:
        folder = Path(root)
        if args.only in (None, "kill"):
            (folder / "kill").mkdir()
            figures["kill"] = kill_cycles(folder / "kill", cycles, args.clients, args.seed)
            print(json.dumps({"kill": figures["kill"]}, indent=2))
        if args.only in (None, "disk"):
            (folder / "disk").mkdir()
            figures["disk"] = disk_full(folder / "disk", 40)
            print(json.dumps({"disk": figures["disk"]}, indent=2))
        if args.only in (None, "engine"):
            (folder / "engine").mkdir()
            figures["engine"] = engine_faults(folder / "engine", engine_cycles, hang=not args.quick)
            print(json.dumps({"engine": figures["engine"]}, indent=2))
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    failed = (
        figures.get("kill", {}).get("failures")
        or figures.get("disk", {}).get("answered_200_not_recorded_once")
        or figures.get("disk", {}).get("refusals_not_5xx")
        or figures.get("engine", {}).get("failures")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
