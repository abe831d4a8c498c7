"""The files chat review keeps: the span journal, and discovery's cache.

**The journal** (`.beebox/chat-review/state.json`, §4.3) is read with the spec's
`parse_review_state` — a missing, unparsable or malformed file gives a fresh
state, warned about unless simply missing — and written as the spec's
`serialize_review_state` writes it (the bytes JavaScript's `JSON.stringify(state,
null, 2) + "\\n"` would write), atomically and durably (`write_atomic`). A run
saves the whole journal after every session, so `ReviewStateText` keeps each
session's entry as text and serialises again only the entries that changed: a
save costs the sessions reviewed since the last, not every session of the box
(the property tests hold it to the spec's bytes).

**The discovery cache** (ours) remembers, per husk file, what discovery last
learned and the file identities it learned it from: the husk's own fields (valid
while the husk's inode, size and modification time are the same) and the
transcript's facts — real user turns, first snippet, the unread span's size and
bootstrap reason — valid while the transcript's identity *and* the session's
journal entry are the same. So `status` on a box where nothing changed reads no
transcript at all, only a stat per husk and per transcript. A walk also marks
where it counted to (`GrowthMark`: the end of its last complete line, a digest
of every byte before it, and the span's size in entries and rendered pieces), so
facts of the same file grown longer are counted on over the appended lines only
(`discovery._count_on`). It is only a cache: a missing or unreadable one is
rebuilt, and a stale entry is never used.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from beebox_impl.atomic import write_atomic
from beebox_impl.files import FileIdentity
from beebox_impl.review.paths import discovery_cache_path, state_path
from beebox_spec.js_values import js_json_stringify, js_property_order
from beebox_spec.review.journal import (
    METADATA_CONSUMER,
    BootstrapReason,
    ReviewState,
    SessionReviewState,
    StateLoad,
    parse_review_state,
    session_state_json,
)

__all__ = [
    "CACHE_VERSION",
    "CachedHusk",
    "CachedTranscript",
    "DiscoveryCache",
    "GrowthMark",
    "ReviewStateFile",
    "ReviewStateText",
    "journal_span_id",
]

_log = logging.getLogger(__name__)

# Bumped whenever what the cache means changes; an older cache is dropped.
# 3: a task notification is neither a real user turn nor an entry (spec: transcript rule 4).
# 4: a sub-agent's user line is not a real user turn (spec: `review.turns`).
CACHE_VERSION = 4


class ReviewStateText:
    """`beebox_spec.review.journal.serialize_review_state`, remembering each session's text.

    ``serialize_review_state`` is ``JSON.stringify({lastRunAt, sessions}, null, 2)``:
    each session's entry sits at one depth (two gaps) inside ``sessions``, so its
    text is the entry's own stringification (`session_state_json`) with every line
    after the first indented two gaps more (a JSON string holds no raw newline). An
    entry is the same text while it is the same object: a state is never changed in
    place (`with_session` makes a new one), so an entry not replaced since the last
    call is not serialised again.
    """

    _GAP = "  "

    def __init__(self) -> None:
        self._entries: dict[str, tuple[SessionReviewState, str]] = {}

    def __call__(self, state: ReviewState) -> str:
        sessions = state["sessions"]
        inner = self._GAP * 2
        members = [
            self._member(session_id, sessions[session_id])
            for session_id in js_property_order(sessions)
        ]
        # Entries no longer in the state are forgotten with it.
        for gone in self._entries.keys() - sessions.keys():
            del self._entries[gone]
        sessions_text = (
            "{\n" + inner + f",\n{inner}".join(members) + "\n" + self._GAP + "}"
            if members
            else "{}"
        )
        last_run = js_json_stringify(state["lastRunAt"])
        return (
            f'{{\n{self._GAP}"lastRunAt": {last_run},\n{self._GAP}"sessions": {sessions_text}\n}}\n'
        )

    def _member(self, session_id: str, session: SessionReviewState) -> str:
        known = self._entries.get(session_id)
        if known is not None and known[0] is session:
            return known[1]
        entry = js_json_stringify(session_state_json(session), indent=len(self._GAP))
        text = js_json_stringify(session_id) + ": " + entry.replace("\n", "\n" + self._GAP * 2)
        self._entries[session_id] = (session, text)
        return text


class ReviewStateFile:
    """The span journal of one box."""

    def __init__(self, box_root: Path) -> None:
        self.path = state_path(box_root)
        self._text = ReviewStateText()

    def load(self) -> StateLoad:
        """The state, or a fresh one (with the problem) when the file is missing or bad."""
        try:
            text: str | None = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = None
        except (OSError, UnicodeDecodeError) as error:
            _log.warning("chat review state %s unreadable (%s): starting fresh", self.path, error)
            text = ""
        loaded = parse_review_state(text)
        if loaded.problem not in (None, "missing"):
            _log.warning("chat review state %s is %s: starting fresh", self.path, loaded.problem)
        return loaded

    def save(self, state: ReviewState) -> None:
        """Write the whole state atomically (temp file, fsync, rename)."""
        write_atomic(self.path, self._text(state).encode("utf-8"))


def journal_span_id(session: SessionReviewState) -> str | None:
    """The span id the session's journal entry records, None when there is none."""
    applied = session["applied"].get(METADATA_CONSUMER)
    return applied["spanId"] if applied is not None else None


