"""`beebox_spec.review`: snippets, turns, gates, rendering, the reviewer, leak scan, titles."""

from __future__ import annotations

import hashlib
import itertools
import string
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from beebox_spec.entries import JsonValue, SessionContentBlock, SessionEntry
from beebox_spec.errors import InvariantError, Rejection
from beebox_spec.js_values import JS_WHITESPACE
from beebox_spec.review.husk import (
    TitleOwner,
    content_hash,
    plan_husk_write,
    read_husk_field,
    resolve_title_owner,
)
from beebox_spec.review.leak_scan import (
    REDACTED_CREDENTIAL,
    has_credential,
    mask_data_uris,
    redact_credentials,
    scan_credentials,
)
from beebox_spec.review.qualification import (
    DISCOVERY_GATES,
    DiscoveryFacts,
    QualifiedSession,
    SkipReason,
    claims_session,
    first_skip_reason,
    is_quiescent,
    order_for_review,
    snippet_title_from,
)
from beebox_spec.review.rendering import (
    MAX_RENDERED_CHARS,
    elide_middle,
    render_entries,
    reviewer_span_text,
)
from beebox_spec.review.reviewer import (
    REVIEWER_SYSTEM_PROMPT,
    ReviewArgs,
    ReviewOutput,
    ReviewOutputRejection,
    build_user_prompt,
    render_account,
    validate_review_output,
)
from beebox_spec.review.snippets import (
    extract_snippet,
    first_message_snippet,
    strip_speech_wrappers,
)
from beebox_spec.review.turns import (
    count_real_user_turns,
    first_real_user_snippet,
    is_pure_self_note,
    real_user_turn_text,
)

T_USER = "2026-07-28T03:00:00Z"
T_AGENT = "2026-07-28T03:00:01Z"


def user(uuid: str, *texts: str) -> SessionEntry:
    return {
        "uuid": uuid,
        "type": "user",
        "timestamp": T_USER,
        "content": [{"type": "text", "text": text} for text in texts],
    }


def agent(uuid: str, content: list[SessionContentBlock]) -> SessionEntry:
    return {"uuid": uuid, "type": "assistant", "timestamp": T_AGENT, "content": content}


def marker(omitted: int) -> str:
    return f"\n\n… ({omitted} chars of conversation elided) …\n\n"


# ---------------------------------------------------------------------------
# §4.1 Snippets
# ---------------------------------------------------------------------------


def test_snippet_strips_shells_and_collapses_whitespace() -> None:
    raw = '<typed user="Ian" user-email="ian@example.com">  Plan the\n\n trip\tto Keene </typed>'
    assert extract_snippet(raw) == "Plan the trip to Keene"


def test_snippet_strips_chat_app_tags_in_both_forms_and_any_case() -> None:
    assert extract_snippet('<chat-app view="home"/>\nhello') == "hello"
    assert extract_snippet('<CHAT-APP view="home" / >\nhello') == "hello"
    assert extract_snippet("<chat-app a='1'><card-activity x='y'/></chat-app>\nhello") == "hello"


def test_snippet_strips_voice_direction_markup() -> None:
    raw = "<speech><instructions tone='warm'>be nice</instructions>call mom<send-message/></speech>"
    assert extract_snippet(raw) == "call mom"
    assert strip_speech_wrappers("<mic-off/>x<erase-message a='1'/>") == "x"


def test_snippet_keeps_unknown_tags_and_tag_lookalikes() -> None:
    # `\b` after the tag name: `<typedx>` is not a `<typed>` shell.
    assert extract_snippet("<typedx>hi</typedx>") == "<typedx>hi</typedx>"
    assert extract_snippet("<b>bold</b>") == "<b>bold</b>"


def test_snippet_whitespace_is_javascripts() -> None:
    # NBSP, U+3000 and the BOM are JavaScript whitespace; U+001C and U+0085 are not.
    assert extract_snippet("\ufeffa\u00a0\u3000b\ufeff") == "a b"
    assert extract_snippet("a\u001cb\u0085") == "a\u001cb\u0085"


def test_snippet_truncation() -> None:
    assert extract_snippet("a" * 80) == "a" * 80
    assert extract_snippet("a" * 81) == "a" * 79 + "…"
    # Trailing whitespace at the cut is trimmed before the ellipsis.
    assert extract_snippet("a" * 78 + " bcdef") == "a" * 78 + "…"
    assert extract_snippet("abcdef", 4) == "abc…"


def test_snippet_of_nothing_is_none() -> None:
    assert extract_snippet("") is None
    assert extract_snippet(" \n\t ") is None
    assert extract_snippet('<typed user="x"></typed>') is None


