"""The two records of a message and their join (`beebox_spec.reconcile`), and the
sender named in both (`beebox_spec.attribution`)."""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from beebox_spec.attribution import inject_user_attr, user_identity
from beebox_spec.entries import PendingMessage, SessionContentBlock, SessionEntry, entry_text
from beebox_spec.errors import InvariantError
from beebox_spec.js_values import parse_iso_timestamp
from beebox_spec.reconcile import (
    ACCEPTED_SCAN_LIMIT,
    ACCEPTED_WINDOW,
    RECONCILE_LOOKBACK_EXTRA,
    AcceptedRow,
    HistoryMarker,
    accepted_row_from_bus,
    baseline_for,
    matches_session,
    matches_user,
    merge_accepted_into_pending,
    normalize_for_compare,
    read_accepted_messages,
    reconcile_pending,
)

VECTORS = Path(__file__).resolve().parents[2] / "conformance" / "vectors" / "reconcile"

IMAGE: SessionContentBlock = {"type": "image", "mediaType": "image/png", "dataBase64": "iVBORw0K"}


def user(uuid: str, text: str, timestamp: str = "2026-08-01T12:00:00.000Z") -> SessionEntry:
    return {"uuid": uuid, "type": "user", "timestamp": timestamp, "content": [text_block(text)]}


def assistant(uuid: str, text: str) -> SessionEntry:
    return {
        "uuid": uuid,
        "type": "assistant",
        "timestamp": "2026-08-01T12:00:00.000Z",
        "content": [text_block(text)],
    }


def pending(uuid: str, text: str, known: list[str] | None = None) -> PendingMessage:
    entry: PendingMessage = {
        "uuid": uuid,
        "type": "user",
        "timestamp": "2026-08-01T12:00:00.000Z",
        "content": [text_block(text)],
    }
    if known is not None:
        entry["reconcileKnownUuids"] = known
    return entry


def text_block(text: str) -> SessionContentBlock:
    return {"type": "text", "text": text}


def uuids(entries: list[SessionEntry] | list[PendingMessage]) -> list[str]:
    return [entry["uuid"] for entry in entries]


# ---------------------------------------------------------------------------
# normalize_for_compare
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("plain", "plain"),
        ("a [image not displayed] b [image not displayed]", "a  b "),
        ("[image1][image#2] [image#10]x", " x"),
        ("[image]", "[image]"),
        ("[image#]", "[image#]"),
        ("[image\u0661]", "[image\u0661]"),  # an Arabic-Indic digit is not an ASCII digit
        ("[Image1]", "[Image1]"),
        ('<typed user="Ann" user-email="a@x">hi</typed>', "<typed>hi</typed>"),
        ('<speech lang="en">hi</speech>', "<speech>hi</speech>"),
        ("<typed>hi</typed>", "<typed>hi</typed>"),
        ('<typedx user="A">hi</typedx>', '<typedx user="A">hi</typedx>'),
        ('<typed-x user="A">', "<typed>"),  # `\b` sits between `d` and `-`
        ('<typed\u00e9 a="1">', "<typed>"),  # ASCII `\b`: `\u00e9` is not a word character
        ('<TYPED user="A">', '<TYPED user="A">'),
        (
            'a <typed user="A">x</typed> <speech b="2">y</speech>',
            "a <typed>x</typed> <speech>y</speech>",
        ),
        ("<typed user='A'\nuser-email='b'>x", "<typed>x"),
        ("  spaced  \n", "  spaced  \n"),
        ("<typed [image1]>", "<typed>"),  # tokens go first, then the tag is rewritten
    ],
)
def test_normalize_for_compare(text: str, normalized: str) -> None:
    assert normalize_for_compare(text) == normalized


TAG_PIECES = st.sampled_from(("<typed", "<speech", "<typedx", " a=1", ">", "<", "x", "-", "\n"))


@given(st.lists(TAG_PIECES, max_size=10).map("".join))
def test_normalized_text_holds_only_bare_opening_tags(text: str) -> None:
    normalized = normalize_for_compare(text)
    for match in re.finditer(r"<(typed|speech)\b[^>]*>", normalized, re.ASCII):
        assert match[0] in ("<typed>", "<speech>")


def test_normalize_does_not_trim() -> None:
    assert normalize_for_compare(" <typed>a</typed> ") == " <typed>a</typed> "


# ---------------------------------------------------------------------------
# parse_iso_timestamp
# ---------------------------------------------------------------------------


