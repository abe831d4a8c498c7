"""Load: N concurrent clients against a `bbx serve` child on loopback (issue 9 §2).

Each client holds one keep-alive connection and an SSE listener of its own
(``GET /api/events``), and loops over a mix of operations for the whole run:

- ``send``: ``POST /api/chat/send`` with a photo (a fresh ``messageId`` each; a
  send answered ``429`` — too many photos wait for the chat's next turn — is not
  an error: the client sends that same message again as its first send after
  the answer's ``Retry-After``, as the page does, and the count of such answers
  is reported);
- ``history``: ``GET /api/chat/history?tail=20`` (the chat's last entries);
- ``media``: ``GET /api/session-media/<ref>`` of a photo a history read listed;
- ``bootstrap``: ``GET /api/chat/bootstrap?tail=20``.

It reports the throughput, p50/p99 latency per operation, errors (any answer but
2xx, any connection failure, any event stream that ended early; target 0), the
events the listeners received, and the server's RSS and open file descriptors
at the start and at the end of the measured run (target: flat), sampled along
the way. RSS is judged by its level, the median of the readings over the first
and over the last third of the run (within `FLAT_GROWTH_PCT`); single readings
swing with the requests in flight (see `_rss_figures`). The measured run follows a warm-up of
the same load (``--warm-up``, 60 s), in which the clients' requests in flight fill
the box's working set; the RSS before it is printed too. The server is the embedded default
(`EchoEngine`), so what is measured is the box: HTTP, the acceptance record, the
session, transcripts and media.

Run it: ``python bench/load.py`` (64 clients, 60 s warm-up, 300 s measured),
``--quick`` (8 clients, 5 s + 20 s), or ``--clients N --seconds S --warm-up W``;
``--photo-kib K`` sends photos of K KiB (256 by default; 0: sends without a photo,
so no media is fetched either: a run that isolates what photos cost);
``--serve-option OPTION`` passes an option to `bbx serve` (repeatable);
``--json FILE`` keeps the figures.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import http.client
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from beebox_impl.files import FileIdentity
from beebox_impl.transcript.index import build_index

MIX = (("send", 2), ("history", 4), ("media", 3), ("bootstrap", 1))
# Over the strip mark once base64-encoded (256 KiB a line): served back by reference.
PHOTO_KIB = 256
# "Flat": over the measured run, after the warm-up, RSS grows at most this much.
FLAT_GROWTH_PCT = 5.0
WARM_UP_S = 60.0
RSS_FIELDS = ("VmRSS", "RssAnon", "RssFile", "RssShmem")


@dataclass
class Server:
    """The `bbx serve` child: where it listens and its token."""

    process: subprocess.Popen[bytes]
    port: int
    token: str

    def usage(self) -> tuple[float, int]:
        """RSS (MiB) and open file descriptors of the server process now."""
        return self.rss_parts()["VmRSS"], len(os.listdir(f"/proc/{self.process.pid}/fd"))

    def rss_parts(self) -> dict[str, float]:
        """RSS and its parts (MiB): anonymous memory (the heaps), file-backed pages
        (the interpreter, libraries, SQLite's mapped WAL index), shared memory."""
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        return {name: int(fields[name].split()[0]) / 1024 for name in RSS_FIELDS}


def start_server(
    box: Path, projects: Path, log: Path, serve_options: tuple[str, ...] = ()
) -> Server:
    """Start ``bbx serve [serve_options]`` on a free loopback port; read its first line."""
    environment = {**os.environ, "BBX_CLAUDE_PROJECTS_DIR": str(projects)}
    with log.open("wb") as errors:
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "beebox_impl", "serve", "--box", str(box)),
                *("--port", "0", *serve_options),
            ],
            stdout=subprocess.PIPE,
            stderr=errors,
            env=environment,
        )
    assert process.stdout is not None
    line = process.stdout.readline().decode()
    if not line.startswith("beebox serving "):
        process.kill()
        raise SystemExit(f"bbx serve did not start: {line!r} {log.read_text()}")
    address, _, token = line.rsplit(" at ", 1)[1].strip().partition("/?token=")
    return Server(process, int(address.rsplit(":", 1)[1]), token)


@dataclass
class Tally:
    """What every client saw, merged under a lock."""

    latencies: dict[str, list[float]] = field(default_factory=lambda: {op: [] for op, _ in MIX})
    errors: dict[str, int] = field(default_factory=dict)
    events: int = 0
    deferred: int = 0
    refs: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def error(self, what: str) -> None:
        with self.lock:
            self.errors[what] = self.errors.get(what, 0) + 1


