"""The `extractive` reviewer: deterministic, offline, the embedded default.

It writes only what it can point to in the text it is given — no model, no
network, the same answer for the same input — and follows the reviewer's brief
(`REVIEWER_SYSTEM_PROMPT`) as far as rules can:

- **Title.** From the person's first substantial request in the span: its first
  sentence, with openers ("can you", "please", "I'd like to", …) and fillers
  taken off, emails, URLs, ids, long numbers and redaction markers removed (a
  title is a label, not a data dump), each word cased as the conversation most
  often cases it ("keene" → "Keene"), cut at a word to at most 80 characters. On
  an increment (not read from the top) the current title is kept (""), so
  titles do not churn from night to night.
- **contains.** One sentence: what the conversation is about (the title's
  phrase) and the terms it keeps returning to.
- **The account.** Sentences that record a decision, an open question, a
  follow-up or something learned about the person, each recognised by its
  wording, become notes. The previous account is *extended*: its notes are
  carried forward, an open thread that a new decision settles (most of its
  words recur in it) is dropped, duplicates are not added twice, and when the
  account would pass `NOTES_MAX` the oldest follow-ups, then open threads, then
  decisions give way first.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Final

from beebox_spec.javascript import js_trim
from beebox_spec.review import (
    CONTAINS_MAX,
    NOTE_KINDS,
    NOTE_MAX,
    NOTES_MAX,
    REDACTED_CREDENTIAL,
    RENDERED_ENTRY_SEPARATOR,
    TITLE_MAX,
    NoteKind,
    ReviewArgs,
    ReviewNote,
    ReviewOutput,
)

__all__ = ["ExtractiveReviewer", "SpanTurn", "parse_rendered_span"]

# `render_entries`' role headers.
_HEADER: Final = re.compile(r"^\*\*(User|Agent)\*\* \(.*\)$")
_ELISION: Final = re.compile(r"^… \(\d+ chars of conversation elided\) …$")

# At most this many new notes from one span: an account, not a transcript.
_NEW_NOTES_PER_SPAN: Final = 12
# A note shorter than this many words says too little to keep.
_MIN_NOTE_WORDS: Final = 4

_STOPWORDS: Final = frozenset(
    (
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "also",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "done",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "get",
        "got",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "let",
        "like",
        "make",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "need",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "ok",
        "okay",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "please",
        "really",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "sure",
        "than",
        "thank",
        "thanks",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "use",
        "very",
        "want",
        "was",
        "we",
        "well",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "yes",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "one",
        "two",
        "also",
        "maybe",
        "think",
        "know",
        "going",
        "go",
        "see",
        "look",
        "looks",
        "lets",
        "let's",
        "i'm",
        "i've",
        "i'll",
        "you're",
        "we're",
        "it's",
        "that's",
        "there's",
        "don't",
        "doesn't",
        "didn't",
        "can't",
        "won't",
        "isn't",
        "aren't",
        "here's",
        "something",
        "anything",
        "everything",
        "thing",
        "things",
        "way",
        "much",
        "many",
        "lot",
        "new",
        "good",
        "great",
        "right",
        "time",
    )
)

# Openers and fillers a title does not need, taken off the front again and again.
_OPENERS: Final = re.compile(
    r"^(?:hi|hello|hey|ok|okay|so|well|yes|no|thanks|thank you|great|cool|quick question|"
    r"please|pls|can you|could you|would you|will you|can we|could we|should we|can i|could i|"
    r"help me(?: to)?|i need(?: you)? to|i want(?: you)? to|i'd like(?: you)? to|"
    r"i would like(?: you)? to|let's|lets|i'm trying to|i am trying to|we need to|"
    r"i was wondering if you could|i wonder if you could)\b[\s,:;!.-]*",
    re.IGNORECASE,
)
_TRAILERS: Final = re.compile(r"(?:[\s,]+(?:please|for me|thanks|thank you))+[\s?.!]*$", re.I)
# Title noise (a titling-quality rule of the brief): emails, URLs, ids, long numbers.
_TITLE_NOISE: Final = re.compile(
    r"\S+@\S+\.\S+"
    r"|https?://\S+|www\.\S+"
    r"|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"
    r"|\b(?=[0-9a-z]*[0-9])(?=[0-9a-z]*[a-z])[0-9a-z]{12,}\b"
    r"|\b\d{5,}\b"
    r"|" + re.escape(REDACTED_CREDENTIAL),
    re.IGNORECASE,
)
_WEAK: Final = ("ed", "ly")
_WORD: Final = re.compile(r"[A-Za-z][A-Za-z'’-]*[A-Za-z]|[A-Za-z]")
_SENTENCE_END: Final = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")
_MARKDOWN_PREFIX: Final = re.compile(r"^\s*(?:[-*+•]|\d+[.)]|#+|>)\s+")

# The wording that marks each kind of note, checked in this order.
_CUES: Final[tuple[tuple[NoteKind, re.Pattern[str]], ...]] = (
    (
        "decision",
        re.compile(
            r"\b(?:decided|decide to|we'll go with|i'll go with|let's go with|going with|"
            r"settled on|agreed|we chose|i chose|chosen|booked|confirmed|went with|"
            r"will use|we'll use|i'll use|let's use|the plan is|final(?:ly)? (?:pick|choice))\b",
            re.IGNORECASE,
        ),
    ),
    (
        "learned",
        re.compile(
            r"\b(?:i prefer|i like|i love|i hate|i don't like|i can't stand|i'm allergic|"
            r"i am allergic|i live|i work|i always|i never|i usually|"
            r"my (?:wife|husband|partner|son|daughter|kids?|dog|cat|mom|mother|dad|father|"
            r"sister|brother|birthday|name|budget|job|boss))\b",
            re.IGNORECASE,
        ),
    ),
    (
        "follow-up",
        re.compile(
            r"\b(?:i'll|i will|we'll|we will|remind me|next step|follow up|follow-up|"
            r"to-do|todo|don't forget|tomorrow|next week|later today|by friday|by monday)\b",
            re.IGNORECASE,
        ),
    ),
    (
        "open-thread",
        re.compile(
            r"\b(?:not sure|still need to|haven't decided|undecided|open question|tbd|"
            r"to be decided|unclear|we'll see|figure out|whether or not|still open|"
            r"no answer yet|waiting on|waiting for)\b",
            re.IGNORECASE,
        ),
    ),
)


@dataclass(frozen=True, slots=True)
class SpanTurn:
    """One entry of a rendered span: who spoke, and the lines of text (tool lines apart)."""

    is_user: bool
    text: str
    tools: tuple[str, ...]


def parse_rendered_span(span: str) -> list[SpanTurn]:
    """Read a span rendered by `render_entries` (and maybe elided) back into turns."""
    turns: list[SpanTurn] = []
    for chunk in span.split(RENDERED_ENTRY_SEPARATOR):
        lines = [line for line in chunk.split("\n") if not _ELISION.match(line.strip())]
        is_user = False
        if lines and (header := _HEADER.match(lines[0])):
            is_user = header.group(1) == "User"
            lines = lines[1:]
        tools = tuple(line[2:] for line in lines if line.startswith("→ "))
        text = "\n".join(line for line in lines if not line.startswith("→ "))
        if text.strip() or tools:
            turns.append(SpanTurn(is_user, text, tools))
    return turns


def _sentences(text: str) -> list[str]:
    """Sentences of a text: split at line breaks and sentence ends, markdown marks removed."""
    found: list[str] = []
    for raw_line in text.split("\n"):
        line = _MARKDOWN_PREFIX.sub("", raw_line).replace("**", "").replace("`", "")
        for piece in _SENTENCE_END.split(line):
            sentence = " ".join(piece.split())
            if sentence:
                found.append(sentence)
    return found


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


def _content_words(text: str) -> set[str]:
    return {word.lower() for word in _words(text) if word.lower() not in _STOPWORDS}


def _cut_at_word(text: str, limit: int, ellipsis: str = "") -> str:
    """`text` cut at a word boundary to at most `limit` characters (ellipsis included)."""
    if len(text) <= limit:
        return text
    room = limit - len(ellipsis)
    cut = text[:room]
    space = cut.rfind(" ")
    if space > room // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:-–—") + ellipsis


class _Casing:
    """How the conversation most often spells each word (proper nouns keep their capital)."""

    def __init__(self, texts: list[str]) -> None:
        # A sentence's first word is capitalised by grammar, not by name.
        spellings = Counter(
            word for text in texts for sentence in _sentences(text) for word in _words(sentence)[1:]
        )
        # Each word's spellings with their counts, in the order they first appear.
        self._forms: dict[str, dict[str, int]] = {}
        for word, count in spellings.items():
            self._forms.setdefault(word.lower(), {})[word] = count

    def case(self, word: str) -> str:
        forms = self._forms.get(word.lower())
        if not forms:
            return word
        # The most frequent spelling; ties go to the capitalised one (a name is a name).
        return max(forms.items(), key=lambda item: (item[1], item[0][:1].isupper()))[0]


def _clean_request(sentence: str) -> str:
    text = _TITLE_NOISE.sub("", sentence)
    text = " ".join(text.split())
    previous = None
    while previous != text:
        previous = text
        text = _OPENERS.sub("", text).strip()
    text = _TRAILERS.sub("", text)
    return text.strip(" \t,;:-–—?!.\"'()[]")


def _title_from(turns: list[SpanTurn], casing: _Casing) -> tuple[str, bool]:
    """A title from the person's first substantial request (True), else from keywords (False)."""
    for turn in turns:
        if not turn.is_user:
            continue
        for sentence in _sentences(turn.text):
            request = _clean_request(sentence)
            words = request.split(" ")
            # Too short to say what the conversation is about: try the next sentence.
            if len(_content_words(request)) < 2:
                continue
            cased = [casing.case(word) if _WORD.fullmatch(word) else word for word in words]
            title = " ".join(cased)
            title = title[:1].upper() + title[1:]
            return _cut_at_word(title, TITLE_MAX), True
    keywords = _keywords(turns, set(), 3, casing)
    if keywords:
        return _cut_at_word("About " + _join_words(keywords), TITLE_MAX), False
    return "", False


