"""The C allocator's settings for a long-lived `bbx serve` process (glibc only).

Photos pass through a serving box in buffers of megabytes: a drained turn's
transcript line holds up to 10 MiB of them, a send's body a few hundred KiB
each. glibc's `malloc` raises its mmap threshold to the largest block freed so
far (up to 32 MiB), so after the first such burst every later buffer below that
size is carved from the heap of the calling thread's arena, and a heap returns
memory to the system only from its top: the process keeps the burst's high-water
mark. And with one handler thread per connection, glibc gives up to eight
arenas per core, each holding a heap of its own.

`tune_allocator_for_serving` fixes the threshold at `MMAP_THRESHOLD_BYTES`, so a
buffer of a megabyte or more has its own mapping, unmapped when freed, and caps
the arenas at `ARENA_MAX`. A fixed threshold also stops glibc moving its trim
threshold (the free space a heap's top may keep) to twice the mmap threshold, as
it does when it moves that one: left at 128 KiB, every 256 KiB read buffer freed
at a heap's top is handed back and the next one faulted in again, page by page (a
transcript's first read took ~30% longer, with 17 times the page faults). So the
trim threshold is set to `TRIM_THRESHOLD_BYTES`, glibc's own pairing. What it
buys, measured with `bench/load.py` (64 clients, 256 KiB photos, 310 s, one run
each, `docs/reliability-diary.md`): the served box's RSS once warm held at 98 MiB,
against 145–157 MiB untuned, at the same throughput (182.5 against 181 requests a
second) — a third of the memory a person sees the box take.

Every thread also keeps a cache of its own freed small chunks (glibc's tcache: up
to seven a size, for sizes up to 1 KiB, about 0.2 MiB a thread when full), handed
back only when the thread ends. A serving box has a handler thread per open
connection, and a keep-alive connection or an event stream keeps its thread for
hours, so these caches fill slowly, size by size, thread by thread: RSS climbed
about a mebibyte a minute under 64 clients and their 64 event streams, and the
climb stopped with the caches off (`bench/load.py`, no photos, 10 minutes each,
back to back: +0.97 MiB a minute and a level 11.0% up with them, +0.25 MiB a
minute and +1.8% without, the chat index's 0.09 MiB a minute included; 105 and 113
requests a second). The caches can be set only as glibc starts, from the
environment, so turning them off is a deployment setting
(``GLIBC_TUNABLES=glibc.malloc.tcache_count=0``, `docs/http.md`), not something
`bbx serve` does: it once executed itself again to set it, which surprised whoever
embedded or debugged it and cost 0.08 s of every start, for at most 0.2 MiB a
long-lived connection (dropped 12-05, issue 36).

Memory freed in the middle of a heap stays in the process: a heap shrinks only from
its top, and photo-sized buffers (a 256 KiB photo is a 341 KiB base64 string, its
decoded bytes, its transcript line) leave holes between the chunks still in use.
Under 30 minutes of photo load the heap in use stayed flat while its free space
grew by a third, and RSS with it (`bench/held_objects.py --sites`,
`docs/reliability.md`). `trim_free_heap` (glibc's ``malloc_trim(0)``) hands the
free pages of every heap back (``MADV_DONTNEED``); they are faulted in again only
when used, so a hole left unused stops counting. `bbx serve` calls it every
`TRIM_EVERY_SECONDS` (``--trim-heap-every``), in a worker thread: a few
milliseconds each time. Side by side over 30 minutes of the same load it halved
RSS's slope (+0.09 against +0.18 MiB a minute; one pair of runs); the rise itself
was the index shelf's bursts of objects, since fixed (`docs/reliability.md`).

It is for the process that owns its allocator: `bbx serve` calls both before any
thread starts. A host embedding the box keeps its own settings; a setting the
person already made through glibc's environment (``MALLOC_MMAP_THRESHOLD_``,
``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_ARENA_MAX``) is left as they made it.
Elsewhere (musl, macOS, Windows) they do nothing.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import platform
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "ARENA_MAX",
    "MMAP_THRESHOLD_BYTES",
    "TRIM_EVERY_SECONDS",
    "TRIM_THRESHOLD_BYTES",
    "AllocatorTuning",
    "HeapReading",
    "can_trim_heap",
    "read_heap",
    "trim_free_heap",
    "tune_allocator_for_serving",
]

_log = logging.getLogger(__name__)

# Buffers at least this big get their own mapping (glibc's default starts at 128 KiB
# and moves; a fixed 128 KiB measured ~40% fewer requests a second under load, as
# every photo-sized buffer then costs a mapping and its page faults).
MMAP_THRESHOLD_BYTES: Final = 1024 * 1024
TRIM_THRESHOLD_BYTES: Final = 2 * MMAP_THRESHOLD_BYTES
ARENA_MAX: Final = 2

# How often `bbx serve` hands the heaps' free pages back (module doc).
TRIM_EVERY_SECONDS: Final = 10.0

# `mallopt` parameters (glibc's malloc.h).
_M_TRIM_THRESHOLD: Final = -1
_M_MMAP_THRESHOLD: Final = -3
_M_ARENA_MAX: Final = -8


@dataclass(frozen=True, slots=True)
class AllocatorTuning:
    """What `tune_allocator_for_serving` set (False: left alone, and why in `reason`)."""

    mmap_threshold: bool
    trim_threshold: bool
    arena_max: bool
    reason: str


def tune_allocator_for_serving() -> AllocatorTuning:
    """Fix glibc's mmap and trim thresholds and cap its arenas; a no-op elsewhere."""
    if not _is_glibc():
        library = platform.libc_ver()[0] or "unknown"
        return AllocatorTuning(False, False, False, f"not glibc ({library})")
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError) as error:
        return AllocatorTuning(False, False, False, f"no mallopt: {error}")
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # glibc read these at start-up: what the person set there stands.
    threshold = "MALLOC_MMAP_THRESHOLD_" not in os.environ and bool(
        mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
    )
    trim = "MALLOC_TRIM_THRESHOLD_" not in os.environ and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    )
    arenas = "MALLOC_ARENA_MAX" not in os.environ and bool(mallopt(_M_ARENA_MAX, ARENA_MAX))
    return AllocatorTuning(threshold, trim, arenas, "glibc")


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd",
            "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


