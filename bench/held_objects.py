"""What the box's Python heap holds under load, sampled in the serving process itself.

`bench/load.py` watches a `bbx serve` child from outside: its RSS, which swings
with the photos in flight and includes what the C allocator keeps. This asks the
other question — does the box *hold* more Python objects as it serves? — where it
can be answered: the box runs in this process (allocator set up as `bbx serve`
sets it up, `beebox_impl.allocator`: run as a script, it starts itself again with
glibc's per-thread caches off), and the load clients of `bench/load.py` run in
a child process, so nothing of theirs is counted. Every ``--every`` seconds, after
`gc.collect()`, it prints `sys.getallocatedblocks()` (every live object of
Python's own allocator, containers or not), the number of objects the collector
tracks, and RSS. The verdict compares the medians of the first and the last third
of the samples (within `FLAT_GROWTH_PCT`, as `bench/load.py` judges RSS).

Run it: ``python bench/held_objects.py`` (16 clients with 256 KiB photos, 300 s),
``--quick`` (4 clients, 15 s: a smoke run), or ``--clients N --seconds S --every E``.
It prints figures and verdicts and exits 0 either way: a MISSED is a figure.
"""

from __future__ import annotations

import argparse
import base64
import gc
import multiprocessing
import os
import statistics
import sys
import tempfile
import threading
import time
import types
from pathlib import Path

import anyio
import load

from beebox_impl.allocator import restart_for_serving, tune_allocator_for_serving
from beebox_impl.box import Box
from beebox_impl.http import serve_box


def _drive(port: int, token: str, clients: int, seconds: float) -> None:
    """The child process: `load.Client`s with photos, as `bench/load.py` runs them."""
    photo = base64.b64encode(os.urandom(load.PHOTO_KIB * 1024)).decode()
    server = types.SimpleNamespace(port=port, token=token)
    tally = load.Tally()
    stop_at = time.monotonic() + seconds
    threads = [
        threading.Thread(
            target=load.Client(server, tally, number, photo).run,  # type: ignore[arg-type]
            args=(0.0, stop_at),
        )
        for number in range(clients)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    requests = sum(len(values) for values in tally.latencies.values())
    print(f"  clients: {requests} requests, errors {tally.errors or 0}", flush=True)


def _rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _sample() -> tuple[int, int, float]:
    gc.collect()
    return sys.getallocatedblocks(), len(gc.get_objects()), _rss_mib()


def _growth(samples: list[int]) -> tuple[float, float, float]:
    third = max(1, len(samples) // 3)
    first, last = statistics.median(samples[:third]), statistics.median(samples[-third:])
    return first, last, 100 * (last - first) / first


async def _serve_and_sample(clients: int, seconds: float, every: float) -> None:
    with tempfile.TemporaryDirectory(prefix="bbx-held-") as folder:
        root = Path(folder)
        async with (
            Box.open(root / "box", projects_root=root / "projects") as box,
            serve_box(box, port=0) as running,
        ):
            child = multiprocessing.get_context("spawn").Process(
                target=_drive, args=(running.port, box.token, clients, seconds)
            )
            child.start()
            started = time.monotonic()
            blocks: list[int] = []
            tracked: list[int] = []
            print(f"{'t (s)':>6} {'allocated blocks':>17} {'gc objects':>11} {'RSS MiB':>8}")
            while child.is_alive():
                await anyio.sleep(every)
                block_count, object_count, rss = await anyio.to_thread.run_sync(_sample)
                blocks.append(block_count)
                tracked.append(object_count)
                print(
                    f"{time.monotonic() - started:6.0f} {block_count:17,} {object_count:11,}"
                    f" {rss:8.1f}",
                    flush=True,
                )
            await anyio.to_thread.run_sync(child.join)
    for label, values in (("allocated blocks", blocks), ("gc objects", tracked)):
        first, last, growth = _growth(values)
        flat = growth <= load.FLAT_GROWTH_PCT
        print(
            f"{label}: {first:,.0f} -> {last:,.0f} (medians of the first and last third),"
            f" {growth:+.1f}% (target: at most +{load.FLAT_GROWTH_PCT}%): "
            + ("ok" if flat else "MISSED")
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--every", type=float, default=30.0, help="seconds between samples")
    parser.add_argument("--quick", action="store_true", help="4 clients for 15 s")
    args = parser.parse_args(argv)
    if args.quick:
        clients, seconds, every = 4, 15.0, 3.0
    else:
        clients, seconds, every = args.clients, args.seconds, args.every
    tuning = tune_allocator_for_serving()
    print(f"held objects: {clients} clients, {seconds:.0f} s; allocator: {tuning}")
    anyio.run(_serve_and_sample, clients, seconds, every)
    return 0


if __name__ == "__main__":
    restart_for_serving()
    raise SystemExit(main())
