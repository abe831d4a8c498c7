"""A box's own settings: ``<box>/_config/settings.yaml``.

The file is the boxholder's: `bbx init` writes it once, commented, and never
again; beebox only reads it, as the box opens. Today it holds how the agent
asks before it acts (issue 33), and how photos come back in a history read::

    permissions:
      mode: default          # Claude Code's permission mode
      allow: []              # rules allowed without asking, e.g. "Bash(git status:*)"
      deny: []               # rules always refused, e.g. "Bash(rm:*)"
      timeout_minutes: 10    # an unanswered request is denied after this long
    history:
      photos: refs           # every photo by reference; "original": only big lines'

Every key is optional (a missing file, or a missing key, is the default). A key
beebox does not know is refused rather than ignored — a typo must not silently
leave the agent in another mode — and so is a value of the wrong kind, each with
the file, the line and what would be right (`InvalidBoxSettings`).
``bypassPermissions`` may be written here like any mode, but `bbx serve` still
refuses it without ``--dangerously-bypass-permissions`` on its own command line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError

from beebox_impl.atomic import write_atomic
from beebox_impl.engine.claude_permissions import (
    PERMISSION_MODES,
    InvalidPermissionMode,
    PermissionMode,
    permission_mode,
)
from beebox_spec.errors import BeeboxError
from beebox_spec.permissions import DEFAULT_TIMEOUT
from beebox_spec.transcript import PHOTO_MODES, PhotoMode

__all__ = [
    "DEFAULT_PHOTO_MODE",
    "MAX_PERMISSION_TIMEOUT",
    "SETTINGS_TEMPLATE",
    "BoxSettings",
    "HistorySettings",
    "InvalidBoxSettings",
    "PermissionSettings",
    "install_settings",
    "load_box_settings",
    "settings_path",
]

# How a box reads photos unless its settings say otherwise: every one by reference.
DEFAULT_PHOTO_MODE: Final[PhotoMode] = "refs"

# The longest a request may wait for an answer: a day.
MAX_PERMISSION_TIMEOUT: Final = timedelta(days=1)

SETTINGS_TEMPLATE: Final = f"""\
# This box's settings. beebox reads them as the box opens (`bbx serve`), and
# never writes this file again: edit it freely. Every key is optional.

permissions:
  # How Claude Code asks before it acts: {" | ".join(PERMISSION_MODES)}.
  # "default" asks on the page before edits and commands; "acceptEdits" allows
  # edits inside the box and asks about commands; "plan" only reads and plans;
  # "dontAsk" denies whatever it would have asked. `bbx serve --permission-mode`
  # overrides this; "bypassPermissions" also needs --dangerously-bypass-permissions.
  mode: default
  # Claude Code permission rules allowed without asking, e.g. "Bash(git status:*)".
  allow: []
  # Rules always refused, e.g. "Bash(rm:*)".
  deny: []
  # An unanswered request is denied after this many minutes (at most a day).
  timeout_minutes: {DEFAULT_TIMEOUT.total_seconds() / 60:g}

history:
  # How photos come back in a history read: {" | ".join(PHOTO_MODES)}.
  # "refs" takes every photo out of the history and serves it by reference, one
  # at a time; "original" does so only for transcript lines over 256 KiB, as
  # the original did, and sends smaller photos inline as base64.
  photos: {DEFAULT_PHOTO_MODE}
"""


class InvalidBoxSettings(BeeboxError, ValueError):
    """The settings file is not what beebox reads (the message says where and why)."""


@dataclass(frozen=True, slots=True)
class PermissionSettings:
    """``permissions:``: the mode, the rules, and how long a request may wait."""

    mode: PermissionMode = "default"
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    timeout: timedelta = DEFAULT_TIMEOUT


@dataclass(frozen=True, slots=True)
class HistorySettings:
    """``history:``: how photos come back (`beebox_spec.transcript`'s photo mode)."""

    photos: PhotoMode = DEFAULT_PHOTO_MODE


@dataclass(frozen=True, slots=True)
class BoxSettings:
    """Everything the settings file says (the defaults where it is silent)."""

    permissions: PermissionSettings = field(default_factory=PermissionSettings)
    history: HistorySettings = field(default_factory=HistorySettings)


def settings_path(box_root: Path) -> Path:
    """Where a box keeps its settings."""
    return box_root / "_config" / "settings.yaml"


def install_settings(box_root: Path) -> bool:
    """Write the commented template if the box has no settings file; whether it did."""
    path = settings_path(box_root)
    if path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, SETTINGS_TEMPLATE.encode())
    return True