@dataclass(frozen=True, slots=True)
class HeapReading:
    """glibc's own count of its heaps (``mallinfo2``), in bytes."""

    from_system: int  # ``arena``: what the arenas' heaps hold from the system
    in_arenas: int  # ``uordblks``: in use, carved from the heaps
    free_in_arenas: int  # ``fordblks``: free inside the heaps (holes and the tops)
    mapped_chunks: int  # ``hblks``: chunks with a mapping of their own
    mapped_bytes: int  # ``hblkhd``: their bytes

    @property
    def in_use(self) -> int:
        """Every byte handed out: from the heaps and mapped."""
        return self.in_arenas + self.mapped_bytes


@functools.cache
def _glibc_function(name: str, result: Any, arguments: tuple[Any, ...]) -> Any:
    """glibc's function ``name`` with its signature set (None off glibc, or when this
    glibc lacks it), looked up once: opening the C library allocates, which would
    move the very counts a caller of `read_heap` compares across a free."""
    if not _is_glibc():
        return None
    try:
        function = getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None
    function.restype = result
    function.argtypes = list(arguments)
    return function


def read_heap() -> HeapReading | None:
    """The heaps as glibc counts them now; None off glibc (or before 2.33)."""
    mallinfo2 = _glibc_function("mallinfo2", _Mallinfo2, ())
    if mallinfo2 is None:
        return None
    info = mallinfo2()
    return HeapReading(info.arena, info.uordblks, info.fordblks, info.hblks, info.hblkhd)


def can_trim_heap() -> bool:
    """Whether `trim_free_heap` can do anything here (glibc's ``malloc_trim``)."""
    return _malloc_trim() is not None


def _malloc_trim() -> Any:
    return _glibc_function("malloc_trim", ctypes.c_int, (ctypes.c_size_t,))


def trim_free_heap() -> bool:
    """Hand the free pages of every heap back to the system (glibc's ``malloc_trim``).

    True when glibc released memory; False when it had none to release, and off
    glibc. It takes each arena's lock in turn while it walks the free chunks: call
    it from a worker thread, not from the event loop.
    """
    malloc_trim = _malloc_trim()
    if malloc_trim is None:
        return False
    return bool(malloc_trim(0))


def _is_glibc() -> bool:
    return platform.libc_ver()[0] == "glibc"
