"""`tune_allocator_for_serving`: glibc keeps big freed buffers out of its heaps.

Each case runs in a child process, so this test process's allocator is not changed.
The child frees a 4 MiB buffer, then allocates another of the same size and reports
whether glibc gave it its own mapping (`read_heap().mapped_chunks` went up): by default
glibc has moved its threshold past that size on the free, and carves the second
from a heap; tuned, it maps it. Tuned, it first frees a 768 KiB buffer (below the
threshold: from a heap) and reports whether the heap kept the space
(`read_heap().from_system` unchanged) rather than handing it back to be faulted in again,
trying up to three times, as a buffer freed in a hole lower in the heap is kept whatever
the setting (a fresh-clone CI run met one).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc", reason="the tuning is glibc's mallopt"
)

_CHILD = r"""
import json, sys
from beebox_impl.allocator import read_heap, tune_allocator_for_serving

tuning = tune_allocator_for_serving() if sys.argv[1] == "tuned" else None
kept = None
if tuning is not None:
    # Once untimed first: whatever the first reading or the first big buffer makes
    # for good (a lazily built object, a cache) is made before the measured one,
    # not above it in the heap, where it would keep the freed space from the top.
    warm_up = bytearray(768 * 1024)
    read_heap()
    del warm_up
    # A buffer that lands in a hole left lower in the heap cannot show a trim, so
    # each try fills the hole it used and the next lands higher: kept means kept
    # every time.
    holes_filled = []
    kept = True
    for _ in range(3):
        below = bytearray(768 * 1024)
        held = read_heap().from_system
        del below
        if read_heap().from_system != held:
            kept = False
            break
        holes_filled.append(bytearray(768 * 1024))
    del holes_filled
size = 4 * 1024 * 1024
first = bytearray(size)
del first
before = read_heap().mapped_chunks
second = bytearray(size)
mapped = read_heap().mapped_chunks - before
print(json.dumps({
    "mapped": mapped,
    "kept_on_free": kept,
    "threshold_set": None if tuning is None else tuning.mmap_threshold,
    "trim_set": None if tuning is None else tuning.trim_threshold,
    "arenas_set": None if tuning is None else tuning.arena_max,
}))
"""


def _child(mode: str, **environment: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, mode],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **environment},
        timeout=60,
    )
    answer: dict[str, object] = json.loads(done.stdout)
    return answer


def test_untuned_glibc_carves_a_big_buffer_from_a_heap_after_freeing_one() -> None:
    # The behaviour the tuning exists for; if glibc stops doing this, the test says so.
    assert _child("default")["mapped"] == 0


def test_tuned_a_big_buffer_gets_its_own_mapping() -> None:
    answer = _child("tuned")
    assert answer == {
        "mapped": 1,
        "kept_on_free": True,
        "threshold_set": True,
        "trim_set": True,
        "arenas_set": True,
    }


def test_settings_made_in_the_environment_stand() -> None:
    answer = _child(
        "tuned",
        MALLOC_MMAP_THRESHOLD_="8388608",
        MALLOC_TRIM_THRESHOLD_="131072",
        MALLOC_ARENA_MAX="4",
    )
    # The person's 8 MiB threshold: the 4 MiB buffer comes from a heap; their
    # 128 KiB trim threshold: the freed 768 KiB goes back to the system.
    assert answer == {
        "mapped": 0,
        "kept_on_free": False,
        "threshold_set": False,
        "trim_set": False,
        "arenas_set": False,
    }
