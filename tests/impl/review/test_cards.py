"""Husk cards: field edits keep every other byte; exclusive, idempotent creation; origins."""

from __future__ import annotations

import threading
from datetime import date
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ruamel.yaml.reader import Reader

from beebox_impl.review.cards import (
    CardFormatError,
    _literal_block,
    _SpanForwardingReader,
    _with_fields,
    ensure_chat_husk,
    find_husk_for_session,
    list_chat_husks,
    parse_card,
    read_card,
    reconcile_husk_origins,
    update_card,
)
from beebox_impl.review.origin import ORIGIN_ENV, MachineOrigin, local_origin
from tests.impl.review.boxes import ELSEWHERE, HERE

SESSION = "0f3c2e8a-1111-4222-8333-444455556666"

HAND_EDITED = """\
---
session: 0f3c2e8a-1111-4222-8333-444455556666
# the boxholder's note about this chat
engine: claude
origin: origin-here   # stamped at creation
title: "Keene, the July plan"
tags: [trip,   family]
nested:
    - x:  1
      y: 'two'
contains: old sentence
contains-evidence: |-
  - decision: an old one

  - learned: a second
review-span: abc
zzz-unknown: keep me
---
# Body

The boxholder's own words. --- not a fence
---
"""


def test_setting_fields_keeps_every_other_byte(tmp_path: Path) -> None:
    path = tmp_path / "card.chat.card"
    path.write_text(HAND_EDITED, encoding="utf-8")

    update_card(
        tmp_path,
        path,
        lambda card: {
            "contains": "A new sentence: with a colon.",
            "contains-evidence": "- decision: new\n- open-thread: still open",
            "review-span": "def",
            "brand-new": "appended",
        },
    )

    text = path.read_text(encoding="utf-8")
    expected = (
        HAND_EDITED.replace("contains: old sentence", "contains: 'A new sentence: with a colon.'")
        .replace(
            "contains-evidence: |-\n  - decision: an old one\n\n  - learned: a second\n",
            "contains-evidence: |-\n  - decision: new\n  - open-thread: still open\n",
        )
        .replace("review-span: abc", "review-span: def")
        .replace("zzz-unknown: keep me\n", "zzz-unknown: keep me\nbrand-new: appended\n")
    )
    assert text == expected
    card = read_card(path)
    assert card.text("contains-evidence") == "- decision: new\n- open-thread: still open"
    assert card.text("title") == "Keene, the July plan"


def test_an_unchanged_value_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "card.chat.card"
    path.write_text(HAND_EDITED, encoding="utf-8")
    before = path.stat().st_mtime_ns, path.read_bytes()

    _, wrote = update_card(tmp_path, path, lambda card: {"review-span": "abc"})

    assert wrote is False
    assert (path.stat().st_mtime_ns, path.read_bytes()) == before


@given(
    st.text(
        st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\x85\u2028\u2029"),
        max_size=120,
    )
)
def test_any_text_value_reads_back_as_written(value: str) -> None:
    card = parse_card("---\nsession: s\ntitle: old\n---\nbody\n")
    written = parse_card(_with_fields(card, {"title": value, "contains-evidence": value}))

    assert written.fields["title"] == value
    assert written.fields["contains-evidence"] == value
    assert written.body == "body\n"


@pytest.mark.parametrize(
    "text",
    ["no front matter\n", "---\nsession: s\n", "---\n- a list\n---\n", "---\n: [\n---\n"],
)
def test_malformed_cards_are_rejected(text: str) -> None:
    with pytest.raises(CardFormatError):
        parse_card(text)


def test_ensure_chat_husk_creates_once_and_is_idempotent(tmp_path: Path) -> None:
    first = ensure_chat_husk(
        tmp_path, SESSION, origin=HERE, created=date(2026, 7, 1), title="plan the trip"
    )
    again = ensure_chat_husk(
        tmp_path, SESSION, origin=ELSEWHERE, created=date(2026, 7, 2), title="other"
    )

    assert first == again
    assert first.name == "2026-07-01_0f3c2e8a.chat.card"
    card = read_card(first)
    assert list(card.fields) == ["session", "origin", "origin-name", "title"]
    assert card.text("origin") == HERE.id
    assert card.text("title") == "plan the trip"
    assert card.body == ""


