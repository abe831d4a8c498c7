"""Crash-safe file replacement: a reader sees the old bytes or the new, never a mix.

The one way beebox replaces a file it owns (the session-id file, the review's
journal — §4.3: "written atomically" — and husk and schedule cards): the new
bytes go to a temporary file in the same folder, are flushed to the disk
(`fsync`), and the temporary file is renamed over the old one; then the folder
itself is synced, so the rename survives a power cut too.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["remove_durably", "sync_folder", "write_atomic"]


def write_atomic(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Replace `path` with `data` atomically and durably (parents created as needed).

    `mode` sets the permission bits of the new file; by default an existing
    file's bits are kept, and a new file gets 0o644.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        try:
            mode = path.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o644
    import tempfile  # noqa: PLC0415 - only a write needs it; light commands import this module

    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    sync_folder(path.parent)


def sync_folder(folder: Path) -> None:
    """Make the folder's entries durable (a rename or removal in it survives a power cut)."""
    # Some filesystems refuse to open or sync a folder: then there is nothing more to do.
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(descriptor)
    finally:
        os.close(descriptor)


def remove_durably(path: Path) -> None:
    """Remove `path` (if there) so that the removal survives a power cut."""
    path.unlink(missing_ok=True)
    sync_folder(path.parent)
