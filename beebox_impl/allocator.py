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
trim threshold is set to `TRIM_THRESHOLD_BYTES`, glibc's own pairing. Measured
with `bench/load.py` (64 clients, 256 KiB photos, 90 s, each setting one run,
`docs/reliability.md`): see the load table.

It is for the process that owns its allocator: `bbx serve` calls it before any
thread starts. A host embedding the box keeps its own settings; a setting the person
already made through glibc's environment (``MALLOC_MMAP_THRESHOLD_``,
``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_ARENA_MAX``) is left as they made it. Elsewhere
(musl, macOS, Windows) it does nothing.
"""

from __future__ import annotations

import ctypes
import os
import platform
from dataclasses import dataclass
from typing import Final

__all__ = [
    "ARENA_MAX",
    "MMAP_THRESHOLD_BYTES",
    "TRIM_THRESHOLD_BYTES",
    "AllocatorTuning",
    "tune_allocator_for_serving",
]

# Buffers at least this big get their own mapping (glibc's default starts at 128 KiB
# and moves; a fixed 128 KiB measured ~40% fewer requests a second under load, as
# every photo-sized buffer then costs a mapping and its page faults).
MMAP_THRESHOLD_BYTES: Final = 1024 * 1024
TRIM_THRESHOLD_BYTES: Final = 2 * MMAP_THRESHOLD_BYTES
ARENA_MAX: Final = 2

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
    library, _version = platform.libc_ver()
    if library != "glibc":
        return AllocatorTuning(False, False, False, f"not glibc ({library or 'unknown'})")
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