class Client:
    """One client: a keep-alive connection, its own random mix, its own event listener."""

    def __init__(self, server: Server, tally: Tally, number: int, photo: str | None) -> None:
        self.server = server
        self.tally = tally
        self.number = number
        self.photo = photo
        self.random = random.Random(number)
        self.connection: http.client.HTTPConnection | None = None
        self.headers = {"Authorization": f"Bearer {server.token}"}
        self.retry_after: str | None = None
        # A send answered 429, to be sent again (same messageId) as the first send
        # after its Retry-After; other operations go on meanwhile.
        self.deferred: bytes | None = None
        self.deferred_until = 0.0

    def _request(
        self, method: str, path: str, body: bytes | None = None, *, keep_headers: bool = False
    ) -> tuple[int, bytes]:
        headers = dict(self.headers)
        if body is not None:
            headers["Content-Type"] = "application/json"
        for attempt in range(2):
            if self.connection is None:
                self.connection = http.client.HTTPConnection(
                    "127.0.0.1", self.server.port, timeout=120
                )
            try:
                self.connection.request(method, path, body=body, headers=headers)
                answer = self.connection.getresponse()
                if keep_headers:
                    self.retry_after = answer.getheader("Retry-After")
                return answer.status, answer.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                # The server closed an idle keep-alive connection: open another once.
                self.connection.close()
                self.connection = None
                if attempt == 1:
                    raise
        raise AssertionError("unreachable")

    def one(self, operation: str) -> bool:
        """Do ``operation``; False when there was nothing to do (no request made)."""
        if operation == "send":
            if self.deferred is not None and time.monotonic() < self.deferred_until:
                return False  # this client's message waits for its retry time
            data = self.deferred or send_body(self.number, self.photo)
            status, answer = self._request("POST", "/api/chat/send", data, keep_headers=True)
            self.deferred = data if status == 429 else None
            if status == 429:
                self.deferred_until = time.monotonic() + float(self.retry_after or 1)
                with self.tally.lock:
                    self.tally.deferred += 1
                return True
        elif operation == "history":
            status, answer = self._request("GET", "/api/chat/history?tail=20")
            if status == 200:
                self._harvest(answer)
            elif status == 404:
                status = 200  # no chat session yet (before the first turn): an answer
        elif operation == "media":
            with self.tally.lock:
                ref = self.random.choice(self.tally.refs) if self.tally.refs else None
            if ref is None:
                return False
            status, answer = self._request("GET", f"/api/session-media/{ref}")
        else:
            status, answer = self._request("GET", "/api/chat/bootstrap?tail=20")
        if not 200 <= status < 300:
            self.tally.error(f"{operation} {status}")
        return True

    def _harvest(self, answer: bytes) -> None:
        refs = [
            block["imageRef"]
            for entry in json.loads(answer)["entries"]
            for block in entry["content"]
            if "imageRef" in block
        ]
        if refs:
            with self.tally.lock:
                self.tally.refs.extend(refs[-2:])
                del self.tally.refs[:-256]

    def run(self, measure_from: float, stop_at: float) -> None:
        """The mix until ``stop_at``; latencies of what starts from ``measure_from`` on
        (errors count from the start)."""
        operations = [op for op, weight in MIX for _ in range(weight)]
        latencies: dict[str, list[float]] = {op: [] for op, _ in MIX}
        while (now := time.monotonic()) < stop_at:
            operation = self.random.choice(operations)
            started = time.perf_counter()
            try:
                made = self.one(operation)
            except (OSError, http.client.HTTPException) as error:
                self.tally.error(f"{operation} {type(error).__name__}")
                self.connection = None
                continue
            if made and now >= measure_from:
                latencies[operation].append(time.perf_counter() - started)
        if self.connection is not None:
            self.connection.close()
        with self.tally.lock:
            for operation, values in latencies.items():
                self.tally.latencies[operation].extend(values)


# A listener waits this long for a line: the box sends a heartbeat every 15 s, so
# a silence this long is an error (a timed-out socket cannot be read again anyway).
EVENT_SILENCE_S = 60.0


