"""Real user turns: which transcript lines are turns the person took.

Spec sources, in `docs/sources.md` (a bare §N.M below is its anchor `facts-N-M`):
`docs/sources.md#facts-4-2` (§4.2 step 4: real user turns) and
`docs/sources.md#facts-2-1` (§2.1, "Related": self-notes).

A transcript line counts as a turn the person took when it is a `user` line that
is not `isMeta`, not an SDK compaction summary, not a sub-agent's (`isSidechain`),
holds non-blank text (so tool_result-only turns do not count), and whose text is
not Claude Code plumbing
(the history read's rule, `beebox_spec.transcript.is_plumbing_message`: its own
notices, and the notification of a background task that ended) nor
consists only of self-notes. Discovery counts them (a session needs two) and takes
the first one's snippet.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from beebox_spec.entries import JsonValue, is_json_object
from beebox_spec.js_values import js_trim, js_trim_start
from beebox_spec.review.snippets import SNIPPET_MAX_LEN, extract_snippet, strip_chat_app_tags
from beebox_spec.transcript import is_plumbing_message, is_sidechain_record

__all__ = [
    "COMPACTION_PREFIX",
    "count_real_user_turns",
    "first_real_user_snippet",
    "is_compaction_summary",
    "is_pure_self_note",
    "real_user_turn_text",
]

# The text Claude Code opens a post-compaction summary with.
COMPACTION_PREFIX: Final = (
    "This session is being continued from a previous conversation that ran out of context."
)
_SELF_NOTE = re.compile(r"<self-note\b([^>]*)>([\s\S]*?)</self-note>", re.ASCII)


def is_compaction_summary(text: str) -> bool:
    """True for a post-compaction summary recognised by its opening words."""
    return js_trim_start(text).startswith(COMPACTION_PREFIX)


def is_pure_self_note(text: str) -> bool:
    """True when the text, `<chat-app>` tags aside, is only `<self-note>` blocks and whitespace.

    A self-note is the agent writing to itself through the user position
    (§2.1 "Related"); a message mixing self-notes with other text is a real
    message. A drained queue joins several notes with "\\n\\n".
    """
    rest = strip_chat_app_tags(text)
    notes = 0
    last_end = 0
    for match in _SELF_NOTE.finditer(rest):
        # Anything but whitespace between notes makes it a real message.
        if js_trim(rest[last_end : match.start()]):
            return False
        notes += 1
        last_end = match.end()
    # No note at all, or text after the last one: not a pure self-note.
    return notes > 0 and not js_trim(rest[last_end:])


def real_user_turn_text(line: JsonValue) -> str | None:
    """The text of a transcript line when it is a turn the person took, else None (§4.2 step 4).

    `line` is one transcript line as `parse_json_text` read it (unparsable lines
    never get here). It counts when all of these hold:

    - it is an object of `type` "user" with a `message` object;
    - it is not `isMeta` (text Claude Code injected) and not `isCompactSummary`
      (the SDK's post-compaction summary);
    - it is not a sub-agent's turn (`beebox_spec.transcript.is_sidechain_record`):
      up to Claude Code 1.0.x a Task call's sub-agent writes its turns into the
      session's transcript, its prompt a `user` line the agent wrote, not the
      person (ours, `docs/spec-decisions.md#sub-agent-work`);
    - its content (a string, or the `text` blocks of a block list) has at least
      one block of non-blank text: a tool_result-only turn has none;
    - the non-blank texts, joined by "\\n" and trimmed, are neither plumbing,
      nor a compaction summary by its opening words, nor only self-notes.

    Plumbing is decided by `beebox_spec.transcript.is_plumbing_message`, the
    history read's rule. Two of its strings, "Tool loaded." and "Todos have been
    modified…", are read off the original's code (`isPlumbingMessage`), not
    the spec sources: §4.2 says only that plumbing is excluded. The third, a text
    opening `<task-notification>` (a background task of the agent's has ended), is
    not the original's, which counted such a turn as the person's
    (ours, `docs/spec-decisions.md#task-notifications`).

    The returned text is that joined, trimmed text. A block's `text` must be a
    string (JavaScript would coerce other values with `String()`; transcripts
    do not carry them).
    """
    # Only an object line can be a turn.
    if not is_json_object(line):
        return None
    # Only a user line with a message object is a user turn.
    message = line.get("message")
    if line.get("type") != "user" or not is_json_object(message):
        return None
    # Injected text, the SDK's compaction summary and what the agent told a sub-agent
    # it started are not the person's words.
    if (
        line.get("isMeta") is True
        or line.get("isCompactSummary") is True
        or is_sidechain_record(line)
    ):
        return None
    content = message.get("content")
    blocks: list[JsonValue]
    if isinstance(content, str):
        blocks = [{"type": "text", "text": content}]
    elif isinstance(content, list):
        blocks = content
    else:
        blocks = []
    texts: list[str] = []
    for block in blocks:
        if is_json_object(block) and block.get("type") == "text":
            text = block.get("text")
            # Only non-blank text counts towards a turn.
            if isinstance(text, str) and js_trim(text):
                texts.append(text)
    # No text at all (a tool_result-only or image-only turn): not a turn.
    if not texts:
        return None
    joined = js_trim("\n".join(texts))
    # Claude Code's own notices and summaries are not the person's turns.
    if is_plumbing_message(joined) or is_compaction_summary(joined):
        return None
    # The agent writing to itself is not the person's turn either.
    if is_pure_self_note(joined):
        return None
    return joined


def count_real_user_turns(lines: Iterable[JsonValue]) -> int:
    """How many of the transcript's lines are real user turns (`getSessionMetadata().userTurns`)."""
    return sum(1 for line in lines if real_user_turn_text(line) is not None)


def first_real_user_snippet(
    lines: Iterable[JsonValue], max_len: int = SNIPPET_MAX_LEN
) -> str | None:
    """The first non-empty snippet of a real user turn (`getSessionMetadata().firstUserSnippet`).

    A real turn whose snippet is empty (say, a bare `<typed></typed>`) does not
    settle it: the next real turn is tried, as the original only fills the
    snippet while it is still null.
    """
    for line in lines:
        text = real_user_turn_text(line)
        if text is not None:
            snippet = extract_snippet(text, max_len)
            # The first real turn that leaves words settles it.
            if snippet is not None:
                return snippet
    return None
