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
from typing import Any, Final

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


def kill_cycles(folder: Path, cycles: int, clients: int, seed: int) -> dict[str, Any]:
    box, projects, log = folder / "box", folder / "projects", folder / "serve.log"
    current: list[Serve] = [start(box, projects, log)]
    address_lock = threading.Lock()
    ledger = Ledger()
    stop = threading.Event()
    chooser = random.Random(seed)

    def client(number: int) -> None:
        sent = 0
        while not stop.is_set():
            text = f"c{number}-m{sent}"
            body: dict[str, Any] = {"message": text, "messageId": text}
            if sent % 4 == 0:
                body["images"] = [{"mediaType": "image/png", "data": PHOTO}]
            while not stop.is_set():
                with address_lock:
                    port, token = current[0].port, current[0].token
                try:
                    status, answer = request(port, token, "POST", "/api/chat/send", body, timeout=5)
                except (OSError, http.client.HTTPException):
                    status, answer = 0, None
                if status == 200:
                    with ledger.lock:
                        ledger.answered.setdefault(text, answer)
                    break
                with ledger.lock:
                    ledger.unanswered_tries += 1
                time.sleep(0.02)
            sent += 1

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    failures: list[str] = []
    leftovers: Counter[str] = Counter()
    started = time.monotonic()
    for cycle in range(cycles):
        time.sleep(chooser.uniform(0.05, 0.6))
        with address_lock:
            finish(current[0], kill=True)
        with ledger.lock:
            answered = dict(ledger.answered)
        per_text, integrity, _ = bus_rows(box)
        if integrity != "ok":
            failures.append(f"cycle {cycle}: integrity {integrity}")
        if per_text and max(per_text.values()) > 1:
            failures.append(f"cycle {cycle}: a text twice in the bus")
        # Answered ids read before the check: every one of them must be in the bus once.
        lost = [text for text in answered if per_text[text] != 1]
        if lost:
            failures.append(f"cycle {cycle}: answered but not recorded once: {lost[:5]}")
        # What the killed server left; the restarted one must remove it as it opens
        # (a temporary file of its own, mid-save as we look, is not a leftover).
        left_by_the_killed = set(temporary_files(box))
        fresh = start(box, projects, log)
        with address_lock:
            current[0] = fresh
        for name in left_by_the_killed & set(temporary_files(box)):
            leftovers[name] += 1
        if cycle % 20 == 19:
            print(f"  kill cycle {cycle + 1}/{cycles}: {len(answered)} answered", file=sys.stderr)
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    minutes = (time.monotonic() - started) / 60
    # Drain: served once more until the chat is idle with nothing queued.
    with address_lock:
        serve = current[0]
    deadline = time.monotonic() + 120
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        code, answer = request(serve.port, serve.token, "GET", "/api/chat/bootstrap?tail=1")
        status = answer["status"] if code == 200 else {}
        if status and not status["busy"] and status["queued"] == 0:
            break
        time.sleep(0.2)
    exit_code = finish(serve, kill=False)
    per_text, integrity, queued_rows = bus_rows(box)
    said = texts_in_transcripts(projects)
    queued_texts = [text for text, answer in ledger.answered.items() if answer == {"queued": True}]
    turn_texts = [text for text, answer in ledger.answered.items() if "turnId" in answer]

    def in_transcript(text: str) -> bool:
        return said[text] > 0

    queued_lost = [t for t in queued_texts if not in_transcript(t)]
    turns_lost = [t for t in turn_texts if not in_transcript(t)]
    if queued_lost:
        failures.append(f"queued texts that never reached a turn: {queued_lost[:5]}")
    # A turn in flight at a kill is sent again when the box opens (at least once).
    if turns_lost:
        failures.append(f"started turns that never reached a transcript: {turns_lost[:5]}")
    if queued_rows:
        failures.append(f"{queued_rows} rows left in the persisted queue")
    return {
        "cycles": cycles,
        "clients": clients,
        "minutes": round(minutes, 1),
        "sends_answered_200": len(ledger.answered),
        "answered_queued": len(queued_texts),
        "answered_turn": len(turn_texts),
        "answered_deduplicated": sum(
            1 for a in ledger.answered.values() if a == {"deduplicated": True}
        ),
        "tries_without_answer": ledger.unanswered_tries,
        "bus_rows": sum(per_text.values()),
        "recorded_twice": sum(1 for count in per_text.values() if count > 1),
        "answered_not_recorded": sum(1 for text in ledger.answered if per_text[text] != 1),
        "queued_not_drained": len(queued_lost),
        "turn_texts_missing_from_transcript": len(turns_lost),
        # Sent again after a kill that came after the engine had written it down.
        "answered_texts_said_twice": sum(1 for text in ledger.answered if said[text] > 1),
        "persisted_queue_rows_at_end": queued_rows,
        "integrity_final": integrity,
        "temporary_files_left_after_restart": dict(leftovers),
        "final_exit_code": exit_code,
        "final_status": status,
        "failures": failures,
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
    turns_file = folder / "plan.turns"

    def turns() -> list[tuple[int, str]]:
        # A drained queue is one turn of texts joined by blank lines: one entry each.
        if not turns_file.exists():
            return []
        return [
            (int(turn["start"]), text)
            for turn in map(json.loads, turns_file.read_text().splitlines())
            for text in str(turn["text"]).split("\n\n")
        ]

    def wait(condition: Callable[[], bool], timeout: float) -> float:
        started = time.monotonic()
        while not condition():
            if time.monotonic() - started > timeout:
                raise TimeoutError("gave up waiting")
            time.sleep(0.02)
        return time.monotonic() - started

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

        def send(text: str) -> Any:
            status, answer = request(
                running.port,
                box.token,
                "POST",
                "/api/chat/send",
                {"message": text, "messageId": text},
                timeout=60,
            )
            if status != 200:
                results["failures"].append(f"{text}: {status}")
            return answer

        def idle() -> bool:
            status = box.status()
            return not status["busy"] and status["queued"] == 0

        def start_of(text: str) -> int | None:
            return next((number for number, said in turns() if said == text), None)

        def turned(text: str) -> Callable[[], bool]:
            return lambda: start_of(text) is not None

        for cycle in range(cycles):
            # die: a text queued behind the turn drains into a fresh run.
            first, behind = f"d{cycle}-first", f"d{cycle}-queued"
            send(first)
            wait(turned(first), 30)
            queued = send(behind)
            started = time.monotonic()
            (folder / "plan.die").touch()
            wait(turned(behind), 60)
            wait(idle, 60)
            (folder / "plan.die").unlink()
            results["die"].append(
                {
                    "queued": queued == {"queued": True},
                    "drained_into_a_fresh_run": start_of(behind) != start_of(first),
                    "recovered_s": round(time.monotonic() - started, 2),
                }
            )
            # garbage: the run is closed, the next send starts a fresh one.
            portal.call(box.restart)
            wait(lambda: not box.status()["running"], 30)
            send(f"g{cycle}-first")
            started = time.monotonic()
            wait(lambda: idle() and not box.status()["running"], 60)
            after = f"g{cycle}-after"
            send(after)
            wait(turned(after), 60)
            wait(idle, 60)
            results["garbage"].append(
                {
                    "fresh_run": start_of(after) != start_of(f"g{cycle}-first"),
                    "recovered_s": round(time.monotonic() - started, 2),
                }
            )
            portal.call(box.restart)
            wait(lambda: not box.status()["running"], 30)
        if hang:
            send("h-first")
            started = time.monotonic()
            wait(lambda: box.status()["phase"] == "starting", 30)
            send("h-queued")
            wait(lambda: box.status()["phase"] != "starting", 180)
            hung_for = time.monotonic() - started
            after_failure = dict(box.status())
            # The failed start kept its texts queued; the next send starts a fresh run.
            after = send("h-after")
            wait(turned("h-after"), 60)
            wait(idle, 60)
            results["hang"] = {
                "start_failed_after_s": round(hung_for, 1),
                "status_after_the_failed_start": after_failure,
                "next_send": after,
                "texts_in_the_fresh_run": [t for _, t in turns() if t.startswith("h-")],
                "turn_texts": [
                    json.loads(line)["text"] for line in turns_file.read_text().splitlines()
                ][-1:],
            }
    results["cycles"] = cycles
    results["starts"] = len((folder / "plan.starts").read_text().splitlines())
    return results


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
