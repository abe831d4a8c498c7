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
- **Evidence.** What the person said, and what the agent added. An agent's
  sentence that repeats one of the person's earlier sentences of the span —
  nearly all of its words, in order, in one piece — has those words taken out;
  what is left is the agent's own, and the sentence is judged by it alone. An
  echo (the echo engine's `You said: "…"`) or a restatement ("Got it, we'll go
  with …") leaves no content word, and is no evidence at all: neither a note
  nor a term for `contains` (`_agents_own`).
- **The account.** Sentences that record a decision, an open question, a
  follow-up or something learned about the person become notes. The kind is
  the first of `_RULES` whose wording the sentence holds: a label ("Decision:",
  "TODO:"), doubt ("not sure", "haven't decided": still open), a decision
  stated ("we decided", "we will", "let's go with"), something learned (the
  person's sentences only), a follow-up ("I'll", "tomorrow"), something
  pending ("waiting for"); else the person's last question of the span is an
  open thread. A stated decision is a decision even when it also names a time.
  The previous account is *extended*: its notes are carried forward, an open
  thread that a new decision settles (most of its words recur in it) is
  dropped, duplicates are not added twice, and when the account would pass
  `NOTES_MAX` the oldest follow-ups, then open threads, then decisions give
  way first.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Final

from beebox_spec.js_values import js_trim
from beebox_spec.review.leak_scan import REDACTED_CREDENTIAL
from beebox_spec.review.rendering import RENDERED_ENTRY_SEPARATOR
from beebox_spec.review.reviewer import (
    CONTAINS_MAX,
    NOTE_KINDS,
    NOTE_MAX,
    NOTES_MAX,
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
        "i'd",
        "you'll",
        "you've",
        "you'd",
        "we'll",
        "we've",
        "we'd",
        "they'll",
        "they've",
        "it'll",
        "said",
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

# ---------------------------------------------------------------------------
# What kind of note a sentence makes: the rules, each with its wording table,
# tried in the order of `_RULES`; the first that matches names the kind.
# ---------------------------------------------------------------------------

# Rule 1: a sentence that opens with a label ("Decision: …", "TODO: …") is what
# its label says, whatever wording follows it.
_LABELS: Final[dict[NoteKind, tuple[str, ...]]] = {
    "decision": ("decision", "decided", "agreed", "final decision", "the plan"),
    "follow-up": ("todo", "to-do", "to do", "follow-up", "follow up", "action item", "next step"),
    "open-thread": ("open question", "question", "undecided", "unresolved", "tbd"),
}

# Rule 2: doubt — something is not settled, or a decision's wording is denied.
# Before rule 3, which would read "decided", "confirmed" or "we will" as settled.
_IN_DOUBT: Final = (
    "haven't decided",
    "have not decided",
    "hasn't decided",
    "not decided",
    "not yet decided",
    "undecided",
    "to be decided",
    "yet to decide",
    "still deciding",
    "can't decide",
    "cannot decide",
    "decide whether",
    "decide if",
    "whether we will",
    "not confirmed",
    "isn't confirmed",
    "unconfirmed",
    "not booked",
    "haven't booked",
    "not agreed",
    "not sure",
    "unsure",
    "unclear",
    "open question",
    "tbd",
    "still open",
    "no answer yet",
    "we'll see",
    "we will see",
)

# Rule 3: a decision, stated. Before the follow-up wording: "we will buy it on
# Saturday" is what was settled, not only something to do.
_DECISION: Final = (
    "decided",
    "decide to",
    "we will",
    "we'll go with",
    "i'll go with",
    "let's go with",
    "going with",
    "went with",
    "settled on",
    "agreed",
    "we chose",
    "i chose",
    "chosen",
    "booked",
    "confirmed",
    "will use",
    "we'll use",
    "i'll use",
    "let's use",
    "the plan is",
    "final pick",
    "final choice",
    "finally pick",
)

# Rule 4: something lasting about the person — only the person says it.
_RELATIONS: Final = (
    "wife",
    "husband",
    "partner",
    "son",
    "daughter",
    "kid",
    "kids",
    "dog",
    "cat",
    "mom",
    "mother",
    "dad",
    "father",
    "sister",
    "brother",
    "birthday",
    "name",
    "budget",
    "job",
    "boss",
)
_LEARNED: Final = (
    "i prefer",
    "i like",
    "i love",
    "i hate",
    "i don't like",
    "i can't stand",
    "i'm allergic",
    "i am allergic",
    "i live",
    "i work",
    "i always",
    "i never",
    "i usually",
    *(f"my {who}" for who in _RELATIONS),
)

# Rule 5: something someone means to do.
_FOLLOW_UP: Final = (
    "i'll",
    "i will",
    "we'll",
    "remind me",
    "next step",
    "follow up",
    "follow-up",
    "to-do",
    "todo",
    "don't forget",
    "tomorrow",
    "next week",
    "later today",
    "by friday",
    "by monday",
)

# Rule 6: something waiting on someone or something; after the follow-ups, as
# "I'll figure out the parking" is something to do.
_PENDING: Final = (
    "still need to",
    "figure out",
    "whether or not",
    "waiting on",
    "waiting for",
)


def _wording(phrases: tuple[str, ...]) -> re.Pattern[str]:
    """Any of the phrases, as whole words, in any case."""
    return re.compile(r"\b(?:" + "|".join(map(re.escape, phrases)) + r")\b", re.IGNORECASE)


def _label(phrases: tuple[str, ...]) -> re.Pattern[str]:
    """A sentence opening with one of the phrases and a colon."""
    return re.compile(r"^(?:" + "|".join(map(re.escape, phrases)) + r")\s*:", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class _Rule:
    """One classification rule: the kind it gives, its wording, and whose sentences it reads."""

    kind: NoteKind
    pattern: re.Pattern[str]
    person_only: bool = False


_RULES: Final[tuple[_Rule, ...]] = (
    *(_Rule(kind, _label(labels)) for kind, labels in _LABELS.items()),
    _Rule("open-thread", _wording(_IN_DOUBT)),
    _Rule("decision", _wording(_DECISION)),
    _Rule("learned", _wording(_LEARNED), person_only=True),
    _Rule("follow-up", _wording(_FOLLOW_UP)),
    _Rule("open-thread", _wording(_PENDING)),
)

# ---------------------------------------------------------------------------
# An agent repeating the person (see `_agents_own`)
# ---------------------------------------------------------------------------

# A sentence of the person is repeated when at least 4 in 5 of its words come
# back, in order, in one piece (at most 1 word in 5 changed inside it).
_REPEAT_SHARE: Final = (4, 5)
# A sentence of the person with fewer content words ("Yes, I will.") is too
# common a string of words to be told apart from the agent's own.
_MIN_REPEAT_CONTENT: Final = 2


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


@dataclass(frozen=True, slots=True)
class _Sentence:
    """A sentence as written (a note's text) and `own`: what its speaker added (`_agents_own`)."""

    text: str
    own: str


@dataclass(frozen=True, slots=True)
class _HeardTurn:
    """A turn's sentences, and `own_text`: its words less any it repeats of the person."""

    is_user: bool
    sentences: tuple[_Sentence, ...]
    own_text: str


def _word_key(word: str) -> str:
    return word.lower().replace("’", "'")


def _agents_own(sentence: str, person: list[tuple[str, ...]]) -> str:
    """What an agent's sentence adds to the person's earlier sentences (`person`, as word keys).

    A stretch of the agent's words that carries nearly all of one of the person's
    sentences (`_REPEAT_SHARE`: in order, in one piece, a word in five changed at
    most) is the person's, and is taken out. What is left is the agent's own; ""
    when it holds no content word — `You said: "…"`, "Got it, we'll …": an echo or
    a restatement, not evidence.
    """
    matches = list(_WORD.finditer(sentence))
    words = [_word_key(match.group()) for match in matches]
    present = set(words)
    share, whole = _REPEAT_SHARE
    repeated = [False] * len(words)
    for said in person:
        # Cheap necessary test first: enough of its words occur at all.
        if sum(word in present for word in said) * whole < share * len(said):
            continue
        matcher = SequenceMatcher(None, words, said, autojunk=False)
        blocks = [block for block in matcher.get_matching_blocks() if block.size]
        matched = sum(block.size for block in blocks)
        if not blocks or matched * whole < share * len(said):
            continue
        start, end = blocks[0].a, blocks[-1].a + blocks[-1].size
        if (end - start - matched) * whole > (whole - share) * len(said):
            continue
        repeated[start:end] = [True] * (end - start)
    if not any(repeated):
        return sentence
    pieces: list[str] = []
    kept_from = 0
    for index, match in enumerate(matches):
        if repeated[index] and (index == 0 or not repeated[index - 1]):
            pieces.append(sentence[kept_from : match.start()])
        if repeated[index]:
            kept_from = match.end()
    pieces.append(sentence[kept_from:])
    own = " ".join(" ".join(pieces).split())
    return own if _content_words(own) else ""


def _heard(turns: list[SpanTurn]) -> list[_HeardTurn]:
    """The span's turns as sentences, each agent sentence with what it adds to the person."""
    person: list[tuple[str, ...]] = []
    heard: list[_HeardTurn] = []
    for turn in turns:
        texts = _sentences(turn.text)
        if turn.is_user:
            heard.append(
                _HeardTurn(True, tuple(_Sentence(text, text) for text in texts), turn.text)
            )
            person += (
                tuple(_word_key(word) for word in _words(text))
                for text in texts
                if len(_content_words(text)) >= _MIN_REPEAT_CONTENT
            )
            continue
        sentences = tuple(_Sentence(text, _agents_own(text, person)) for text in texts)
        repeats = any(sentence.own != sentence.text for sentence in sentences)
        own_text = "\n".join(sentence.own for sentence in sentences) if repeats else turn.text
        heard.append(_HeardTurn(False, sentences, own_text))
    return heard


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


def _title_from(turns: list[_HeardTurn], casing: _Casing) -> tuple[str, bool]:
    """A title from the person's first substantial request (True), else from keywords (False)."""
    for turn in turns:
        if not turn.is_user:
            continue
        for sentence in turn.sentences:
            request = _clean_request(sentence.text)
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


def _keywords(turns: list[_HeardTurn], exclude: set[str], count: int, casing: _Casing) -> list[str]:
    """The content words the conversation returns to most (the person's words count double).

    An agent's repeats of the person do not count again (`_agents_own`).
    """
    scores: Counter[str] = Counter()
    first_seen: dict[str, int] = {}
    for turn in turns:
        for word in _words(_TITLE_NOISE.sub(" ", turn.own_text)):
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


def _contains(topic: str, is_request: bool, turns: list[_HeardTurn], casing: _Casing) -> str:
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


def _classify(sentence: str, is_user: bool) -> NoteKind | None:
    """The kind of the first rule of `_RULES` the sentence matches (None: no note)."""
    text = sentence.replace("’", "'")
    for rule in _RULES:
        if (is_user or not rule.person_only) and rule.pattern.search(text):
            return rule.kind
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


def _new_notes(turns: list[_HeardTurn]) -> list[ReviewNote]:
    notes: list[ReviewNote] = []
    last_user = max((index for index, turn in enumerate(turns) if turn.is_user), default=-1)
    for index, turn in enumerate(turns):
        for sentence in turn.sentences:
            text = sentence.text
            if len(_words(text)) < _MIN_NOTE_WORDS or REDACTED_CREDENTIAL in text:
                continue
            # Judged by what its speaker added: an agent's repeat of the person is
            # the person's note already.
            kind = _classify(sentence.own, turn.is_user)
            # The person's last question of the span is still waiting for its answer.
            if kind is None and index == last_user and text.endswith("?"):
                kind = "open-thread"
            if kind is not None:
                notes.append({"kind": kind, "text": _note_text(text)})
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
        spoken = parse_rendered_span(args.span)
        casing = _Casing([turn.text for turn in spoken] + [args.current_account or ""])
        turns = _heard(spoken)
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
