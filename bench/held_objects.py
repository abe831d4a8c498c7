"""What the box's Python heap holds under load, sampled in the serving process itself.

`bench/load.py` watches a `bbx serve` child from outside: its RSS, which swings with
the photos in flight and includes what the C allocator keeps. This asks the other
question — does the box *hold* more Python objects as it serves? — where it can be
answered: the box runs in this process (allocator set up as `bbx serve` sets it up,
`beebox_impl.allocator`; start it with ``GLIBC_TUNABLES=glibc.malloc.tcache_count=0``
to measure the deployment `docs/http.md` recommends; it does not trim the heaps
every few seconds, as `bbx serve` does, so their free space shows as it accrues),
and the load clients of `bench/load.py` run in a child process, so nothing of theirs
is counted. Every ``--every`` seconds, after `gc.collect()`, it prints `sys.getallocatedblocks()`
(every live object of Python's own allocator, containers or not), the number of
objects the collector tracks, and RSS. The verdict compares the medians of the first
and the last third of the samples (within `FLAT_GROWTH_PCT`, as `bench/load.py`
judges RSS).

Further readings answer where RSS goes when the Python objects stay flat.
What Python's own allocator holds from the system (its 1 MiB arenas, from
`sys._debugmallocstats`: an arena goes back only once every object in it is gone,
so a few long-lived objects can pin many). The heap in use, free and held from the
system in glibc's arenas (``mallinfo2``, on glibc): RSS follows the memory in use,
so a level that rises with a flat object count is memory the requests in flight
hold, or memory freed and not given back (free grows). And with
``--sites N``, `tracemalloc` (8 frames) at every sample: each traced block is
charged to its allocation site — the innermost frame in the box's own code, with
the innermost frame of all beside it — and the N sites whose medians grew most
from the first third to the last are printed, with their size at the end.
Tracing slows the box several-fold; its figures name the holders, not the rates.

Run it: ``python bench/held_objects.py`` (16 clients with 256 KiB photos, 300 s),
``--quick`` (4 clients, 15 s: a smoke run), or ``--clients N --seconds S --every E``;
``--streams`` holds one event stream a client as well (as `bench/load.py` does),
``--photo-kib K`` sets the photo size (0: no photos), ``--sites N`` traces,
``--size-classes`` prints the block sizes of Python's allocator whose pools grew
(a pool stays with its size until it is empty: pools that grow while the blocks
in use do not are a peak that grew).
It prints figures and verdicts and exits 0 either way: a MISSED is a figure.
"""

from __future__ import annotations

import argparse
import base64
import functools
import gc
import multiprocessing
import os
import re
import statistics
import sys
import tempfile
import threading
import time
import tracemalloc
import types
from array import array
from pathlib import Path

import anyio
import load

from beebox_impl.allocator import read_heap, tune_allocator_for_serving
from beebox_impl.box import Box
from beebox_impl.http import serve_box


def _drive(
    port: int, token: str, *, clients: int, seconds: float, photo_kib: int, streams: bool
) -> None:
    """The child process: `load.Client`s (and their event streams), as `bench/load.py`
    runs them."""
    threading.Thread(target=_exit_when_orphaned, args=(os.getppid(),), daemon=True).start()
    photo = base64.b64encode(os.urandom(photo_kib * 1024)).decode() if photo_kib else None
    server = types.SimpleNamespace(port=port, token=token)
    tally = load.Tally()
    listening = load.EventStreams(server, tally, clients) if streams else None  # type: ignore[arg-type]
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
    if listening is not None:
        listening.close()
    requests = sum(len(values) for values in tally.latencies.values())
    print(
        f"  clients: {requests} requests, errors {sum(tally.errors.values())}"
        + (f" {dict(sorted(tally.errors.items()))}" if tally.errors else "")
        + f", events {tally.events}",
        flush=True,
    )


def _exit_when_orphaned(parent: int) -> None:
    # A harness stopped by a signal does not stop its child: without this, the
    # clients went on knocking at a closed port for the rest of their run.
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def _rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


OBJECT_COUNTS = ("allocated blocks", "gc objects")
BOX_PACKAGE = os.sep + "beebox_impl" + os.sep


def _site(traceback: tracemalloc.Traceback) -> str:
    """Where a block was allocated: the innermost frame in the box's code, and the
    innermost frame of all when that is elsewhere (the library doing the allocating)."""
    innermost = traceback[-1]
    for depth, frame in enumerate(reversed(traceback)):
        if BOX_PACKAGE in frame.filename:
            box_frame = f"{frame.filename.rsplit(BOX_PACKAGE, 1)[1]}:{frame.lineno}"
            if depth == 0:
                return box_frame
            return f"{box_frame} > {Path(innermost.filename).name}:{innermost.lineno}"
    return f"{Path(innermost.filename).name}:{innermost.lineno} (outside the box)"