def listen(
    server: Server,
    tally: Tally,
    stop: threading.Event,
    ready: threading.Barrier,
    open_streams: list[http.client.HTTPConnection],
) -> None:
    """Hold an event stream until ``stop``; an early end is an error."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=EVENT_SILENCE_S)
    events = 0
    try:
        connection.request(
            "GET", "/api/events", headers={"Authorization": f"Bearer {server.token}"}
        )
        answer = connection.getresponse()
        if answer.status != 200:
            tally.error(f"events {answer.status}")
            return
        assert answer.fp is not None
        with tally.lock:
            open_streams.append(connection)
        ready.wait()
        while not stop.is_set():
            line = answer.fp.readline()
            if not line:
                if not stop.is_set():
                    tally.error("events ended early")
                return
            if line.startswith(b"event:"):
                events += 1
    except (OSError, http.client.HTTPException) as error:
        if not stop.is_set():
            tally.error(f"events {type(error).__name__}")
    finally:
        connection.close()
        with tally.lock:
            tally.events += events


class EventStreams:
    """One event stream a client (`listen`), open from construction until `close`."""

    def __init__(self, server: Server, tally: Tally, count: int) -> None:
        self.tally = tally
        self.stop = threading.Event()
        self.open_streams: list[http.client.HTTPConnection] = []
        ready = threading.Barrier(count + 1)
        self.listeners = [
            threading.Thread(
                target=listen,
                args=(server, tally, self.stop, ready, self.open_streams),
                daemon=True,
            )
            for _ in range(count)
        ]
        for thread in self.listeners:
            thread.start()
        ready.wait(timeout=60)

    def close(self) -> None:
        """End every stream: the run is over, so an end now is not an error."""
        self.stop.set()
        # Wake every listener from its wait for the next line.
        with self.tally.lock:
            for connection in self.open_streams:
                if connection.sock is not None:
                    with contextlib.suppress(OSError):
                        connection.sock.shutdown(socket.SHUT_RDWR)
        for thread in self.listeners:
            thread.join(timeout=10)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


def _growth_pct(before: float, after: float) -> float:
    return round(100 * (after - before) / before, 1) if before else 0.0


def send_body(client: int, photo: str | None) -> bytes:
    """A send's body: a fresh text and ``messageId``, and ``photo`` (base64) if any."""
    body: dict[str, Any] = {
        "message": f"client {client} says {uuid.uuid4().hex[:8]}",
        "messageId": str(uuid.uuid4()),
    }
    if photo is not None:
        body["images"] = [{"mediaType": "image/png", "data": photo}]
    return json.dumps(body).encode()


def _rss_trend_mib_per_min(samples: list[tuple[float, float]]) -> float:
    """The least-squares slope of (seconds, MiB) readings, in MiB a minute.

    For information beside the level: a rise that goes on at a steady rate shows
    here however the readings swing; 0 with fewer than two distinct times.
    """
    times = [seconds / 60 for seconds, _ in samples]
    if len(set(times)) < 2:
        return 0.0
    slope, _intercept = statistics.linear_regression(times, [rss for _, rss in samples])
    return round(slope, 3)


def _rss_figures(before_warm_up: float, samples: list[float]) -> dict[str, float]:
    """The server's RSS before the warm-up and over the measured run (MiB).

    ``start`` and ``end`` are single readings; ``growth_pct`` is between them. RSS
    swings by about a tenth with the requests in flight (photo bodies and decodes
    come and go), so two readings can differ by that much with nothing held. The
    **level** is the median of the readings in the first and in the last third of
    the run, and ``level_growth_pct`` between those two levels is what the target
    judges: memory that stays held shows as a rise in the level.
    """
    third = max(1, len(samples) // 3)
    first, last = statistics.median(samples[:third]), statistics.median(samples[-third:])
    return {
        "before_warm_up": round(before_warm_up, 1),
        "start": round(samples[0], 1),
        "end": round(samples[-1], 1),
        "growth_pct": _growth_pct(samples[0], samples[-1]),
        "level_first_third": round(first, 1),
        "level_last_third": round(last, 1),
        "level_growth_pct": _growth_pct(first, last),
        "low": round(min(samples), 1),
        "high": round(max(samples), 1),
    }


def _transcript_sizes(projects: Path) -> dict[Path, int]:
    """The size in bytes of every chat transcript under ``projects`` now."""
    return {path: path.stat().st_size for path in sorted(projects.glob("*/*.jsonl"))}


def _chat_index_figures(projects: Path, sizes_at_start: dict[Path, int]) -> dict[str, float]:
    """What the box holds for its chat's data: the transcripts' indexes (the box keeps
    one per transcript it reads), built here after the run, and measured with
    `tracemalloc` as the memory they keep. A line's share of its index is about the
    same for every line of this load (a photo line each send), so the part of it
    for the lines appended during the measured run is the index's share of them.
    """
    lines = lines_at_start = 0
    held = 0
    size = 0
    for path in _transcript_sizes(projects):
        with path.open("rb") as file:
            identity = FileIdentity.of_open_file(file)
            assert identity is not None
            tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0]
            index = build_index(path, file, identity)
            held += tracemalloc.get_traced_memory()[0] - before
            tracemalloc.stop()
        size += identity.size
        lines += index.line_count
        # Lines that ended within the bytes there at the start of the measured run.
        lines_at_start += index.line_offsets.bisect_left(sizes_at_start.get(path, 0))
        del index
    per_line = held / lines if lines else 0.0
    return {
        "transcript_mb": round(size / 1e6, 1),
        "lines_at_start": lines_at_start,
        "lines_at_end": lines,
        "index_mib": round(held / 2**20, 1),
        "index_bytes_per_line": round(per_line),
        "index_growth_mib": round(per_line * (lines - lines_at_start) / 2**20, 1),
    }