def _keywords(turns: list[SpanTurn], exclude: set[str], count: int, casing: _Casing) -> list[str]:
    """The content words the conversation returns to most (the person's words count double)."""
    scores: Counter[str] = Counter()
    first_seen: dict[str, int] = {}
    for turn in turns:
        for word in _words(_TITLE_NOISE.sub(" ", turn.text)):
            lower = word.lower()
            # Short words, past tenses and adverbs rarely name what a conversation is about.
            if lower in _STOPWORDS or lower in exclude or len(lower) < 4 or lower.endswith(_WEAK):
                continue
            scores[lower] += 2 if turn.is_user else 1
            first_seen.setdefault(lower, len(first_seen))
    ranked = sorted(scores, key=lambda word: (-scores[word], first_seen[word]))
    return [casing.case(word) for word in ranked[:count] if scores[word] > 1]


def _join_words(words: list[str]) -> str:
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " and " + words[-1]


def _contains(topic: str, is_request: bool, turns: list[SpanTurn], casing: _Casing) -> str:
    """One sentence: the request (or the title's subject) and the terms the span returns to."""
    keywords = _keywords(turns, _content_words(topic), 3, casing)
    subject = topic[:1].lower() + topic[1:] if topic[1:2].islower() else topic
    if not subject:
        sentence = "A conversation"
    elif is_request:
        sentence = f"The boxholder asked to {subject}"
    else:
        sentence = f"A conversation about {subject}"
    if keywords:
        sentence += f"; it covers {_join_words(keywords)}"
    return _cut_at_word(sentence, CONTAINS_MAX - 1).rstrip(".?!") + "."