def at(text: str) -> datetime:
    parsed = parse_iso_timestamp(text)
    assert parsed is not None, text
    return parsed


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-08-01T12:00:00.000Z", datetime(2026, 8, 1, 12, 0, 0, tzinfo=UTC)),
        ("2026-08-01T12:00:00Z", datetime(2026, 8, 1, 12, 0, 0, tzinfo=UTC)),
        ("2026-08-01T12:00:00.123Z", datetime(2026, 8, 1, 12, 0, 0, 123000, tzinfo=UTC)),
        ("2026-08-01T12:00:00.1Z", datetime(2026, 8, 1, 12, 0, 0, 100000, tzinfo=UTC)),
        ("2026-08-01T12:00:00.123456Z", datetime(2026, 8, 1, 12, 0, 0, 123000, tzinfo=UTC)),
        ("2026-08-01T12:00:00.9999Z", datetime(2026, 8, 1, 12, 0, 0, 999000, tzinfo=UTC)),
        ("2026-08-01T12:00:00+02:00", datetime(2026, 8, 1, 10, 0, 0, tzinfo=UTC)),
        ("2026-08-01T12:00:00.500-05:30", datetime(2026, 8, 1, 17, 30, 0, 500000, tzinfo=UTC)),
        ("2026-02-28T23:59:59.999Z", datetime(2026, 2, 28, 23, 59, 59, 999000, tzinfo=UTC)),
    ],
)
def test_parse_iso_timestamp_reads(text: str, expected: datetime) -> None:
    assert parse_iso_timestamp(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "x",
        "2026-08-01",
        "2026-08-01T12:00:00",  # no zone: JavaScript would guess local time
        "2026-08-01T12:00Z",
        "2026-08-01 12:00:00Z",
        "2026-08-01t12:00:00z",
        "2026-08-01T12:00:00.Z",
        "2026-13-01T12:00:00Z",
        "2026-02-30T12:00:00Z",
        "2026-08-01T24:00:00Z",
        "2026-08-01T12:00:60Z",
        "2026-08-01T12:00:00+0200",
        "2026-08-01T12:00:00+24:00",
        "0000-01-01T00:00:00Z",
        "0001-01-01T00:00:00+01:00",
        "9999-12-31T23:00:00-01:30",
        " 2026-08-01T12:00:00Z",
        "2026-08-01T12:00:00Z ",
        "\u0662026-08-01T12:00:00Z",
    ],
)
def test_parse_iso_timestamp_refuses(text: str) -> None:
    assert parse_iso_timestamp(text) is None


@given(
    st.datetimes(
        min_value=datetime(1970, 1, 1),
        max_value=datetime(9000, 1, 1),
        timezones=st.just(UTC),
    )
)
def test_parse_reads_what_to_iso_string_writes(moment: datetime) -> None:
    # `Date.prototype.toISOString` writes milliseconds and `Z`.
    written = moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    assert parse_iso_timestamp(written) == moment.replace(
        microsecond=moment.microsecond - moment.microsecond % 1000
    )


# ---------------------------------------------------------------------------
# inject_user_attr and user_identity (`beebox_spec.attribution`), with the comparison
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("<typed>hi</typed>", '<typed user="Ann" user-email="ann@example.com">hi</typed>'),
        (
            '<speech lang="en">hi</speech>',
            '<speech user="Ann" user-email="ann@example.com" lang="en">hi</speech>',
        ),
        ("/compact", "/compact"),
        ("/<typed>x</typed>", "/<typed>x</typed>"),
        ("hi <typed>x</typed>", "hi <typed>x</typed>"),
        (" <typed>x</typed>", " <typed>x</typed>"),
        ("<typedx>x</typedx>", "<typedx>x</typedx>"),
        ("<typed", "<typed"),
        (
            "<typed>a</typed><typed>b</typed>",
            '<typed user="Ann" user-email="ann@example.com">a</typed><typed>b</typed>',
        ),
        # The client's own identity attributes are removed; others stay.
        (
            '<typed user="mallory" lang="en" user-email="m@x">hi</typed>',
            '<typed user="Ann" user-email="ann@example.com" lang="en">hi</typed>',
        ),
        (
            '<speech\tuser-email="m@x" data-user="d">hi</speech>',
            '<speech user="Ann" user-email="ann@example.com" data-user="d">hi</speech>',
        ),
        # Only the leading tag is attributed, and only its attributes are touched.
        (
            '<typed>a</typed><typed user="m">b</typed>',
            '<typed user="Ann" user-email="ann@example.com">a</typed><typed user="m">b</typed>',
        ),
    ],
)
def test_inject_user_attr(message: str, expected: str) -> None:
    assert inject_user_attr(message, "ann@example.com", "Ann") == expected