def test_snippet_length_must_be_positive() -> None:
    with pytest.raises(InvariantError):
        extract_snippet("abc", 0)


@given(st.text(), st.integers(min_value=1, max_value=120))
def test_snippet_shape(raw: str, max_len: int) -> None:
    snippet = extract_snippet(raw, max_len)
    if snippet is not None:
        assert 0 < len(snippet) <= max_len
        assert snippet[0] not in JS_WHITESPACE
        assert snippet[-1] not in JS_WHITESPACE
        assert not any(
            a in JS_WHITESPACE and b in JS_WHITESPACE for a, b in itertools.pairwise(snippet)
        )


def test_first_message_snippet_reads_the_first_user_entry_only() -> None:
    entries = [
        agent("a-0", [{"type": "text", "text": "Hello, what can I do?"}]),
        user("u-1", "<typed>first</typed>", "line two"),
        user("u-2", "second"),
    ]
    assert first_message_snippet(entries) == "first line two"


def test_first_message_snippet_does_not_look_past_an_empty_first_message() -> None:
    image_only: SessionEntry = {
        "uuid": "u-1",
        "type": "user",
        "timestamp": T_USER,
        "content": [{"type": "image", "imageRef": "s/u-1/0"}],
    }
    assert first_message_snippet([image_only, user("u-2", "second")]) is None


def test_first_message_snippet_window_is_100_entries() -> None:
    filler = [agent(f"a-{i}", [{"type": "text", "text": "x"}]) for i in range(100)]
    assert first_message_snippet([*filler, user("u-late", "late")]) is None
    assert first_message_snippet([*filler[:99], user("u-in", "in time")]) == "in time"


# ---------------------------------------------------------------------------
# §4.2 Real user turns
# ---------------------------------------------------------------------------


def line(content: JsonValue, **flags: JsonValue) -> JsonValue:
    return {"type": "user", "uuid": "u", "message": {"role": "user", "content": content}, **flags}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(line("  hello there  "), "hello there", id="string content"),
        pytest.param(
            line([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]),
            "a\nb",
            id="text blocks",
        ),
        pytest.param(
            line([{"type": "text", "text": "look"}, {"type": "tool_result", "tool_use_id": "t"}]),
            "look",
            id="text beside a tool result",
        ),
        pytest.param(
            line([{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]),
            None,
            id="tool_result only",
        ),
        pytest.param(line([{"type": "image", "source": {}}]), None, id="image only"),
        pytest.param(line("   "), None, id="blank text"),
        pytest.param(line("hi", isMeta=True), None, id="isMeta"),
        pytest.param(line("hi", isMeta="yes"), "hi", id="isMeta must be true itself"),
        pytest.param(line("Summary of before", isCompactSummary=True), None, id="isCompactSummary"),
        pytest.param(line("Write a poem.", isSidechain=True), None, id="a sub-agent's prompt"),
        pytest.param(line("hi", isSidechain="true"), "hi", id="isSidechain must be true itself"),
        pytest.param(line("hi", isSidechain=False), "hi", id="the session's own turn"),
        pytest.param(
            line(
                "This session is being continued from a previous conversation that ran out of"
                " context. More"
            ),
            None,
            id="compaction summary by its words",
        ),
        pytest.param(line("Tool loaded."), None, id="plumbing: tool loaded"),
        pytest.param(
            line("Tool loaded. Thanks"), "Tool loaded. Thanks", id="plumbing must match whole"
        ),
        pytest.param(line("Todos have been modified successfully"), None, id="plumbing: todos"),
        pytest.param(line('<self-note ref="x">remember</self-note>'), None, id="self-note"),
        pytest.param(
            line('<chat-app v="1"/>\n<self-note>a</self-note>\n\n<self-note>b</self-note>'),
            None,
            id="drained self-notes behind a snapshot",
        ),
        pytest.param(
            line("<self-note>a</self-note> and a question"),
            "<self-note>a</self-note> and a question",
            id="self-note mixed with words",
        ),
        pytest.param(
            {"type": "assistant", "message": {"content": "hi"}}, None, id="assistant line"
        ),
        pytest.param({"type": "user", "message": "hi"}, None, id="message not an object"),
        pytest.param({"type": "user"}, None, id="no message"),
        pytest.param(["not", "an", "object"], None, id="not an object"),
        pytest.param(line([{"type": "text", "text": 7}]), None, id="non-string text"),
    ],
)
def test_real_user_turn_text(raw: JsonValue, expected: str | None) -> None:
    assert real_user_turn_text(raw) == expected