@dataclass(frozen=True, slots=True)
class CachedHusk:
    """A husk's discovery fields, as read from the husk at `identity`."""

    identity: FileIdentity
    session: str
    origin: str | None
    engine: str | None
    context_dir: str | None


@dataclass(frozen=True, slots=True)
class GrowthMark:
    """Where the facts of a transcript were counted to, so that facts of the same file
    grown longer can be counted on from there (discovery's `status` after a night).

    `end` is the end of the last complete line counted (`line_count` lines),
    `prefix` the digest of every byte before it (`walk.raw_prefix_digest`, hex). The span the facts
    measured held `span_entries` entries, of which `span_pieces` rendered to
    something (`span_chars` is those pieces and the separators between them).
    """

    end: int
    line_count: int
    prefix: str
    span_entries: int
    span_pieces: int

    def as_json(self) -> list[int | str]:
        """The mark as the cache stores it."""
        return [self.end, self.line_count, self.prefix, self.span_entries, self.span_pieces]

    @classmethod
    def from_json(cls, value: Any) -> GrowthMark | None:
        """A mark read back from the cache (None when it is not one)."""
        if not isinstance(value, list) or len(value) != 5:
            return None
        end, lines, prefix, entries, pieces = value
        if not isinstance(prefix, str) or not all(
            type(number) is int and number >= 0 for number in (end, lines, entries, pieces)
        ):
            return None
        return cls(end, lines, prefix, entries, pieces)


@dataclass(frozen=True, slots=True)
class CachedTranscript:
    """What a walk of the transcript at `identity` found, against journal entry `journal`
    (and, when it can be counted on from there, where it counted to: `growth`)."""

    identity: FileIdentity
    journal: str | None
    user_turns: int
    first_user_snippet: str | None
    span_chars: int
    bootstrap: BootstrapReason | None
    growth: GrowthMark | None = None


_BOOTSTRAPS: dict[str, BootstrapReason] = {
    "no-journal": "no-journal",
    "boundary-missing": "boundary-missing",
    "prefix-rewritten": "prefix-rewritten",
}


