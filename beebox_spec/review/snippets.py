"""Snippets: the first user message, reduced to the words the person typed.

Spec sources, in `docs/sources.md` (a bare §N.M below is its anchor `facts-N-M`):
`docs/sources.md#facts-4-1` (§4.1: husk titles from the first message).

A husk starts out titled with the *snippet* of the first user message:
`<typed>`/`<speech>` shells, voice-direction markup and `<chat-app>` snapshot tags
are stripped, runs of whitespace collapse to one space, the ends are trimmed, and
a text longer than 80 characters is cut to 79 (trailing whitespace trimmed again)
plus "…". Review later recognises an untouched snippet title by recomputing it
(`beebox_spec.review.husk`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from beebox_spec.entries import SessionEntry
from beebox_spec.errors import InvariantError
from beebox_spec.js_values import JS_SPACE_CLASS, js_trim, js_trim_end

__all__ = [
    "FIRST_MESSAGE_WINDOW",
    "SNIPPET_MAX_LEN",
    "extract_snippet",
    "first_message_snippet",
    "strip_chat_app_tags",
    "strip_speech_wrappers",
]

# A run of JavaScript whitespace (`\s+`), collapsed to one space in snippets.
_JS_SPACE_RUN: Final = re.compile(JS_SPACE_CLASS + "+")

# §4.1: husk titles stay bookmark-sized; the snippet is cut to the same length
# (the original's TITLE_MAX_LEN / snippetMaxLen 80; `extractSnippet`'s own
# default of 60 is used by neither caller).
SNIPPET_MAX_LEN: Final = 80
# §4.1: `ensureChatHusk` looks for the first user message among this many entries.
FIRST_MESSAGE_WINDOW: Final = 100

# The original's `stripSpeechWrappers`, in its order. §4.1 names the `<typed>` /
# `<speech>` shells and the `<chat-app>` prepends; the same function also drops
# `<instructions>` voice-direction blocks and the self-closing voice-keyword
# markers, so they are stripped here too (read off the generation of the
# function that strips `<chat-app>`; later generations also strip
# `<user-selection>`, `<unsure>` and `<attachments>`, which §4.1 does not cover).
_INSTRUCTIONS_BLOCK = re.compile(r"<instructions\b[^>]*>[\s\S]*?</instructions>", re.ASCII)
_VOICE_MARKER_TAG = re.compile(
    r"<(?:send-message|send-close-message|cancel-message|mic-off|erase-message)\b[^>]*/>",
    re.ASCII,
)
# `<chat-app …/>` or `<chat-app …>…</chat-app>`, any case, with one newline after it.
_CHAT_APP_TAG = re.compile(
    rf"<chat-app\b[^>]*?(?:/{JS_SPACE_CLASS}*>|>[\s\S]*?</chat-app{JS_SPACE_CLASS}*>)\n?",
    re.ASCII | re.IGNORECASE,
)
# Opening or closing `<speech …>` / `<typed …>` tag; the text between them stays.
_SPEECH_SHELL_TAG = re.compile(r"</?(?:speech|typed)\b[^>]*>", re.ASCII)


def strip_chat_app_tags(text: str) -> str:
    """Remove every `<chat-app>` snapshot tag (self-closing or paired) and the newline after it."""
    return _CHAT_APP_TAG.sub("", text)


def strip_speech_wrappers(text: str) -> str:
    """The words the person typed or spoke: voice markup, snapshot tags and shells removed.

    Not trimmed: callers trim (rendering) or collapse whitespace (snippets).
    """
    text = _INSTRUCTIONS_BLOCK.sub("", text)
    text = _VOICE_MARKER_TAG.sub("", text)
    text = strip_chat_app_tags(text)
    return _SPEECH_SHELL_TAG.sub("", text)


def extract_snippet(raw: str, max_len: int = SNIPPET_MAX_LEN) -> str | None:
    """A user message as a one-line label of at most `max_len` characters, or None if empty.

    Wrappers are stripped, every run of JavaScript whitespace becomes one space,
    and the ends are trimmed. A longer text keeps its first `max_len - 1`
    characters, trailing whitespace trimmed, followed by "…" (so the result may
    be shorter than `max_len`, never longer).
    """
    # max_len 0 has no meaning (JavaScript would clamp the cut to "…" alone).
    if max_len < 1:
        raise InvariantError(f"snippet length must be at least 1, got {max_len}")
    cleaned = js_trim(_JS_SPACE_RUN.sub(" ", strip_speech_wrappers(raw)))
    # Nothing the person wrote survived the stripping: there is no snippet.
    if not cleaned:
        return None
    # Short enough already: the label is the whole message.
    if len(cleaned) <= max_len:
        return cleaned
    return js_trim_end(cleaned[: max_len - 1]) + "…"


def first_message_snippet(entries: Sequence[SessionEntry]) -> str | None:
    """The husk's starting title (§4.1 `ensureChatHusk` → `readSnippetTitle`).

    The first entry of type `user` among the first `FIRST_MESSAGE_WINDOW`
    entries, its text blocks joined by "\\n", reduced by `extract_snippet`.
    None when there is no such entry or nothing survives the cleaning; the
    search does not go on to a later user entry.
    """
    for entry in entries[:FIRST_MESSAGE_WINDOW]:
        # Only the first user entry is looked at.
        if entry["type"] == "user":
            raw = "\n".join(
                block.get("text", "") for block in entry["content"] if block.get("type") == "text"
            )
            return extract_snippet(raw, SNIPPET_MAX_LEN)
    return None