def test_count_and_first_snippet_over_a_transcript() -> None:
    lines: list[JsonValue] = [
        {"type": "summary", "summary": "x"},
        line("<typed></typed>"),
        line([{"type": "tool_result", "tool_use_id": "t"}]),
        line("  <typed user='Ian'>Book the  Keene trip</typed>"),
        {"type": "assistant", "message": {"content": [{"type": "text", "text": "On it"}]}},
        line("Also the hotel", isMeta=True),
        line("and the hotel"),
    ]
    assert count_real_user_turns(lines) == 3
    # The first real turn leaves no words, so the next one names the snippet.
    assert first_real_user_snippet(lines) == "Book the Keene trip"


def test_pure_self_note_needs_a_note() -> None:
    assert not is_pure_self_note("")
    assert not is_pure_self_note("<self-note>unterminated")
    assert is_pure_self_note(" <self-note a='1'>x</self-note> ")


# ---------------------------------------------------------------------------
# §4.2 Qualification
# ---------------------------------------------------------------------------

NOW = datetime(2026, 7, 28, 4, 0, tzinfo=UTC)


def test_gate_table_order_is_the_spec_order() -> None:
    assert [gate.reason for gate in DISCOVERY_GATES] == [
        SkipReason.FOREIGN_ORIGIN,
        SkipReason.MISSING_TRANSCRIPT,
        SkipReason.DEFERRED_ACTIVE,
        SkipReason.TOO_FEW_TURNS,
        SkipReason.MISSING_TRANSCRIPT,
        SkipReason.BELOW_THRESHOLD,
    ]


def test_quiescence_boundary() -> None:
    assert is_quiescent(NOW - timedelta(minutes=30), NOW)
    assert not is_quiescent(NOW - timedelta(minutes=30) + timedelta(microseconds=1), NOW)
    assert not is_quiescent(NOW + timedelta(hours=1), NOW)
    assert is_quiescent(datetime(2026, 7, 28, 5, 0, tzinfo=timezone(timedelta(hours=2))), NOW)
    with pytest.raises(InvariantError):
        is_quiescent(datetime(2026, 7, 28, 3, 0), NOW)  # naive on purpose


def test_claims_session() -> None:
    assert claims_session(None, "laptop")
    assert claims_session("laptop", "laptop")
    assert not claims_session("prod", "laptop")


def facts(**changes: object) -> DiscoveryFacts:
    base: dict[str, object] = {
        "husk_origin": "m-1",
        "local_origin": "m-1",
        "transcript_mtime": NOW - timedelta(hours=2),
        "user_turns": 2,
        "span_chars": 6_000,
    }
    base.update(changes)
    return DiscoveryFacts(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        pytest.param({}, None, id="qualifies at every threshold"),
        pytest.param({"husk_origin": None}, None, id="no origin is claimed"),
        pytest.param({"husk_origin": "m-2"}, SkipReason.FOREIGN_ORIGIN, id="foreign origin"),
        pytest.param({"transcript_mtime": None}, SkipReason.MISSING_TRANSCRIPT, id="no transcript"),
        pytest.param(
            {"transcript_mtime": NOW - timedelta(minutes=29)},
            SkipReason.DEFERRED_ACTIVE,
            id="active",
        ),
        pytest.param({"user_turns": 1}, SkipReason.TOO_FEW_TURNS, id="one turn"),
        pytest.param({"span_chars": None}, SkipReason.MISSING_TRANSCRIPT, id="gone at span read"),
        pytest.param({"span_chars": 5_999}, SkipReason.BELOW_THRESHOLD, id="below threshold"),
        pytest.param(
            {"husk_origin": "m-2", "transcript_mtime": None, "user_turns": 0},
            SkipReason.FOREIGN_ORIGIN,
            id="origin is checked first",
        ),
        pytest.param(
            {"transcript_mtime": NOW, "user_turns": 0, "span_chars": 0},
            SkipReason.DEFERRED_ACTIVE,
            id="quiescence before turns",
        ),
        pytest.param(
            {"user_turns": 0, "span_chars": None}, SkipReason.TOO_FEW_TURNS, id="turns before span"
        ),
    ],
)
def test_first_skip_reason(changes: dict[str, object], reason: SkipReason | None) -> None:
    assert first_skip_reason(facts(**changes), NOW) == reason


def session(session_id: str, minutes_ago: int) -> QualifiedSession:
    return QualifiedSession(
        session_id=session_id,
        husk_path=f"_content/chat/web/2026-07-28_{session_id}.chat.card",
        log_path=f"/p/{session_id}.jsonl",
        engine=None,
        mtime=NOW - timedelta(minutes=minutes_ago),
        span_chars=7_000,
        bootstrap=None,
        snippet_title=None,
    )


