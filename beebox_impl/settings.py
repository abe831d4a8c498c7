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

The file is YAML, read by ruamel.yaml; but importing ruamel takes longer than a
light command (`bbx chat history`) takes to run. So the file is first read as
the small part of YAML it is usually written in (`_plain_document`): ``key:``
lines two levels deep, each value a letter-first word, a decimal number, a
quoted string without escapes or a one-line ``[...]`` of those, comments and
blank lines; printable ASCII only. That reading answers exactly what ruamel's
would, or gives up at the first thing outside it (a block list, an escape, a
tab, a word YAML reads as null or a boolean, a repeated key...), and then ruamel
reads the file. Both documents go through the same checks; a file the checks
refuse is read again by ruamel, so every message says the line ruamel places
the fault on. One file, one answer, whichever way it was read: a differential
property test holds the two readings equal (`tests/impl/test_settings_reading.py`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, Final, NamedTuple, TypeAlias

from beebox_impl.atomic import write_atomic
from beebox_impl.engine.permission_modes import (
    PERMISSION_MODES,
    InvalidPermissionMode,
    PermissionMode,
    permission_mode,
)
from beebox_spec.errors import BeeboxError
from beebox_spec.permission_timeout import DEFAULT_TIMEOUT
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


class PermissionSettings(NamedTuple):
    """``permissions:``: the mode, the rules, and how long a request may wait."""

    mode: PermissionMode = "default"
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    timeout: timedelta = DEFAULT_TIMEOUT


class HistorySettings(NamedTuple):
    """``history:``: how photos come back (`beebox_spec.transcript`'s photo mode)."""

    photos: PhotoMode = DEFAULT_PHOTO_MODE


class BoxSettings(NamedTuple):
    """Everything the settings file says (the defaults where it is silent)."""

    permissions: PermissionSettings = PermissionSettings()
    history: HistorySettings = HistorySettings()


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
    plain = _plain_document(text)
    if plain is not _OUTSIDE_PLAIN_YAML:
        try:
            return _box_settings(path, plain)
        except InvalidBoxSettings:
            pass  # said below as ruamel places it: with the line it is on
    return _box_settings(path, _yaml_document(path, text))


def _yaml_document(path: Path, text: str) -> object:
    # Imported here: a plain file (`_plain_document`) never needs it.
    from ruamel.yaml import YAML  # noqa: PLC0415
    from ruamel.yaml.error import YAMLError  # noqa: PLC0415

    try:
        return YAML(typ="rt").load(text)
    except YAMLError as error:
        raise InvalidBoxSettings(f"{path}: not YAML: {error}") from error
    except (TypeError, RecursionError) as error:
        # YAML ruamel parses but cannot build: a mapping as a key, nesting past the stack.
        raise InvalidBoxSettings(f"{path}: not YAML beebox can read ({error})") from error


def _box_settings(path: Path, document: object) -> BoxSettings:
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


class _OutsidePlainYaml:
    """The file uses more of YAML than `_plain_document` reads."""


_OUTSIDE_PLAIN_YAML: Final = _OutsidePlainYaml()

# A key, or a plain word value: a string to YAML unless it names null or a boolean
# (1.2's words; 1.1's too, which a reader may still follow: no guess either way).
_WORD: Final = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_NOT_STRINGS: Final = frozenset({"null", "true", "false", "yes", "no", "on", "off", "y", "n"})
_INTEGER: Final = re.compile(r"0|[1-9][0-9]*")
_DECIMAL: Final = re.compile(r"(?:0|[1-9][0-9]*)\.[0-9]+")
_KEY_LINE: Final = re.compile(rf"( *)({_WORD.pattern}):(.*)")
# Printable ASCII and newlines: nothing for YAML to reject or to read as a break.
_PLAIN_TEXT: Final = re.compile(r"[\x20-\x7e\n]*")
# A quoted string without escapes (a doubled quote or a backslash): its characters.
_QUOTED: Final = re.compile(r"'([^']*)'(?!')|\"([^\"\\]*)\"")
_COMMENT_OR_NOTHING: Final = re.compile(r"(?: +#.*)?| *")

_PlainValue: TypeAlias = str | int | float | list[str] | None


def _plain_document(text: str) -> object:
    """The file as ruamel reads it (plain dicts and lists), or `_OUTSIDE_PLAIN_YAML`.

    A top-level ``key:`` with nothing after it opens a section; the lines indented
    under it (all by the same amount) are its keys, each with a value or none
    (null). No third level, no repeated key, nothing that is not a key line, a
    comment line or a blank one.
    """
    if _PLAIN_TEXT.fullmatch(text) is None:
        return _OUTSIDE_PLAIN_YAML
    document: dict[str, Any] = {}
    section: dict[str, Any] | None = None
    section_key = ""
    section_indent = 0
    for line in text.split("\n"):
        stripped = line.lstrip(" ")
        if not stripped or stripped.startswith("#"):
            continue
        matched = _KEY_LINE.fullmatch(line)
        if matched is None:
            return _OUTSIDE_PLAIN_YAML
        indent, key = len(matched[1]), matched[2]
        value = _plain_value(matched[3])
        if key.lower() in _NOT_STRINGS or value is _OUTSIDE_PLAIN_YAML:
            return _OUTSIDE_PLAIN_YAML
        if indent == 0:
            if key in document:
                return _OUTSIDE_PLAIN_YAML
            document[key] = value
            # Only a key with nothing after it may have keys under it.
            section = {} if value is None else None
            section_key, section_indent = key, 0
            continue
        if section is None or key in section:
            return _OUTSIDE_PLAIN_YAML
        if not section:
            section_indent = indent
            document[section_key] = section
        if indent != section_indent:
            return _OUTSIDE_PLAIN_YAML
        section[key] = value
    return document or None


def _plain_value(rest: str) -> _PlainValue | _OutsidePlainYaml:
    """The value after a key's colon: None when there is none (a comment at most)."""
    if not rest:
        return None
    if not rest.startswith(" "):
        # ``key:value`` is one plain scalar to YAML, not a key.
        return _OUTSIDE_PLAIN_YAML
    value = rest.lstrip(" ")
    if not value or value.startswith("#"):
        return None
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return _OUTSIDE_PLAIN_YAML
        inside = value[1:end]
        # A piece split inside a quoted item is no whole item: the line is then ruamel's.
        items = [_plain_scalar(item.strip(" ")) for item in inside.split(",")]
        strings = [item for item in items if isinstance(item, str)]
        if inside.strip(" ") == "":
            strings, items = [], []
        if len(strings) != len(items):
            return _OUTSIDE_PLAIN_YAML
        return strings if _COMMENT_OR_NOTHING.fullmatch(value[end + 1 :]) else _OUTSIDE_PLAIN_YAML
    quoted = _QUOTED.match(value)
    if quoted is not None:
        after = value[quoted.end() :]
        text = quoted[1] if quoted[1] is not None else quoted[2]
        return text if _COMMENT_OR_NOTHING.fullmatch(after) else _OUTSIDE_PLAIN_YAML
    # A plain scalar ends where a comment starts: `` #``.
    scalar = value.partition(" #")[0].rstrip(" ")
    return _plain_scalar(scalar)


def _plain_scalar(token: str) -> str | int | float | _OutsidePlainYaml:
    """One item: a quoted string, a word or a decimal number, as ruamel resolves it."""
    quoted = _QUOTED.fullmatch(token)
    if quoted is not None:
        return quoted[1] if quoted[1] is not None else quoted[2]
    if _WORD.fullmatch(token) is not None and token.lower() not in _NOT_STRINGS:
        return token
    if _INTEGER.fullmatch(token) is not None:
        return int(token)
    if _DECIMAL.fullmatch(token) is not None:
        return float(token)
    return _OUTSIDE_PLAIN_YAML


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


class _Where(NamedTuple):
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
        # ruamel's round-trip maps know where each key was (0-based line); a plain
        # reading's do not, and its refusals are said again from ruamel's.
        lines = getattr(value, "lc", None)
        if lines is None:
            return ""
        try:
            line, _column = lines.key(key)
        except (KeyError, TypeError):
            return ""
        return f":{line + 1}"