class _SiteSizes:
    """Bytes traced at each allocation site, a row per sample. Kept compact — each
    site's name once, each sample one array — so the harness's own records hardly
    move the block count it reports."""

    def __init__(self) -> None:
        self.numbers: dict[str, int] = {}
        self.samples: list[array[int]] = []

    def add_snapshot(self) -> None:
        # Not this harness's own allocations, nor the tracer's.
        snapshot = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, __file__), tracemalloc.Filter(False, tracemalloc.__file__)]
        )
        sizes = array("Q", bytes(8 * len(self.numbers)))
        for statistic in snapshot.statistics("traceback"):
            number = self.numbers.setdefault(_site(statistic.traceback), len(self.numbers))
            if number >= len(sizes):
                sizes.extend(0 for _ in range(number + 1 - len(sizes)))
            sizes[number] += statistic.size
        self.samples.append(sizes)

    def print_growth(self, count: int) -> None:
        """The ``count`` sites whose medians grew most from the first third to the last."""

        def size(sample: array[int], number: int) -> int:
            return sample[number] if number < len(sample) else 0

        third = max(1, len(self.samples) // 3)
        first, last = self.samples[:third], self.samples[-third:]
        rows = []
        for site, number in self.numbers.items():
            before = statistics.median(size(sample, number) for sample in first)
            after = statistics.median(size(sample, number) for sample in last)
            rows.append((after - before, after, site))
        rows.sort(reverse=True)
        traced = [sum(sample) / 2**20 for sample in self.samples]
        begin, end, growth = _growth(traced)
        print(
            f"traced: {begin:.1f} -> {end:.1f} MiB (medians of the first and last third),", end=""
        )
        print(f" {growth:+.1f}%")
        print(f"{'grew MiB':>9} {'last MiB':>9}  allocation site (box frame > allocating frame)")
        for grew, after, site in rows[:count]:
            print(f"{grew / 2**20:9.2f} {after / 2**20:9.2f}  {site}")


def _python_allocator_stats() -> str:
    """`sys._debugmallocstats`'s report: it writes to the C stderr, captured here
    through a temporary file standing in for descriptor 2."""
    with tempfile.TemporaryFile() as captured:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(captured.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        captured.seek(0)
        return captured.read().decode("ascii", "replace")


def _python_arenas_mib(report: str) -> float:
    """What Python's own allocator holds from the system: its arenas (MiB); 0 when
    there is no report (while `tracemalloc` traces, or without pymalloc)."""
    for line in report.splitlines():
        # "34 arenas * 1048576 bytes/arena     =           35,651,584"
        if "bytes/arena" in line:
            return int(line.rsplit("=", 1)[1].replace(",", "")) / 2**20
    return 0.0


# A size class's row: class, block size, pools, blocks in use, blocks available.
_SIZE_CLASS_ROW = re.compile(r"\s*\d+\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*")


class _SizeClassPools:
    # Each sample's pools a block size (Python's allocator), for `--size-classes`: a
    # class whose pools grow while its blocks in use do not had a growing peak.
    def __init__(self) -> None:
        self.samples: list[dict[int, tuple[int, int]]] = []

    def add(self, report: str) -> None:
        rows = (_SIZE_CLASS_ROW.fullmatch(line) for line in report.splitlines())
        self.samples.append(
            {int(row[1]): (int(row[2]), int(row[3])) for row in rows if row is not None}
        )

    def print_growth(self) -> None:
        third = max(1, len(self.samples) // 3)
        sizes = sorted({size for sample in self.samples for size in sample})
        if not sizes:
            # `sys._debugmallocstats` reports only on Python's own allocator, untraced.
            print("block size, pools and blocks in use: none read (traced, or not pymalloc)")
            return
        print("block size, pools and blocks in use: medians of the first -> last third")
        for size in sizes:
            pools, used = (
                [
                    statistics.median(sample.get(size, (0, 0))[column] for sample in part)
                    for part in (self.samples[:third], self.samples[-third:])
                ]
                for column in (0, 1)
            )
            if pools[0] != pools[1]:
                print(
                    f"{size:5} B  pools {pools[0]:6,.0f} -> {pools[1]:<6,.0f}"
                    f" blocks {used[0]:8,.0f} -> {used[1]:,.0f}"
                )


def _heap_mib() -> tuple[float, float, float] | None:
    """glibc's heap in use, free inside its arenas and held from the system (MiB);
    None off glibc."""
    heap = read_heap()
    if heap is None:
        return None
    return heap.in_use / 2**20, heap.free_in_arenas / 2**20, heap.from_system / 2**20


def _sample(sites: _SiteSizes | None, pools: _SizeClassPools | None) -> list[float]:
    gc.collect()
    report = _python_allocator_stats()
    if pools is not None:
        pools.add(report)
    row = [
        float(sys.getallocatedblocks()),
        float(len(gc.get_objects())),
        _rss_mib(),
        _python_arenas_mib(report),
        *(_heap_mib() or ()),
    ]
    if sites is not None:
        sites.add_snapshot()
    return row


def _growth(samples: list[float]) -> tuple[float, float, float]:
    third = max(1, len(samples) // 3)
    first, last = statistics.median(samples[:third]), statistics.median(samples[-third:])
    return first, last, 100 * (last - first) / first if first else 0.0


async def _serve_and_sample(
    *,
    clients: int,
    seconds: float,
    every: float,
    photo_kib: int,
    streams: bool,
    sites: int,
    size_classes: bool,
) -> None:
    site_sizes = _SiteSizes() if sites else None
    pools = _SizeClassPools() if size_classes else None
    if sites:
        tracemalloc.start(8)
    with tempfile.TemporaryDirectory(prefix="bbx-held-") as folder:
        root = Path(folder)
        async with (
            Box.open(root / "box", projects_root=root / "projects") as box,
            serve_box(box, port=0) as running,
        ):
            child = multiprocessing.get_context("spawn").Process(
                target=_drive,
                args=(running.port, box.token),
                kwargs={
                    "clients": clients,
                    "seconds": seconds,
                    "photo_kib": photo_kib,
                    "streams": streams,
                },
            )
            child.start()
            started = time.monotonic()
            columns: dict[str, list[float]] = {
                "allocated blocks": [], "gc objects": [], "RSS MiB": [],
                "py arenas MiB": [], "heap in use MiB": [], "heap free MiB": [],
                "heap held MiB": [],
            }  # fmt: skip
            print(f"{'t (s)':>6}" + "".join(f" {name:>17}" for name in columns))
            while child.is_alive():
                await anyio.sleep(every)
                row = await anyio.to_thread.run_sync(_sample, site_sizes, pools)
                for name, value in zip(columns, row, strict=False):
                    columns[name].append(value)
                print(
                    f"{time.monotonic() - started:6.0f}"
                    + "".join(
                        f" {value:17,.0f}" if name in OBJECT_COUNTS else f" {value:17,.1f}"
                        for name, value in zip(columns, row, strict=False)
                    ),
                    flush=True,
                )
            await anyio.to_thread.run_sync(child.join)
    # The object counts have the flat target; RSS and the heap swing with the requests
    # in flight, so theirs are figures to read beside them.
    for label, values in columns.items():
        if not values:
            continue  # no heap readings off glibc
        first, last, growth = _growth(values)
        verdict = ""
        if label in OBJECT_COUNTS:
            flat = growth <= load.FLAT_GROWTH_PCT
            verdict = f" (target: at most +{load.FLAT_GROWTH_PCT}%): " + (
                "ok" if flat else "MISSED"
            )
        print(
            f"{label}: {first:,.1f} -> {last:,.1f} (medians of the first and last third),"
            f" {growth:+.1f}%{verdict}"
        )
    if site_sizes is not None:
        site_sizes.print_growth(sites)
    if pools is not None:
        pools.print_growth()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--every", type=float, default=30.0, help="seconds between samples")
    parser.add_argument("--quick", action="store_true", help="4 clients for 15 s")
    parser.add_argument("--photo-kib", type=int, default=load.PHOTO_KIB, help="0: no photos")
    parser.add_argument("--streams", action="store_true", help="an event stream a client too")
    parser.add_argument(
        "--sites", type=int, default=0, metavar="N", help="trace; print the N sites that grew most"
    )
    parser.add_argument(
        "--size-classes",
        action="store_true",
        help="print the block sizes of Python's allocator whose pools grew",
    )
    args = parser.parse_args(argv)
    if args.quick:
        clients, seconds, every = 4, 15.0, 3.0
    else:
        clients, seconds, every = args.clients, args.seconds, args.every
    if args.photo_kib < 0 or args.sites < 0:
        parser.error("--photo-kib and --sites take a count, 0 or more")
    tuning = tune_allocator_for_serving()
    print(
        f"held objects: {clients} clients, {seconds:.0f} s, photos {args.photo_kib} KiB,"
        f" event streams {'on' if args.streams else 'off'},"
        f" tracing {'on' if args.sites else 'off'}; allocator: {tuning}"
    )
    anyio.run(
        functools.partial(
            _serve_and_sample,
            clients=clients,
            seconds=seconds,
            every=every,
            photo_kib=args.photo_kib,
            streams=args.streams,
            sites=args.sites,
            size_classes=args.size_classes,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
