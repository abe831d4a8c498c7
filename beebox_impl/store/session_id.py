"""The whole-box chat's saved SDK session id: ``<box>/.beebox/chat-session-id.json``.

The file is ``{"sessionId": "<id>"}`` (`docs/sources.md#facts-3-2`, §3.2). It is written
atomically — a temporary file in the same folder, flushed and fsynced, renamed
over the old one, then the folder fsynced — so a reader sees the old id or the
new one, never half a file, and a crash never leaves the box without an id it had
saved. A file that is missing, unreadable or not of that shape reads as no id:
the chat then starts a new SDK session instead of failing.
"""

from __future__ import annotations

import json
import logging
from functools import partial
from pathlib import Path
from typing import Final

import anyio.to_thread

from beebox_impl.atomic import remove_durably, write_atomic
from beebox_impl.layout import state_dir

__all__ = ["SESSION_ID_FILE_NAME", "SessionIdFile", "session_id_path"]

SESSION_ID_FILE_NAME: Final = "chat-session-id.json"

_log = logging.getLogger(__name__)


def session_id_path(box_root: Path) -> Path:
    """Where a box keeps its chat's session id."""
    return state_dir(box_root) / SESSION_ID_FILE_NAME


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
        data = content.encode("utf-8")
        await anyio.to_thread.run_sync(partial(write_atomic, self.path, data, mode=0o600))

    async def forget(self) -> None:
        await anyio.to_thread.run_sync(remove_durably, self.path)
