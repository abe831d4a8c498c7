"""Chat review: which sessions qualify, what the reviewer reads, and what it may write.

Spec sources, in `docs/sources.md` (a bare §N.M below is its anchor `facts-N-M`):
`docs/sources.md#review` (the chat review page, all of it),
`docs/sources.md#facts-4-1` (§4.1: husk titles from the first message),
`docs/sources.md#facts-4-2` (§4.2: discovery), `docs/sources.md#facts-4-4` (§4.4:
rendering), `docs/sources.md#facts-4-5` (§4.5: the reviewer),
`docs/sources.md#facts-4-6` (§4.6: applying to the husk),
`docs/sources.md#facts-4-10` (§4.10: the credential-shape leak scan), and
`docs/sources.md#facts-2-1` (§2.1, "Related": self-notes). The span journal (§4.3)
and the per-session run decisions (§4.7) live in `beebox_spec.journal`, which
builds on this module. Going further than the original:
`docs/design.md#design-5-leak-scan` (§5).

The nightly pass reads chat sessions that have grown since it last looked and
writes a title, a one-sentence `contains` and a running account onto each
session's husk card. This module holds the rules of that pass that do not
concern the journal, in the order the pass meets them:

1. **Snippets** (§4.1). A husk starts out titled with the *snippet* of the
   first user message: `<typed>`/`<speech>` shells, voice-direction markup and
   `<chat-app>` snapshot tags are stripped, runs of whitespace collapse to one
   space, the ends are trimmed, and a text longer than 80 characters is cut to
   79 (trailing whitespace trimmed again) plus "…". Review later recognises an
   untouched snippet title by recomputing it.
2. **Real user turns** (§4.2). A transcript line counts as a turn the person
   took when it is a `user` line that is not `isMeta`, not an SDK compaction
   summary, holds non-blank text (so tool_result-only turns do not count), and
   whose text is not Claude Code plumbing (the history read's rule,
   `beebox_spec.transcript.is_plumbing_message`) nor consists only of self-notes.
3. **Qualification** (§4.2). One ordered table of gates; the first that fails
   names the skip reason: another machine's session, transcript missing,
   modified within the last 30 minutes, fewer than 2 real user turns,
   transcript gone when the span was read, fewer than 6,000 rendered characters
   of new material. A qualified session is scalars only; qualified sessions are
   reviewed oldest modification first.
4. **Rendering** (§4.4). Entries render as role headers with trimmed text and
   one line per tool call, tool results skipped, entries joined by a rule. The
   render is uncapped (the size gate measures it); what a model receives is
   elided to 40,000 characters, keeping `floor(max / 2)` characters at each end.
5. **The reviewer** (§4.5): the user prompt's four parts, the system prompt
   carrying the title rules of `docs/sources.md#review-titles`, and the schema its
   output must meet, checked by `validate_review_output` (a typed rejection names
   the field).
6. **The leak scan** (§4.10): one table of credential shapes. Chat review
   rejects a generated field only for a credential shape, never for a name, an
   email address or a place. Going further than the original
   (`docs/design.md#design-5-leak-scan`), the span text is redacted with the same
   table before it leaves the machine.
7. **Title ownership and the husk write** (§4.6): a hand-set title wins for
   good; the pass hashes the titles it writes, and recognises its own and the
   first-message snippet.

Three conventions hold throughout, because the original is JavaScript:

- *Lengths* are counted in Unicode code points (Python `len`). The original
  counts UTF-16 code units; the two differ only for characters outside the
  Basic Multilingual Plane (most emoji), where cutting by code units could
  split a character in two. **(deliberate difference)**
- *Whitespace* is JavaScript's: the set `\\s` and `trim()` use there
  (`beebox_spec.javascript`), which is not Python's `str.isspace()` (Python
  adds U+001C–U+001F and U+0085 and lacks U+FEFF).
- *Patterns* are ASCII-only where JavaScript's are: `\\w` is `[A-Za-z0-9_]`,
  `\\d` is `[0-9]`, and a word boundary `\\b` sees only those as word
  characters (`re.ASCII`, or the class spelled out).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Final, Literal, TypedDict, TypeGuard

from beebox_spec.entries import JsonValue, SessionEntry
from beebox_spec.errors import InvariantError, Rejection
from beebox_spec.javascript import (
    JS_SPACE_CLASS,
    JS_SPACE_CLASS_ITEMS,
    js_trim,
    js_trim_end,
    js_trim_start,
)
from beebox_spec.transcript import is_plumbing_message

__all__ = [
    "COMPACTION_PREFIX",
    "CONTAINS_MAX",
    "CREDENTIAL_PATTERNS",
    "DISCOVERY_GATES",
    "FIRST_MESSAGE_WINDOW",
    "MAX_RENDERED_CHARS",
    "NOTES_MAX",
    "NOTE_KINDS",
    "NOTE_MAX",
    "QUIESCENCE",
    "REDACTED_CREDENTIAL",
    "RENDERED_ENTRY_SEPARATOR",
    "REVIEWER_SYSTEM_PROMPT",
    "REVIEW_CHAR_THRESHOLD",
    "REVIEW_MIN_USER_TURNS",
    "SNIPPET_MAX_LEN",
    "TITLE_MAX",
    "BootstrapReason",
    "CredentialFinding",
    "CredentialPattern",
    "DiscoveryFacts",
    "DiscoveryGate",
    "HuskField",
    "HuskWritePlan",
    "NoteKind",
    "QualifiedSession",
    "ReviewArgs",
    "ReviewNote",
    "ReviewOutput",
    "ReviewOutputRejection",
    "SkipReason",
    "TitleOwner",
    "build_user_prompt",
    "claims_session",
    "content_hash",
    "count_real_user_turns",
    "elide_middle",
    "extract_snippet",
    "first_message_snippet",
    "first_real_user_snippet",
    "first_skip_reason",
    "has_credential",
    "has_enough_new_material",
    "has_enough_user_turns",
    "is_compaction_summary",
    "is_pure_self_note",
    "is_quiescent",
    "mask_data_uris",
    "order_for_review",
    "plan_husk_write",
    "read_husk_field",
    "real_user_turn_text",
    "redact_credentials",
    "render_account",
    "render_entries",
    "resolve_title_owner",
    "reviewer_span_text",
    "scan_credentials",
    "snippet_title_from",
    "strip_chat_app_tags",
    "strip_speech_wrappers",
    "validate_review_output",
]


# A run of JavaScript whitespace (`\s+`), collapsed to one space in snippets.
_JS_SPACE_RUN: Final = re.compile(JS_SPACE_CLASS + "+")


# ---------------------------------------------------------------------------
# §4.1 Snippets: the first user message, reduced to the words typed
# ---------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------
# §4.2 Real user turns, over raw transcript lines
# ---------------------------------------------------------------------------

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


def _is_json_object(value: JsonValue) -> TypeGuard[dict[str, JsonValue]]:
    return isinstance(value, dict)


def real_user_turn_text(line: JsonValue) -> str | None:
    """The text of a transcript line when it is a turn the person took, else None (§4.2 step 4).

    `line` is one transcript line as `parse_json_text` read it (unparsable lines
    never get here). It counts when all of these hold:

    - it is an object of `type` "user" with a `message` object;
    - it is not `isMeta` (text Claude Code injected) and not `isCompactSummary`
      (the SDK's post-compaction summary);
    - its content (a string, or the `text` blocks of a block list) has at least
      one block of non-blank text: a tool_result-only turn has none;
    - the non-blank texts, joined by "\\n" and trimmed, are neither plumbing,
      nor a compaction summary by its opening words, nor only self-notes.

    Plumbing is decided by `beebox_spec.transcript.is_plumbing_message`, the
    history read's rule. Its two strings, "Tool loaded." and "Todos have been
    modified…", are read off the original's code (`isPlumbingMessage`), not
    the spec sources: §4.2 says only that plumbing is excluded.

    The returned text is that joined, trimmed text. A block's `text` must be a
    string (JavaScript would coerce other values with `String()`; transcripts
    do not carry them).
    """
    # Only an object line can be a turn.
    if not _is_json_object(line):
        return None
    # Only a user line with a message object is a user turn.
    message = line.get("message")
    if line.get("type") != "user" or not _is_json_object(message):
        return None
    # Injected text and the SDK's compaction summary are not the person's words.
    if line.get("isMeta") is True or line.get("isCompactSummary") is True:
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
        if _is_json_object(block) and block.get("type") == "text":
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


# ---------------------------------------------------------------------------
# §4.2 Qualification: the gates, in order
# ---------------------------------------------------------------------------

# §4.2 QUIESCENCE_MS: a transcript modified more recently than this is still in use.
QUIESCENCE: Final = timedelta(minutes=30)
# §4.2: pre-elision rendered characters of the unread span needed for a review.
REVIEW_CHAR_THRESHOLD: Final = 6_000
# §4.2: real user turns in the whole session needed before it is reviewed at all.
REVIEW_MIN_USER_TURNS: Final = 2
# §4.2's `PARSE_LIMIT` (the span walk's page size, the most entries one review
# folds in) is `beebox_spec.journal.resolve_span`'s `limit`, whose default is
# `MAX_SESSION_ENTRIES`; it is not repeated here.


class SkipReason(StrEnum):
    """Why discovery passed over a husk; the values are the run summary's counters (§4.2, §4.7)."""

    FOREIGN_ORIGIN = "foreignOrigin"
    MISSING_TRANSCRIPT = "missingTranscripts"
    DEFERRED_ACTIVE = "deferredActive"
    TOO_FEW_TURNS = "tooFewTurns"
    BELOW_THRESHOLD = "belowThreshold"


def claims_session(husk_origin: str | None, local_origin: str) -> bool:
    """A machine reviews only sessions it originated; a husk with no origin predates the stamp."""
    return husk_origin is None or husk_origin == local_origin


def is_quiescent(mtime: datetime, now: datetime) -> bool:
    """True when the transcript has been unmodified for at least `QUIESCENCE`.

    Both times must be timezone-aware. A modification time in the future (clock
    skew) reads as active.
    """
    # Naive times cannot be compared with aware ones: a caller bug.
    if mtime.tzinfo is None or now.tzinfo is None:
        raise InvariantError("quiescence needs timezone-aware times")
    return now - mtime >= QUIESCENCE


def has_enough_user_turns(user_turns: int) -> bool:
    """At least `REVIEW_MIN_USER_TURNS` real user turns in the session."""
    return user_turns >= REVIEW_MIN_USER_TURNS


def has_enough_new_material(span_chars: int) -> bool:
    """At least `REVIEW_CHAR_THRESHOLD` rendered characters (pre-elision) in the unread span."""
    return span_chars >= REVIEW_CHAR_THRESHOLD


@dataclass(frozen=True)
class DiscoveryFacts:
    """What discovery learns about one husk, as scalars.

    `transcript_mtime` is None when the transcript is missing at the stat;
    `span_chars` is None when it was gone by the time the span was read. An
    implementation gathers these lazily, in the gates' order, and stops at the
    first gate that fails; fields a failed gate made unnecessary may hold any
    value.
    """

    husk_origin: str | None
    local_origin: str
    transcript_mtime: datetime | None
    user_turns: int
    span_chars: int | None


@dataclass(frozen=True)
class DiscoveryGate:
    """One row of the gate table: the reason recorded when `passes` is false."""

    reason: SkipReason
    passes: Callable[[DiscoveryFacts, datetime], bool]


def _origin_claimed(facts: DiscoveryFacts, now: datetime) -> bool:
    return claims_session(facts.husk_origin, facts.local_origin)


def _transcript_present(facts: DiscoveryFacts, now: datetime) -> bool:
    return facts.transcript_mtime is not None


def _quiet_long_enough(facts: DiscoveryFacts, now: datetime) -> bool:
    # Reached only after _transcript_present, so the mtime is known.
    assert facts.transcript_mtime is not None
    return is_quiescent(facts.transcript_mtime, now)


def _enough_turns(facts: DiscoveryFacts, now: datetime) -> bool:
    return has_enough_user_turns(facts.user_turns)


def _span_readable(facts: DiscoveryFacts, now: datetime) -> bool:
    return facts.span_chars is not None


def _enough_material(facts: DiscoveryFacts, now: datetime) -> bool:
    # Reached only after _span_readable, so the size is known.
    assert facts.span_chars is not None
    return has_enough_new_material(facts.span_chars)


# §4.2 "Per husk, in order": the first gate that fails names the skip. The
# transcript can vanish twice: at the stat, and between the stat and the span
# read. Exhaustion (§4.7 step 5) is deliberately not a gate: it belongs to a
# span, which is only known at review time.
DISCOVERY_GATES: Final[tuple[DiscoveryGate, ...]] = (
    DiscoveryGate(SkipReason.FOREIGN_ORIGIN, _origin_claimed),
    DiscoveryGate(SkipReason.MISSING_TRANSCRIPT, _transcript_present),
    DiscoveryGate(SkipReason.DEFERRED_ACTIVE, _quiet_long_enough),
    DiscoveryGate(SkipReason.TOO_FEW_TURNS, _enough_turns),
    DiscoveryGate(SkipReason.MISSING_TRANSCRIPT, _span_readable),
    DiscoveryGate(SkipReason.BELOW_THRESHOLD, _enough_material),
)


def first_skip_reason(facts: DiscoveryFacts, now: datetime) -> SkipReason | None:
    """The reason of the first gate the husk fails, or None when it qualifies."""
    for gate in DISCOVERY_GATES:
        if not gate.passes(facts, now):
            return gate.reason
    return None


# §4.3: why a span is read from the top instead of continuing the journal
# (defined here because a qualified session carries it; `beebox_spec.journal`
# decides it).
BootstrapReason = Literal["no-journal", "boundary-missing", "prefix-rewritten"]


@dataclass(frozen=True)
class QualifiedSession:
    """A session that passed every gate, as scalars only (§4.2 step 7).

    Nothing parsed is kept: the span is read again inside the review step, after
    the per-run cap, so only one session's entries are ever held at once.
    `bootstrap` is the span's bootstrap reason (None when it continues the
    journal); `snippet_title` is what `snippet_title_from` makes of the first
    real user snippet.
    """

    session_id: str
    husk_path: str
    log_path: str
    engine: str | None
    mtime: datetime
    span_chars: int
    bootstrap: BootstrapReason | None
    snippet_title: str | None


def snippet_title_from(first_user_snippet: str | None) -> str | None:
    """`firstUserSnippet.trim() || null`: the snippet a qualified session is compared against."""
    if first_user_snippet is None:
        return None
    return js_trim(first_user_snippet) or None


def order_for_review(sessions: Iterable[QualifiedSession]) -> list[QualifiedSession]:
    """Oldest modification first, ties in discovery order: a capped run serves the neglected."""
    return sorted(sessions, key=lambda session: session.mtime)


# ---------------------------------------------------------------------------
# §4.4 Rendering
# ---------------------------------------------------------------------------

# §4.4: the most characters of conversation a model is handed.
MAX_RENDERED_CHARS: Final = 40_000
# §4.4: what stands between two rendered entries.
RENDERED_ENTRY_SEPARATOR: Final = "\n\n---\n\n"


def _render_lines(entry: SessionEntry) -> list[str]:
    """One entry's lines: its role header, then one per visible text or tool call."""
    is_user = entry["type"] == "user"
    lines = [f"**{'User' if is_user else 'Agent'}** ({entry['timestamp']})"]
    for block in entry["content"]:
        kind = block.get("type")
        text = block.get("text", "")
        if kind == "text" and text:
            # The person's words lose their shells; either side is trimmed.
            shown = js_trim(strip_speech_wrappers(text)) if is_user else js_trim(text)
            # Text that trims to nothing adds no line.
            if shown:
                lines.append(shown)
        elif kind == "tool_use":
            tool = block.get("toolName", "")
            summary = block.get("inputSummary", "")
            lines.append(f"→ {tool}: {summary}" if summary else f"→ {tool}")
        # tool_result, thinking and image blocks add nothing.
    return lines


def render_entries(entries: Sequence[SessionEntry]) -> str:
    """Dialogue plus one-line tool summaries, uncapped (the original's `renderEntries`).

    Only `user` and `assistant` entries render, each as its lines joined by
    "\\n"; an entry that renders to its header line alone is dropped (counted
    in lines, not by looking for a newline: a timestamp may hold one); entries
    are joined by "\\n\\n---\\n\\n".
    """
    rendered = [_render_lines(entry) for entry in entries if entry["type"] in ("user", "assistant")]
    # A header alone means nothing visible survived.
    return RENDERED_ENTRY_SEPARATOR.join("\n".join(lines) for lines in rendered if len(lines) > 1)


def elide_middle(text: str, max: int = MAX_RENDERED_CHARS) -> str:
    """Cut the middle out of a text longer than `max`, keeping both ends.

    A text of at most `max` characters is returned unchanged. Otherwise the
    first and the last `floor(max / 2)` characters are kept around the marker
    "\\n\\n… (<N> chars of conversation elided) …\\n\\n", N = length − max. With
    an odd `max` one more character is dropped than N says (as in the original).
    """
    # A negative bound has no meaning (JavaScript's slicing would clamp it).
    if max < 0:
        raise InvariantError(f"elision bound must not be negative, got {max}")
    # Short enough: nothing is elided.
    if len(text) <= max:
        return text
    half = max // 2
    omitted = len(text) - max
    return (
        text[:half]
        + f"\n\n… ({omitted} chars of conversation elided) …\n\n"
        + text[len(text) - half :]
    )


def reviewer_span_text(entries: Sequence[SessionEntry]) -> str:
    """The span text a reviewer receives: rendered, redacted, elided, redacted again.

    §4.7 step 7 sends `elideMiddle(renderEntries(entries), 40000)`. Going
    further (`docs/design.md#design-5-leak-scan`), credential shapes are redacted
    before the text leaves the machine: once before eliding, so a key cut in half
    by the elision cannot slip through as a fragment, and once after, because
    cutting can expose a shape that a word boundary hid. The size gate still
    measures the render (`beebox_spec.journal.span_size`), not this text.
    """
    return redact_credentials(
        elide_middle(redact_credentials(render_entries(entries)), MAX_RENDERED_CHARS)
    )


# ---------------------------------------------------------------------------
# §4.5 The reviewer: its input, its prompts, the schema of its output
# ---------------------------------------------------------------------------

# §4.5 named the original's reviewer model and its agent limits (4 turns, $0.25 a
# session). Ours is one tool-less model request a session, its input bounded by
# `MAX_RENDERED_CHARS` and its output by the reviewer's own token cap, so neither
# limit has anything to bound (`docs/spec-decisions.md`).

# §4.5 output schema bounds.
TITLE_MAX: Final = 80
CONTAINS_MAX: Final = 200
NOTES_MAX: Final = 40
NOTE_MAX: Final = 280

NoteKind = Literal["decision", "open-thread", "follow-up", "learned"]
NOTE_KINDS: Final[tuple[NoteKind, ...]] = ("decision", "open-thread", "follow-up", "learned")
_NOTE_KIND_BY_NAME: Final[dict[str, NoteKind]] = {kind: kind for kind in NOTE_KINDS}


class ReviewNote(TypedDict):
    """One item of the running account."""

    kind: NoteKind
    text: str


class ReviewOutput(TypedDict):
    """What a reviewer returns: `title` "" keeps the existing one; `notes` is the FULL account."""

    title: str
    contains: str
    notes: list[ReviewNote]


class ReviewOutputRejection(Rejection):
    """A reviewer's output breaks the §4.5 schema; `field` says where (e.g. `notes[2].kind`)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"review output {field}: {problem}")
        self.field = field
        self.problem = problem


def _string_field(value: JsonValue, field: str, min_len: int, max_len: int) -> str:
    # The field must be a string.
    if not isinstance(value, str):
        raise ReviewOutputRejection(field, "must be a string")
    # Too short: an empty `contains` or note says nothing.
    if len(value) < min_len:
        raise ReviewOutputRejection(field, f"must be at least {min_len} characters")
    # Too long for where it is shown.
    if len(value) > max_len:
        raise ReviewOutputRejection(field, f"must be at most {max_len} characters")
    return value


def validate_review_output(obj: JsonValue) -> ReviewOutput:
    """Check a reviewer's output against the §4.5 schema; return it with unknown keys dropped.

    `title`: a string of at most 80 characters with no "\\n" ("" keeps the
    existing title). `contains`: 1..200 characters. `notes`: a list of at most
    40 objects, each `{kind, text}` with `kind` one of `NOTE_KINDS` and `text`
    1..280 characters. The first violation raises `ReviewOutputRejection`
    naming its field. Unknown keys are dropped, as the original's zod object
    schema does. **(inference: zod's default `strip`)**
    """
    # The output must be an object.
    if not _is_json_object(obj):
        raise ReviewOutputRejection("(output)", "must be an object")
    # Every field must be present.
    for field in ("title", "contains", "notes"):
        if field not in obj:
            raise ReviewOutputRejection(field, "is missing")
    title = _string_field(obj["title"], "title", 0, TITLE_MAX)
    # A title is one line.
    if "\n" in title:
        raise ReviewOutputRejection("title", "must be a single line")
    contains = _string_field(obj["contains"], "contains", 1, CONTAINS_MAX)
    raw_notes = obj["notes"]
    # The account must be a list.
    if not isinstance(raw_notes, list):
        raise ReviewOutputRejection("notes", "must be a list")
    # The account must stay short enough to read.
    if len(raw_notes) > NOTES_MAX:
        raise ReviewOutputRejection("notes", f"must have at most {NOTES_MAX} items")
    notes: list[ReviewNote] = []
    for index, raw_note in enumerate(raw_notes):
        where = f"notes[{index}]"
        # Each note must be an object.
        if not _is_json_object(raw_note):
            raise ReviewOutputRejection(where, "must be an object")
        raw_kind = raw_note.get("kind")
        kind = _NOTE_KIND_BY_NAME.get(raw_kind) if isinstance(raw_kind, str) else None
        # A note's kind must be one of the four.
        if kind is None:
            raise ReviewOutputRejection(f"{where}.kind", f"must be one of {', '.join(NOTE_KINDS)}")
        text = _string_field(raw_note.get("text"), f"{where}.text", 1, NOTE_MAX)
        notes.append({"kind": kind, "text": text})
    return {"title": title, "contains": contains, "notes": notes}


def render_account(notes: Sequence[ReviewNote]) -> str:
    """The account as `contains-evidence` holds it: `- <kind>: <text>` lines ("" for none)."""
    return "\n".join(f"- {note['kind']}: {note['text']}" for note in notes)


@dataclass(frozen=True)
class ReviewArgs:
    """What the reviewer is given for one session (§4.5 `ReviewArgs`).

    `current_title` and `current_account` are the husk's fields (None when
    absent or empty); `span` is already rendered and elided; `bootstrap` is
    true when the span is the conversation read from the top.
    """

    session_id: str
    current_title: str | None
    current_account: str | None
    span: str
    bootstrap: bool


def build_user_prompt(args: ReviewArgs) -> str:
    """The per-session prompt: the four parts of §4.5 joined by "\\n\\n"."""
    title_part = (
        "This conversation has no title yet."
        if args.current_title is None
        else f"Current title: {args.current_title}"
    )
    account_part = (
        "You have not summarized this conversation before."
        if args.current_account is None
        else f"The account you wrote last time:\n\n{args.current_account}"
    )
    span_intro = (
        "What follows is the whole conversation so far. If it is long, its middle may be elided."
        if args.bootstrap
        else "What follows is only the NEW part of the conversation since you last looked."
    )
    return "\n\n".join([title_part, account_part, span_intro, args.span])


# §4.5 and `docs/sources.md#review-titles` ("Titles hold back; everything else doesn't").
REVIEWER_SYSTEM_PROMPT: Final = """\
You read one conversation between a person (the boxholder) and their assistant, \
and you write down what it came to: a title, a one-sentence `contains`, and an \
account made of short, kinded notes.

Most of the time you are shown only the NEW part of a conversation you have \
summarized before, together with the account you wrote last time. Extend that \
account rather than starting over: carry forward the notes that still hold, \
revise the ones the new material changes, drop the ones that are settled and no \
longer worth keeping, and add what is new. The earlier conversation is not in \
front of you; your previous account is the only record of it. Return the whole \
updated account, not just the changes.

Report only what the conversation shows. Do not invent anything. An empty list \
of notes is a normal result for a routine conversation.

## contains and the account: explicit and specific

`contains` is one sentence saying what can be found in this conversation. Each \
note is one line of one kind: decision (something settled), open-thread \
(something raised and still open), follow-up (something someone meant to do) or \
learned (something lasting about the boxholder, their situation or their \
preferences). Both are the lasting record of a conversation whose transcript \
will be deleted, so make them as explicit and specific as they need to be: \
names, amounts, dates, the actual property, the actual question, what was \
decided. Whatever you leave out is lost. The restraint described below for \
titles does not apply here.

## The title: the one place to hold back

Titles are shown in lists, and lists get read in places the conversation never \
anticipated: on a shared screen, over someone's shoulder, in a screenshot. So \
the test is not "is this private?" but: would the boxholder wince if someone \
nearby read this title?

- Names, places, dates, figures and other specifics are fine; they are what \
makes a title findable again. "Road trip to Keene, July 8-11" and "Indigo's \
custodial account paperwork" are good titles. Do not strip them out.
- Avoid the wince: health problems, money trouble, conflict with a named \
person, anything intimate, anything that reflects badly on someone or reveals \
a judgement about them.
- When a conversation genuinely is about one of those, name the shape rather \
than the sting: enough to find it again, not enough to embarrass anyone who \
reads it cold.
- Most conversations need none of this. Give them a clear, specific title.

A title is also a human-readable label, not a data dump: no email addresses, \
URLs, ids or long numbers. They are not secret, but in a list they read as noise \
and crowd out the words that help someone recognise the conversation; if such a \
detail matters, put it in `contains` or the account.

Keep the title to one line of at most 80 characters. Return an empty title when \
the current title still fits the conversation, so titles do not churn from one \
night to the next.

Use no tools. Work only from the text you are given.
"""


# ---------------------------------------------------------------------------
# §4.10 The leak scan: credential shapes
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CredentialPattern:
    """One credential shape: its name, its pattern, and whether `data:` URIs are masked first."""

    name: str
    pattern: re.Pattern[str]
    on_masked_text: bool


# §4.10: the one table of credential shapes, translated from JavaScript with
# ASCII `\w`, `\d` and `\b`; every pattern is applied to every match position
# (the original's `/g`). Only the catch-all runs on text whose `data:` URIs are
# masked, so an inlined image does not trip it.
CREDENTIAL_PATTERNS: Final[tuple[CredentialPattern, ...]] = (
    # Google API key: `AIza` and 35 URL-safe base64 characters (no leading \b).
    CredentialPattern("Google API key", re.compile(r"AIza[A-Za-z0-9_-]{35}"), False),
    # OpenAI-style secret key: `sk-` and a run of 20 or more (covers `sk-proj-…`).
    CredentialPattern("OpenAI API key", re.compile(r"\bsk-[A-Za-z0-9_-]{20,}", re.ASCII), False),
    # GitHub tokens: `gho_`, `ghp_`, `ghr_`, `ghs_`, `ghu_` and 20 or more alphanumerics.
    CredentialPattern("GitHub token", re.compile(r"\bgh[oprsu]_[0-9A-Za-z]{20,}", re.ASCII), False),
    # Slack bot/user token: `xoxb-` / `xoxp-` and 10 or more of alphanumerics and dashes.
    CredentialPattern("Slack token", re.compile(r"\bxox[bp]-[0-9A-Za-z-]{10,}", re.ASCII), False),
    # JWT: three base64url segments of 10 or more, the first starting `eyJ` (`{"`).
    CredentialPattern(
        "JWT",
        re.compile(r"\b(?:eyJ[A-Za-z0-9_-]{10,}\.){2}[A-Za-z0-9_-]{10,}", re.ASCII),
        False,
    ),
    # Catch-all: 40 or more base64/hex characters between word boundaries.
    CredentialPattern(
        "long base64/hex run", re.compile(r"\b[0-9+/A-Za-z]{40,}={0,2}\b", re.ASCII), True
    ),
)

# `data:` and everything up to whitespace, a quote, a parenthesis or an angle bracket.
_DATA_URI = re.compile(r"data:[^" + JS_SPACE_CLASS_ITEMS + r"\"'()<>]*")

# What a redacted credential reads as.
REDACTED_CREDENTIAL: Final = "[redacted credential]"


def mask_data_uris(text: str) -> str:
    """Replace every `data:` URI by as many dots, so offsets stay valid (a URI holds no newline)."""
    return _DATA_URI.sub(lambda match: "." * len(match.group()), text)


@dataclass(frozen=True)
class CredentialFinding:
    """One credential shape found: which pattern, where (`start`, `end`), and the matched text."""

    pattern: str
    start: int
    end: int
    text: str


def scan_credentials(text: str) -> list[CredentialFinding]:
    """Every credential shape in `text`, pattern by pattern in table order, left to right."""
    masked = mask_data_uris(text)
    findings: list[CredentialFinding] = []
    for row in CREDENTIAL_PATTERNS:
        scanned = masked if row.on_masked_text else text
        for match in row.pattern.finditer(scanned):
            start, end = match.span()
            findings.append(CredentialFinding(row.name, start, end, text[start:end]))
    return findings


def has_credential(text: str) -> bool:
    """True when any credential shape occurs in `text` (what rejects a generated field)."""
    return bool(scan_credentials(text))


def redact_credentials(text: str) -> str:
    """`text` with every credential shape replaced by `REDACTED_CREDENTIAL`.

    Overlapping or touching findings (a JWT segment is also a long run) are
    merged and replaced once. Replacing can expose a new shape — a key glued
    to the end of another (`…0sk-…` has no word boundary before `sk-`; after
    the first is redacted, `]sk-…` has one) — so the result is scanned again
    until no shape remains. This ends: a finding never includes the marker's
    characters, so each round removes text that was there before.
    """
    while findings := scan_credentials(text):
        text = _replace_spans(text, [(finding.start, finding.end) for finding in findings])
    return text


def _replace_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """Replace the union of `spans` with one marker per merged stretch."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        # Overlapping or touching: one stretch.
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    pieces: list[str] = []
    position = 0
    for start, end in merged:
        pieces.extend([text[position:start], REDACTED_CREDENTIAL])
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


# ---------------------------------------------------------------------------
# §4.6 Title ownership and the husk write
# ---------------------------------------------------------------------------

TitleOwner = Literal["unmanaged", "generated", "manual"]


def content_hash(text: str) -> str:
    """The first 16 hex digits of SHA-256 over the UTF-8 text (§4.3 `contentHash`).

    Used for the titles the pass writes (§4.6) and, through
    `beebox_spec.journal`, for the prefix hash and span ids. A lone surrogate
    (possible in a Python string read from a JSON escape) is encoded as U+FFFD,
    as JavaScript encodes it. **(inference: Node's UTF-8 encoder)**
    """
    well_formed = re.sub("[\ud800-\udfff]", "\ufffd", text)
    return hashlib.sha256(well_formed.encode("utf-8")).hexdigest()[:16]


def resolve_title_owner(
    stored_owner: TitleOwner,
    stored_hash: str | None,
    live_title: str | None,
    snippet_title: str | None,
) -> TitleOwner:
    """Who owns the husk's title now, from the card as it is at write time (§4.6).

    1. A title once found hand-set stays `manual`.
    2. A husk with no title is `unmanaged`: nothing to protect.
    3. Once the pass has written a title (a stored hash), the live title is
       `generated` if it still hashes the same, else a person edited it: `manual`.
    4. Before the first write (no hash), the first-message snippet is ours to
       replace (`unmanaged`); any other title was put there by a person (`manual`).
    """
    # Rule 1: a hand-set title wins for good.
    if stored_owner == "manual":
        return "manual"
    # Rule 2: no title on the card.
    if live_title is None:
        return "unmanaged"
    # Rule 3: we wrote a title; is it still ours?
    if stored_hash is not None:
        return "generated" if content_hash(live_title) == stored_hash else "manual"
    # Rule 4: first review; only the reproducible snippet is ours.
    return "unmanaged" if live_title == snippet_title else "manual"


def read_husk_field(value: JsonValue) -> str | None:
    """A husk front-matter field as review reads it: a non-empty string, else None (§4.6)."""
    return value if isinstance(value, str) and value != "" else None


HuskField = Literal["title", "contains", "contains-evidence"]


@dataclass(frozen=True)
class HuskWritePlan:
    """The one card write a review makes (§4.6), and what it leaves in the journal.

    `title`, `contains` and `contains_evidence` are the values to set, None
    where the field is left as it is. `review_span_applied` says whether the
    `review-span` marker is written (every field passed the leak scan);
    `rejected` names the fields the scan dropped; `title_owner` and
    `title_hash` are the session's title state after the write.
    """

    title: str | None
    contains: str | None
    contains_evidence: str | None
    review_span_applied: bool
    rejected: tuple[HuskField, ...]
    title_owner: TitleOwner
    title_hash: str | None


def plan_husk_write(
    output: ReviewOutput, owner: TitleOwner, stored_hash: str | None
) -> HuskWritePlan:
    """Apply the §4.6 rules to a validated output, given the owner resolved from the live card.

    Each generated field is leak-scanned (`title` only when offered, i.e. not
    ""; an empty field passes) and only a credential shape rejects it. The
    title is written when clean and the owner is not `manual`. The span counts
    as applied only when nothing was rejected: a dropped account means the span
    was not folded in and must be retried. Afterwards the owner is `generated`
    if a title was written, else unchanged; the hash is that of the written
    title, else None for a manual title, else the stored hash.
    """
    account = render_account(output["notes"])
    rejected: list[HuskField] = []
    title_offered = output["title"] != ""
    # An offered title carrying a credential shape is dropped.
    title_clean = title_offered and not has_credential(output["title"])
    if title_offered and not title_clean:
        rejected.append("title")
    # `contains` carrying a credential shape is dropped.
    contains_clean = not has_credential(output["contains"])
    if not contains_clean:
        rejected.append("contains")
    # The account carrying a credential shape is dropped.
    account_clean = not has_credential(account)
    if not account_clean:
        rejected.append("contains-evidence")
    # A hand-set title is never touched.
    write_title = title_clean and owner != "manual"
    if write_title:
        title_owner: TitleOwner = "generated"
        title_hash: str | None = content_hash(output["title"])
    else:
        title_owner = owner
        title_hash = None if owner == "manual" else stored_hash
    return HuskWritePlan(
        title=output["title"] if write_title else None,
        contains=output["contains"] if contains_clean else None,
        contains_evidence=account if account_clean else None,
        review_span_applied=not rejected,
        rejected=tuple(rejected),
        title_owner=title_owner,
        title_hash=title_hash,
    )
