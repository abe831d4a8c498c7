"""Reading a transcript into history (`beebox_spec.transcript`)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from beebox_spec.entries import (
    IMAGE_NOT_DISPLAYED,
    MAX_SESSION_ENTRIES,
    JsonObject,
    JsonValue,
    SessionEntry,
)
from beebox_spec.js_values import parse_json_object_or_none
from beebox_spec.media import STRIPPED_MEDIA_MARKER, extract_media, image_blocks
from beebox_spec.transcript import (
    MAX_SESSION_LINE_BYTES,
    SNIFF_CHARS,
    InvalidHistorySlice,
    entries_from_lines,
    entry_from_record,
    history_page,
    history_tail,
    is_oversize_line,
    is_plumbing_message,
    oversize_entry,
    read_transcript_lines,
    sniff_record_type,
    sniff_top_level_keys,
    split_transcript_lines,
)

SESSION = "sess-1"
TS = "2026-03-01T10:00:00.000Z"


def compact(value: Any) -> str:
    """A transcript line as Claude Code writes it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def user(uuid: str, content: JsonValue, **extra: JsonValue) -> JsonObject:
    record: JsonObject = {"type": "user", "uuid": uuid, "timestamp": TS}
    record.update(extra)
    record["message"] = {"role": "user", "content": content}
    return record


def assistant(uuid: str, content: JsonValue, model: str = "claude-opus-4-1") -> JsonObject:
    return {
        "type": "assistant",
        "uuid": uuid,
        "timestamp": TS,
        "message": {"role": "assistant", "model": model, "content": content},
    }


def text(value: str) -> JsonObject:
    return {"type": "text", "text": value}


def image(data: str | None) -> JsonObject:
    source: JsonObject = {"type": "base64", "media_type": "image/png"}
    if data is not None:
        source["data"] = data
    return {"type": "image", "source": source}


def kinds(lines: list[str]) -> list[str]:
    out: list[str] = []
    for line in read_transcript_lines(lines):
        if line["kind"] == "oversize":
            out.append("oversize")
        else:
            out.append("stripped" if line["mediaStripped"] else "parseable")
    return out


# ---------------------------------------------------------------------------------
# Lines
# ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        ("", []),
        ("\n", [""]),
        ("a", ["a"]),
        ("a\n", ["a"]),
        ("a\n\n", ["a", ""]),
        ("a\nb", ["a", "b"]),
        ("a\r\nb\r\n", ["a", "b"]),
        ("a\rb\n", ["a\rb"]),
        ("a\r\r\n", ["a\r"]),
        ("\r\n", [""]),
    ],
)
def test_split_on_newlines(text: str, lines: list[str]) -> None:
    assert split_transcript_lines(text) == lines
    assert split_transcript_lines(text.encode("utf-8")) == lines


def test_invalid_utf8_decodes_to_replacement_characters() -> None:
    raw = b'{"a":"\xf0\x9f\x98"}\n\xed\xa0\x80\n'
    assert split_transcript_lines(raw) == ['{"a":"\ufffd"}', "\ufffd\ufffd\ufffd"]


def test_a_byte_order_mark_is_kept_and_makes_the_first_line_unparsable() -> None:
    raw = "\ufeff" + compact(user("u-1", "bom")) + "\n" + compact(user("u-2", "next"))
    lines = split_transcript_lines(raw.encode("utf-8"))
    assert lines[0].startswith("\ufeff")
    assert [entry["uuid"] for entry in entries_from_lines(SESSION, lines)] == ["u-2"]


@given(st.lists(st.text().map(lambda s: s.replace("\n", "").replace("\r", "")), max_size=5))
def test_lines_written_with_a_final_newline_read_back(lines: list[str]) -> None:
    text = "".join(line + "\n" for line in lines)
    assert split_transcript_lines(text) == lines


# ---------------------------------------------------------------------------------
# The guard
# ---------------------------------------------------------------------------------