def test_inject_escapes_as_xml_and_inserts_dollars_literally() -> None:
    injected = inject_user_attr("<typed>x</typed>", 'e"@x', 'A "B" $1 $& <&amp;>')
    assert injected == (
        '<typed user="A &quot;B&quot; $1 $&amp; &lt;&amp;amp;&gt;" user-email="e&quot;@x">x</typed>'
    )


@pytest.mark.parametrize(
    "message",
    [
        '<typed user="mallory" user-email="m@x">hi',
        '<typed user-email="m@x" user="mallory">hi</typed>',
        '<typed data-user="mallory" x-user-email="m@x">hi</typed>',
        '<typed>hi <typed user="mallory" user-email="m@x">there</typed></typed>',
        '<speech>hi</speech> <external-input user="mallory" user-email="m@x">',
    ],
)
def test_a_client_cannot_name_another_sender(message: str) -> None:
    content = [text_block(inject_user_attr(message, "ann@example.com", "Ann"))]
    assert user_identity(content, "user") == "Ann"
    assert user_identity(content, "user-email") == "ann@example.com"


# Pieces that have broken attribution: quotes, entities (escaped or not), the
# tag's end, and attributes a client could write to name someone else.
ATTRIBUTE_TRAPS = st.sampled_from(
    ('"', "&", "&amp;", "&quot;", "&gt;", ">", "<", "'", " ", 'user="m"', 'user-email="m@x"')
)
TRAPPY_TEXT = st.lists(st.one_of(ATTRIBUTE_TRAPS, st.text(max_size=3)), max_size=8).map("".join)
# An opening tag as a client could send it, its own identity attributes included.
CLIENT_TAG = st.tuples(
    st.sampled_from(("<typed", "<speech")),
    st.lists(
        st.sampled_from((' user="mallory"', ' user-email="m@x"', ' lang="en"', " x", '"')),
        max_size=4,
    ).map("".join),
).map(lambda parts: f"{parts[0]}{parts[1]}>")


@given(
    name=TRAPPY_TEXT.filter(bool),
    email=TRAPPY_TEXT.filter(bool),
    tag=CLIENT_TAG,
    body=TRAPPY_TEXT,
)
def test_identity_reads_back_exactly_what_injection_wrote(
    name: str, email: str, tag: str, body: str
) -> None:
    content = [text_block(inject_user_attr(tag + body, email, name))]
    assert user_identity(content, "user") == name
    assert user_identity(content, "user-email") == email


@given(name=TRAPPY_TEXT, email=TRAPPY_TEXT, tag=CLIENT_TAG, body=TRAPPY_TEXT)
def test_attribution_does_not_change_what_reconciliation_compares(
    name: str, email: str, tag: str, body: str
) -> None:
    # The page's own copy is unattributed; the transcript's echo is attributed.
    message = tag + body
    assert normalize_for_compare(inject_user_attr(message, email, name)) == (
        normalize_for_compare(message)
    )


@pytest.mark.parametrize(
    ("content", "user_name", "user_email"),
    [
        ([text_block('<typed user="Ann" user-email="a@x">hi</typed>')], "Ann", "a@x"),
        ([text_block('<external-input user="Bo">hi</external-input>')], "Bo", None),
        ([text_block('<typed user="">hi</typed>')], None, None),
        ([text_block('<typed user="A &amp;quot; &quot;B&quot;">')], 'A &quot; "B"', None),
        ([text_block('<typed user="&lt;&amp;lt;&gt;&apos;">')], "<&lt;>&apos;", None),
        ([text_block('<typed user="First" x user="Second">')], "First", None),
        ([text_block("hi")], None, None),
        ([IMAGE, text_block("x"), text_block('<typed user="Late">')], None, None),
        ([IMAGE, text_block('<typed user="First">')], "First", None),
        ([text_block('before <speech user="Cy">')], "Cy", None),
    ],
)
def test_user_identity(
    content: list[SessionContentBlock], user_name: str | None, user_email: str | None
) -> None:
    assert user_identity(content, "user") == user_name
    assert user_identity(content, "user-email") == user_email


# ---------------------------------------------------------------------------
# read_accepted_messages
# ---------------------------------------------------------------------------

NOW = datetime(2026, 8, 1, 12, 10, 0, tzinfo=UTC)


def row(
    row_id: int,
    message: str = "<typed>hi</typed>",
    *,
    session_id: str | None = "s-1",
    email: str | None = None,
    timestamp: str = "2026-08-01T12:05:00.000Z",
) -> AcceptedRow:
    return {
        "id": row_id,
        "sessionId": session_id,
        "message": message,
        "user": None if email is None else {"email": email, "name": email.split("@")[0]},
        "timestamp": timestamp,
    }


