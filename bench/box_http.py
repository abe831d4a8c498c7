"""HTTP benchmark: sends and history tails over loopback, each beside its baseline.

What is measured, in one run (figures printed, never asserted):

- ``POST /api/chat/send`` — sends/second and p50/p99 latency with 1 and with 16
  concurrent clients (each client one keep-alive connection, each send a fresh
  ``messageId``), against a fresh box on the EchoEngine; beside it the
  **baseline**: a bare `ThreadingHTTPServer` answering every POST a fixed 200,
  driven the same way. The target: send p50 ≤ 3 × baseline p50 + one fsync (the
  fsync is measured on the box's disk in the same run and printed too).
- The same sends to a box whose one turn is **in flight** and never ends (a
  `ScriptedEngine` that takes the turn and never answers, as a model call of
  seconds): every send is queued, as every send is while the Claude engine
  works on a turn. Judged against the same target. (With the `EchoEngine` a turn
  ends within a millisecond, so many sends there start a turn of their own.)
- ``GET /api/chat/history?tail=200`` on the ~150 MB transcript of
  `bench/generate_transcript.py` (2,000 lines, 150 photos), warm, beside the
  **baseline**: the same tail read in-process (`read_history` with a warm index
  cache). The target: HTTP p50 ≤ 1.5 × in-process p50. Beside it, for
  information, the fixed-200 server answering the same GETs: what HTTP alone
  costs a read.
- **No failed request**: every line counts its failures, and a last verdict adds
  them up over the whole run (target: none).

Printed for information beside the send target, the **architecture floor**: the
least a durable send costs in the shape the box must have (a `ThreadingHTTPServer`
in front of an anyio loop, the answer only once the row
is committed). Its handler parses the JSON body, commits one ``BEGIN IMMEDIATE`` /
two ``INSERT`` / ``COMMIT`` (WAL, ``synchronous=FULL``: the box's bus row and
claim) in the handler thread itself, then crosses to the loop once (as the box's
handlers do, `anyio.from_thread.run` with the loop's token), as the hand-over
to the session on the loop must, and answers. No auth, no validation, no session,
no events, no worker-thread hop: a send cannot do less, so a target below this
floor is out of reach of any box of this shape. Beside it, the floor's two halves
alone (the commit without the crossing, the crossing without the commit), to show
what each costs on this machine.

Each line of requests also shows the server's CPU a request (``cpu … ms/req``: this
process's user and system time while the clients ran, over the requests answered):
the server runs alone in this process, so at one client its latency follows that
figure (`docs/performance.md`).

Every client runs in a process of its own (one process for all of them, a thread
each), for the baseline, the floor and the box alike: a client thread in the
server's process would take the interpreter lock from the server it measures, which
a browser does not.

Run it: ``python bench/box_http.py [--quick]`` (``--quick``: a small transcript and
fewer requests, for a smoke run). ``--box-sends N [--box-clients C]
[--turn-in-flight | --from-memory]`` runs the box's sends alone, to be profiled
(``docs/performance.md``).
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import resource
import socket
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ProcessPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal, TypeAlias

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from generate_transcript import generate_transcript
from sessions import AutoAnswerEngine

from beebox_impl.box import Box
from beebox_impl.engine.protocol import Engine
from beebox_impl.engine.scripted import ScriptedEngine
from beebox_impl.http import serve_box
from beebox_impl.services.send import SendRequest, TurnStarted
from beebox_impl.transcript import TailSlice, TranscriptIndexCache, read_history
from beebox_impl.transcript.location import project_dir


class _Connection(http.client.HTTPConnection):
    """A client connection without Nagle's delay (headers and body are two writes)."""

    def connect(self) -> None:
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _Fixed200(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer()

    def do_GET(self) -> None:
        self._answer()

    def _answer(self) -> None:
        body = b"{}"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _FloorSend(_Fixed200):
    """The architecture floor's handler (module doc): commit, then one crossing to the
    loop; or one of the two alone, as its server says."""

    server: _FloorServer

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        row_id = self.server.commit(request["messageId"]) if self.server.commits else 0
        if self.server.crosses:
            row_id = self.server.run_on_loop(self.server.hand_over, row_id)
        body = json.dumps({"turnId": str(row_id)}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _BaselineServer(ThreadingHTTPServer):
    """A bare server of the baselines: the backlog the box's server has (no resets at
    16 clients), its threads gone with the process."""

    request_queue_size = 128
    daemon_threads = True


def _fixed_200_server() -> _BaselineServer:
    return _BaselineServer(("127.0.0.1", 0), _Fixed200)


class _FloorServer(_BaselineServer):
    def __init__(
        self,
        run_on_loop: Callable[..., Any],
        database: Path,
        *,
        commits: bool = True,
        crosses: bool = True,
    ) -> None:
        self.run_on_loop = run_on_loop
        self.commits = commits
        self.crosses = crosses
        self._lock = threading.Lock()
        self._connection = sqlite3.connect(database, isolation_level=None, check_same_thread=False)
        self._connection.execute("PRAGMA journal_mode=WAL")
        self._connection.execute("PRAGMA synchronous=FULL")
        self._connection.execute(
            "CREATE TABLE bus (id INTEGER PRIMARY KEY, payload TEXT, created_at_ms INTEGER)"
        )
        self._connection.execute(
            "CREATE TABLE claims (message_id TEXT PRIMARY KEY, claimed_at_ms INTEGER, row INTEGER)"
        )
        super().__init__(("127.0.0.1", 0), _FloorSend)

    def commit(self, message_id: str) -> int:
        with self._lock:
            now_ms = time.time_ns() // 1_000_000
            self._connection.execute("BEGIN IMMEDIATE")
            cursor = self._connection.execute(
                "INSERT INTO bus (payload, created_at_ms) VALUES (?, ?)", ("{}", now_ms)
            )
            assert cursor.lastrowid is not None
            self._connection.execute(
                "INSERT INTO claims VALUES (?, ?, ?)", (message_id, now_ms, cursor.lastrowid)
            )
            self._connection.execute("COMMIT")
            return cursor.lastrowid

    async def hand_over(self, row_id: int) -> int:
        await anyio.lowlevel.checkpoint()
        return row_id

    def server_close(self) -> None:
        super().server_close()
        self._connection.close()


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _drive(
    port: int, clients: int, per_client: int, request: Callable[[http.client.HTTPConnection], None]
) -> tuple[float, list[float], int]:
    """Run ``clients`` threads doing ``per_client`` requests each: (seconds, latencies, failed)."""
    latencies: list[float] = []
    failed = 0
    lock = threading.Lock()
    barrier = threading.Barrier(clients + 1)

    def client() -> None:
        nonlocal failed
        connection = _Connection("127.0.0.1", port, timeout=60)
        mine: list[float] = []
        errors = 0
        barrier.wait()
        for _ in range(per_client):
            started = time.perf_counter()
            try:
                request(connection)
            except Exception:
                errors += 1
                connection.close()
                connection = _Connection("127.0.0.1", port, timeout=60)
                continue
            mine.append(time.perf_counter() - started)
        connection.close()
        with lock:
            latencies.extend(mine)
            failed += errors

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started, latencies, failed


def _post_send(token: str | None) -> Callable[[http.client.HTTPConnection], None]:
    # A partial of a module function, not a closure: it crosses to the clients' process.
    return partial(_send_one, token)


def _send_one(token: str | None, connection: http.client.HTTPConnection) -> None:
    body = json.dumps({"message": "bench", "messageId": str(uuid.uuid4())})
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    connection.request("POST", "/api/chat/send", body=body, headers=headers)
    response = connection.getresponse()
    response.read()
    if response.status != 200:
        raise RuntimeError(f"status {response.status}")


def _get(path: str, token: str) -> Callable[[http.client.HTTPConnection], None]:
    return partial(_get_one, path, token)


def _get_one(path: str, token: str, connection: http.client.HTTPConnection) -> None:
    connection.request("GET", path, headers={"Authorization": f"Bearer {token}"})
    response = connection.getresponse()
    response.read()
    if response.status != 200:
        raise RuntimeError(f"status {response.status}")


@dataclass(frozen=True)
class _Driven:
    """One count of clients' requests: how long, each latency, the failures, and the
    server's CPU (user and system) over them, when it ran in this process."""

    seconds: float
    latencies: list[float]
    failed: int
    server_cpu_seconds: float | None = None


class _Clients:
    """The clients' process: `_drive` runs there, so no client thread shares the
    server's interpreter lock (a browser does not); one process for the whole run."""

    def __init__(self) -> None:
        self._pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        # Over every drive of the run: the target "no failed request".
        self.requests = 0
        self.failed = 0

    async def drive(
        self,
        port: int,
        clients: int,
        per_client: int,
        request: Callable[[http.client.HTTPConnection], None],
    ) -> _Driven:
        """`_drive` in the clients' process, awaited without blocking the loop; with
        the CPU this process (the server's) spent meanwhile."""
        before = resource.getrusage(resource.RUSAGE_SELF)
        answer = self._pool.submit(_drive, port, clients, per_client, request)
        seconds, latencies, failed = await anyio.to_thread.run_sync(answer.result)
        after = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        self.requests += len(latencies) + failed
        self.failed += failed
        return _Driven(seconds, latencies, failed, cpu)

    def close(self) -> None:
        self._pool.shutdown()


def _line(label: str, driven: _Driven) -> str:
    latencies = driven.latencies
    rate = len(latencies) / driven.seconds if driven.seconds else 0.0
    # The server's CPU a request: in a process of its own, its latency from one
    # client follows it (docs/performance.md, "Where the one-client send still goes over").
    cpu = (
        f"   cpu {driven.server_cpu_seconds / len(latencies) * 1000:6.3f} ms/req"
        if driven.server_cpu_seconds is not None and latencies
        else ""
    )
    return (
        f"  {label:<56} {rate:>9.0f} req/s   p50 {_percentile(latencies, 0.5) * 1000:7.3f} ms"
        f"   p99 {_percentile(latencies, 0.99) * 1000:7.3f} ms{cpu}   failed {driven.failed}"
    )


def _fsync_seconds(folder: Path) -> float:
    # What a send's commit pays: SQLite in WAL mode appends the transaction's pages
    # to the log and fsyncs it. So: append one 4 KiB page (unbuffered: the bytes
    # must be in the file before the fsync, or it syncs nothing), then time fsync.
    samples = []
    path = folder / "fsync-probe"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for _ in range(200):
            os.write(descriptor, b"x" * 4096)
            started = time.perf_counter()
            os.fsync(descriptor)
            samples.append(time.perf_counter() - started)
    finally:
        os.close(descriptor)
        path.unlink()
    return statistics.median(samples)


def _verdict(label: str, ours: float, limit: float, how: str) -> str:
    mark = "ok" if ours <= limit else "MISSED"
    return f"  {label}: p50 {ours * 1000:.3f} ms vs target {limit * 1000:.3f} ms ({how}): {mark}"


async def _fixed_200_gets(clients_process: _Clients, requests: int, token: str) -> float:
    """The fixed-200 baseline answering the history's GETs from one client: print the
    line; its p50."""
    server = _fixed_200_server()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        path = "/api/chat/history?tail=200"
        driven = await clients_process.drive(
            server.server_address[1], 1, requests, _get(path, token)
        )
    finally:
        server.shutdown()
        server.server_close()
    print(_line("baseline fixed 200 GET, 1 client(s)", driven))
    return _percentile(driven.latencies, 0.5)


async def _send_p50s(
    clients_process: _Clients, server: ThreadingHTTPServer, label: str, sends: int
) -> dict[int, float]:
    """Serve with ``server`` while 1, then 16 clients send; print each line; their p50s."""
    threading.Thread(target=server.serve_forever, daemon=True).start()
    p50: dict[int, float] = {}
    try:
        for clients in (1, 16):
            driven = await clients_process.drive(
                server.server_address[1],
                clients,
                max(1, sends // clients),
                _post_send(None),
            )
            print(_line(f"{label}, {clients} client(s)", driven))
            p50[clients] = _percentile(driven.latencies, 0.5)
    finally:
        server.shutdown()
        server.server_close()
    return p50


# The engine of a served box: the embedded echo; one whose first turn never ends;
# one that answers every turn from memory and writes nothing.
_BoxEngine: TypeAlias = Literal["echo", "turn in flight", "from memory"]
# How a line of sends names the box's engine.
_SENDS_LABEL: dict[_BoxEngine, str] = {
    "echo": "box send",
    "turn in flight": "box send, a turn in flight",
    "from memory": "box send, an engine answering from memory",
}


@asynccontextmanager
async def _served_box(folder: Path, kind: _BoxEngine = "echo") -> AsyncIterator[tuple[Box, int]]:
    """A fresh box served on a free port: (box, port). On its embedded defaults (the
    `EchoEngine`); with ``"turn in flight"``, on a `ScriptedEngine` whose first turn
    is started and never answered: as a model call in flight, every send after it is
    queued; with ``"from memory"``, on the auto-answer engine of `bench/sessions.py`."""
    engines: dict[_BoxEngine, tuple[str, Engine | None]] = {
        "echo": ("box", None),
        "turn in flight": ("busy-box", ScriptedEngine(start_mode="accept")),
        "from memory": ("memory-box", AutoAnswerEngine(keep_sent=False)),
    }
    name, engine = engines[kind]
    async with (
        Box.open(folder / name, engine=engine, projects_root=folder / "projects") as box,
        serve_box(box, port=0) as running,
    ):
        if kind == "turn in flight":
            started = await box.send(SendRequest("the turn in flight"))
            if not isinstance(started, TurnStarted):
                raise RuntimeError("the box did not start the turn to keep in flight")
        yield box, running.port


async def _box_sends(
    clients_process: _Clients,
    box: Box,
    port: int,
    sends: int,
    *,
    counts: tuple[int, ...] = (1, 16),
    label: str = "box send",
) -> dict[int, list[float]]:
    """``sends`` sends to the box from each count of clients; print each line; the latencies."""
    latencies: dict[int, list[float]] = {}
    for clients in counts:
        driven = await clients_process.drive(
            port, clients, max(1, sends // clients), _post_send(box.token)
        )
        latencies[clients] = driven.latencies
        print(_line(f"{label}, {clients} client(s)", driven))
    return latencies


async def _run(
    folder: Path,
    quick: bool,
    box_sends: int | None,
    box_clients: tuple[int, ...],
    engine: _BoxEngine,
) -> None:
    clients_process = _Clients()
    try:
        if box_sends is None:
            await _measure(clients_process, folder, quick)
            return
        async with _served_box(folder, engine) as (box, port):
            await _box_sends(
                clients_process,
                box,
                port,
                box_sends,
                counts=box_clients,
                label=_SENDS_LABEL[engine],
            )
    finally:
        clients_process.close()


async def _measure(clients_process: _Clients, folder: Path, quick: bool) -> None:
    sends = 100 if quick else 1000
    fsync = _fsync_seconds(folder)
    print(f"fsync p50 on the box's disk: {fsync * 1000:.3f} ms")
    floors = await _send_floors(clients_process, folder, sends, fsync)
    verdicts: list[str] = []
    async with _served_box(folder, "turn in flight") as (busy, busy_port):
        label = _SENDS_LABEL["turn in flight"]
        verdicts += floors.judge(
            "send while a turn is in flight",
            await _box_sends(clients_process, busy, busy_port, sends, label=label),
        )
    async with _served_box(folder, "from memory") as (idle, idle_port):
        label = _SENDS_LABEL["from memory"]
        from_memory = await _box_sends(clients_process, idle, idle_port, sends, label=label)
    async with _served_box(folder) as (box, port):
        verdicts += floors.judge(
            "send", await _box_sends(clients_process, box, port, sends), from_memory
        )
        verdicts += await _history_verdicts(
            clients_process, box, port, folder / "projects", quick=quick
        )
        mark = "ok" if clients_process.failed == 0 else "MISSED"
        verdicts.append(
            f"  no failed request: {clients_process.failed} failed of"
            f" {clients_process.requests}: {mark}"
        )
        print("targets (figures of this run):")
        print("\n".join(verdicts))


@dataclass(frozen=True)
class _SendFloors:
    """What a box's sends are judged against, by count of clients: the p50 of the
    fixed-200 baseline, of the architecture floor, and of its commit and its crossing
    alone; and one fsync of the box's disk."""

    fsync: float
    baseline: dict[int, float]
    floor: dict[int, float]
    halves: dict[str, dict[int, float]]

    def judge(
        self,
        what: str,
        box_latencies: dict[int, list[float]],
        from_memory: dict[int, list[float]] | None = None,
    ) -> list[str]:
        """The verdict lines of the box's sends ``what``, with the floors beside them."""
        lines: list[str] = []
        for clients, latencies in box_latencies.items():
            send_target = 3 * self.baseline[clients] + self.fsync
            floor = self.floor[clients]
            below = " (the target is below the floor)" if send_target < floor else ""
            lines.append(
                _verdict(
                    f"{what}, {clients} client(s)",
                    _percentile(latencies, 0.5),
                    send_target,
                    "3 x baseline p50 + one fsync",
                )
            )
            lines.append(
                f"    (info) architecture floor, {clients} client(s): p50"
                f" {floor * 1000:.3f} ms; box send / floor ="
                f" {_percentile(latencies, 0.5) / floor:.2f}x{below};"
                f" its commit alone {self.halves['commit'][clients] * 1000:.3f} ms,"
                f" its crossing alone {self.halves['crossing'][clients] * 1000:.3f} ms"
            )
            if from_memory is not None:
                lines.append(
                    f"    (info) an engine answering from memory, {clients} client(s): p50"
                    f" {_percentile(from_memory[clients], 0.5) * 1000:.3f} ms (the same"
                    " sends with no engine work)"
                )
        return lines


async def _send_floors(
    clients_process: _Clients, folder: Path, sends: int, fsync: float
) -> _SendFloors:
    """The baseline and the floors of a send, each measured and printed."""
    print("POST /api/chat/send")
    baseline_p50 = await _send_p50s(
        clients_process, _fixed_200_server(), "baseline fixed 200", sends
    )
    run_on_loop = partial(anyio.from_thread.run, token=anyio.lowlevel.current_token())
    floor = await anyio.to_thread.run_sync(_FloorServer, run_on_loop, folder / "floor.sqlite3")
    floor_p50 = await _send_p50s(clients_process, floor, "architecture floor", sends)
    halves: dict[str, dict[int, float]] = {}
    for half, commits in (("commit", True), ("crossing", False)):
        server = await anyio.to_thread.run_sync(
            partial(
                _FloorServer,
                run_on_loop,
                folder / f"floor-{half}.sqlite3",
                commits=commits,
                crosses=not commits,
            )
        )
        halves[half] = await _send_p50s(clients_process, server, f"floor, {half} alone", sends)
    return _SendFloors(fsync, baseline_p50, floor_p50, halves)


async def _history_verdicts(
    clients_process: _Clients, box: Box, port: int, projects: Path, *, quick: bool
) -> list[str]:
    """``GET /api/chat/history?tail=200`` on a generated transcript, beside the same
    read in-process and a fixed 200 GET: each measured and printed; the verdict lines."""
    history_requests = 20 if quick else 200
    print("GET /api/chat/history?tail=200")
    target = project_dir(box.root, projects)
    target.mkdir(parents=True, exist_ok=True)
    generated = await anyio.to_thread.run_sync(
        lambda: generate_transcript(target, photos=15 if quick else 150)
    )
    print(f"  transcript: {generated.size_bytes / 1e6:.1f} MB, {generated.line_count} lines")
    cache = TranscriptIndexCache()
    read_history(generated.path, generated.session_id, TailSlice(200), cache=cache)
    in_process: list[float] = []
    for _ in range(history_requests):
        started = time.perf_counter()
        read_history(generated.path, generated.session_id, TailSlice(200), cache=cache)
        in_process.append(time.perf_counter() - started)
    print(_line("baseline in-process tail=200", _Driven(sum(in_process), in_process, 0)))
    fixed_get = await _fixed_200_gets(clients_process, history_requests, box.token)
    path = f"/api/chat/history?session={generated.session_id}&tail=200"
    await clients_process.drive(port, 1, 1, _get(path, box.token))
    history = await clients_process.drive(port, 1, history_requests, _get(path, box.token))
    print(_line("box history tail=200 over HTTP", history))
    return [
        _verdict(
            "history tail=200",
            _percentile(history.latencies, 0.5),
            1.5 * _percentile(in_process, 0.5),
            "1.5 x the in-process p50",
        ),
        f"    (info) baseline fixed 200 GET, 1 client(s): p50 {fixed_get * 1000:.3f} ms"
        " (what HTTP alone costs a read)",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small configuration for a smoke run")
    parser.add_argument(
        "--box-sends",
        type=int,
        metavar="N",
        help="only the box's sends, N by 1 client, then N by 16 clients: no baselines and no"
        " targets (a run to profile, docs/performance.md)",
    )
    parser.add_argument(
        "--box-clients",
        type=int,
        metavar="C",
        help="with --box-sends: only the N sends by C clients",
    )
    engines = parser.add_mutually_exclusive_group()
    engines.add_argument(
        "--turn-in-flight",
        action="store_true",
        help="with --box-sends: a box whose one turn never ends, so every send is queued",
    )
    engines.add_argument(
        "--from-memory",
        action="store_true",
        help="with --box-sends: a box on an engine that answers every turn from memory",
    )
    args = parser.parse_args(argv)
    if args.box_sends is not None and args.box_sends < 1:
        parser.error("--box-sends takes a count of at least 1")
    if args.box_clients is not None and (args.box_sends is None or args.box_clients < 1):
        parser.error("--box-clients takes a count of at least 1, with --box-sends")
    engine: _BoxEngine = (
        "turn in flight" if args.turn_in_flight else "from memory" if args.from_memory else "echo"
    )
    if engine != "echo" and args.box_sends is None:
        parser.error("--turn-in-flight and --from-memory go with --box-sends")
    box_clients = (1, 16) if args.box_clients is None else (args.box_clients,)
    with tempfile.TemporaryDirectory(prefix="bbx-bench-http-") as folder:
        anyio.run(_run, Path(folder), args.quick, args.box_sends, box_clients, engine)
    return 0


if __name__ == "__main__":
    sys.exit(main())
