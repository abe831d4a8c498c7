"""What the fuzzers found, each kept as a regression test (docs/reliability.md lists them).

Each test names the target that found it and the input, minimised.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from beebox_impl.review import cards
from beebox_impl.review.cards import (
    FIELD_TITLE,
    CardFormatError,
    parse_card,
    read_card,
    update_card,
)
from fuzz.targets import card
from tests.reliability.support import served_box_sync


@pytest.mark.parametrize("front", ["{}", "{  }", "{}  # hand-written, empty"])
def test_a_field_written_into_an_empty_flow_mapping_card_reads_back(
    tmp_path: Path, front: str
) -> None:
    # fuzz_card, input b"---\n{  }\n---\n": the title was appended as a block line
    # after the flow mapping ("{  }\ntitle: x"), which is not YAML: the card written
    # by the review could no longer be read. Fixed: every write is read back first,
    # and a line edit that does not read back gives way to a whole dump.
    path = tmp_path / "card.chat.card"
    path.write_text(f"---\n{front}\n---\nbody\n")
    assert dict(parse_card(path.read_text()).fields) == {}
    update_card(tmp_path, path, lambda _: {FIELD_TITLE: "A title"})
    written = read_card(path)
    assert written.text(FIELD_TITLE) == "A title"
    assert written.body == "body\n"


def test_the_card_target_holds_on_every_finding() -> None:
    # The target no longer skips these inputs: each write reads back.
    for front in ("{}", "{  }", "{sess\n\n\n, title: t}", 'session: s\ntitle: "a\nb: c"'):
        card(f"---\n{front}\n---\nbody\n".encode())


def test_rewriting_a_quoted_value_continued_at_column_zero_keeps_the_card_readable(
    tmp_path: Path,
) -> None:
    # fuzz_card: a double-quoted title that goes on over an unindented line. The
    # rewrite replaced only the key's line and the indented ones under it, so the
    # continuation stayed behind as a key of its own ("review-span: abc"): a second
    # review-span, a card no longer readable. Fixed: a field runs to the next key's
    # line (`_value_end`), and the write is read back.
    path = tmp_path / "card.chat.card"
    path.write_text('---\nsession: s\ntitle: "Keene, the\nreview-span: abc"\n---\nbody\n')
    assert parse_card(path.read_text()).text(FIELD_TITLE) == "Keene, the review-span: abc"
    update_card(tmp_path, path, lambda _: {FIELD_TITLE: "A title"})
    written = read_card(path)
    assert written.text(FIELD_TITLE) == "A title"
    assert written.text("review-span") is None
    assert written.text("session") == "s"


def test_a_flow_mapping_card_with_a_multi_line_key_stays_readable_after_a_write(
    tmp_path: Path,
) -> None:
    # fuzz_card: a front matter that is one flow mapping is dumped whole when a field
    # is set, and ruamel writes a key that spans blank lines as a multi-line implicit
    # key, which it cannot read back ("expected ',' or '}', but got ':'"): the
    # whole-dump path did not check that its output reads back. Fixed: it is checked,
    # and the last resort is the fields alone in block style.
    path = tmp_path / "card.chat.card"
    path.write_text("---\n{sess\n\n\n, title: t}\n---\n")
    assert parse_card(path.read_text()).text(FIELD_TITLE) == "t"
    update_card(tmp_path, path, lambda _: {FIELD_TITLE: "A title"})
    assert read_card(path).text(FIELD_TITLE) == "A title"


def test_a_card_no_style_can_write_is_refused_and_left_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Whatever the front matter, the writer never keeps a card that does not read
    # back: with every candidate made unreadable, the write is refused.
    path = tmp_path / "card.chat.card"
    original = "---\nsession: s\ntitle: t\n---\nbody\n"
    path.write_text(original)
    monkeypatch.setattr(cards, "_heads_with_fields", lambda card, updates: iter(["{\n"]))
    with pytest.raises(CardFormatError, match="readably"):
        update_card(tmp_path, path, lambda _: {FIELD_TITLE: "A title"})
    assert path.read_text() == original


# fuzz_card: ruamel raises NotImplementedError ("overlap in comment") on this front
# matter, and parse_card let it through instead of answering CardFormatError, so
# every caller that skips unreadable cards (discovery, the sessions list) failed.
OVERLAPPING_COMMENTS = "---\nti~le: #\r\n\n# two\n \n lines\n\nsession: s\n---\n"


def test_a_card_ruamel_cannot_compose_is_a_card_format_error() -> None:
    with pytest.raises(CardFormatError):
        parse_card(OVERLAPPING_COMMENTS)


def test_a_card_that_trips_ruamels_own_assertion_is_a_card_format_error() -> None:
    # fuzz_card (after the writer fixes), minimised: ruamel's scanner asserts
    # (`add_pre_comments`) on a comment beside a block scalar indicator, and the
    # AssertionError escaped parse_card as NotImplementedError once did.
    with pytest.raises(CardFormatError, match="AssertionError"):
        parse_card("---\n# a #---\n|-8 #||---\n---")


def test_the_sessions_list_skips_a_card_ruamel_cannot_compose(tmp_path: Path) -> None:
    with served_box_sync(tmp_path) as served:
        husks = served.box.root / "_content" / "chat" / "web"
        husks.mkdir(parents=True, exist_ok=True)
        (husks / "2026-08-01_bad.chat.card").write_text(OVERLAPPING_COMMENTS)
        answer = served.client.request("GET", "/api/chat/sessions")
        assert answer.status == 200
        assert answer.json() == {"sessions": []}