def read(
    rows: list[AcceptedRow],
    *,
    session_id: str | None = "s-1",
    now: datetime = NOW,
    viewer_email: str | None = None,
    history: list[HistoryMarker] | None = None,
) -> list[str]:
    return uuids(read_accepted_messages(rows, session_id, now, viewer_email, history or []))


def test_window_is_exactly_ten_minutes() -> None:
    assert timedelta(minutes=10) == ACCEPTED_WINDOW
    assert ACCEPTED_SCAN_LIMIT == 50


@pytest.mark.parametrize(
    ("timestamp", "kept"),
    [
        ("2026-08-01T12:00:00.000Z", True),  # exactly ten minutes old
        ("2026-08-01T12:00:00Z", True),
        ("2026-08-01T11:59:59.999Z", False),  # a millisecond over
        ("2026-08-01T11:59:59.9999Z", False),  # cut to the millisecond: still over
        ("2026-08-01T11:50:00.000Z", False),
        ("2026-08-01T12:09:59.999Z", True),
        ("2026-08-01T12:10:00.000Z", True),
        ("2026-08-01T12:30:00.000Z", True),  # from the future: no upper bound
        ("2026-08-01T14:00:00.000+02:00", True),  # 12:00Z, with an offset
        ("2026-08-01T13:59:59.999+02:00", False),
        ("not a time", False),
        ("", False),
        ("2026-08-01T12:05:00", False),  # no zone: unreadable
    ],
)
def test_window_edges(timestamp: str, kept: bool) -> None:
    assert read([row(1, timestamp=timestamp)]) == (["accepted-1"] if kept else [])


def test_now_is_counted_in_whole_milliseconds() -> None:
    # JavaScript's `now.getTime()` has no microseconds: 12:10:00.000999 is 12:10:00.000.
    now = datetime(2026, 8, 1, 12, 10, 0, 999, tzinfo=UTC)
    assert read([row(1, timestamp="2026-08-01T12:00:00.000Z")], now=now) == ["accepted-1"]


def test_now_in_another_zone_is_the_same_instant() -> None:
    now = NOW.astimezone(timezone(timedelta(hours=-7)))
    assert read([row(1, timestamp="2026-08-01T12:00:00.000Z")], now=now) == ["accepted-1"]


def test_naive_now_is_a_caller_bug() -> None:
    with pytest.raises(InvariantError):
        read([row(1)], now=datetime(2026, 8, 1, 12, 10))


@pytest.mark.parametrize(
    ("row_session", "asked", "visible"),
    [
        ("s-1", "s-1", True),
        ("s-1", "s-2", False),
        ("s-1", None, False),
        (None, None, True),
        (None, "s-1", False),
    ],
)
def test_session_matching(row_session: str | None, asked: str | None, visible: bool) -> None:
    assert matches_session(row_session, asked) is visible
    assert read([row(1, session_id=row_session)], session_id=asked) == (
        ["accepted-1"] if visible else []
    )


@pytest.mark.parametrize(
    ("row_email", "viewer", "visible"),
    [
        (None, None, True),
        (None, "ann@x", True),
        ("ann@x", "ann@x", True),
        ("ann@x", None, False),  # fails closed
        ("ann@x", "bo@x", False),
        ("ann@x", "ANN@x", False),  # compared exactly
    ],
)
def test_sender_matching_for_session_less_rows(
    row_email: str | None, viewer: str | None, visible: bool
) -> None:
    assert matches_user(row_email, viewer) is visible
    rows = [row(1, session_id=None, email=row_email)]
    assert read(rows, session_id=None, viewer_email=viewer) == (["accepted-1"] if visible else [])


@pytest.mark.parametrize("viewer", [None, "bo@x"])
def test_sender_is_not_checked_for_rows_with_a_session(viewer: str | None) -> None:
    assert read([row(1, email="ann@x")], viewer_email=viewer) == ["accepted-1"]


def test_an_accepted_message_reads_as_a_pending_entry() -> None:
    message = (
        '<typed user="Ann &quot;A&quot;" user-email="ann@example.com">see [image#1][image2]</typed>'
    )
    history: list[HistoryMarker] = [
        {"uuid": "h-before", "timestamp": "2026-08-01T12:04:59.999Z"},
        {"uuid": "h-same", "timestamp": "2026-08-01T12:05:00.000Z"},
        {"uuid": "h-after", "timestamp": "2026-08-01T12:05:00.001Z"},
        {"uuid": "h-undated", "timestamp": ""},
        {"uuid": "h-unreadable", "timestamp": "yesterday"},
        {"uuid": "h-before-offset", "timestamp": "2026-08-01T14:04:00.000+02:00"},
    ]
    [entry] = read_accepted_messages([row(42, message)], "s-1", NOW, None, history)
    assert entry == {
        "uuid": "accepted-42",
        "type": "user",
        "timestamp": "2026-08-01T12:05:00.000Z",
        "content": [
            {
                "type": "text",
                "text": '<typed user="Ann &quot;A&quot;" user-email="ann@example.com">see </typed>',
            }
        ],
        "user": 'Ann "A"',
        "userEmail": "ann@example.com",
        "reconcileKnownUuids": ["h-before", "h-undated", "h-unreadable", "h-before-offset"],
    }