def test_racing_creators_make_one_husk(tmp_path: Path) -> None:
    results: list[Path] = []
    barrier = threading.Barrier(8)

    def create() -> None:
        barrier.wait()
        results.append(
            ensure_chat_husk(tmp_path, SESSION, origin=HERE, created=date(2026, 7, 1), title=None)
        )

    threads = [threading.Thread(target=create) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(set(results)) == 1
    assert [husk.session for husk in list_chat_husks(tmp_path)] == [SESSION]


def test_a_prefix_clash_gets_its_own_file(tmp_path: Path) -> None:
    other = SESSION[:8] + "-ffff-4222-8333-444455556666"
    one = ensure_chat_husk(tmp_path, SESSION, origin=HERE, created=date(2026, 7, 1), title=None)
    two = ensure_chat_husk(tmp_path, other, origin=HERE, created=date(2026, 7, 1), title=None)

    assert one != two
    assert find_husk_for_session(tmp_path, other) == two


def test_reconcile_stamps_only_unstamped_husks_whose_transcript_is_here(tmp_path: Path) -> None:
    folder = tmp_path / "_content/chat/web"
    folder.mkdir(parents=True)
    (folder / "a.chat.card").write_text("---\nsession: here-one\n---\nbody\n")
    (folder / "b.chat.card").write_text("---\nsession: not-here\n---\n")
    (folder / "c.chat.card").write_text("---\nsession: stamped\norigin: someone\n---\n")
    transcripts = tmp_path / "t"
    transcripts.mkdir()
    for name in ("here-one", "stamped"):
        (transcripts / f"{name}.jsonl").write_text("{}\n")

    count = reconcile_husk_origins(
        tmp_path, HERE, lambda husk: transcripts / f"{husk.session}.jsonl"
    )

    assert count == 1
    assert (folder / "a.chat.card").read_text() == (
        f"---\nsession: here-one\norigin: {HERE.id}\norigin-name: {HERE.name}\n---\nbody\n"
    )
    assert read_card(folder / "b.chat.card").text("origin") is None
    assert read_card(folder / "c.chat.card").text("origin") == "someone"


def test_unreadable_cards_are_skipped_when_listing(tmp_path: Path) -> None:
    folder = tmp_path / "_content/chat/web"
    folder.mkdir(parents=True)
    (folder / "good.chat.card").write_text("---\nsession: s1\n---\n")
    (folder / "no-session.chat.card").write_text("---\ntitle: x\n---\n")
    (folder / "garbage.chat.card").write_text("hello\n")
    (folder / "other.card").write_text("---\nsession: s2\n---\n")

    assert [husk.session for husk in list_chat_husks(tmp_path)] == ["s1"]


def test_the_local_origin_is_configured_or_a_hash_of_the_machine_id(tmp_path: Path) -> None:
    machine_id = tmp_path / "machine-id"
    machine_id.write_text("0123456789abcdef\n")

    assert local_origin({ORIGIN_ENV: "prod-1"}).id == "prod-1"
    derived = local_origin({}, (machine_id,))
    assert derived == local_origin({}, (machine_id,))
    assert "0123456789abcdef" not in derived.id
    assert isinstance(derived, MachineOrigin)
    assert local_origin({}, (tmp_path / "missing",)).id != derived.id


# Multi-line text as an account is written: lines of words and punctuation, some blank,
# some indented, the odd control character or non-ASCII letter.
ACCOUNT_LINES = st.lists(
    st.text(st.characters(codec="utf-8", exclude_characters="\n\r"), max_size=12)
    | st.sampled_from(["", "  indented", "- a decision: book the ferry", "# not a comment"]),
    min_size=1,
    max_size=6,
)


@given(ACCOUNT_LINES, st.integers(0, 3))
def test_a_literal_block_written_directly_reads_back_as_its_value(
    lines: list[str], breaks: int
) -> None:
    value = "\n".join(lines) + "\n" * breaks
    dumped = _literal_block("contains-evidence", value)
    if dumped is not None:
        assert dict(parse_card(f"---\n{dumped}---\n").fields) == {"contains-evidence": value}


@given(ACCOUNT_LINES, st.integers(0, 3))
def test_an_account_of_any_text_is_written_and_reads_back(lines: list[str], breaks: int) -> None:
    value = "\n".join(lines) + "\n" * breaks
    card = parse_card(HAND_EDITED)
    try:
        written = parse_card(_with_fields(card, {"contains-evidence": value}))
    except CardFormatError:
        return  # refused, never written wrong
    assert written.fields["contains-evidence"] == value
    assert written.body == card.body


_READER_TEXT = st.text(alphabet="ab :-|\n\r\ufeff\x85\u2028\t", max_size=60)


@given(_READER_TEXT, st.lists(st.integers(1, 12), max_size=12))
def test_the_span_forwarding_reader_keeps_the_marks_ruamels_reader_keeps(
    text: str, steps: list[int]
) -> None:
    # The card parser's reader moves over a span in one step; the marks it keeps
    # (and errors quote) must be the ones ruamel's own walk keeps.
    ours, theirs = _SpanForwardingReader(text), Reader(text)
    for step in steps:
        if theirs.pointer + step >= len(theirs.buffer):
            break
        ours.forward(step)
        theirs.forward(step)
        assert (ours.pointer, ours.index, ours.line, ours.column) == (
            theirs.pointer,
            theirs.index,
            theirs.line,
            theirs.column,
        )