def load_box_settings(box_root: Path) -> BoxSettings:
    """The box's settings (blocking); `InvalidBoxSettings` for a file beebox cannot read."""
    path = settings_path(box_root)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return BoxSettings()
    except (OSError, UnicodeDecodeError) as error:
        raise InvalidBoxSettings(f"{path}: cannot be read ({error})") from error
    try:
        document = YAML(typ="rt").load(text)
    except YAMLError as error:
        raise InvalidBoxSettings(f"{path}: not YAML: {error}") from error
    if document is None:
        return BoxSettings()
    where = _Where(path, document)
    top = where.mapping(document, "the file", {"permissions", "history"})
    permissions = top.get("permissions")
    history = top.get("history")
    return BoxSettings(
        PermissionSettings() if permissions is None else _permission_settings(where, permissions),
        HistorySettings() if history is None else _history_settings(where, history),
    )


def _history_settings(where: _Where, value: object) -> HistorySettings:
    section = where.mapping(value, "history", {"photos"})
    photos = section.get("photos", DEFAULT_PHOTO_MODE)
    if photos not in PHOTO_MODES:
        raise where.error(section, "history", "photos", f"one of {', '.join(PHOTO_MODES)}")
    return HistorySettings(photos)


def _permission_settings(where: _Where, value: object) -> PermissionSettings:
    section = where.mapping(value, "permissions", {"mode", "allow", "deny", "timeout_minutes"})
    defaults = PermissionSettings()
    mode = section.get("mode", defaults.mode)
    try:
        checked_mode = permission_mode(mode if isinstance(mode, str) else repr(mode))
    except InvalidPermissionMode:
        raise where.error(
            section, "permissions", "mode", f"one of {', '.join(PERMISSION_MODES)}"
        ) from None
    allow = _rules(where, section, "allow")
    deny = _rules(where, section, "deny")
    timeout = defaults.timeout
    minutes = section.get("timeout_minutes")
    if minutes is not None:
        if isinstance(minutes, bool) or not isinstance(minutes, int | float):
            raise where.error(section, "permissions", "timeout_minutes", "a number of minutes")
        if not 0 < minutes * 60 <= MAX_PERMISSION_TIMEOUT.total_seconds():
            raise where.error(
                section, "permissions", "timeout_minutes", "more than 0 and at most 1440 (a day)"
            )
        timeout = timedelta(minutes=minutes)
    return PermissionSettings(checked_mode, allow, deny, timeout)


def _rules(where: _Where, section: Mapping[str, Any], key: str) -> tuple[str, ...]:
    rules = section.get(key)
    if rules is None:
        return ()
    if not isinstance(rules, list) or not all(
        isinstance(rule, str) and rule.strip() for rule in rules
    ):
        raise where.error(
            section, "permissions", key, 'a list of rules, such as ["Bash(git status:*)"]'
        )
    return tuple(rule.strip() for rule in rules)


@dataclass(frozen=True)
class _Where:
    """Says where in the file a value is wrong."""

    path: Path
    document: object

    def mapping(self, value: object, name: str, known: set[str]) -> Mapping[str, Any]:
        if not isinstance(value, dict):
            raise InvalidBoxSettings(f"{self.path}: {name} must be a mapping of keys")
        unknown = sorted(str(key) for key in value if key not in known)
        if unknown:
            raise InvalidBoxSettings(
                f"{self.path}{self._line(value, unknown[0])}: unknown key(s) in {name}: "
                f"{', '.join(unknown)} (known: {', '.join(sorted(known))})"
            )
        return value

    def error(
        self, section: Mapping[str, Any], name: str, key: str, expected: str
    ) -> InvalidBoxSettings:
        return InvalidBoxSettings(
            f"{self.path}{self._line(section, key)}: {name}.{key} is "
            f"{section.get(key)!r}; expected {expected}"
        )

    @staticmethod
    def _line(value: object, key: str) -> str:
        # ruamel's round-trip maps know where each key was (0-based line).
        if isinstance(value, CommentedMap):
            try:
                line, _column = value.lc.key(key)
            except (KeyError, TypeError):
                return ""
            return f":{line + 1}"
        return ""