def test_unattributed_message_has_no_user_keys() -> None:
    [entry] = read_accepted_messages([row(1, "/compact")], "s-1", NOW, None, [])
    assert "user" not in entry
    assert "userEmail" not in entry
    assert entry["reconcileKnownUuids"] == []


def test_rows_are_read_oldest_first_and_filtered() -> None:
    rows = [
        row(1, "first"),
        row(2, ""),  # empty message
        row(3, "other session", session_id="s-9"),
        row(4, "[image1]"),  # not empty before the token is removed
        row(5, "stale", timestamp="2026-08-01T11:00:00.000Z"),
        row(6, "last"),
    ]
    assert read(rows) == ["accepted-1", "accepted-4", "accepted-6"]


def test_only_the_newest_scan_limit_rows_count() -> None:
    rows = [row(index) for index in range(ACCEPTED_SCAN_LIMIT + 1)]
    result = read(rows)
    assert len(result) == ACCEPTED_SCAN_LIMIT
    assert result[0] == "accepted-1"


def test_baseline_for() -> None:
    history: list[HistoryMarker] = [
        {"uuid": "a", "timestamp": "2026-08-01T11:00:00.000Z"},
        {"uuid": "b", "timestamp": "2026-08-01T12:00:00.000Z"},
        {"uuid": "c", "timestamp": "garbage"},
    ]
    assert baseline_for(history, at("2026-08-01T12:00:00.000Z")) == ["a", "c"]
    assert baseline_for(history, at("2026-08-01T12:00:00.001Z")) == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            {
                "sessionId": "s",
                "message": "m",
                "timestamp": "t",
                "user": {"email": "e", "name": "n"},
            },
            {
                "id": 7,
                "sessionId": "s",
                "message": "m",
                "user": {"email": "e", "name": "n"},
                "timestamp": "t",
            },
        ),
        (
            {"sessionId": 3, "message": None, "timestamp": 5, "user": {"name": "n"}},
            {"id": 7, "sessionId": None, "message": "", "user": None, "timestamp": ""},
        ),
        (
            {"user": {"email": "e", "name": 9}},
            {
                "id": 7,
                "sessionId": None,
                "message": "",
                "user": {"email": "e", "name": ""},
                "timestamp": "",
            },
        ),
        (
            "not an object",
            {"id": 7, "sessionId": None, "message": "", "user": None, "timestamp": ""},
        ),
        (None, {"id": 7, "sessionId": None, "message": "", "user": None, "timestamp": ""}),
    ],
)
def test_accepted_row_from_bus_narrows(data: Any, expected: AcceptedRow) -> None:
    assert accepted_row_from_bus(7, data) == expected


def test_reload_after_the_transcript_caught_up_shows_no_duplicate() -> None:
    """The newest baseline rule: the message's own echo, written after it, stays a candidate."""
    history = [
        user("h1", '<typed user="Ann" user-email="a@x">yes</typed>', "2026-08-01T11:00:00.000Z"),
        assistant("h2", "ok"),
        user("h3", '<typed user="Ann" user-email="a@x">yes</typed>', "2026-08-01T12:05:00.200Z"),
    ]
    history[1]["timestamp"] = "2026-08-01T11:00:01.000Z"
    rows = [
        row(
            9,
            '<typed user="Ann" user-email="a@x">yes</typed>',
            timestamp="2026-08-01T12:05:00.000Z",
        )
    ]
    accepted = read_accepted_messages(rows, "s-1", NOW, None, history)
    assert accepted[0].get("reconcileKnownUuids") == ["h1", "h2"]
    merged = merge_accepted_into_pending([], accepted)
    result = reconcile_pending(history, merged)
    assert uuids(result["pendingMessages"]) == []
    assert uuids(result["messages"]) == ["h1", "h2", "h3"]


def test_a_second_yes_is_not_retired_by_the_first() -> None:
    history = [user("h1", "<typed>yes</typed>", "2026-08-01T11:00:00.000Z")]
    rows = [row(9, "<typed>yes</typed>", timestamp="2026-08-01T12:05:00.000Z")]
    accepted = read_accepted_messages(rows, "s-1", NOW, None, history)
    result = reconcile_pending(history, merge_accepted_into_pending([], accepted))
    assert uuids(result["pendingMessages"]) == ["accepted-9"]