def test_order_for_review_is_oldest_first_and_stable() -> None:
    sessions = [session("b", 60), session("a", 600), session("c", 60), session("d", 6000)]
    assert [s.session_id for s in order_for_review(sessions)] == ["d", "a", "b", "c"]


def test_snippet_title_from() -> None:
    assert snippet_title_from(None) is None
    assert snippet_title_from(" \u00a0") is None
    assert snippet_title_from(" Keene trip ") == "Keene trip"


# ---------------------------------------------------------------------------
# §4.4 Rendering and elision
# ---------------------------------------------------------------------------


def test_render_dialogue_with_headers_and_rule() -> None:
    rendered = render_entries(
        [
            user("u1", "Can you check the invoice?"),
            agent("a1", [{"type": "text", "text": "Checked — it's paid."}]),
        ]
    )
    assert rendered == (
        f"**User** ({T_USER})\nCan you check the invoice?\n\n---\n\n"
        f"**Agent** ({T_AGENT})\nChecked — it's paid."
    )


def test_render_strips_user_shells_and_drops_header_only_entries() -> None:
    rendered = render_entries([user("u2", '<typed user="Ian">plain words</typed>'), user("u3", "")])
    assert rendered == f"**User** ({T_USER})\nplain words"


def test_header_only_is_decided_by_lines_not_by_a_newline() -> None:
    # A timestamp holding a newline makes a header of two text lines, still a header.
    only_a_result: SessionEntry = {
        "uuid": "u4",
        "type": "user",
        "timestamp": "2026-07-28\n03:00:00Z",
        "content": [{"type": "tool_result", "toolUseId": "t", "resultSummary": "ok"}],
    }
    assert render_entries([only_a_result]) == ""
    assert render_entries([only_a_result, user("u5", "hi")]) == f"**User** ({T_USER})\nhi"
    with_text: SessionEntry = {**only_a_result, "content": [{"type": "text", "text": "hi"}]}
    assert render_entries([with_text]) == "**User** (2026-07-28\n03:00:00Z)\nhi"


def test_render_keeps_agent_markup_and_renders_tools() -> None:
    rendered = render_entries(
        [
            agent(
                "a1",
                [
                    {"type": "text", "text": "  <typed>quoted</typed>  "},
                    {"type": "tool_use", "toolName": "Read", "inputSummary": "/a.txt"},
                    {"type": "tool_result", "toolUseId": "t", "resultSummary": "secret contents"},
                    {"type": "tool_use", "toolName": "Bash", "inputSummary": ""},
                    {"type": "thinking", "text": "private"},
                ],
            )
        ]
    )
    assert rendered == f"**Agent** ({T_AGENT})\n<typed>quoted</typed>\n→ Read: /a.txt\n→ Bash"


def test_render_is_uncapped() -> None:
    rendered = render_entries([user(f"u{i}", "y" * 200) for i in range(400)])
    assert len(rendered) > MAX_RENDERED_CHARS * 2
    assert "chars of conversation elided" not in rendered


def test_elide_middle_examples() -> None:
    assert elide_middle("abcdefghij", 100) == "abcdefghij"
    elided = elide_middle("x" * 50 + "MIDDLE" + "y" * 50, 20)
    assert elided == "x" * 10 + marker(86) + "y" * 10
    assert elide_middle("a" * MAX_RENDERED_CHARS) == "a" * MAX_RENDERED_CHARS
    with pytest.raises(InvariantError):
        elide_middle("abc", -1)


@given(st.text(max_size=300), st.integers(min_value=0, max_value=200))
def test_elide_middle_length_and_ends(text: str, bound: int) -> None:
    elided = elide_middle(text, bound)
    if len(text) <= bound:
        assert elided == text
        return
    half = bound // 2
    omitted = len(text) - bound
    assert len(elided) == 2 * half + len(marker(omitted))
    assert elided.startswith(text[:half] + marker(omitted))
    assert elided.endswith(marker(omitted) + text[len(text) - half :])


