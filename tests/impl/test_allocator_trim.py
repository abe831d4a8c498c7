"""`trim_free_heap` and `bbx serve --trim-heap-every`: free holes handed back.

The mechanism runs in a child process (this test process's heaps are not ours to
change): tuned as `bbx serve` tunes it, the child allocates photo-sized buffers
from a heap, frees every other one — holes between chunks still in use, which a
heap cannot give back from its top — and reads its anonymous RSS and glibc's count
of bytes in use before and after `trim_free_heap`.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import anyio
import pytest

from beebox_impl import allocator
from beebox_impl.cli import box as cli_box
from beebox_impl.cli import main

glibc_only = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")

_CHILD = r"""
import json
from pathlib import Path
from beebox_impl.allocator import read_heap, trim_free_heap, tune_allocator_for_serving


def anonymous_kib():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1])

tune_allocator_for_serving()
# 48 buffers of 300 KiB, each written (its pages touched), below the 1 MiB mmap
# threshold: carved from the heap. Every other one freed: 24 holes, ~7 MiB.
buffers = [b"x" * (300 * 1024) for _ in range(48)]
written = anonymous_kib()
del buffers[::2]
before, in_use_before = anonymous_kib(), read_heap().in_arenas
released = trim_free_heap()
after, in_use_after = anonymous_kib(), read_heap().in_arenas
print(json.dumps({
    "released": released,
    "handed_back_by_free_kib": written - before,
    "handed_back_kib": before - after,
    "in_use_change_kib": (in_use_after - in_use_before) // 1024,
    "buffers_intact": all(buffer == b"x" * (300 * 1024) for buffer in buffers),
}))
"""


@glibc_only
def test_trim_hands_back_the_holes_and_keeps_what_is_in_use() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD],
        capture_output=True,
        text=True,
        check=True,
        # The allocator as `bbx serve` sets it up, not as this shell may have it.
        env={
            name: value
            for name, value in os.environ.items()
            if not name.startswith("MALLOC_") and name != "GLIBC_TUNABLES"
        },
        timeout=60,
    )
    answer = json.loads(done.stdout)
    assert answer["released"] is True, answer
    # Freed, the holes stay resident: a heap gives back only from its top.
    assert answer["handed_back_by_free_kib"] < 1024, answer
    # 24 holes of 300 KiB: nearly all of them handed back.
    assert answer["handed_back_kib"] >= 5 * 1024, answer
    # What is in use stays (the reads of /proc in between allocate a little).
    assert abs(answer["in_use_change_kib"]) < 256, answer
    assert answer["buffers_intact"] is True, answer


@pytest.mark.parametrize("text", ["-1", "0.05", "x", "nan", "inf", "86401"])
def test_serve_refuses_an_interval_out_of_range(
    text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["serve", f"--trim-heap-every={text}"])
    assert exited.value.code == 2
    assert f"not an interval: {text!r}" in capsys.readouterr().err


@pytest.mark.anyio
async def test_serve_trims_every_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    trims: list[int] = []

    def count() -> bool:
        trims.append(1)
        return True

    monkeypatch.setattr(cli_box, "trim_free_heap", count)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(cli_box._trim_heap_periodically, 0.01)
            while len(trims) < 3:
                await anyio.sleep(0.01)
            tasks.cancel_scope.cancel()
    assert len(trims) >= 3


def test_serve_help_names_the_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    shown = " ".join(capsys.readouterr().out.split())  # argparse wraps the help
    assert "--trim-heap-every SECONDS" in shown
    assert f"(default {allocator.TRIM_EVERY_SECONDS:g}; 0: never)" in shown


@pytest.mark.parametrize(("text", "seconds"), [("0", 0.0), ("0.1", 0.1), ("86400", 86_400.0)])
def test_serve_takes_an_interval_in_range(text: str, seconds: float) -> None:
    assert cli_box._trim_interval(text) == seconds


def test_trim_is_a_no_op_off_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(allocator, "_is_glibc", lambda: False)
    allocator._glibc_function.cache_clear()  # looked up once a process
    try:
        assert allocator.trim_free_heap() is False
        assert allocator.can_trim_heap() is False
        assert allocator.read_heap() is None
    finally:
        allocator._glibc_function.cache_clear()


@glibc_only
def test_trim_is_available_on_glibc() -> None:
    assert allocator.can_trim_heap() is True