# ---------------------------------------------------------------------------
# reconcile_pending: examples
# ---------------------------------------------------------------------------


def test_no_pending_returns_the_server_messages() -> None:
    server = [user("u1", "a"), assistant("a1", "b")]
    result = reconcile_pending(server, [])
    assert result == {"messages": server, "pendingMessages": []}


def test_one_occurrence_retires_one_pending() -> None:
    result = reconcile_pending([user("u1", "yes")], [pending("p1", "yes"), pending("p2", "yes")])
    assert uuids(result["pendingMessages"]) == ["p2"]
    assert uuids(result["messages"]) == ["u1", "p2"]


def test_drained_turn_retires_every_message_it_joined() -> None:
    drained = "\n\n".join(f'<typed user="A">{word}</typed>' for word in ("one", "two", "three"))
    pendings = [
        pending(f"p{i}", f"<typed>{w}</typed>") for i, w in enumerate(("three", "one", "two"))
    ]
    assert reconcile_pending([user("u1", drained)], pendings)["pendingMessages"] == []


def test_oldest_match_first() -> None:
    server = [user("u1", "hi there"), user("u2", "hi")]
    result = reconcile_pending(server, [pending("p1", "hi"), pending("p2", "hi there")])
    assert uuids(result["pendingMessages"]) == ["p2"]


def test_baseline_naming_the_only_echo_pins_the_pending_message() -> None:
    result = reconcile_pending([user("u1", "hello")], [pending("p1", "hello", known=["u1"])])
    assert uuids(result["pendingMessages"]) == ["p1"]


def test_removal_joins_the_text_around_it() -> None:
    # "aabb" holds "ab" once; removing it leaves "ab", which retires a second "ab".
    result = reconcile_pending([user("u1", "aabb")], [pending("p1", "ab"), pending("p2", "ab")])
    assert result["pendingMessages"] == []


def test_window_counts_user_entries_only() -> None:
    extra = RECONCILE_LOOKBACK_EXTRA
    server = [user("echo", "target")]
    server += [assistant(f"a{i}", "target") for i in range(20)]
    server += [user(f"u{i}", "other") for i in range(extra)]
    assert reconcile_pending(server, [pending("p1", "target")])["pendingMessages"] == []
    server.append(user("newest", "other"))
    assert uuids(reconcile_pending(server, [pending("p1", "target")])["pendingMessages"]) == ["p1"]


def test_empty_pending_text_is_dropped() -> None:
    image_only: PendingMessage = {
        "uuid": "p1",
        "type": "user",
        "timestamp": "",
        "content": [IMAGE],
    }
    result = reconcile_pending([], [image_only, pending("p2", "[image#3][image not displayed]")])
    assert result == {"messages": [], "pendingMessages": []}


# ---------------------------------------------------------------------------
# reconcile_pending: properties
# ---------------------------------------------------------------------------

WORDS = ("yes", "no", "hi", "yes please", "ok")
# A token is one whole message; separators hold no `<` or `>`, so (after
# normalization) an occurrence of a token can only be a whole token, and
# removing one can never create another.
TOKENS = tuple(f"<typed>{word}</typed>" for word in WORDS)
SEPARATORS = ("", "\n\n", " ", "[image1]", "[image not displayed]", "x")


@st.composite
def token_text(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.sampled_from(TOKENS), max_size=4))
    text = draw(st.sampled_from(SEPARATORS))
    for part in parts:
        attributed = part.replace("<typed>", '<typed user="Ann" user-email="a@x">', 1)
        text += (attributed if draw(st.booleans()) else part) + draw(st.sampled_from(SEPARATORS))
    return text


@st.composite
def token_server(draw: st.DrawFn) -> list[SessionEntry]:
    kinds = draw(st.lists(st.booleans(), max_size=12))
    entries: list[SessionEntry] = []
    for index, is_user in enumerate(kinds):
        text = draw(token_text())
        entries.append(user(f"u{index}", text) if is_user else assistant(f"a{index}", text))
    return entries


@st.composite
def token_pendings(draw: st.DrawFn, server_uuids: list[str]) -> list[PendingMessage]:
    count = draw(st.integers(min_value=0, max_value=8))
    pendings: list[PendingMessage] = []
    for index in range(count):
        text = draw(st.sampled_from((*TOKENS, "[image#1]")))
        known = (
            draw(st.none() | st.lists(st.sampled_from(server_uuids), unique=True))
            if server_uuids
            else None
        )
        pendings.append(pending(f"p{index}", text, known))
    return pendings


