"""The whole-box chat's saved SDK session id: ``<box>/.beebox/chat-session-id.json``.

The file is ``{"sessionId": "<id>"}`` (original-facts §3.2). It is written
atomically — a temporary file in the same folder, flushed and fsynced, renamed
over the old one, then the folder fsynced — so a reader sees the old id or the
new one, never half a file, and a crash never leaves the box without an id it had
saved. A file that is missing, unreadable or not of that shape reads as no id:
the chat then starts a new SDK session instead of failing.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Final

import anyio.to_thread

__all__ = ["SESSION_ID_FILE_NAME", "SessionIdFile", "session_id_path"]

SESSION_ID_FILE_NAME: Final = "chat-session-id.json"

_log = logging.getLogger(__name__)


def session_id_path(box_root: Path) -> Path:
    """Where a box keeps its chat's session id."""
    return box_root / ".beebox" / SESSION_ID_FILE_NAME


def _read(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as error:
        _log.warning("cannot read %s: %s", path, error)
        return None
    try:
        document = json.loads(text)
    except ValueError:
        _log.warning("%s is not JSON; starting a new session", path)
        return None
    session_id = document.get("sessionId") if isinstance(document, dict) else None
    # Only a non-empty string is an id.
    if not isinstance(session_id, str) or not session_id:
        _log.warning("%s holds no sessionId; starting a new session", path)
        return None
    return session_id


def _fsync_folder(folder: Path) -> None:
    # The rename is durable only once the folder's entry is; not every OS can open a folder.
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def _write_atomically(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(content)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    _fsync_folder(path.parent)


def _remove(path: Path) -> None:
    path.unlink(missing_ok=True)
    _fsync_folder(path.parent)


class SessionIdFile:
    """The session-id file of one box (a `SessionIdStore`); file work runs in a worker thread."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def for_box(cls, box_root: Path) -> SessionIdFile:
        """The session-id file of the box at ``box_root``."""
        return cls(session_id_path(box_root))

    async def load(self) -> str | None:
        return await anyio.to_thread.run_sync(_read, self.path)

    async def save(self, session_id: str) -> None:
        content = json.dumps({"sessionId": session_id}, ensure_ascii=False) + "\n"
        await anyio.to_thread.run_sync(_write_atomically, self.path, content)

    async def forget(self) -> None:
        await anyio.to_thread.run_sync(_remove, self.path)
