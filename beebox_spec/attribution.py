"""Attribution: naming a message's sender in its opening tag, and reading it back.

Spec sources, in `docs/sources.md`: `docs/sources.md#facts-2-1` (§2.1 step 5:
`injectUserAttr`) and the original's `userIdentity`, which its transcript read
and its acceptance record's read (§2.2) share.

Before recording a send, the send route adds `user="…" user-email="…"` to the
message's opening `<typed>`/`<speech>` tag, right after the tag name
(`inject_user_attr`), unless the message is a slash command (it starts with
`/`). Whoever reads a message's sender — the history's entries
(`beebox_spec.transcript`), the acceptance record read back
(`beebox_spec.reconcile`) — reads it with `user_identity`, which takes the first
such attribute, so the sender the server names always wins.

**Attribution cannot be spoofed**
(ours, `docs/spec-decisions.md#attribution-not-spoofable`):

- The values are escaped as an XML attribute value is, `&` first
  (`&amp;`, `&quot;`, `&lt;`, `&gt;`), and the reader decodes exactly those four
  in one pass, so every name and email reads back exactly as it was injected.
  Escaping `>` also keeps the tag whole for every `[^>]*` reader of it
  (`normalize_for_compare`, the review's wrapper stripping).
- The reader takes the *first* matching attribute of the first tag that has
  one: the injected sender.
- Injection first removes the `user="…"` and `user-email="…"` attributes the
  client wrote into that opening tag, so an attributed message names one
  sender only, for the reader and for the agent alike. The sources say what
  is added, not that the client's own attributes stay.

A message that is not attributed (a slash command, or one that does not start
with a `<typed>`/`<speech>` tag) is recorded as sent; whatever identity
attributes it carries are read as they stand, as in the original.

The patterns here are ASCII-only, as JavaScript's are: a word boundary `\\b`
sees only `[A-Za-z0-9_]` as word characters.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final, Literal

from beebox_spec.entries import SessionContentBlock
from beebox_spec.js_values import JS_SPACE_CLASS

__all__ = ["inject_user_attr", "user_identity"]

# §2.1 step 5: the opening tag attribution is injected into, only at the very
# start of the message (the original's /^(<(?:typed|speech)\b)([^>]*>)/).
_LEADING_TYPED_OR_SPEECH_TAG = re.compile(r"^(<(?:typed|speech)\b)([^>]*>)", re.ASCII)

# §2.2 via the original's `userIdentity` (`cli/lib/session-entry.ts`): an
# identity attribute of the first `<typed>`/`<speech>`/`<external-input>` tag
# that carries it. The `[^>]*?` is lazy: the *first* such attribute of the tag,
# which is where injection puts the sender
# (ours, `docs/spec-decisions.md#attribution-not-spoofable`).
_USER_ATTR = re.compile(r'<(?:typed|speech|external-input)\b[^>]*?\buser="([^"]*)"', re.ASCII)
_USER_EMAIL_ATTR = re.compile(
    r'<(?:typed|speech|external-input)\b[^>]*?\buser-email="([^"]*)"', re.ASCII
)

# A `user="…"` or `user-email="…"` attribute of the tag a client sent, with the
# whitespace before it; removed before the sender is injected
# (ours, `docs/spec-decisions.md#attribution-not-spoofable`).
_CLIENT_IDENTITY_ATTR = re.compile(JS_SPACE_CLASS + r'+(?:user|user-email)="[^"]*"')

# An attribute value escaped as XML escapes one, `&` first so the escape can be
# undone; `user_identity` decodes exactly these four
# (ours, `docs/spec-decisions.md#attribution-not-spoofable`).
_ATTRIBUTE_ESCAPES: Final = (("&", "&amp;"), ('"', "&quot;"), ("<", "&lt;"), (">", "&gt;"))
_ATTRIBUTE_ENTITY = re.compile("|".join(entity for _, entity in _ATTRIBUTE_ESCAPES))
_ATTRIBUTE_UNESCAPES: Final = {entity: character for character, entity in _ATTRIBUTE_ESCAPES}


def _escape_attribute(value: str) -> str:
    """The value as it is written inside `"…"`: `&`, `"`, `<`, `>` as XML escapes them."""
    for character, entity in _ATTRIBUTE_ESCAPES:
        value = value.replace(character, entity)
    return value


def _unescape_attribute(value: str) -> str:
    """The value `_escape_attribute` was given: its four entities decoded in one pass."""
    return _ATTRIBUTE_ENTITY.sub(lambda match: _ATTRIBUTE_UNESCAPES[match[0]], value)


def inject_user_attr(message: str, email: str, name: str) -> str:
    """The message with its sender named in its opening tag (§2.1 step 5 `injectUserAttr`).

    When the message *starts* with a `<typed …>` or `<speech …>` tag, inserts
    ` user="<name>" user-email="<email>"` right after the tag name, before any
    attributes the tag already has, and removes the tag's own `user="…"` and
    `user-email="…"` attributes, which only the client can have written. Both
    values are escaped by `_escape_attribute`
    (ours, `docs/spec-decisions.md#attribution-not-spoofable`). A slash command (a
    message starting with `/`) is left alone, as is a message that does not start
    with such a tag. The values are inserted literally (the original builds a
    JavaScript replacement string, where a `$` in a name would be read as a
    pattern; that is not part of the rule).
    """
    # A slash command is passed to the agent untouched.
    if message.startswith("/"):
        return message
    attributes = f' user="{_escape_attribute(name)}" user-email="{_escape_attribute(email)}"'

    def attributed(match: re.Match[str]) -> str:
        # The client's own identity attributes go: only the server names the sender.
        rest = _CLIENT_IDENTITY_ATTR.sub("", match[2])
        return match[1] + attributes + rest

    return _LEADING_TYPED_OR_SPEECH_TAG.sub(attributed, message, count=1)


def user_identity(
    content: Sequence[SessionContentBlock], attribute: Literal["user", "user-email"]
) -> str | None:
    """The `user` or `user-email` attribute a message's tag carries, decoded; None if absent.

    Reads the first text block only: the first `<typed>`, `<speech>` or
    `<external-input>` tag in it that carries the attribute, and the first
    such attribute in that tag (on an attributed message, the one injection
    wrote). The value is decoded by `_unescape_attribute`, so it reads back
    exactly what `inject_user_attr` was given. An empty value counts as
    absent. (The original's `userIdentity`, shared by the transcript read and the
    acceptance record's.)
    """
    first_text = next(
        (block.get("text", "") for block in content if block.get("type") == "text"), ""
    )
    pattern = _USER_ATTR if attribute == "user" else _USER_EMAIL_ATTR
    match = pattern.search(first_text)
    # An absent or empty attribute names nobody.
    if match is None or match[1] == "":
        return None
    return _unescape_attribute(match[1])