def collected(server: list[SessionEntry], pending_count: int) -> list[SessionEntry]:
    users = [entry for entry in server if entry["type"] == "user"]
    return users[-(pending_count + RECONCILE_LOOKBACK_EXTRA) :]


def retired(pendings: list[PendingMessage], still: list[PendingMessage]) -> list[PendingMessage]:
    kept = {id(entry) for entry in still}
    return [
        entry
        for entry in pendings
        if id(entry) not in kept and normalize_for_compare(entry_text(entry)) != ""
    ]


@given(st.data())
def test_never_retires_more_pendings_than_occurrences(data: st.DataObject) -> None:
    server = data.draw(token_server())
    pendings = data.draw(token_pendings([entry["uuid"] for entry in server]))
    result = reconcile_pending(server, pendings)
    window = collected(server, len(pendings))
    retired_texts = Counter(
        normalize_for_compare(entry_text(e)) for e in retired(pendings, result["pendingMessages"])
    )
    for text, count in retired_texts.items():
        occurrences = sum(normalize_for_compare(entry_text(e)).count(text) for e in window)
        assert count <= occurrences, (text, count, occurrences)


@given(st.data())
def test_without_baselines_retires_exactly_min_of_pendings_and_occurrences(
    data: st.DataObject,
) -> None:
    server = data.draw(token_server())
    pendings = data.draw(token_pendings([]))
    result = reconcile_pending(server, pendings)
    window = collected(server, len(pendings))
    retired_texts = Counter(
        normalize_for_compare(entry_text(e)) for e in retired(pendings, result["pendingMessages"])
    )
    wanted = Counter(normalize_for_compare(entry_text(e)) for e in pendings)
    for text, count in wanted.items():
        if text == "":
            continue
        occurrences = sum(normalize_for_compare(entry_text(e)).count(text) for e in window)
        assert retired_texts[text] == min(count, occurrences), text
    # Identical pendings retire in their own order: the earliest copies go first.
    for text in wanted:
        copies = [e["uuid"] for e in pendings if normalize_for_compare(entry_text(e)) == text]
        gone = [u for u in copies if u not in uuids(result["pendingMessages"])]
        assert gone == copies[: len(gone)]


@given(st.data())
def test_a_baseline_naming_every_echo_pins_the_pending_message(data: st.DataObject) -> None:
    server = data.draw(token_server())
    text = data.draw(st.sampled_from(TOKENS))
    echoes = [e["uuid"] for e in server if text in normalize_for_compare(entry_text(e))]
    others = data.draw(token_pendings([]))
    position = data.draw(st.integers(min_value=0, max_value=len(others)))
    pinned = pending("pinned", text, known=echoes)
    pendings = [*others[:position], pinned, *others[position:]]
    assert "pinned" in uuids(reconcile_pending(server, pendings)["pendingMessages"])


TEXT_ALPHABET = st.sampled_from(("a", "b", " ", "\n", "<", ">", "typed", "[image1]", "#", "1", '"'))
free_text = st.lists(TEXT_ALPHABET, max_size=8).map("".join)


@st.composite
def free_server(draw: st.DrawFn) -> list[SessionEntry]:
    kinds = draw(st.lists(st.booleans(), max_size=10))
    return [
        user(f"u{i}", draw(free_text)) if is_user else assistant(f"a{i}", draw(free_text))
        for i, is_user in enumerate(kinds)
    ]


@given(st.data())
def test_reconcile_invariants_on_any_text(data: st.DataObject) -> None:
    server = data.draw(free_server())
    server_uuids = [entry["uuid"] for entry in server]
    pendings = [
        pending(
            f"p{i}",
            data.draw(free_text),
            data.draw(st.none() | st.lists(st.sampled_from(server_uuids), unique=True))
            if server_uuids
            else None,
        )
        for i in range(data.draw(st.integers(min_value=0, max_value=6)))
    ]
    before = copy.deepcopy((server, pendings))
    result = reconcile_pending(server, pendings)
    still = result["pendingMessages"]
    # The inputs are not changed.
    assert (server, pendings) == before
    # Shown: the server messages, then what is still pending.
    assert result["messages"] == [*server, *still]
    # What is still pending is a subsequence of the pending list, none of it empty.
    iterator = iter(pendings)
    assert all(any(entry is candidate for candidate in iterator) for entry in still)
    assert all(normalize_for_compare(entry_text(entry)) != "" for entry in still)
    # Every retired message's text sat in an eligible entry of the window.
    window = collected(server, len(pendings))
    gone = retired(pendings, still)
    for entry in gone:
        text = normalize_for_compare(entry_text(entry))
        baseline = set(entry.get("reconcileKnownUuids", []))
        assert any(
            text in normalize_for_compare(entry_text(echo))
            for echo in window
            if echo["uuid"] not in baseline
        )
    # Each retirement consumed its own characters of the window's text.
    consumed = sum(len(normalize_for_compare(entry_text(entry))) for entry in gone)
    assert consumed <= sum(len(normalize_for_compare(entry_text(echo))) for echo in window)