def test_the_bound_is_utf8_bytes_and_inclusive() -> None:
    assert not is_oversize_line("a" * MAX_SESSION_LINE_BYTES)
    assert is_oversize_line("a" * (MAX_SESSION_LINE_BYTES + 1))
    assert not is_oversize_line("é" * (MAX_SESSION_LINE_BYTES // 2))
    assert is_oversize_line("é" * (MAX_SESSION_LINE_BYTES // 2) + "a")
    assert not is_oversize_line("😀" * (MAX_SESSION_LINE_BYTES // 4))
    assert is_oversize_line("😀" * (MAX_SESSION_LINE_BYTES // 4) + "a")


def test_lines_under_the_bound_keep_their_images() -> None:
    under = compact(user("u-1", [text("x"), image(b64(b"p" * 150_000))]))
    assert not is_oversize_line(under)
    [line] = read_transcript_lines([under])
    assert line == {"kind": "parseable", "lineNumber": 1, "text": under, "mediaStripped": False}


def test_each_shape_of_line_and_the_numbering() -> None:
    photo = compact(user("u-2", [text("look"), image(b64(b"p" * 200_000))]))
    huge_text = compact(user("u-3", "z" * MAX_SESSION_LINE_BYTES))
    both = compact(user("u-4", [text("z" * MAX_SESSION_LINE_BYTES), image(b64(b"p" * 200_000))]))
    lines = ["", compact(user("u-1", "hi")), photo, huge_text, both, "// comment"]
    assert kinds(lines) == [
        "parseable",
        "parseable",
        "stripped",
        "oversize",
        "oversize",
        "parseable",
    ]
    assert [line["lineNumber"] for line in read_transcript_lines(lines)] == [1, 2, 3, 4, 5, 6]
    stripped = read_transcript_lines(lines)[2]
    assert stripped["kind"] == "parseable"
    assert json.loads(stripped["text"])["message"]["content"][1]["source"]["data"] == (
        STRIPPED_MEDIA_MARKER
    )
    oversize = read_transcript_lines(lines)[4]
    assert oversize == {"kind": "oversize", "lineNumber": 5, "raw": both}


# ---------------------------------------------------------------------------------
# Stubs for oversize lines
# ---------------------------------------------------------------------------------

BIG = "z" * (MAX_SESSION_LINE_BYTES + 10)


def stub_text(line: str) -> str:
    return f"[message too large to display: ~{(len(line.encode()) + 512) // 1024} KB]"


def test_a_user_stub_reads_its_envelope_from_the_head() -> None:
    line = compact(user("u-big", BIG))
    assert oversize_entry(line, 7) == {
        "uuid": "u-big",
        "type": "user",
        "timestamp": TS,
        "content": [{"type": "text", "text": stub_text(line)}],
    }


@pytest.mark.parametrize(
    ("record", "why"),
    [
        ({"type": "system", "uuid": "x", "content": BIG}, "system"),
        ({"type": "user", "isMeta": True, "uuid": "x", "message": {"content": BIG}}, "isMeta"),
        ({"isMeta": True, "uuid": "x", "message": {"content": BIG}}, "isMeta without a type"),
        (
            {"type": "assistant", "uuid": "x", "message": {"model": "<synthetic>", "content": BIG}},
            "synthetic",
        ),
        (
            {
                "type": "user",
                "uuid": "x",
                "message": {"content": [{"type": "tool_result", "content": "r"}, text(BIG)]},
            },
            "tool_result plumbing, even with text",
        ),
    ],
)
def test_each_stub_drop_rule(record: JsonObject, why: str) -> None:
    assert oversize_entry(compact(record), 1) is None, why


def test_a_stub_without_a_uuid_in_its_head_is_named_by_line_number() -> None:
    no_uuid = compact({"type": "user", "message": {"content": BIG}})
    late_uuid = compact({"type": "user", "message": {"content": BIG}, "uuid": "u-late"})
    empty_uuid = compact({"type": "user", "uuid": "", "message": {"content": BIG}})
    for line in (no_uuid, late_uuid, empty_uuid):
        stub = oversize_entry(line, 42)
        assert stub is not None
        assert stub["uuid"] == "oversize-42"
        assert stub["timestamp"] == ""


def test_marks_past_the_head_are_not_seen() -> None:
    padding = "p" * SNIFF_CHARS
    line = compact({"type": "user", "pad": padding, "isMeta": True, "message": {"content": BIG}})
    stub = oversize_entry(line, 1)
    assert stub is not None
    assert stub["type"] == "user"


def test_the_top_level_type_is_the_envelope() -> None:
    # (ours) A nested type comes first here; the record's own type decides.
    user_first = compact({"type": "user", "x": {"type": "system"}, "message": {"content": BIG}})
    nested_first = compact({"x": {"type": "system"}, "type": "user", "message": {"content": BIG}})
    assert oversize_entry(user_first, 1) is not None
    assert oversize_entry(nested_first, 1) is not None
    # A progress line carrying a copy of a user message is not a user turn.
    progress = compact({"type": "progress", "data": {"message": {"type": "user", "x": BIG}}})
    assert oversize_entry(progress, 1) is None


@pytest.mark.parametrize(
    "record_type",
    ["queue-operation", "last-prompt", "api-request-blob", "attachment", "summary", "x-new"],
)
def test_an_oversize_line_of_any_other_type_is_dropped(record_type: str) -> None:
    # Claude Code 2.1 copies a prompt into lines of these types: over the bound
    # they are no message of anybody's (the parse drops them too).
    line = compact({"type": record_type, "sessionId": "s", "content": BIG})
    assert oversize_entry(line, 1) is None
    # The type may come after other keys, as `attachment` lines have it.
    late = compact(
        {
            "parentUuid": None,
            "attachment": {"type": "file", "c": "x"},
            "type": record_type,
            "pad": BIG,
        }
    )
    assert oversize_entry(late, 1) is None


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        ('{"type":"user","a":1}', "user"),
        ('{"x":{"type":"system"},"type":"assistant"', "assistant"),
        ('{"a":[{"type":"user"}],"type":"attachment"', "attachment"),
        # A string holding the key is not the key; nor is an escaped quote its end.
        ('{"a":"\\"type\\":\\"user","type":"system"}', "system"),
        ('{"a":"type","type":"q"}', "q"),
        # Cut off before the value ends, or before any top-level type: unknown.
        ('{"message":{"type":"message","content":[{"type":"text","text":"zz', None),
        ('{"type":"us', None),
        ('[{"type":"user"}]', None),
        ("", None),
    ],
)
def test_sniffing_the_record_type(head: str, expected: str | None) -> None:
    assert sniff_record_type(head) == expected


def test_the_top_level_keys_a_head_shows() -> None:
    head = '{"parentUuid":null,"n":{"a":"b"},"list":["x"],"type":"user","message":{"content":"zz'
    assert sniff_top_level_keys(head) == [
        ("parentUuid", None),
        ("n", None),
        ("list", None),
        ("type", "user"),
        ("message", None),
    ]
    assert sniff_top_level_keys('{"k":"v\\"q","t":"cut') == [("k", 'v\\"q'), ("t", None)]
    assert sniff_top_level_keys("not json") == []
    # An array's strings are not keys, however they are laid out.
    assert sniff_top_level_keys('["a","message","x","y"]') == []
    assert oversize_entry('["a","message",' + '"z",' * 70_000 + '"z"]', 1) is None


def test_an_untyped_head_is_a_turn_only_with_a_message() -> None:
    with_message = compact({"uuid": "u-x", "message": {"content": BIG}, "type": "user"})
    without = compact({"parentUuid": None, "attachment": {"content": BIG}, "type": "attachment"})
    assert oversize_entry(with_message, 1) is not None
    assert oversize_entry(without, 1) is None


def test_an_unattributed_stub_is_the_assistants() -> None:
    stub = oversize_entry(compact({"uuid": "u-x", "message": {"content": BIG}}), 3)
    assert stub is not None
    assert stub["type"] == "assistant"


@pytest.mark.parametrize(
    ("size", "kilobytes"),
    [(262_655, 256), (262_656, 257), (262_657, 257), (263_679, 257), (263_680, 258)],
)
def test_the_stub_size_rounds_half_up(size: int, kilobytes: int) -> None:
    head, foot = '{"type":"user","uuid":"u","message":{"content":"', '"}}'
    line = head + "z" * (size - len(head) - len(foot)) + foot
    assert len(line.encode()) == size
    stub = oversize_entry(line, 1)
    assert stub is not None
    assert stub["content"] == [
        {"type": "text", "text": f"[message too large to display: ~{kilobytes} KB]"}
    ]


# The stub and the parse should drop the same records. For records whose fate
# depends on the envelope alone they agree, and (ours) so do they on an image-only
# user turn, which both keep; the one place they differ is §1.1's accepted
# limitation, pinned below so a change to either side is noticed.
AGREEING_FAMILY: list[JsonObject] = [
    {"type": "system", "subtype": "local_command", "uuid": "x", "content": "c"},
    user("u", "typed text"),
    {"type": "user", "isMeta": True, "uuid": "u", "message": {"role": "user", "content": "meta"}},
    assistant("a", [text("reply")]),
    assistant("a", [text("No response requested.")], model="<synthetic>"),
    user("u", [{"type": "tool_result", "tool_use_id": "t", "content": "result"}]),
    user("u", [image("QUJD")]),
    # (ours) a background task's notification, as Claude Code writes it and as a block.
    user("u", "<task-notification>\n<status>completed</status>\n</task-notification>"),
    user("u", [text("<task-notification>\n<result>r</result>\n</task-notification>")]),
]


@pytest.mark.parametrize("record", AGREEING_FAMILY)
def test_stub_and_parse_agree_on_what_to_drop(record: JsonObject) -> None:
    padded = json.loads(json.dumps(record))
    padded["padding"] = "z" * (MAX_SESSION_LINE_BYTES + 10)
    kept_by_parse = entry_from_record(record, None) is not None
    kept_by_stub = oversize_entry(compact(padded), 1) is not None
    assert kept_by_parse == kept_by_stub


def test_accepted_limitation_tool_result_with_text() -> None:
    record = user("u", [{"type": "tool_result", "tool_use_id": "t", "content": "r"}, text("real")])
    assert entry_from_record(record, None) is not None
    assert oversize_entry(compact({**record, "padding": BIG}), 1) is None


def test_an_oversize_image_only_turn_is_a_stub_as_its_parse_is_an_entry() -> None:
    # §1.1 listed this as a limitation (the stub showed what the parse dropped);
    # with image-only turns kept (ours) the two agree.
    record = user("u", [image("QUJD")])
    assert entry_from_record(record, None) is not None
    assert oversize_entry(compact({**record, "padding": BIG}), 1) is not None


# ---------------------------------------------------------------------------------
# Entries
# ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("record", "why"),
    [
        ({"type": "progress", "uuid": "p", "data": {}, "message": {"content": "x"}}, "progress"),
        ({"type": "system", "uuid": "s", "message": {"content": "x"}}, "system"),
        ({"type": "summary", "summary": "t"}, "metadata"),
        ({"type": "user", "uuid": "u", "message": "hello"}, "message not an object"),
        ({"type": "user", "uuid": "u"}, "no message"),
        (user("u", "x", isMeta=True), "isMeta"),
        (assistant("a", [text("x")], model="<synthetic>"), "synthetic"),
        (assistant("a", []), "assistant without blocks"),
        (user("u", [{"type": "tool_result", "tool_use_id": "t", "content": "r"}]), "plumbing"),
        (user("u", [{"type": "image"}]), "an image with nothing to show"),
        (user("u", [{"type": "image", "source": {"type": "file", "file_id": "f"}}]), "file image"),
        (
            user("u", [{"type": "tool_result", "tool_use_id": "t", "content": [image("QUJD")]}]),
            "plumbing whose image is nested",
        ),
        (user("u", [text("  \n\u3000")]), "blank text"),
        (user("u", "Tool loaded."), "plumbing text"),
        (user("u", [text("Todos have been modified successfully."), text(" ")]), "todos text"),
    ],
)
def test_records_that_are_not_history(record: JsonObject, why: str) -> None:
    assert entry_from_record(record, None) is None, why


@pytest.mark.parametrize(
    ("text", "plumbing"),
    [
        ("Tool loaded.", True),
        ("\ufeff Tool loaded.\u2028\n", True),
        ("Tool loaded. Thanks", False),
        ("Tool loaded.\x85", False),
        ("tool loaded.", False),
        ("Todos have been modified successfully.", True),
        ("\u3000Todos have been modified", True),
        ("Note: Todos have been modified", False),
        ("", False),
    ],
)
def test_plumbing_is_the_trimmed_text(text: str, plumbing: bool) -> None:
    # Exactly "Tool loaded.", or a start of "Todos have been modified", after a JS trim.
    assert is_plumbing_message(text) is plumbing


def test_blank_means_javascript_whitespace() -> None:
    # U+FEFF and U+2028 are JavaScript whitespace; U+001C and U+0085 are only Python's.
    assert entry_from_record(user("u", [text("\ufeff\u2028")]), None) is None
    assert entry_from_record(user("u", [text("\x1c")]), None) is not None
    assert entry_from_record(user("u", [text("\x85")]), None) is not None


def test_an_empty_string_reply_is_one_empty_block_and_kept() -> None:
    entry = entry_from_record(assistant("a", ""), None)
    assert entry is not None
    assert entry["content"] == [text("")]


def test_the_missing_uuid_and_timestamp_read_as_empty() -> None:
    entry = entry_from_record({"type": "user", "message": {"content": "x"}}, None)
    assert entry == {"uuid": "", "type": "user", "timestamp": "", "content": [text("x")]}


def test_a_failed_upload_alone_is_kept_as_its_placeholder() -> None:
    entry = entry_from_record(user("u", [image("")]), SESSION)
    assert entry is not None
    assert entry["content"] == [{"type": "text", "text": IMAGE_NOT_DISPLAYED}]


@pytest.mark.parametrize(
    ("content", "shown"),
    [
        ([image("QUJD")], {"type": "image", "mediaType": "image/png", "dataBase64": "QUJD"}),
        (
            [{"type": "image", "source": {"type": "url", "url": "https://example.com/p.png"}}],
            {"type": "image", "imageUrl": "https://example.com/p.png"},
        ),
    ],
)
def test_an_image_only_user_turn_is_kept(content: JsonValue, shown: JsonObject) -> None:
    # (ours) The original dropped every user turn without text; a photo is enough.
    entry = entry_from_record(user("u", content), None)
    assert entry is not None
    assert entry["content"] == [shown]


def test_a_caption_less_photo_too_big_to_read_keeps_its_turn_and_its_reference() -> None:
    # A 300 KB line holding one photo sent without a caption: the original dropped the turn
    # and its reference (`docs/spec-decisions.md#image-only-turns-kept`).
    photo = b"\xff\xd8" * 115_000
    line = compact(user("u-photo", [image(b64(photo))]))
    assert len(line.encode()) > 300_000
    assert kinds([line]) == ["stripped"]
    assert entries_from_lines(SESSION, [line]) == [
        {
            "uuid": "u-photo",
            "type": "user",
            "timestamp": TS,
            "content": [
                {"type": "image", "imageRef": f"{SESSION}/u-photo/0", "mediaType": "image/png"}
            ],
        }
    ]
    assert extract_media(line, 0) == {"ok": True, "mediaType": "image/png", "data": photo}


def test_an_image_keeps_a_turn_whose_only_text_is_plumbing() -> None:
    entry = entry_from_record(user("u", [text("Tool loaded."), image("QUJD")]), None)
    assert entry is not None
    assert [block["type"] for block in entry["content"]] == ["text", "image"]


def test_the_sender_is_read_from_the_typed_tag() -> None:
    typed = '<typed user="Ann" user-email="ann@example.com">hi</typed>'
    entry = entry_from_record(user("u", typed), None)
    assert entry is not None
    assert (entry.get("user"), entry.get("userEmail")) == ("Ann", "ann@example.com")
    plain = entry_from_record(user("u", "hi"), None)
    assert plain is not None
    assert "user" not in plain
    assert "userEmail" not in plain


def test_skipped_lines() -> None:
    good = compact(user("u-1", "kept"))
    lines = [
        "",
        "// Source: gist 46faec66",
        good,
        '{"type":"user","message":{"content":"x"},"n":NaN,"uuid":"u-nan"}',
        "[1]",
        good[: len(good) // 2],
    ]
    assert [entry["uuid"] for entry in entries_from_lines(SESSION, lines)] == ["u-1"]


def test_stripped_photo_and_failed_upload_in_one_turn() -> None:
    photo = b"\x89PNG" * 60_000
    line = compact(user("u-1", [text("two"), image(""), image(b64(photo))]))
    [entry] = entries_from_lines(SESSION, [line])
    assert entry["content"] == [
        text("two"),
        {"type": "text", "text": IMAGE_NOT_DISPLAYED},
        {"type": "image", "imageRef": f"{SESSION}/u-1/1", "mediaType": "image/png"},
    ]
    assert extract_media(line, 1) == {"ok": True, "mediaType": "image/png", "data": photo}
    assert extract_media(line, 0) == {"ok": False, "reason": "no-payload"}


def test_only_stripped_lines_mint_references() -> None:
    with_marker = compact(user("u-1", [text("small"), image(STRIPPED_MEDIA_MARKER)]))
    [entry] = entries_from_lines(SESSION, [with_marker])
    assert entry["content"][1] == {"type": "text", "text": IMAGE_NOT_DISPLAYED}


def test_a_half_written_photo_line_is_skipped() -> None:
    line = compact(user("u-1", [text("look"), image(b64(b"p" * 200_000))]))
    assert entries_from_lines(SESSION, [compact(user("u-0", "before")), line[:-2]]) == [
        {"uuid": "u-0", "type": "user", "timestamp": TS, "content": [text("before")]}
    ]


@given(st.lists(st.text(max_size=60), max_size=8))
def test_any_text_reads_without_error_into_wire_shaped_entries(lines: list[str]) -> None:
    for entry in entries_from_lines(SESSION, lines):
        assert isinstance(entry["uuid"], str)
        assert entry["type"] in ("user", "assistant")
        assert isinstance(entry["timestamp"], str)
        assert isinstance(entry["content"], list)


# ---------------------------------------------------------------------------------
# Slices
# ---------------------------------------------------------------------------------


def numbered(count: int) -> list[SessionEntry]:
    return [
        {
            "uuid": f"u-{n}",
            "type": "user",
            "timestamp": TS,
            "content": [{"type": "text", "text": str(n)}],
        }
        for n in range(count)
    ]


def uuids(entries: list[SessionEntry]) -> list[str]:
    return [entry["uuid"] for entry in entries]


def test_tail() -> None:
    history = history_tail(SESSION, numbered(10), 3)
    assert (history["sessionId"], uuids(history["entries"]), history["total"]) == (
        SESSION,
        ["u-7", "u-8", "u-9"],
        10,
    )
    assert uuids(history_tail(SESSION, numbered(2), 5)["entries"]) == ["u-0", "u-1"]
    assert history_tail(SESSION, [], MAX_SESSION_ENTRIES) == {
        "sessionId": SESSION,
        "entries": [],
        "total": 0,
    }


def test_page() -> None:
    entries = numbered(10)
    assert uuids(history_page(SESSION, entries, 0, 2)["entries"]) == ["u-0", "u-1"]
    assert uuids(history_page(SESSION, entries, 8, 5)["entries"]) == ["u-8", "u-9"]
    assert history_page(SESSION, entries, 10, 5) == {
        "sessionId": SESSION,
        "entries": [],
        "total": 10,
    }
    assert history_page(SESSION, entries, 99, MAX_SESSION_ENTRIES)["total"] == 10


@pytest.mark.parametrize("tail", [0, -1, MAX_SESSION_ENTRIES + 1, True])
def test_tail_bounds(tail: int) -> None:
    with pytest.raises(InvalidHistorySlice):
        history_tail(SESSION, numbered(3), tail)


@pytest.mark.parametrize(
    ("offset", "limit"), [(-1, 1), (0, 0), (0, MAX_SESSION_ENTRIES + 1), (False, 1), (0, True)]
)
def test_page_bounds(offset: int, limit: int) -> None:
    with pytest.raises(InvalidHistorySlice):
        history_page(SESSION, numbered(3), offset, limit)


@given(st.integers(0, 30), st.integers(0, 40), st.integers(1, 40))
def test_pages_tile_the_history(count: int, offset: int, limit: int) -> None:
    entries = numbered(count)
    page = history_page(SESSION, entries, offset, limit)
    assert page["entries"] == entries[offset : offset + limit]
    assert page["total"] == count


# ---------------------------------------------------------------------------------
# The corpus of real transcripts
# ---------------------------------------------------------------------------------

CORPUS_CANDIDATES = [
    Path(__file__).resolve().parents[3] / "shared" / "corpus" / "claude-transcripts",
    Path("/work/shared/corpus/claude-transcripts"),
]
CORPUS = next((path for path in CORPUS_CANDIDATES if path.is_dir()), None)


@pytest.mark.skipif(CORPUS is None, reason="the transcript corpus (shared/corpus) is absent")
def test_every_corpus_transcript_reads() -> None:
    assert CORPUS is not None
    files = sorted(CORPUS.rglob("*.jsonl"))
    assert len(files) >= 10
    total = 0
    for path in files:
        lines = split_transcript_lines(path.read_bytes())
        entries = entries_from_lines(path.stem, lines)
        total += len(entries)
        for entry in entries:
            assert entry["type"] in ("user", "assistant"), path
    assert total > 500


@pytest.mark.skipif(CORPUS is None, reason="the transcript corpus (shared/corpus) is absent")
def test_corpus_photos_follow_back_to_their_bytes() -> None:
    assert CORPUS is not None
    served = 0
    for path in sorted(CORPUS.rglob("*.jsonl")):
        for line in split_transcript_lines(path.read_bytes()):
            record = parse_json_object_or_none(line)
            if record is None or not isinstance(record.get("message"), dict):
                continue
            message = record["message"]
            assert isinstance(message, dict)
            for index, block in enumerate(image_blocks(message.get("content"))):
                source = block.get("source")
                assert isinstance(source, dict)
                data = source.get("data")
                if isinstance(data, str) and len(data) >= 1024:
                    result = extract_media(line, index)
                    assert result["ok"], (path, index)
                    assert result["data"] == base64.b64decode(data)
                    served += 1
    assert served >= 2


@pytest.mark.skipif(CORPUS is None, reason="the transcript corpus (shared/corpus) is absent")
def test_the_corpus_screenshot_line_is_stripped_and_its_nested_image_never_referenced() -> None:
    assert CORPUS is not None
    path = CORPUS / "session-share" / "images-in-tool-results.jsonl"
    if not path.exists():
        pytest.skip(f"{path.name} is absent")
    lines = split_transcript_lines(path.read_bytes())
    assert kinds(lines)[3] == "stripped"
    entries = entries_from_lines(path.stem, lines)
    assert all("imageRef" not in block for entry in entries for block in entry["content"])
