"""Cross-process lock groups: at most one holder of a group at a time, per box.

The chat review run holds lock group `retro` (§4.7, §4.9 `lockGroup: "retro"`); so
does the scheduler when it starts a scheduled script of that group. The lock is
an advisory `flock` on `.beebox/locks/<group>.lock`: the kernel drops it when the
holder exits, however it exits, so a crashed run never leaves a stale lock. The
holder writes who it is into the file, which a refused caller reports.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from beebox_impl.errors import BoxInUse
from beebox_impl.review.paths import lock_path

__all__ = ["REVIEW_LOCK_GROUP", "LockHeldError", "hold_lock_group"]

# §4.9: the chat-review schedule's lock group.
REVIEW_LOCK_GROUP: Final = "retro"


class LockHeldError(BoxInUse):
    """Another holder has the lock group; the message (and ``holder``) say who."""


@contextmanager
def hold_lock_group(box_root: Path, group: str, holder: str) -> Iterator[None]:
    """Hold `group`'s lock for the block, or raise `LockHeldError` at once (never wait).

    `holder` names the work (for example ``chat-review``) in the refusal others see.
    """
    path = lock_path(box_root, group)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            who = _holder_of(path)
            raise LockHeldError(
                f"lock group {group} is held by {who or 'another process'}", who
            ) from None
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, f"{holder} pid {os.getpid()}\n".encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(descriptor, 0)
            fcntl.flock(descriptor, fcntl.LOCK_UN)
    finally:
        os.close(descriptor)


def _holder_of(path: Path) -> str | None:
    # What the holder wrote of itself ("<work> pid <n>"), if it could be read.
    try:
        who = path.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return who or None