@given(st.integers(min_value=0, max_value=50))
def test_elide_middle_drops_the_middle(bound: int) -> None:
    text = "<" * (bound // 2) + "M" * (bound + 1) + ">" * (bound // 2)
    elided = elide_middle(text, bound)
    assert "M" not in elided
    assert elided.startswith("<" * (bound // 2))
    assert elided.endswith(">" * (bound // 2))


# ---------------------------------------------------------------------------
# §4.5 The reviewer
# ---------------------------------------------------------------------------

VALID: dict[str, JsonValue] = {
    "title": "Road trip to Keene, July 8-11",
    "contains": "Planning a July road trip to Keene: route, hotel and budget.",
    "notes": [
        {"kind": "decision", "text": "Leave on July 8, back July 11."},
        {"kind": "open-thread", "text": "Which hotel in Keene?"},
    ],
}


def with_field(key: str, value: JsonValue) -> dict[str, JsonValue]:
    return {**VALID, key: value}


def test_valid_output_is_returned_without_unknown_keys() -> None:
    extra: dict[str, JsonValue] = {
        **VALID,
        "mood": "cheerful",
        "notes": [{"kind": "learned", "text": "Likes trains.", "score": 3}],
    }
    assert validate_review_output(extra) == {
        "title": VALID["title"],
        "contains": VALID["contains"],
        "notes": [{"kind": "learned", "text": "Likes trains."}],
    }


def test_output_bounds_are_inclusive() -> None:
    notes: JsonValue = [{"kind": "follow-up", "text": "n" * 280}] * 40
    output = validate_review_output({"title": "t" * 80, "contains": "c" * 200, "notes": notes})
    assert len(output["notes"]) == 40
    assert validate_review_output(with_field("title", ""))["title"] == ""
    assert validate_review_output(with_field("title", "a\rb"))["title"] == "a\rb"
    assert validate_review_output(with_field("notes", []))["notes"] == []


@pytest.mark.parametrize(
    ("output", "field"),
    [
        pytest.param(["not", "an", "object"], "(output)", id="not an object"),
        pytest.param({"contains": "x", "notes": []}, "title", id="title missing"),
        pytest.param(with_field("title", "t" * 81), "title", id="title too long"),
        pytest.param(with_field("title", "two\nlines"), "title", id="title on two lines"),
        pytest.param(with_field("title", None), "title", id="title null"),
        pytest.param(with_field("contains", ""), "contains", id="contains empty"),
        pytest.param(with_field("contains", "c" * 201), "contains", id="contains too long"),
        pytest.param(with_field("contains", True), "contains", id="contains a boolean"),
        pytest.param(with_field("notes", "- decision: x"), "notes", id="notes not a list"),
        pytest.param(
            with_field("notes", [{"kind": "decision", "text": "x"}] * 41), "notes", id="41 notes"
        ),
        pytest.param(with_field("notes", ["decision: x"]), "notes[0]", id="note not an object"),
        pytest.param(
            with_field("notes", [{"kind": "idea", "text": "x"}]), "notes[0].kind", id="unknown kind"
        ),
        pytest.param(
            with_field("notes", [{"kind": ["decision"], "text": "x"}]),
            "notes[0].kind",
            id="kind a list",
        ),
        pytest.param(
            with_field(
                "notes", [{"kind": "decision", "text": "ok"}, {"kind": "learned", "text": ""}]
            ),
            "notes[1].text",
            id="empty note text",
        ),
        pytest.param(
            with_field("notes", [{"kind": "learned", "text": "n" * 281}]),
            "notes[0].text",
            id="long note",
        ),
        pytest.param(
            with_field("notes", [{"kind": "learned"}]), "notes[0].text", id="note text missing"
        ),
    ],
)
def test_invalid_output_is_rejected_naming_the_field(output: JsonValue, field: str) -> None:
    with pytest.raises(ReviewOutputRejection) as caught:
        validate_review_output(output)
    assert caught.value.field == field
    assert isinstance(caught.value, Rejection)


def test_render_account() -> None:
    assert render_account([]) == ""
    assert (
        render_account(
            [
                {"kind": "decision", "text": "Leave July 8."},
                {"kind": "follow-up", "text": "Book it."},
            ]
        )
        == "- decision: Leave July 8.\n- follow-up: Book it."
    )


def test_user_prompt_first_review() -> None:
    args = ReviewArgs("s-1", None, None, "SPAN", bootstrap=True)
    assert build_user_prompt(args) == (
        "This conversation has no title yet.\n\n"
        "You have not summarized this conversation before.\n\n"
        "What follows is the whole conversation so far."
        " If it is long, its middle may be elided.\n\n"
        "SPAN"
    )


def test_user_prompt_increment() -> None:
    args = ReviewArgs("s-1", "Keene trip", "- decision: go", "SPAN", bootstrap=False)
    assert build_user_prompt(args) == (
        "Current title: Keene trip\n\n"
        "The account you wrote last time:\n\n- decision: go\n\n"
        "What follows is only the NEW part of the conversation since you last looked.\n\n"
        "SPAN"
    )


@pytest.mark.parametrize(
    "phrase",
    [
        "would the boxholder wince if someone\nnearby read this title?",
        "name the shape rather\nthan the sting",
        "Names, places, dates, figures",
        "Road trip to Keene, July 8-11",
        "no email addresses,\nURLs, ids or long numbers",
        "carry forward the notes that still hold",
        "revise the ones",
        "drop the ones that are settled",
        "add what is new",
        "Do not invent anything",
        "as explicit and specific",
        "Return an empty title when",
    ],
)
def test_system_prompt_carries_the_rules(phrase: str) -> None:
    assert " ".join(phrase.split()) in " ".join(REVIEWER_SYSTEM_PROMPT.split())


# ---------------------------------------------------------------------------
# §4.10 The leak scan
# ---------------------------------------------------------------------------

URLSAFE = string.ascii_letters + string.digits + "_-"
ALNUM = string.ascii_letters + string.digits
BASE64 = ALNUM + "+/"


def run(alphabet: str, size: int) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, min_size=size, max_size=size)


CREDENTIALS = {
    "Google API key": st.builds(lambda tail: "AIza" + tail, run(URLSAFE, 35)),
    "OpenAI API key": st.builds(
        lambda tail: "sk-" + tail, st.text(alphabet=URLSAFE, min_size=20, max_size=60)
    ),
    "GitHub token": st.builds(
        lambda kind, tail: f"gh{kind}_{tail}",
        st.sampled_from("oprsu"),
        st.text(alphabet=ALNUM, min_size=20),
    ),
    "Slack token": st.builds(
        lambda kind, tail: f"xox{kind}-{tail}",
        st.sampled_from("bp"),
        st.text(alphabet=ALNUM + "-", min_size=10),
    ),
    "JWT": st.builds(
        lambda a, b, c: f"eyJ{a}.eyJ{b}.{c}",
        st.text(alphabet=URLSAFE, min_size=10, max_size=30),
        st.text(alphabet=URLSAFE, min_size=10, max_size=30),
        st.text(alphabet=URLSAFE, min_size=10, max_size=40),
    ),
    # Word characters at both ends: the pattern's `\b` needs one after the space
    # before it (a run starting with `+` or `/` is only matched from its first letter
    # or digit, as in the original).
    "long base64/hex run": st.builds(
        lambda body, pad: body + pad,
        st.text(alphabet=BASE64, min_size=38, max_size=79).map(lambda body: "Q" + body + "Q"),
        st.sampled_from(["", "=", "=="]),
    ),
}


@pytest.mark.parametrize("name", sorted(CREDENTIALS))
@given(data=st.data())
def test_every_credential_shape_is_found(name: str, data: st.DataObject) -> None:
    credential = data.draw(CREDENTIALS[name])
    text = f"before {credential} after"
    findings = scan_credentials(text)
    assert name in {finding.pattern for finding in findings}
    assert has_credential(text)
    for finding in findings:
        assert text[finding.start : finding.end] == finding.text


NEAR_MISSES = {
    "sk- with 19 characters": st.builds(lambda tail: "sk-" + tail, run(URLSAFE, 19)),
    "AIza with 34 characters": st.builds(lambda tail: "AIza" + tail, run(URLSAFE, 34)),
    "39-character base64 run": run(BASE64, 39).filter(lambda body: "AIza" not in body),
    "long run inside a data: URI": st.builds(
        lambda body: f'<img src="data:image/png;base64,{body}">',
        st.text(alphabet=BASE64 + "=", min_size=40, max_size=400).filter(
            lambda body: "AIza" not in body
        ),
    ),
    "gh token with 19 characters": st.builds(
        lambda kind, tail: f"gh{kind}_{tail}", st.sampled_from("oprsu"), run(ALNUM, 19)
    ),
    "Slack token with 9 characters": st.builds(lambda tail: "xoxb-" + tail, run(ALNUM + "-", 9)),
}


@pytest.mark.parametrize("name", sorted(NEAR_MISSES))
@given(data=st.data())
def test_near_misses_pass(name: str, data: st.DataObject) -> None:
    text = f"before {data.draw(NEAR_MISSES[name])} after"
    assert scan_credentials(text) == []


def test_boundaries_are_ascii() -> None:
    assert has_credential("é" + "A" * 40)
    assert not has_credential("_" + "A" * 40)
    assert not has_credential("task-" + "a" * 30)
    assert has_credential("(sk-" + "a" * 20)


def test_data_uri_masking_only_shields_the_catch_all() -> None:
    assert not has_credential("data:" + "A" * 60)
    assert has_credential("data:sk-" + "a" * 20)
    assert has_credential("data:x " + "A" * 40)


@given(st.text())
def test_masking_keeps_length_and_newlines(text: str) -> None:
    masked = mask_data_uris(text)
    assert len(masked) == len(text)
    assert [i for i, c in enumerate(masked) if c == "\n"] == [
        i for i, c in enumerate(text) if c == "\n"
    ]


FRAGMENTS = st.one_of(
    st.text(alphabet=string.printable + "é😀\u00a0", max_size=20),
    *CREDENTIALS.values(),
    st.sampled_from(["data:", "sk-", "AIza", "eyJ", ".", "=", "_", "-", " ", "xoxb-", "ghp_"]),
)


@given(st.lists(FRAGMENTS, max_size=8).map("".join))
def test_redaction_leaves_no_credential(text: str) -> None:
    redacted = redact_credentials(text)
    assert not has_credential(redacted)
    if not has_credential(text):
        assert redacted == text
    else:
        assert REDACTED_CREDENTIAL in redacted


def test_redaction_rescans_what_it_exposes() -> None:
    # The Google key ends just before `sk-`, which has no word boundary until the key is gone.
    glued = "AIza" + "0" * 33 + "-0" + "sk-" + "0" * 20
    assert [finding.pattern for finding in scan_credentials(glued)] == ["Google API key"]
    assert redact_credentials(glued) == REDACTED_CREDENTIAL * 2


def test_redaction_merges_overlapping_findings() -> None:
    jwt = "eyJ" + "a" * 40 + ".eyJ" + "b" * 12 + "." + "c" * 12
    assert redact_credentials(f"token {jwt} end") == f"token {REDACTED_CREDENTIAL} end"


def test_reviewer_span_text_redacts_and_elides() -> None:
    key = "sk-" + "a1B2c3D4e5F6g7H8i9J0"
    # Words, not a 40-letter run: the catch-all would rightly take that for a credential.
    entries = [user(f"u{i}", f"message {i} " + "lorem ipsum " * 25) for i in range(300)]
    entries[0] = user("u0", f"my key is {key}")
    entries[-1] = user("u-last", f"again {key}")
    text = reviewer_span_text(entries)
    assert key not in text
    assert text.count(REDACTED_CREDENTIAL) == 2
    assert "chars of conversation elided" in text


@given(
    st.lists(FRAGMENTS, min_size=1, max_size=6).map("".join),
    st.integers(min_value=0, max_value=300),
)
def test_reviewer_span_text_never_carries_a_credential(text: str, padding: int) -> None:
    entries = [user("u1", "x" * padding + text), user("u2", text + "y" * padding)] * 40
    assert not has_credential(reviewer_span_text(entries))


# ---------------------------------------------------------------------------
# §4.6 Title ownership and the husk write
# ---------------------------------------------------------------------------


def test_content_hash_is_a_sha256_prefix() -> None:
    assert content_hash("") == "e3b0c44298fc1c14"
    assert content_hash("café") == hashlib.sha256("café".encode()).hexdigest()[:16]
    assert content_hash("\ud800") == content_hash("\ufffd")


SNIP = "can you plan a road trip to keene"
OURS = "Road trip to Keene, July 8-11"
HAND = "My Keene trip"
LIVE = {"none": None, "snippet": SNIP, "ours": OURS, "hand": HAND}
HASH = {"none": None, "of ours": content_hash(OURS), "of snippet": content_hash(SNIP)}

# For a stored owner other than `manual`: (stored hash, live title, snippet known) → owner.
NOT_MANUAL_TABLE: dict[tuple[str, str, bool], TitleOwner] = {
    ("none", "none", True): "unmanaged",
    ("none", "snippet", True): "unmanaged",
    ("none", "ours", True): "manual",
    ("none", "hand", True): "manual",
    ("none", "none", False): "unmanaged",
    ("none", "snippet", False): "manual",
    ("none", "ours", False): "manual",
    ("none", "hand", False): "manual",
    ("of ours", "none", True): "unmanaged",
    ("of ours", "snippet", True): "manual",
    ("of ours", "ours", True): "generated",
    ("of ours", "hand", True): "manual",
    ("of ours", "none", False): "unmanaged",
    ("of ours", "snippet", False): "manual",
    ("of ours", "ours", False): "generated",
    ("of ours", "hand", False): "manual",
    ("of snippet", "none", True): "unmanaged",
    ("of snippet", "snippet", True): "generated",
    ("of snippet", "ours", True): "manual",
    ("of snippet", "hand", True): "manual",
    ("of snippet", "none", False): "unmanaged",
    ("of snippet", "snippet", False): "generated",
    ("of snippet", "ours", False): "manual",
    ("of snippet", "hand", False): "manual",
}


def test_title_table_is_complete() -> None:
    assert set(NOT_MANUAL_TABLE) == {
        (h, live, s) for h in HASH for live in LIVE for s in (True, False)
    }


@pytest.mark.parametrize("stored_owner", ["unmanaged", "generated", "manual"])
@pytest.mark.parametrize(("hash_name", "live_name", "snippet_known"), sorted(NOT_MANUAL_TABLE))
def test_title_ownership_table(
    stored_owner: TitleOwner, hash_name: str, live_name: str, snippet_known: bool
) -> None:
    expected = (
        "manual"
        if stored_owner == "manual"
        else NOT_MANUAL_TABLE[hash_name, live_name, snippet_known]
    )
    owner = resolve_title_owner(
        stored_owner, HASH[hash_name], LIVE[live_name], SNIP if snippet_known else None
    )
    assert owner == expected


@given(st.text(), st.text(), st.one_of(st.none(), st.text()))
def test_title_hash_decides_once_written(written: str, live: str, snippet: str | None) -> None:
    owner = resolve_title_owner("generated", content_hash(written), live, snippet)
    assert owner == ("generated" if content_hash(live) == content_hash(written) else "manual")
    assert resolve_title_owner("manual", content_hash(written), live, snippet) == "manual"


def test_read_husk_field() -> None:
    assert read_husk_field("Keene") == "Keene"
    assert read_husk_field("") is None
    assert read_husk_field(None) is None
    assert read_husk_field(3) is None


def output(
    title: str = OURS, contains: str = "Planning the Keene trip.", note: str = "Leave July 8."
) -> ReviewOutput:
    return {"title": title, "contains": contains, "notes": [{"kind": "decision", "text": note}]}


def test_plan_write_clean_output() -> None:
    plan = plan_husk_write(output(), "unmanaged", None)
    assert plan.title == OURS
    assert plan.contains == "Planning the Keene trip."
    assert plan.contains_evidence == "- decision: Leave July 8."
    assert plan.review_span_applied
    assert plan.rejected == ()
    assert (plan.title_owner, plan.title_hash) == ("generated", content_hash(OURS))


def test_plan_write_never_touches_a_manual_title() -> None:
    plan = plan_husk_write(output(), "manual", "0123456789abcdef")
    assert plan.title is None
    assert plan.review_span_applied
    assert (plan.title_owner, plan.title_hash) == ("manual", None)


def test_plan_write_keeps_the_title_when_none_is_offered() -> None:
    plan = plan_husk_write(output(title=""), "generated", "0123456789abcdef")
    assert plan.title is None
    assert plan.review_span_applied
    assert (plan.title_owner, plan.title_hash) == ("generated", "0123456789abcdef")


@pytest.mark.parametrize(
    ("out", "rejected"),
    [
        pytest.param(output(title="key sk-" + "a" * 20), ("title",), id="title"),
        pytest.param(output(contains="uses AIza" + "b" * 35), ("contains",), id="contains"),
        pytest.param(output(note="token ghp_" + "c" * 36), ("contains-evidence",), id="account"),
        pytest.param(
            output(title="x sk-" + "a" * 20, note="ghp_" + "c" * 36),
            ("title", "contains-evidence"),
            id="two fields",
        ),
    ],
)
def test_plan_write_drops_fields_with_credentials(
    out: ReviewOutput, rejected: tuple[str, ...]
) -> None:
    plan = plan_husk_write(out, "unmanaged", None)
    assert plan.rejected == rejected
    assert not plan.review_span_applied
    assert (plan.title is None) == ("title" in rejected)
    assert (plan.contains is None) == ("contains" in rejected)
    assert (plan.contains_evidence is None) == ("contains-evidence" in rejected)


def test_names_and_emails_are_not_rejected() -> None:
    plan = plan_husk_write(output(title="Indigo's account, ian@example.com"), "unmanaged", None)
    assert plan.rejected == ()


@given(st.text(alphabet=string.ascii_letters + " ", min_size=1, max_size=80))
def test_written_title_is_recognised_as_ours_next_time(title: str) -> None:
    # A 40-letter run is a credential shape, and such a title is rightly dropped.
    assume(not has_credential(title))
    plan = plan_husk_write(output(title=title), "unmanaged", None)
    assert plan.title_hash is not None
    assert resolve_title_owner(plan.title_owner, plan.title_hash, title, None) == "generated"