# ---------------------------------------------------------------------------
# merge_accepted_into_pending
# ---------------------------------------------------------------------------


def test_merge_with_nothing_accepted_returns_the_pending_list() -> None:
    pendings = [pending("o1", "a")]
    assert merge_accepted_into_pending(pendings, []) == pendings


def test_merge_consumes_text_matches_one_for_one() -> None:
    merged = merge_accepted_into_pending(
        [pending("o1", "<typed>yes</typed>")],
        [
            pending("accepted-1", '<typed user="A">yes</typed>'),
            pending("accepted-2", "<typed>yes</typed>"),
        ],
    )
    assert uuids(merged) == ["o1", "accepted-2"]


@given(
    pending_texts=st.lists(st.sampled_from(("a", "b", "[image1]", "<typed>a</typed>")), max_size=6),
    accepted_texts=st.lists(
        st.sampled_from(("a", "b", "c", "[image#2]", '<typed user="X">a</typed>')), max_size=6
    ),
)
def test_merge_keeps_what_pending_copies_do_not_cover(
    pending_texts: list[str], accepted_texts: list[str]
) -> None:
    pendings = [pending(f"o{i}", text) for i, text in enumerate(pending_texts)]
    accepted = [pending(f"accepted-{i}", text) for i, text in enumerate(accepted_texts)]
    merged = merge_accepted_into_pending(pendings, accepted)
    assert merged[: len(pendings)] == pendings
    kept = merged[len(pendings) :]
    iterator = iter(accepted)
    assert all(any(entry is candidate for candidate in iterator) for entry in kept)
    have = Counter(normalize_for_compare(entry_text(e)) for e in pendings)
    offered = Counter(normalize_for_compare(entry_text(e)) for e in accepted)
    got = Counter(normalize_for_compare(entry_text(e)) for e in kept)
    for text, count in offered.items():
        expected = count if text == "" else max(0, count - have[text])
        assert got[text] == expected, text


@given(
    pending_ids=st.lists(st.sampled_from(("a", "b", "c")), max_size=3, unique=True),
    accepted_ids=st.lists(st.sampled_from(("a", "b", "c", "d")), max_size=6),
)
def test_merge_never_repeats_a_uuid(pending_ids: list[str], accepted_ids: list[str]) -> None:
    # Distinct texts so that only uuids decide.
    pendings = [pending(uuid, f"pending {uuid}") for uuid in pending_ids]
    accepted = [pending(uuid, f"accepted {i}") for i, uuid in enumerate(accepted_ids)]
    merged = uuids(merge_accepted_into_pending(pendings, accepted))
    assert len(merged) == len(set(merged))
    assert set(merged) == set(pending_ids) | set(accepted_ids)


# ---------------------------------------------------------------------------
# The conformance vectors agree with this module
# ---------------------------------------------------------------------------


def vector_cases(name: str) -> list[Any]:
    path = VECTORS / name
    cases: list[Any] = json.loads(path.read_text(encoding="utf-8"))["cases"]
    return cases


@pytest.mark.parametrize("case", vector_cases("pending.json"), ids=lambda case: case["name"])
def test_pending_vectors(case: Any) -> None:
    result = reconcile_pending(case["input"]["serverMessages"], case["input"]["pendingMessages"])
    got = {
        "messages": uuids(result["messages"]),
        "pendingMessages": uuids(result["pendingMessages"]),
    }
    assert got == case["expect"]


@pytest.mark.parametrize("case", vector_cases("merge-accepted.json"), ids=lambda case: case["name"])
def test_merge_accepted_vectors(case: Any) -> None:
    merged = merge_accepted_into_pending(
        case["input"]["pendingMessages"], case["input"]["accepted"]
    )
    assert uuids(merged) == case["expect"]


def test_a_stop_marks_every_send_before_it_dropped() -> None:
    # (ours) The rows up to the last stop's or reset's own row are owed no more.
    rows = [row(1), row(2), row(4)]
    marked = read_accepted_messages(rows, "s-1", NOW, None, [], settled_through=3)
    assert [(entry["uuid"], entry.get("dropped")) for entry in marked] == [
        ("accepted-1", True),
        ("accepted-2", True),
        ("accepted-4", None),
    ]
    unsettled = read_accepted_messages(rows, "s-1", NOW, None, [], settled_through=0)
    assert all("dropped" not in entry for entry in unsettled)