def run(
    clients: int,
    seconds: float,
    folder: Path,
    warm_up: float,
    *,
    photo_kib: int = PHOTO_KIB,
    serve_options: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The load run; its figures."""
    projects = folder / "projects"
    server = start_server(folder / "box", projects, folder / "serve.log", serve_options)
    tally = Tally()
    photo = (
        base64.b64encode(random.Random(7).randbytes(photo_kib * 1024)).decode("ascii")
        if photo_kib
        else None
    )
    streams = EventStreams(server, tally, clients)
    # Warm-up: a first turn, so the chat has a session and history has photos.
    Client(server, tally, -1, photo).one("send")
    time.sleep(1.0)
    Client(server, tally, -2, photo).one("history")
    cold_usage, cold_parts = server.usage(), server.rss_parts()
    # The same load for `warm_up` seconds first, not measured: the clients' requests
    # in flight fill the box's working set (allocator, caches) before the figures start.
    measure_from = time.monotonic() + warm_up
    stop_at = measure_from + seconds
    workers = [
        threading.Thread(target=Client(server, tally, n, photo).run, args=(measure_from, stop_at))
        for n in range(clients)
    ]
    for thread in workers:
        thread.start()
    time.sleep(max(0.0, measure_from - time.monotonic()))
    start_usage = server.usage()
    sizes_at_start = _transcript_sizes(projects)
    samples: list[tuple[float, float, int]] = [(0.0, *start_usage)]
    parts = [server.rss_parts()]
    started = time.monotonic()
    # Sampled under load: the end reading is taken a second before the clients stop,
    # with the same connections open as at the start.
    step = min(10.0, max(0.5, seconds / 30))
    while (left := stop_at - 1.0 - time.monotonic()) > 0:
        time.sleep(min(step, left))
        samples.append((time.monotonic() - started, *server.usage()))
        parts.append(server.rss_parts())
    end_usage = samples[-1][1:]
    for thread in workers:
        thread.join()
    elapsed = time.monotonic() - started
    after_usage = server.usage()
    streams.close()
    server.process.send_signal(signal.SIGTERM)
    exit_code = server.process.wait(timeout=120)
    chat_index = _chat_index_figures(projects, sizes_at_start)
    total = sum(len(values) for values in tally.latencies.values())
    return {
        "clients": clients,
        "seconds": round(elapsed, 1),
        "operations": total,
        "throughput_per_s": round(total / elapsed, 1),
        "per_operation": {
            op: {
                "count": len(values),
                "p50_ms": round(1000 * percentile(values, 0.50), 1),
                "p99_ms": round(1000 * percentile(values, 0.99), 1),
                "mean_ms": round(1000 * statistics.fmean(values), 1) if values else 0.0,
            }
            for op, values in tally.latencies.items()
        },
        "errors": dict(sorted(tally.errors.items())),
        "error_count": sum(tally.errors.values()),
        "sends_deferred_429": tally.deferred,
        "events_received": tally.events,
        "warm_up_s": warm_up,
        "photo_kib": photo_kib,
        "rss_mib": _rss_figures(cold_usage[0], [rss for _, rss, _ in samples]),
        "rss_trend_mib_per_min": _rss_trend_mib_per_min([(t, rss) for t, rss, _ in samples]),
        "rss_parts_mib": {
            name: _rss_figures(cold_parts[name], [part[name] for part in parts])
            for name in RSS_FIELDS[1:]
        },
        "chat_index": chat_index,
        "open_fds": {"start": start_usage[1], "end": end_usage[1], "after": after_usage[1]},
        "samples": [(round(t, 1), round(rss, 1), fds) for t, rss, fds in samples],
        "server_exit_code": exit_code,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument(
        "--warm-up", type=float, default=WARM_UP_S, help="seconds of load before measuring"
    )
    parser.add_argument("--quick", action="store_true", help="8 clients for 20 s (a smoke run)")
    parser.add_argument(
        "--photo-kib",
        type=int,
        default=PHOTO_KIB,
        help="the photo a send carries, in KiB (0: no photo, and no media to fetch)",
    )
    parser.add_argument(
        "--serve-option",
        action="append",
        default=[],
        metavar="OPTION",
        help="pass this to bbx serve (repeat for more; e.g. --serve-option=--trim-heap-every=0)",
    )
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args(argv)
    if args.photo_kib < 0:
        parser.error("--photo-kib takes 0 or more")
    clients, seconds = (8, 20.0) if args.quick else (args.clients, args.seconds)
    warm_up = 5.0 if args.quick else args.warm_up
    with tempfile.TemporaryDirectory(prefix="bbx-load-") as folder:
        figures = run(
            clients,
            seconds,
            Path(folder),
            warm_up,
            photo_kib=args.photo_kib,
            serve_options=tuple(args.serve_option),
        )
    photos = f"{args.photo_kib} KiB photos" if args.photo_kib else "no photos"
    served = " ".join(["bbx serve", *args.serve_option])
    print(
        f"load: {figures['clients']} clients, {figures['seconds']} s on loopback, {photos};"
        f" {served}"
    )
    print(f"  throughput       {figures['throughput_per_s']} requests/s ({figures['operations']})")
    for operation, row in figures["per_operation"].items():
        p50, p99 = row["p50_ms"], row["p99_ms"]
        print(f"  {operation:<10} n={row['count']:<7} p50 {p50:>8} ms   p99 {p99:>8} ms")
    print(f"  errors           {figures['error_count']} (target 0) {figures['errors'] or ''}")
    print(f"  sends deferred   {figures['sends_deferred_429']} (429: photos waiting; sent again)")
    print(f"  events received  {figures['events_received']} on {figures['clients']} streams")
    rss, fds = figures["rss_mib"], figures["open_fds"]
    print(
        f"  server RSS       level {rss['level_first_third']} MiB -> {rss['level_last_third']} MiB"
        f" (medians of the first and last third), {rss['level_growth_pct']:+.1f}%"
        f" (target: flat, within {FLAT_GROWTH_PCT:.0f}%): "
        f"{'ok' if rss['level_growth_pct'] <= FLAT_GROWTH_PCT else 'MISSED'}"
    )
    print(
        f"                   readings {rss['start']} MiB at the start -> {rss['end']} MiB at the"
        f" end ({rss['growth_pct']:+.1f}%), {rss['low']}-{rss['high']} MiB between;"
        f" {rss['before_warm_up']} MiB before the {figures['warm_up_s']:.0f} s warm-up"
    )
    levels = ", ".join(
        f"{name} {part['level_first_third']} -> {part['level_last_third']}"
        for name, part in figures["rss_parts_mib"].items()
    )
    print(f"                   its parts' levels (MiB): {levels}")
    print(
        f"                   trend {figures['rss_trend_mib_per_min']:+.3f} MiB a minute"
        " (least squares over the readings; for information)"
    )
    index = figures["chat_index"]
    level_rise = rss["level_last_third"] - rss["level_first_third"]
    print(
        f"  chat index       {index['index_mib']} MiB held for {index['lines_at_end']} lines of"
        f" {index['transcript_mb']} MB ({index['index_bytes_per_line']} B a line); the"
        f" {index['lines_at_end'] - index['lines_at_start']} lines appended in the measured run"
        f" hold {index['index_growth_mib']} MiB of it (the RSS level rose {level_rise:.1f} MiB)"
    )
    print(
        f"  server open fds  {fds['start']} -> {fds['end']} (target: flat); "
        f"{fds['after']} once the clients closed"
    )
    print(f"  clean exit       {figures['server_exit_code'] == 0}")
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0 if figures["error_count"] == 0 and figures["server_exit_code"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