def _classify(sentence: str) -> NoteKind | None:
    for kind, cue in _CUES:
        if cue.search(sentence):
            return kind
    return None


def _note_text(sentence: str) -> str:
    return _cut_at_word(js_trim(sentence), NOTE_MAX, "…")


def _key(text: str) -> str:
    return " ".join(word.lower() for word in _words(text))


def _previous_notes(account: str | None) -> list[ReviewNote]:
    """The notes of an account as `render_account` wrote it (`- <kind>: <text>` lines)."""
    notes: list[ReviewNote] = []
    for line in (account or "").split("\n"):
        for kind in NOTE_KINDS:
            prefix = f"- {kind}: "
            if line.startswith(prefix) and line[len(prefix) :].strip():
                notes.append({"kind": kind, "text": line[len(prefix) :].strip()[:NOTE_MAX]})
                break
    return notes


def _new_notes(turns: list[SpanTurn]) -> list[ReviewNote]:
    notes: list[ReviewNote] = []
    last_user = max((index for index, turn in enumerate(turns) if turn.is_user), default=-1)
    for index, turn in enumerate(turns):
        for sentence in _sentences(turn.text):
            if len(_words(sentence)) < _MIN_NOTE_WORDS or REDACTED_CREDENTIAL in sentence:
                continue
            kind = _classify(sentence)
            # The person's last question of the span is still waiting for its answer.
            if kind is None and index == last_user and sentence.endswith("?"):
                kind = "open-thread"
            # Only the person says what they are like.
            if kind == "learned" and not turn.is_user:
                kind = None
            if kind is not None:
                notes.append({"kind": kind, "text": _note_text(sentence)})
    return notes