class DiscoveryCache:
    """Discovery's per-husk cache for one box (see the module docstring)."""

    def __init__(self, box_root: Path) -> None:
        self.path = discovery_cache_path(box_root)
        self._husks: dict[str, CachedHusk] = {}
        self._transcripts: dict[str, CachedTranscript] = {}
        self._dirty = False
        self._load()

    def _load(self) -> None:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as error:
            _log.info("discovery cache %s unreadable (%s): rebuilding", self.path, error)
            return
        if not isinstance(raw, dict) or raw.get("version") != CACHE_VERSION:
            return
        husks = raw.get("husks")
        if not isinstance(husks, dict):
            return
        for name, record in husks.items():
            if isinstance(record, dict):
                self._load_record(name, record)

    def _load_record(self, name: str, record: dict[str, Any]) -> None:
        identity = FileIdentity.from_json(record.get("husk"))
        session = record.get("session")
        if identity is None or not isinstance(session, str):
            return
        self._husks[name] = CachedHusk(
            identity,
            session,
            _optional_str(record.get("origin")),
            _optional_str(record.get("engine")),
            _optional_str(record.get("contextDir")),
        )
        facts = record.get("transcript")
        if not isinstance(facts, dict):
            return
        transcript = FileIdentity.from_json(facts.get("identity"))
        turns = facts.get("userTurns")
        chars = facts.get("spanChars")
        bootstrap = facts.get("bootstrap")
        if (
            transcript is None
            or type(turns) is not int
            or type(chars) is not int
            or not (bootstrap is None or bootstrap in _BOOTSTRAPS)
        ):
            return
        self._transcripts[name] = CachedTranscript(
            transcript,
            _optional_str(facts.get("journal")),
            turns,
            _optional_str(facts.get("snippet")),
            chars,
            None if bootstrap is None else _BOOTSTRAPS[bootstrap],
            GrowthMark.from_json(facts.get("growth")),
        )

    def husk(self, name: str, identity: FileIdentity) -> CachedHusk | None:
        """The cached fields of husk `name`, if read from the same file as it is now."""
        cached = self._husks.get(name)
        return cached if cached is not None and cached.identity == identity else None

    def transcript(
        self, name: str, identity: FileIdentity, journal: str | None
    ) -> CachedTranscript | None:
        """The cached walk of husk `name`'s transcript, if still valid for the file and journal."""
        cached = self._transcripts.get(name)
        if cached is None or cached.identity != identity or cached.journal != journal:
            return None
        return cached

    def grown_transcript(
        self, name: str, identity: FileIdentity, journal: str | None
    ) -> CachedTranscript | None:
        """The cached walk of husk `name`'s transcript if the file is the same one, now
        longer, against the same journal entry, and the walk marked where it counted to
        (the caller checks the bytes there are unchanged)."""
        cached = self._transcripts.get(name)
        if cached is None or cached.growth is None or cached.journal != journal:
            return None
        return cached if identity.grew_past(cached.identity, cached.growth.end) else None

    def remember_husk(self, name: str, husk: CachedHusk) -> None:
        """Record a husk's fields; a changed husk forgets its transcript facts."""
        if self._husks.get(name) != husk:
            self._husks[name] = husk
            self._dirty = True

    def remember_transcript(self, name: str, facts: CachedTranscript) -> None:
        """Record what a walk found."""
        if self._transcripts.get(name) != facts:
            self._transcripts[name] = facts
            self._dirty = True

    def forget_transcript(self, name: str) -> None:
        """Drop husk `name`'s transcript facts (its journal moved in a way not recorded)."""
        if self._transcripts.pop(name, None) is not None:
            self._dirty = True

    def keep_only(self, names: set[str]) -> None:
        """Forget husks that are gone."""
        for table in (self._husks, self._transcripts):
            for name in [name for name in table if name not in names]:
                del table[name]
                self._dirty = True

    def save(self) -> None:
        """Write the cache if it changed (a failure only costs the next discovery time)."""
        if not self._dirty:
            return
        husks: dict[str, Any] = {}
        for name, husk in self._husks.items():
            record: dict[str, Any] = {
                "husk": husk.identity.as_json(),
                "session": husk.session,
                "origin": husk.origin,
                "engine": husk.engine,
                "contextDir": husk.context_dir,
            }
            facts = self._transcripts.get(name)
            if facts is not None:
                record["transcript"] = {
                    "identity": facts.identity.as_json(),
                    "journal": facts.journal,
                    "userTurns": facts.user_turns,
                    "snippet": facts.first_user_snippet,
                    "spanChars": facts.span_chars,
                    "bootstrap": facts.bootstrap,
                    "growth": None if facts.growth is None else facts.growth.as_json(),
                }
            husks[name] = record
        text = json.dumps({"version": CACHE_VERSION, "husks": husks}, ensure_ascii=False)
        try:
            write_atomic(self.path, text.encode("utf-8"))
        except OSError as error:
            _log.warning("discovery cache %s not written: %s", self.path, error)
            return
        self._dirty = False


def _optional_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
