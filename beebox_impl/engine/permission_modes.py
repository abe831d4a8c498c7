"""Claude Code's permission modes: the words a box's settings and `bbx serve` take.

The modes (`PERMISSION_MODES`) are Claude Code's own: ``default`` asks before
edits and commands, ``acceptEdits`` allows edits inside the box, ``plan`` lets
it only read and plan, ``dontAsk`` denies what it would ask about,
``bypassPermissions`` asks about nothing, ``auto`` lets a classifier decide.

A module of its own, importing only `typing` and `beebox_spec.errors`: the
settings file is checked against these words by light commands too (`bbx chat
history` reads the box's settings), which must not pay for the permission
requests' rules (`beebox_impl.engine.claude_permissions`, `beebox_spec.permissions`).
"""

from __future__ import annotations

from typing import Final, Literal, TypeAlias, get_args

from beebox_spec.errors import BeeboxError

__all__ = ["PERMISSION_MODES", "InvalidPermissionMode", "PermissionMode", "permission_mode"]

PermissionMode: TypeAlias = Literal[
    "default", "acceptEdits", "plan", "bypassPermissions", "dontAsk", "auto"
]
PERMISSION_MODES: Final[tuple[PermissionMode, ...]] = get_args(PermissionMode)


class InvalidPermissionMode(BeeboxError, ValueError):
    """A permission mode Claude Code does not have."""


def permission_mode(value: str) -> PermissionMode:
    """``value`` as a mode, or `InvalidPermissionMode` naming the ones there are."""
    if value not in PERMISSION_MODES:
        raise InvalidPermissionMode(
            f"unknown permission mode {value!r}: one of {', '.join(PERMISSION_MODES)}"
        )
    return value
