"""`beebox_spec.review.journal`: hashes, span resolution, the state file, decisions."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from beebox_spec.entries import EntryType, JsonValue, SessionContentBlock, SessionEntry
from beebox_spec.errors import InvariantError
from beebox_spec.js_values import to_iso_timestamp
from beebox_spec.review.husk import HuskWritePlan, TitleOwner, content_hash, plan_husk_write
from beebox_spec.review.journal import (
    MAX_REVIEW_ATTEMPTS,
    METADATA_CONSUMER,
    AppliedSpan,
    JournalBoundary,
    ResolvedSpan,
    ReviewState,
    SessionAction,
    SessionReviewState,
    applied_span_for,
    fresh_review_state,
    fresh_session_state,
    is_exhausted,
    is_rewrite,
    next_session_action,
    parse_review_state,
    prefix_hash,
    resolve_span,
    review_state_from_json,
    serialize_review_state,
    session_state,
    span_id,
    span_id_for,
    span_size,
    state_after_already_applied,
    state_after_reviewer_failure,
    state_after_run,
    state_after_write,
    with_session,
)
from beebox_spec.review.rendering import elide_middle, render_entries

T_USER = "2026-07-28T03:00:00Z"
NOW_ISO = "2026-07-28T04:00:00.000Z"


def user(uuid: str, text: str) -> SessionEntry:
    return {
        "uuid": uuid,
        "type": "user",
        "timestamp": T_USER,
        "content": [{"type": "text", "text": text}],
    }


def sha16(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


A, B, C, D = (
    user("u-a", "first"),
    user("u-b", "second"),
    user("u-c", "third"),
    user("u-d", "fourth"),
)


def part(entry: SessionEntry, rendered: str) -> str:
    return f"{entry['uuid']}\u0000{rendered}"


def boundary_at(entries: Sequence[SessionEntry], index: int) -> JournalBoundary:
    """A journal entry as a successful review of entries 0..index would have left it."""
    return {
        "endUuid": entries[index]["uuid"],
        "endIndex": index,
        "prefixHash": prefix_hash(entries, index),
    }


def uuids(span: ResolvedSpan) -> list[str]:
    return [entry["uuid"] for entry in span["entries"]]


# ---------------------------------------------------------------------------
# Hashes
# ---------------------------------------------------------------------------


def test_prefix_hash_is_uuid_nul_rendering_joined_by_newlines() -> None:
    expected = sha16(
        part(A, f"**User** ({T_USER})\nfirst") + "\n" + part(B, f"**User** ({T_USER})\nsecond")
    )
    assert prefix_hash([A, B, C], 1) == expected
    assert prefix_hash([A, B, C], -1) == sha16("")
    assert prefix_hash([A, B], 5) == prefix_hash([A, B], 1)


def test_prefix_hash_rejects_an_index_below_minus_one() -> None:
    with pytest.raises(InvariantError):
        prefix_hash([A, B], -2)


def test_prefix_hash_sees_content_not_only_identity() -> None:
    assert prefix_hash([user("u-a", "first, REVISED")], 0) != prefix_hash([A], 0)
    # A change the rendering does not show is not seen either.
    with_result: SessionEntry = {
        **A,
        "content": [*A["content"], {"type": "tool_result", "toolUseId": "t", "resultSummary": "x"}],
    }
    assert prefix_hash([with_result], 0) == prefix_hash([A], 0)


def test_span_id() -> None:
    p = prefix_hash([A, B], 1)
    assert span_id("s1", "u-b", p) == sha16(f"s1\nu-b\n{p}")
    assert span_id("s1", "u-b", p) != span_id("s2", "u-b", p)
    assert span_id("s1", "u-b", p) != span_id("s1", "u-b", prefix_hash([user("u-z", "x"), B], 1))


def test_content_hash_is_the_reviews() -> None:
    assert content_hash("Keene") == sha16("Keene")


# ---------------------------------------------------------------------------
# resolve_span: examples
# ---------------------------------------------------------------------------


def test_no_journal_reads_everything() -> None:
    span = resolve_span([A, B, C], None)
    assert (uuids(span), span["endIndex"], span["bootstrap"], span["clipped"]) == (
        ["u-a", "u-b", "u-c"],
        2,
        "no-journal",
        False,
    )
    assert span["endPrefixHash"] == prefix_hash([A, B, C], 2)


def test_empty_span_after_a_matching_boundary_ends_at_minus_one() -> None:
    span = resolve_span([A, B], boundary_at([A, B], 1))
    assert span == {
        "entries": [],
        "endIndex": -1,
        "endPrefixHash": None,
        "bootstrap": None,
        "clipped": False,
    }
    assert span_id_for("s1", span) is None
    assert applied_span_for("s1", span, NOW_ISO) is None


def test_empty_transcript_bootstrap() -> None:
    span = resolve_span([], None)
    assert span == {
        "entries": [],
        "endIndex": -1,
        "endPrefixHash": None,
        "bootstrap": "no-journal",
        "clipped": False,
    }


def test_empty_boundary_uuid_is_no_identity() -> None:
    anonymous = user("", "anonymous")
    span = resolve_span(
        [anonymous, A], {"endUuid": "", "endIndex": 0, "prefixHash": prefix_hash([anonymous], 0)}
    )
    assert span["bootstrap"] == "boundary-missing"


def test_limit_must_be_positive() -> None:
    with pytest.raises(InvariantError):
        resolve_span([A], None, 0)


def test_the_first_occurrence_of_the_boundary_uuid_decides() -> None:
    early = user("u-b", "early")
    assert resolve_span([early, A, B, C], boundary_at([A, B], 1))["bootstrap"] == "prefix-rewritten"
    later = user("u-b", "again")
    assert uuids(resolve_span([A, B, C, later], boundary_at([A, B], 1))) == ["u-c", "u-b"]


# ---------------------------------------------------------------------------
# resolve_span: properties
# ---------------------------------------------------------------------------

UUID_ALPHABET = "abcdef0123456789-"
WORDS = st.text(alphabet="abcdefgh XYZ.,!é😀\n\t", max_size=20)


def text_block(text: str) -> SessionContentBlock:
    return {"type": "text", "text": text}


def tool_use_block(name: str, summary: str) -> SessionContentBlock:
    return {
        "type": "tool_use",
        "toolName": name,
        "toolId": "toolu_1",
        "inputSummary": summary,
        "input": {},
    }


def tool_result_block(summary: str) -> SessionContentBlock:
    return {"type": "tool_result", "toolUseId": "toolu_1", "resultSummary": summary}


BLOCKS = st.one_of(
    st.builds(text_block, WORDS),
    st.builds(tool_use_block, st.sampled_from(["Read", "Bash"]), st.sampled_from(["", "/a.txt"])),
    st.builds(tool_result_block, WORDS),
)


def make_entry(
    uuid: str, kind: EntryType, timestamp: str, content: list[SessionContentBlock]
) -> SessionEntry:
    return {"uuid": uuid, "type": kind, "timestamp": timestamp, "content": content}


def entry_for(uuid: str) -> st.SearchStrategy[SessionEntry]:
    return st.builds(
        make_entry,
        st.just(uuid),
        st.sampled_from(["user", "assistant"]),
        st.sampled_from([T_USER, "2026-07-28T03:00:01Z", ""]),
        st.lists(BLOCKS, max_size=3),
    )


@st.composite
def transcripts(draw: st.DrawFn, min_size: int = 0, max_size: int = 12) -> list[SessionEntry]:
    """Entries with unique, non-empty uuids (the boundary must be an identity)."""
    ids = draw(
        st.lists(
            st.text(alphabet=UUID_ALPHABET, min_size=1, max_size=6),
            unique=True,
            min_size=min_size,
            max_size=max_size,
        )
    )
    return [draw(entry_for(uuid)) for uuid in ids]


LIMITS = st.integers(min_value=1, max_value=6)


@given(transcripts(min_size=2), st.data(), LIMITS)
def test_appended_entries_are_exactly_the_span(
    entries: list[SessionEntry], data: st.DataObject, limit: int
) -> None:
    cut = data.draw(st.integers(min_value=1, max_value=len(entries)))
    journaled, appended = entries[:cut], entries[cut:]
    first = resolve_span(journaled, None, len(journaled))
    applied = applied_span_for("s1", first, NOW_ISO)
    assert applied is not None
    span = resolve_span(entries, applied, limit)
    assert span["bootstrap"] is None
    assert span["entries"] == appended[:limit]
    assert span["clipped"] == (len(appended) > limit)
    if appended:
        assert span["endIndex"] == cut - 1 + len(appended[:limit])
        assert span["endPrefixHash"] == prefix_hash(entries, span["endIndex"])
    else:
        assert (span["endIndex"], span["endPrefixHash"]) == (-1, None)


def changed_text(entry: SessionEntry) -> SessionEntry:
    """The entry with its rendering changed: a "Z" after its first text, or a text block "Z"."""
    content = list(entry["content"])
    for index, block in enumerate(content):
        if block.get("type") == "text":
            content[index] = text_block(block.get("text", "") + "Z")
            break
    else:
        content.append(text_block("Z"))
    return {**entry, "content": content}


EDITS = ["text", "uuid", "delete", "insert"]


@given(transcripts(min_size=1), st.data(), st.sampled_from(EDITS), LIMITS)
def test_edits_at_or_before_the_boundary_force_a_bootstrap(
    entries: list[SessionEntry], data: st.DataObject, edit: str, limit: int
) -> None:
    boundary = data.draw(st.integers(min_value=0, max_value=len(entries) - 1), label="boundary")
    at = data.draw(st.integers(min_value=0, max_value=boundary), label="edited index")
    applied = boundary_at(entries, boundary)
    edited = list(entries)
    if edit == "text":
        edited[at] = changed_text(entries[at])
    elif edit == "uuid":
        edited[at] = {**entries[at], "uuid": "new-" + entries[at]["uuid"]}
    elif edit == "delete":
        del edited[at]
    else:
        edited.insert(at, user("new-entry", "inserted"))
    # Only losing the boundary entry itself (its uuid) makes the boundary missing;
    # every other edit leaves it findable with a different history before it.
    boundary_gone = edit in ("uuid", "delete") and at == boundary
    span = resolve_span(edited, applied, limit)
    assert span["bootstrap"] == ("boundary-missing" if boundary_gone else "prefix-rewritten")
    assert span["entries"] == edited[:limit]
    assert span["endIndex"] == min(len(edited), limit) - 1
    assert span["clipped"] == (len(edited) > limit)


@given(transcripts(), LIMITS)
def test_bootstrap_takes_the_first_window(entries: list[SessionEntry], limit: int) -> None:
    span = resolve_span(entries, None, limit)
    assert span["bootstrap"] == "no-journal"
    assert span["entries"] == entries[:limit]
    assert span["clipped"] == (len(entries) > limit)
    assert span["endPrefixHash"] == (
        prefix_hash(entries, span["endIndex"]) if span["entries"] else None
    )


@given(transcripts(), LIMITS)
def test_nightly_runs_walk_the_transcript_exactly_once(
    entries: list[SessionEntry], limit: int
) -> None:
    applied: AppliedSpan | None = None
    read: list[SessionEntry] = []
    nights = 0
    while True:
        span = resolve_span(entries, applied, limit)
        assert span["bootstrap"] == ("no-journal" if applied is None else None)
        if not span["entries"]:
            break
        read.extend(span["entries"])
        applied = applied_span_for("s1", span, NOW_ISO)
        assert applied is not None
        nights += 1
        assert nights <= len(entries)
    assert read == entries


# The original's paged walk (§4.3 `resolveSpan`), transcribed as an oracle. A
# page may come back short of the limit (the scan's byte budget) without ending
# the transcript; only an empty page or reaching `total` ends the walk. The
# bootstrap asks for one page of `limit`, which the reader fills.
def paged_resolve(
    entries: Sequence[SessionEntry],
    applied: JournalBoundary | None,
    limit: int,
    short: Callable[[int], int],
) -> ResolvedSpan:
    def read_page(offset: int, size: int) -> list[SessionEntry]:
        return list(entries[offset : offset + size])

    def bootstrap(reason: str) -> ResolvedSpan:
        page = read_page(0, limit)
        return {
            "entries": page,
            "endIndex": len(page) - 1,
            "endPrefixHash": prefix_hash(page, len(page) - 1) if page else None,
            "bootstrap": reason,  # type: ignore[typeddict-item]
            "clipped": len(page) < len(entries),
        }

    if applied is None:
        return bootstrap("no-journal")
    if applied["endUuid"] == "":
        return bootstrap("boundary-missing")
    hasher = hashlib.sha256()
    count = 0
    retained: list[SessionEntry] = []
    found = False
    offset = 0
    end_index = -1
    clipped = False
    while True:
        page = read_page(offset, short(offset))
        for i, entry in enumerate(page):
            if found:
                if len(retained) >= limit:
                    clipped = True
                    break
                retained.append(entry)
                end_index = offset + i
            hasher.update(
                (("\n" if count else "") + part(entry, render_entries([entry]))).encode("utf-8")
            )
            count += 1
            if not found and entry["uuid"] == applied["endUuid"]:
                if hasher.copy().hexdigest()[:16] != applied["prefixHash"]:
                    return bootstrap("prefix-rewritten")
                found = True
        offset += len(page)
        if clipped or not page or offset >= len(entries):
            break
    if not found:
        return bootstrap("boundary-missing")
    return {
        "entries": retained,
        "endIndex": end_index,
        "endPrefixHash": hasher.hexdigest()[:16] if retained else None,
        "bootstrap": None,
        "clipped": clipped,
    }


@st.composite
def journals(draw: st.DrawFn, entries: list[SessionEntry]) -> JournalBoundary | None:
    """No journal, one true to a prefix, a stale hash, a vanished boundary, or an empty uuid."""
    kind = draw(st.sampled_from(["none", "true", "stale", "vanished", "empty-uuid"]))
    if kind == "none":
        return None
    if kind in ("true", "stale") and entries:
        index = draw(st.integers(min_value=0, max_value=len(entries) - 1))
        boundary = boundary_at(entries, index)
        if kind == "stale":
            boundary["prefixHash"] = "0123456789abcdef"
        return boundary
    uuid = "" if kind == "empty-uuid" else "gone"
    return {"endUuid": uuid, "endIndex": 0, "prefixHash": "0123456789abcdef"}


@given(transcripts(), st.data(), LIMITS)
def test_plain_list_resolution_equals_the_paged_walk(
    entries: list[SessionEntry], data: st.DataObject, limit: int
) -> None:
    applied = data.draw(journals(entries))
    page_sizes = data.draw(
        st.lists(st.integers(min_value=1, max_value=limit), min_size=1, max_size=4)
    )
    expected = paged_resolve(
        entries, applied, limit, lambda offset: page_sizes[offset % len(page_sizes)]
    )
    assert resolve_span(entries, applied, limit) == expected


def test_span_size_is_the_uncapped_render() -> None:
    long = [user(f"u-{i}", "x" * 200) for i in range(500)]
    span = resolve_span(long, None)
    assert span_size(span) == len(render_entries(long)) > 40_000
    assert len(elide_middle(render_entries(long))) < span_size(span)


def test_is_rewrite() -> None:
    assert not is_rewrite(None)
    assert not is_rewrite("no-journal")
    assert is_rewrite("boundary-missing")
    assert is_rewrite("prefix-rewritten")


# ---------------------------------------------------------------------------
# Journal entries and timestamps
# ---------------------------------------------------------------------------


def test_applied_span_for_records_the_end() -> None:
    span = resolve_span([A, B, C], boundary_at([A, B, C], 0))
    applied = applied_span_for("s1", span, NOW_ISO)
    p = prefix_hash([A, B, C], 2)
    assert applied == {
        "spanId": span_id("s1", "u-c", p),
        "endUuid": "u-c",
        "endIndex": 2,
        "prefixHash": p,
        "at": NOW_ISO,
    }
    assert applied is not None
    assert list(applied) == ["spanId", "endUuid", "endIndex", "prefixHash", "at"]
    assert span_id_for("s1", span) == applied["spanId"]


def test_no_journal_entry_without_an_end_uuid() -> None:
    span = resolve_span([A, user("", "anonymous")], None)
    assert applied_span_for("s1", span, NOW_ISO) is None
    # The run still names the span, so a husk marker can be compared.
    assert span_id_for("s1", span) == span_id("s1", "", prefix_hash([A, user("", "anonymous")], 1))


def test_to_iso_timestamp_is_javascripts() -> None:
    assert (
        to_iso_timestamp(datetime(2026, 7, 28, 4, 0, 0, 123_999, tzinfo=UTC))
        == "2026-07-28T04:00:00.123Z"
    )
    assert to_iso_timestamp(datetime(2026, 7, 28, 6, 0, tzinfo=timezone(timedelta(hours=2)))) == (
        "2026-07-28T04:00:00.000Z"
    )
    # `new Date(Date.UTC(999, 0, 1)).toISOString()`: four digits of year.
    assert to_iso_timestamp(datetime(999, 1, 1, tzinfo=UTC)) == "0999-01-01T00:00:00.000Z"
    with pytest.raises(InvariantError):
        to_iso_timestamp(datetime(2026, 7, 28, 4, 0))  # naive on purpose


# ---------------------------------------------------------------------------
# The state file
# ---------------------------------------------------------------------------

APPLIED: AppliedSpan = {
    "spanId": "fdfa3c19c74991a1",
    "endUuid": "u-b",
    "endIndex": 1,
    "prefixHash": "70ded30990b4f624",
    "at": NOW_ISO,
}
SAMPLE: ReviewState = {
    "lastRunAt": NOW_ISO,
    "sessions": {
        "s1": {
            "applied": {METADATA_CONSUMER: APPLIED},
            "titleOwner": "generated",
            "titleHash": "0123456789abcdef",
            "attempts": 1,
            "failedSpanId": "aaaaaaaaaaaaaaaa",
        },
        "s2": fresh_session_state(),
    },
}


def test_state_round_trips_through_its_text() -> None:
    text = serialize_review_state(SAMPLE)
    assert text.endswith("}\n")
    assert parse_review_state(text) == (SAMPLE, None)


def test_state_text_is_json_stringify_with_two_spaces() -> None:
    state: ReviewState = {"lastRunAt": None, "sessions": {"é": fresh_session_state()}}
    assert serialize_review_state(state) == (
        "{\n"
        '  "lastRunAt": null,\n'
        '  "sessions": {\n'
        '    "é": {\n'
        '      "applied": {},\n'
        '      "titleOwner": "unmanaged",\n'
        '      "titleHash": null,\n'
        '      "attempts": 0\n'
        "    }\n"
        "  }\n"
        "}\n"
    )


# What Node writes for this state with `JSON.stringify(state, null, 2) + "\n"`:
# integer-like keys first and ascending, then the rest as inserted; a lone
# surrogate escaped, U+2028 and other non-ASCII as they are; 10**21 as a double.
JS_STATE: ReviewState = {
    "lastRunAt": None,
    "sessions": {
        "s-b": fresh_session_state(),
        "10": {
            "applied": {
                "2": {
                    "spanId": "x",
                    "endUuid": "é\ud800",
                    "endIndex": 10**21,
                    "prefixHash": "p",
                    "at": "t",
                },
                METADATA_CONSUMER: {
                    "spanId": "y",
                    "endUuid": "u",
                    "endIndex": -1,
                    "prefixHash": "p",
                    "at": "t",
                },
            },
            "titleOwner": "generated",
            "titleHash": '\u2028"\\\n',
            "attempts": 2,
            "failedSpanId": "f",
        },
        "2": {"applied": {}, "titleOwner": "manual", "titleHash": "😀", "attempts": 0},
    },
}
JS_STATE_TEXT = """\
{
  "lastRunAt": null,
  "sessions": {
    "2": {
      "applied": {},
      "titleOwner": "manual",
      "titleHash": "😀",
      "attempts": 0
    },
    "10": {
      "applied": {
        "2": {
          "spanId": "x",
          "endUuid": "é\\ud800",
          "endIndex": 1e+21,
          "prefixHash": "p",
          "at": "t"
        },
        "metadata": {
          "spanId": "y",
          "endUuid": "u",
          "endIndex": -1,
          "prefixHash": "p",
          "at": "t"
        }
      },
      "titleOwner": "generated",
      "titleHash": "\u2028\\"\\\\\\n",
      "attempts": 2,
      "failedSpanId": "f"
    },
    "s-b": {
      "applied": {},
      "titleOwner": "unmanaged",
      "titleHash": null,
      "attempts": 0
    }
  }
}
"""


def test_state_text_is_what_javascript_writes() -> None:
    assert serialize_review_state(JS_STATE) == JS_STATE_TEXT


def test_state_keys_are_written_in_the_journal_order() -> None:
    # However a session's dict was built, the file lists its keys as §4.3 does.
    session: SessionReviewState = {
        "attempts": 0,
        "titleHash": None,
        "titleOwner": "unmanaged",
        "applied": {},
    }
    text = serialize_review_state({"lastRunAt": None, "sessions": {"s": session}})
    assert text == serialize_review_state(
        {"lastRunAt": None, "sessions": {"s": fresh_session_state()}}
    )


SAFE_TEXT = st.text(max_size=6)
# Text JavaScript and Python's json write alike: no lone surrogates (st.text
# has none) and no key that reads as an array index.
PLAIN_KEY = SAFE_TEXT.filter(lambda key: not key.isascii() or not key.isdigit())
APPLIED_SPANS = st.builds(
    lambda span, end_uuid, end_index, prefix, at: AppliedSpan(
        spanId=span, endUuid=end_uuid, endIndex=end_index, prefixHash=prefix, at=at
    ),
    SAFE_TEXT,
    SAFE_TEXT,
    st.integers(-1, 2**53),
    SAFE_TEXT,
    SAFE_TEXT,
)
TITLE_OWNERS: st.SearchStrategy[TitleOwner] = st.sampled_from(["unmanaged", "generated", "manual"])


def session_states(keys: st.SearchStrategy[str]) -> st.SearchStrategy[SessionReviewState]:
    def build(
        applied: dict[str, AppliedSpan],
        owner: TitleOwner,
        title_hash: str | None,
        attempts: int,
        failed: str | None,
    ) -> SessionReviewState:
        session = SessionReviewState(
            applied=applied, titleOwner=owner, titleHash=title_hash, attempts=attempts
        )
        if failed is not None:
            session["failedSpanId"] = failed
        return session

    return st.builds(
        build,
        st.dictionaries(keys, APPLIED_SPANS, max_size=2),
        TITLE_OWNERS,
        st.none() | SAFE_TEXT,
        st.integers(0, 5),
        st.none() | SAFE_TEXT,
    )


def review_states(keys: st.SearchStrategy[str]) -> st.SearchStrategy[ReviewState]:
    return st.builds(
        lambda last_run_at, sessions: ReviewState(lastRunAt=last_run_at, sessions=sessions),
        st.none() | SAFE_TEXT,
        st.dictionaries(keys, session_states(keys), max_size=3),
    )


@given(review_states(PLAIN_KEY))
def test_state_text_matches_pythons_json_where_the_two_agree(state: ReviewState) -> None:
    assert serialize_review_state(state) == json.dumps(state, indent=2, ensure_ascii=False) + "\n"


# Any text at all, lone surrogates and integer-like keys included.
ANY_TEXT = st.text(st.characters(), max_size=6) | st.integers(0, 20).map(str)


@given(review_states(ANY_TEXT))
def test_any_state_round_trips_through_its_text(state: ReviewState) -> None:
    assert parse_review_state(serialize_review_state(state)) == (state, None)


def test_missing_file_is_a_fresh_state() -> None:
    assert parse_review_state(None) == (fresh_review_state(), "missing")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        "{'a': 1}",
        '{"lastRunAt": NaN, "sessions": {}}',
        '{"lastRunAt": null, "sessions": {}, "x": -Infinity}',
        "\ufeff{}",
        pytest.param("[" * 100_000 + "]" * 100_000, id="nested 100,000 deep"),
        pytest.param("[" * 100_000, id="100,000 unclosed brackets"),
    ],
)
def test_unparsable_file_is_a_fresh_state(text: str) -> None:
    assert parse_review_state(text) == (fresh_review_state(), "invalid-json")


def sample_with(
    path: Sequence[str], value: JsonValue | None = None, *, delete: bool = False
) -> str:
    obj: JsonValue = json.loads(serialize_review_state(SAMPLE))
    target = obj
    for key in path[:-1]:
        assert isinstance(target, dict)
        target = target[key]
    assert isinstance(target, dict)
    if delete:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return json.dumps(obj)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("[]", id="not an object"),
        pytest.param(sample_with(["lastRunAt"], delete=True), id="lastRunAt missing"),
        pytest.param(sample_with(["lastRunAt"], 3), id="lastRunAt a number"),
        pytest.param(sample_with(["sessions"], []), id="sessions a list"),
        pytest.param(sample_with(["sessions", "s1", "titleOwner"], "mine"), id="unknown owner"),
        pytest.param(
            sample_with(["sessions", "s1", "titleHash"], delete=True), id="titleHash missing"
        ),
        pytest.param(sample_with(["sessions", "s1", "titleHash"], 0), id="titleHash a number"),
        pytest.param(sample_with(["sessions", "s1", "attempts"], True), id="attempts a boolean"),
        pytest.param(sample_with(["sessions", "s1", "attempts"], 1.5), id="attempts fractional"),
        pytest.param(sample_with(["sessions", "s1", "failedSpanId"], None), id="failedSpanId null"),
        pytest.param(sample_with(["sessions", "s1", "applied"], []), id="applied a list"),
        pytest.param(
            sample_with(["sessions", "s1", "applied", METADATA_CONSUMER, "endIndex"], "1"),
            id="endIndex a string",
        ),
        pytest.param(
            sample_with(["sessions", "s1", "applied", METADATA_CONSUMER, "spanId"], delete=True),
            id="spanId missing",
        ),
    ],
)
def test_malformed_state_is_a_fresh_state(text: str) -> None:
    assert parse_review_state(text) == (fresh_review_state(), "schema-mismatch")


def test_state_reading_is_lenient_where_javascript_is() -> None:
    text = sample_with(["sessions", "s1", "attempts"], 2.0)
    loaded = review_state_from_json(json.loads(text.replace('"s2"', '"s3"')))
    assert loaded is not None
    assert loaded["sessions"]["s1"]["attempts"] == 2
    assert isinstance(loaded["sessions"]["s1"]["attempts"], int)
    extra = review_state_from_json({**json.loads(serialize_review_state(SAMPLE)), "version": 9})
    assert extra == SAMPLE


def test_fresh_states_are_new_objects() -> None:
    first = fresh_session_state()
    first["applied"]["x"] = APPLIED
    assert fresh_session_state()["applied"] == {}
    assert session_state(fresh_review_state(), "unknown") == fresh_session_state()
    assert session_state(SAMPLE, "s1") is SAMPLE["sessions"]["s1"]


# ---------------------------------------------------------------------------
# Per-session decisions (§4.7 steps 4–8)
# ---------------------------------------------------------------------------


def failing(attempts: int, failed: str | None) -> SessionReviewState:
    state = fresh_session_state()
    state["attempts"] = attempts
    if failed is not None:
        state["failedSpanId"] = failed
    return state


@pytest.mark.parametrize(
    ("attempts", "failed", "exhausted"),
    [
        (0, None, False),
        (1, "span-1", False),
        (MAX_REVIEW_ATTEMPTS, "span-1", True),
        (MAX_REVIEW_ATTEMPTS + 3, "span-1", True),
        (MAX_REVIEW_ATTEMPTS, "span-0", False),
        (MAX_REVIEW_ATTEMPTS, None, False),
    ],
)
def test_is_exhausted_only_for_the_failing_span(
    attempts: int, failed: str | None, exhausted: bool
) -> None:
    assert is_exhausted(failing(attempts, failed), "span-1") == exhausted


def test_next_session_action_order() -> None:
    worn = failing(MAX_REVIEW_ATTEMPTS, "span-1")
    assert next_session_action(worn, None, "span-1") == SessionAction.NOTHING_NEW
    assert next_session_action(worn, "span-1", "span-1") == SessionAction.EXHAUSTED
    assert next_session_action(worn, "span-2", "span-2") == SessionAction.ALREADY_APPLIED
    assert next_session_action(worn, "span-2", "span-1") == SessionAction.REVIEW
    assert next_session_action(fresh_session_state(), "span-1", None) == SessionAction.REVIEW


def test_two_reviewer_failures_exhaust_a_span_until_it_grows() -> None:
    state = fresh_session_state()
    for _ in range(MAX_REVIEW_ATTEMPTS):
        assert next_session_action(state, "span-1", None) == SessionAction.REVIEW
        state = state_after_reviewer_failure(state, "span-1")
    assert next_session_action(state, "span-1", None) == SessionAction.EXHAUSTED
    assert next_session_action(state, "span-2", None) == SessionAction.REVIEW


def test_already_applied_catches_the_journal_up() -> None:
    previous = failing(1, "span-0")
    live = "Road trip to Keene"
    caught_up = state_after_already_applied(previous, APPLIED, live, None)
    assert caught_up["applied"] == {METADATA_CONSUMER: APPLIED}
    # No hash and a title that is not the snippet: a person's.
    assert (caught_up["titleOwner"], caught_up["titleHash"], caught_up["attempts"]) == (
        "manual",
        None,
        0,
    )
    ours = {**fresh_session_state(), "titleOwner": "generated", "titleHash": content_hash(live)}
    again = state_after_already_applied(ours, APPLIED, live, None)  # type: ignore[arg-type]
    assert (again["titleOwner"], again["titleHash"]) == ("generated", content_hash(live))
    snippet = state_after_already_applied(fresh_session_state(), APPLIED, "hi there", "hi there")
    assert (snippet["titleOwner"], snippet["titleHash"]) == ("unmanaged", None)
    assert previous == failing(1, "span-0")


def test_already_applied_without_a_journal_entry_changes_nothing() -> None:
    previous = failing(1, "span-0")
    assert state_after_already_applied(previous, None, "title", None) == previous


# A clean write of a new title: the span applied, the title now ours.
WRITTEN: HuskWritePlan = plan_husk_write(
    {"title": "Keene", "contains": "Trip.", "notes": []}, "unmanaged", None
)


def test_successful_write_advances_the_journal() -> None:
    previous = failing(1, "span-0")
    after = state_after_write(previous, APPLIED, WRITTEN, "span-1")
    assert after == {
        "applied": {METADATA_CONSUMER: APPLIED},
        "titleOwner": "generated",
        "titleHash": content_hash("Keene"),
        "attempts": 0,
        "failedSpanId": "span-0",
    }
    assert previous == failing(1, "span-0")


def test_rejected_write_counts_a_failure_and_keeps_the_journal() -> None:
    previous = fresh_session_state()
    rejected = dataclasses.replace(
        WRITTEN, review_span_applied=False, rejected=("contains",), contains=None
    )
    after = state_after_write(previous, APPLIED, rejected, "span-1")
    assert after["applied"] == {}
    assert (after["attempts"], after.get("failedSpanId")) == (1, "span-1")
    assert (after["titleOwner"], after["titleHash"]) == ("generated", content_hash("Keene"))


def test_a_title_written_by_a_run_that_died_reads_as_a_hand_edit() -> None:
    """§4.7 step 6 re-derives the owner from the saved state, which never saw that title."""
    # Night one wrote "Keene" and saved; night two wrote "Keene, July" and the
    # husk's `review-span`, then died before saving the state.
    saved = state_after_write(fresh_session_state(), APPLIED, WRITTEN, "span-1")
    repaired = state_after_already_applied(saved, APPLIED, "Keene, July", None)
    assert (repaired["titleOwner"], repaired["titleHash"]) == ("manual", content_hash("Keene"))
    # A title the saved hash still names stays ours.
    kept = state_after_already_applied(saved, APPLIED, "Keene", None)
    assert (kept["titleOwner"], kept["titleHash"]) == ("generated", content_hash("Keene"))
    # A lost state file: every title but the first-message snippet reads as a person's.
    lost = state_after_already_applied(fresh_session_state(), APPLIED, "Keene", "hi there")
    assert (lost["titleOwner"], lost["titleHash"]) == ("manual", None)


def test_whole_state_updates_are_pure() -> None:
    state = fresh_review_state()
    updated = with_session(state, "s1", failing(1, "x"))
    assert state == fresh_review_state()
    assert updated["sessions"]["s1"] == failing(1, "x")
    finished = state_after_run(updated, NOW_ISO)
    assert finished["lastRunAt"] == NOW_ISO
    assert updated["lastRunAt"] is None


def test_two_nights_of_one_session() -> None:
    """Night one reads the session from the top; night two folds in only what was added."""
    night_one = [A, B]
    span = resolve_span(
        night_one, session_state(fresh_review_state(), "s1")["applied"].get(METADATA_CONSUMER)
    )
    assert span["bootstrap"] == "no-journal"
    sid = span_id_for("s1", span)
    assert sid is not None
    assert next_session_action(fresh_session_state(), sid, None) == SessionAction.REVIEW
    written = plan_husk_write(
        {"title": "Keene", "contains": "Trip.", "notes": []}, "unmanaged", None
    )
    state = with_session(
        fresh_review_state(),
        "s1",
        state_after_write(
            fresh_session_state(), applied_span_for("s1", span, NOW_ISO), written, sid
        ),
    )
    night_two = [A, B, C, D]
    session = session_state(state, "s1")
    span = resolve_span(night_two, session["applied"][METADATA_CONSUMER])
    assert (uuids(span), span["bootstrap"]) == (["u-c", "u-d"], None)
    assert next_session_action(session, span_id_for("s1", span), sid) == SessionAction.REVIEW
