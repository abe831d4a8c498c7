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

from beebox_impl.review.paths import lock_path
from beebox_spec.errors import BeeboxError

__all__ = ["REVIEW_LOCK_GROUP", "LockHeldError", "hold_lock_group"]

# §4.9: the chat-review schedule's lock group.
REVIEW_LOCK_GROUP: Final = "retro"


class LockHeldError(BeeboxError):
    """Another process holds the lock group; the message says which and since when."""


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
            raise LockHeldError(_describe_holder(path, group)) from None
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, f"{holder} pid {os.getpid()}\n".encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(descriptor, 0)
            fcntl.flock(descriptor, fcntl.LOCK_UN)
    finally:
        os.close(descriptor)


def _describe_holder(path: Path, group: str) -> str:
    try:
        who = path.read_text(encoding="utf-8").strip()
    except OSError:
        who = ""
    return f"lock group {group} is held by {who or 'another process'}"