def _settles(decision: ReviewNote, thread: ReviewNote) -> bool:
    """A decision settles an open thread when most of the thread's words recur in it."""
    thread_words = _content_words(thread["text"])
    if not thread_words:
        return False
    return len(thread_words & _content_words(decision["text"])) * 2 >= len(thread_words) + 1


def _extend(previous: list[ReviewNote], new: list[ReviewNote]) -> list[ReviewNote]:
    seen = {_key(note["text"]) for note in previous}
    added: list[ReviewNote] = []
    for note in new:
        if _key(note["text"]) in seen or len(added) == _NEW_NOTES_PER_SPAN:
            continue
        seen.add(_key(note["text"]))
        added.append(note)
    decisions = [note for note in added if note["kind"] == "decision"]
    carried = [
        note
        for note in previous
        if not (note["kind"] == "open-thread" and any(_settles(done, note) for done in decisions))
    ]
    account = carried + added
    # Over the bound: the oldest of the least lasting kinds give way first.
    for kind in ("follow-up", "open-thread", "decision", "learned"):
        while len(account) > NOTES_MAX:
            oldest = next((note for note in account if note["kind"] == kind), None)
            if oldest is None:
                break
            account.remove(oldest)
    return account[:NOTES_MAX]


class ExtractiveReviewer:
    """Deterministic, offline review (see the module docstring)."""

    name: Final = "extractive"
    is_local: Final = True

    def review(self, args: ReviewArgs) -> ReviewOutput:
        turns = parse_rendered_span(args.span)
        casing = _Casing([turn.text for turn in turns] + [args.current_account or ""])
        generated, is_request = _title_from(turns, casing)
        keep_title = args.current_title is not None and not args.bootstrap
        title = "" if keep_title or not generated else generated
        if keep_title and args.current_title:
            topic, is_request = _cut_at_word(args.current_title, TITLE_MAX), False
        else:
            topic = generated
        notes = _extend(_previous_notes(args.current_account), _new_notes(turns))
        return {
            "title": title,
            "contains": _contains(topic, is_request, turns, casing),
            "notes": notes,
        }
