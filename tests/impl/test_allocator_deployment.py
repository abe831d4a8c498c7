"""The deployment setting `docs/http.md` gives for a long-lived `bbx serve` on glibc.

``GLIBC_TUNABLES=glibc.malloc.tcache_count=0`` turns glibc's per-thread caches of
freed chunks off (`beebox_impl.allocator`'s docstring says what they cost a serving
box). `bbx serve` does not set it itself: it cannot without executing itself
again. Each case runs in a child started with or without the setting; the child
frees a small chunk and reports whether glibc still counts it as in use (a
thread's cache keeps it) or as free.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc", reason="the setting is glibc's tunable"
)

_CHILD = r"""
import ctypes, json
from beebox_impl.allocator import read_heap

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
chunk = libc.malloc(200)
in_use = read_heap().in_arenas
libc.free(chunk)
print(json.dumps({"cached": read_heap().in_arenas == in_use}))
"""


def _freed_chunk_is_cached(tunables: str | None) -> bool:
    environment = {key: value for key, value in os.environ.items() if key != "GLIBC_TUNABLES"}
    if tunables is not None:
        environment["GLIBC_TUNABLES"] = tunables
    done = subprocess.run(
        [sys.executable, "-c", _CHILD],
        capture_output=True,
        text=True,
        check=True,
        env=environment,
        timeout=60,
    )
    cached: bool = json.loads(done.stdout)["cached"]
    return cached


def test_glibc_caches_a_freed_chunk_in_its_thread_by_default() -> None:
    # What the setting exists for; if glibc stops doing this, the test says so.
    assert _freed_chunk_is_cached(None)


def test_the_documented_setting_turns_the_caches_off() -> None:
    assert not _freed_chunk_is_cached("glibc.malloc.tcache_count=0")
