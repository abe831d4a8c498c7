"""Which file, as it was: the identity both readers of a growing transcript key on.

A transcript only grows (Claude Code appends to it), and two readers keep what
they learned of one between reads: the transcript index (`beebox_impl.transcript`)
and the review's walk cache (`beebox_impl.review.store`). Both decide "the same
file, grown" the same way — same device and inode, and longer than where the last
read stopped (`FileIdentity.grew_past`) — and then let the bytes say whether it
was only appended to: the index by a digest of the bytes just before its end, the
review by a digest of the whole prefix it goes on hashing from.
"""

from __future__ import annotations

import os
import stat
from typing import Any, BinaryIO, NamedTuple

__all__ = ["FileIdentity"]


class FileIdentity(NamedTuple):
    """Which file, as it was: device, inode, size and modification time (ns).

    A named tuple, as every record of a transcript read is: `bbx chat history`
    imports no dataclasses (`beebox_impl.transcript`).
    """

    device: int
    inode: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, status: os.stat_result) -> FileIdentity:
        """The identity a `stat` result names."""
        return cls(status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)

    @classmethod
    def of_open_file(cls, file: BinaryIO) -> FileIdentity | None:
        """The identity of an open file, or None when it is not a regular file."""
        status = os.fstat(file.fileno())
        if not stat.S_ISREG(status.st_mode):
            return None
        return cls.of(status)

    def grew_past(self, older: FileIdentity, end: int) -> bool:
        """The same file as ``older`` (device and inode), now longer than ``end``, where
        a read of it stopped: perhaps appended to (the bytes before ``end`` decide)."""
        return (self.device, self.inode) == (older.device, older.inode) and self.size > end

    def as_json(self) -> list[int]:
        """The identity as a cache stores it."""
        return [self.device, self.inode, self.size, self.mtime_ns]

    @classmethod
    def from_json(cls, value: Any) -> FileIdentity | None:
        """An identity read back from a cache (None when it is not one)."""
        if isinstance(value, list) and len(value) == 4 and all(type(item) is int for item in value):
            return cls(value[0], value[1], value[2], value[3])
        return None
