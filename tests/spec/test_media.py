"""Photos in a replayed conversation (`beebox_spec.media`).

The heart of it is one property: every reference the history read mints is
followed back, through the line lookup and the extraction, to the bytes of the
very image it was minted for — and a failed upload never gets a reference.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from beebox_spec.entries import IMAGE_NOT_DISPLAYED, JsonObject, JsonValue
from beebox_spec.media import (
    BASE64_PAYLOAD_RE,
    MAX_IMAGE_INDEX,
    MAX_MEDIA_LINE_BYTES,
    OCTET_STREAM,
    SERVABLE_MEDIA_TYPES,
    STRIPPED_MEDIA_MARKER,
    MalformedMediaRef,
    MediaEntryRef,
    MediaRef,
    decode_base64_payload,
    encode_media_ref,
    extract_media,
    find_line_by_uuid,
    image_blocks,
    parse_media_ref,
    parse_media_ref_or_none,
    strip_inline_media,
    summarize_tool_input,
    transform_content,
)
from beebox_spec.transcript import (
    PHOTO_MODES,
    PhotoMode,
    entries_from_lines,
    read_transcript_lines,
    split_transcript_lines,
)

SESSION = "47bf5f5c-9e11-4f51-8a29-7ad38ecdf17c"
MARKER = STRIPPED_MEDIA_MARKER


def compact(value: Any) -> str:
    """A transcript line as Claude Code writes it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def image(data: str | None, media_type: str | None = "image/png") -> JsonObject:
    source: JsonObject = {"type": "base64"}
    if media_type is not None:
        source["media_type"] = media_type
    if data is not None:
        source["data"] = data
    return {"type": "image", "source": source}


def user_line(uuid: str, content: JsonValue, **extra: JsonValue) -> str:
    record: JsonObject = {"type": "user", "message": {"role": "user", "content": content}}
    record["uuid"] = uuid
    record["timestamp"] = "2026-03-01T10:00:00.000Z"
    record.update(extra)
    return compact(record)


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


# ---------------------------------------------------------------------------------
# The strip rule
# ---------------------------------------------------------------------------------


def test_strip_answers_none_when_nothing_matches() -> None:
    assert strip_inline_media(user_line("u-1", [image("QUJD")])) is None
    assert strip_inline_media("") is None


def test_strip_keeps_the_key_and_replaces_only_the_payload() -> None:
    payload = "QUJD" * 300
    line = compact({"a": {"data": payload}, "b": {"base64": payload}, "c": {"other": payload}})
    stripped = strip_inline_media(line)
    assert stripped is not None
    assert json.loads(stripped) == {
        "a": {"data": MARKER},
        "b": {"base64": MARKER},
        "c": {"other": payload},
    }


def test_strip_floor_is_1024_characters() -> None:
    assert strip_inline_media(compact({"data": "A" * 1023})) is None
    assert strip_inline_media(compact({"data": "A" * 1024})) == compact({"data": MARKER})


@pytest.mark.parametrize(
    "line",
    [
        pytest.param('{"data": "' + "A" * 2000 + '"}', id="pretty-printed"),
        pytest.param('{"data":"data:image/png;base64,' + "A" * 2000 + '"}', id="data-url"),
        pytest.param('{"data":"' + "A" * 1000 + "\\/" + "A" * 1000 + '"}', id="escaped-slash"),
        pytest.param('{"data":"' + "A" * 2000 + '\\n"}', id="escaped-newline"),
        pytest.param('{"DATA":"' + "A" * 2000 + '"}', id="key-case"),
        pytest.param('{"data":"' + "٣" * 2000 + '"}', id="non-ascii-digits"),
        pytest.param(
            compact({"text": '"data":"' + "A" * 2000 + '"'}), id="text-that-quotes-a-payload"
        ),
    ],
)
def test_strip_leaves_non_payloads_alone(line: str) -> None:
    assert strip_inline_media(line) is None


def test_strip_is_textual_and_works_on_a_torn_line() -> None:
    torn = '{"message":{"content":[{"source":{"data":"' + "A" * 2000 + '"'
    assert strip_inline_media(torn) == '{"message":{"content":[{"source":{"data":"' + MARKER + '"'


def test_a_stripped_line_never_matches_again() -> None:
    stripped = strip_inline_media(compact({"data": "QUJD" * 500, "base64": "QUJD" * 500}))
    assert stripped is not None
    assert strip_inline_media(stripped) is None


def test_a_key_ending_in_an_escaped_quote_and_data_is_stripped_too() -> None:
    # The textual rule's one oddity on valid JSON: the quote before `data` may be an
    # escaped quote inside a longer key.
    line = compact({'k"data': "QUJD" * 300})
    assert strip_inline_media(line) == compact({'k"data': MARKER})


json_keys = st.one_of(st.sampled_from(["data", "base64", "type", "source", "x"]), st.text())
long_base64 = st.binary(min_size=768, max_size=1600).map(b64)
json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(),
    st.sampled_from(["QUJD", MARKER]),
    long_base64,
)
json_trees = st.recursive(
    json_leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(json_keys, children, max_size=4)
    ),
    max_leaves=12,
)


def stripped_meaning(value: JsonValue) -> JsonValue:
    """What the strip means on compact JSON: payload members become the marker."""
    if isinstance(value, list):
        return [stripped_meaning(item) for item in value]
    if isinstance(value, dict):
        out: JsonObject = {}
        for key, item in value.items():
            is_payload_key = any(
                key == name or key.endswith('"' + name) for name in ("data", "base64")
            )
            is_payload = isinstance(item, str) and re.fullmatch(r"[A-Za-z0-9+/=]{1024,}", item)
            out[key] = MARKER if is_payload_key and is_payload else stripped_meaning(item)
        return out
    return value


@given(json_trees)
def test_strip_means_every_long_data_or_base64_string_becomes_the_marker(tree: JsonValue) -> None:
    line = compact(tree)
    stripped = strip_inline_media(line)
    expected = stripped_meaning(tree)
    if stripped is None:
        assert expected == tree
    else:
        assert expected != tree
        assert json.loads(stripped) == expected


# ---------------------------------------------------------------------------------
# The reference grammar
# ---------------------------------------------------------------------------------

safe_ids = st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True)


@given(safe_ids, safe_ids, st.integers(0, MAX_IMAGE_INDEX))
def test_encode_then_parse_round_trips(session_id: str, entry_uuid: str, index: int) -> None:
    ref: MediaRef = {"sessionId": session_id, "entryUuid": entry_uuid, "index": index}
    assert parse_media_ref(encode_media_ref(ref)) == ref


@given(st.text(max_size=80))
def test_a_parsed_reference_re_encodes_without_leading_zeros(raw: str) -> None:
    ref = parse_media_ref_or_none(raw)
    if ref is not None:
        session_id, entry_uuid, raw_index = raw.split("/")
        assert encode_media_ref(ref) == f"{session_id}/{entry_uuid}/{int(raw_index)}"


@pytest.mark.parametrize(
    ("raw", "rule"),
    [
        ("s-1/../../secrets/0", "3 '/'-separated parts"),
        ("s-1/u-1/0/1", "3 '/'-separated parts"),
        ("s-1/u-1", "3 '/'-separated parts"),
        ("../u-1/0", "session id"),
        ("./u-1/0", "session id"),
        ("/u-1/0", "session id"),
        ("s" * 65 + "/u-1/0", "session id"),
        ("séance/u-1/0", "session id"),
        ("s-1/u.1/0", "entry uuid"),
        ("s-1//0", "entry uuid"),
        ("s-1/" + "u" * 65 + "/0", "entry uuid"),
        ("s-1/ü/0", "entry uuid"),
        ("s-1/u-1/", "index"),
        ("s-1/u-1/1000", "index"),
        ("s-1/u-1/0001", "index"),
        ("s-1/u-1/١", "index"),
        ("s-1/u-1/１", "index"),
        ("s-1/u-1/1\n", "index"),
        ("s-1/u-1/-1", "index"),
        ("s-1/u-1/+1", "index"),
        ("s-1/u-1/ 1", "index"),
        ("s-1/u-1/1.0", "index"),
    ],
)
def test_every_malformed_reference_names_its_rule(raw: str, rule: str) -> None:
    with pytest.raises(MalformedMediaRef) as caught:
        parse_media_ref(raw)
    assert rule in caught.value.rule
    assert parse_media_ref_or_none(raw) is None


def test_leading_zeros_are_accepted_and_dropped() -> None:
    assert parse_media_ref("s/u/007") == {"sessionId": "s", "entryUuid": "u", "index": 7}
    assert parse_media_ref("s/u/000") == {"sessionId": "s", "entryUuid": "u", "index": 0}


@pytest.mark.parametrize(
    "ref",
    [
        {"sessionId": "s", "entryUuid": "u", "index": 1000},
        {"sessionId": "s", "entryUuid": "u", "index": -1},
        {"sessionId": "s", "entryUuid": "u", "index": True},
        {"sessionId": "s/x", "entryUuid": "u", "index": 0},
        {"sessionId": "..", "entryUuid": "u", "index": 0},
        {"sessionId": "s", "entryUuid": "", "index": 0},
    ],
)
def test_encode_refuses_what_parse_would_refuse(ref: MediaRef) -> None:
    with pytest.raises(MalformedMediaRef):
        encode_media_ref(ref)


# ---------------------------------------------------------------------------------
# The one enumeration
# ---------------------------------------------------------------------------------


def test_image_blocks_are_top_level_object_blocks_in_document_order() -> None:
    first, second = image("QUJD"), image(None, "image/gif")
    nested: JsonObject = {"type": "tool_result", "content": [image("QUJD")]}
    content: JsonValue = [
        {"type": "text", "text": "x"},
        first,
        nested,
        ["image"],
        "image",
        {"type": "document", "source": {"data": "QUJD"}},
        second,
    ]
    assert image_blocks(content) == [first, second]
    assert image_blocks(content)[1] is second
    assert image_blocks("a string prompt") == []
    assert image_blocks(None) == []


# ---------------------------------------------------------------------------------
# Minting (transform_content) beyond the vectors
# ---------------------------------------------------------------------------------


MINTING_ITEMS = st.sampled_from(
    [
        image(MARKER),
        image(MARKER, None),
        image(""),
        image(None),
        image("QUJD"),
        {"type": "image"},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/p.png"}},
        {"type": "text", "text": "x"},
        {"type": "thinking", "thinking": "t"},
        {"type": "tool_result", "tool_use_id": "t", "content": [image(MARKER)]},
        {"type": "document", "source": {"type": "base64", "data": MARKER}},
        {"type": "IMAGE", "source": {"type": "base64", "data": MARKER}},
        "image",
        ["image"],
        None,
    ]
).map(lambda item: json.loads(json.dumps(item)))  # a fresh object every draw


@given(st.lists(MINTING_ITEMS, max_size=12))
def test_every_minted_index_is_the_blocks_position_among_image_blocks(
    content: list[JsonValue],
) -> None:
    shown = transform_content(content, {"sessionId": "s", "entryUuid": "u"})
    objects = [item for item in content if isinstance(item, dict)]
    images = image_blocks(content)
    assert len(shown) == len(objects)
    for original, block in zip(objects, shown, strict=True):
        source = original.get("source")
        stripped = (
            original.get("type") == "image"
            and isinstance(source, dict)
            and source.get("type") == "base64"
            and source.get("data") == MARKER
        )
        # Every stripped top-level image, and nothing else, gets a reference …
        assert ("imageRef" in block) == stripped
        if "imageRef" in block:
            # … naming its own position in the one enumeration.
            assert images[parse_media_ref(block["imageRef"])["index"]] is original


def test_the_thousandth_image_gets_no_reference() -> None:
    ref: MediaEntryRef = {"sessionId": "s", "entryUuid": "u"}
    blocks = transform_content([image(MARKER) for _ in range(MAX_IMAGE_INDEX + 2)], ref)
    assert blocks[MAX_IMAGE_INDEX] == {
        "type": "image",
        "imageRef": f"s/u/{MAX_IMAGE_INDEX}",
        "mediaType": "image/png",
    }
    assert blocks[MAX_IMAGE_INDEX + 1] == {"type": "text", "text": IMAGE_NOT_DISPLAYED}


def test_a_stripped_photo_and_a_failed_upload_in_one_turn() -> None:
    content: JsonValue = [{"type": "text", "text": "both"}, image(""), image(MARKER, "image/jpeg")]
    blocks = transform_content(content, {"sessionId": "s-1", "entryUuid": "u-1"})
    assert blocks == [
        {"type": "text", "text": "both"},
        {"type": "text", "text": IMAGE_NOT_DISPLAYED},
        {"type": "image", "imageRef": "s-1/u-1/1", "mediaType": "image/jpeg"},
    ]


def test_summaries_never_split_a_character() -> None:
    command = "x" * 119 + "😀" + "y"
    assert summarize_tool_input("Bash", {"command": command}) == "x" * 119


# ---------------------------------------------------------------------------------
# Finding the line
# ---------------------------------------------------------------------------------


def test_the_parent_uuid_trap() -> None:
    lines = [
        user_line("u-1", "first"),
        compact({"parentUuid": "u-2", "type": "assistant", "uuid": "a-1", "message": {}}),
        user_line("u-2", "second", parentUuid="a-1"),
    ]
    assert find_line_by_uuid(lines, "u-2") == {"found": True, "lineNumber": 3}


def test_a_nested_progress_copy_is_not_the_line() -> None:
    progress = compact(
        {
            "type": "progress",
            "data": {"type": "agent_progress", "message": {"type": "user", "uuid": "u-5"}},
            "uuid": "p-1",
        }
    )
    assert find_line_by_uuid([progress], "u-5") == {"found": False, "reason": "not-found"}
    assert find_line_by_uuid([progress, user_line("u-5", "real")], "u-5") == {
        "found": True,
        "lineNumber": 2,
    }


def test_a_half_written_candidate_is_passed_over() -> None:
    torn = user_line("u-7", "written")[:-10]
    assert find_line_by_uuid([user_line("u-1", "a"), torn], "u-7") == {
        "found": False,
        "reason": "not-found",
    }
    assert find_line_by_uuid([torn, user_line("u-7", "again")], "u-7") == {
        "found": True,
        "lineNumber": 2,
    }


def big_line(uuid: str, total_bytes: int) -> str:
    head, foot = f'{{"uuid":"{uuid}","text":"', '"}'
    return head + "z" * (total_bytes - len(head) - len(foot)) + foot


def test_the_16_mib_limit() -> None:
    at_limit = big_line("u-big", MAX_MEDIA_LINE_BYTES)
    assert len(at_limit.encode()) == MAX_MEDIA_LINE_BYTES
    assert find_line_by_uuid([at_limit], "u-big") == {"found": True, "lineNumber": 1}
    over = big_line("u-big", MAX_MEDIA_LINE_BYTES + 1)
    assert find_line_by_uuid([over], "u-big") == {"found": False, "reason": "too-large"}


def test_the_16_mib_limit_counts_utf8_bytes() -> None:
    head, foot = '{"uuid":"u-big","text":"', '"}'
    # Half as many characters as bytes: too large only when counted in bytes.
    count = (MAX_MEDIA_LINE_BYTES - len(head) - len(foot)) // 2 + 1
    line = head + "é" * count + foot
    assert len(line) < MAX_MEDIA_LINE_BYTES < len(line.encode())
    assert find_line_by_uuid([line], "u-big") == {"found": False, "reason": "too-large"}


def test_a_too_large_candidate_answers_before_a_later_match() -> None:
    nested_big = (
        '{"type":"progress","data":{"message":{"uuid":"u-5"}},"text":"'
        + "z" * MAX_MEDIA_LINE_BYTES
        + '","uuid":"p-1"}'
    )
    lines = [nested_big, user_line("u-5", "real")]
    assert find_line_by_uuid(lines, "u-5") == {"found": False, "reason": "too-large"}


# ---------------------------------------------------------------------------------
# Extraction
# ---------------------------------------------------------------------------------


@given(st.binary(max_size=2000))
def test_decoding_valid_base64_is_plain_base64(raw: bytes) -> None:
    assert decode_base64_payload(b64(raw)) == raw


@pytest.mark.parametrize(
    ("payload", "decoded"),
    [
        ("QQ==QQ==", b"A"),
        ("=QQ==", b""),
        ("QUJDR", b"ABC"),
        ("QUJDRA", b"ABCD"),
        ("QUJDREU", b"ABCDE"),
        ("QQ=Q", b"A"),
        ("QR==", b"A"),
    ],
)
def test_decoding_follows_node_buffer_from_base64(payload: str, decoded: bytes) -> None:
    # The expected bytes are what Node's `Buffer.from(payload, "base64")` answers.
    assert decode_base64_payload(payload) == decoded


def test_unknown_media_types_fall_back_to_octet_stream() -> None:
    payload = b64(b"\x89PNG" * 400)
    for declared, served in [
        ("image/svg+xml", OCTET_STREAM),
        ("text/html", OCTET_STREAM),
        ("image/PNG", OCTET_STREAM),
        (None, OCTET_STREAM),
        *((media_type, media_type) for media_type in sorted(SERVABLE_MEDIA_TYPES)),
    ]:
        result = extract_media(user_line("u-1", [image(payload, declared)]), 0)
        assert result == {"ok": True, "mediaType": served, "data": b"\x89PNG" * 400}, declared


def test_a_half_written_line_is_unparsable() -> None:
    line = user_line("u-1", [image(b64(b"x" * 900))])
    assert extract_media(line[:-3], 0) == {"ok": False, "reason": "unparsable"}


def test_only_the_requested_payload_is_served() -> None:
    first, second = b"first" * 300, b"second" * 300
    line = user_line(
        "u-1",
        [image(b64(first)), {"type": "text", "text": "and"}, image(b64(second))],
        toolUseResult={"file": {"base64": b64(b"tool" * 300)}},
    )
    assert extract_media(line, 0) == {"ok": True, "mediaType": "image/png", "data": first}
    assert extract_media(line, 1) == {"ok": True, "mediaType": "image/png", "data": second}
    assert extract_media(line, 2) == {"ok": False, "reason": "no-such-image"}
    assert extract_media(line, -1) == {"ok": False, "reason": "no-such-image"}


@pytest.mark.parametrize(
    "token", ["cb-media-slot-00", "cb-media-slot-١", "cb-media-slot-", "cb-media-slot-+0"]
)
def test_slot_tokens_are_read_canonically(token: str) -> None:
    # Slot 0 exists (the toolUseResult payload); only the exact token names it.
    line = user_line("u-1", [image(token)], toolUseResult={"file": {"base64": b64(b"t" * 900)}})
    assert extract_media(line, 0) == {"ok": False, "reason": "no-payload"}


def test_a_forged_marker_gets_a_reference_that_finds_no_payload() -> None:
    # An image whose data literally reads the marker is indistinguishable from a
    # stripped one: on a stripped line it gets a reference, and that reference
    # answers no-payload (a 404), never another photo.
    photo = b"photo" * 60_000
    line = user_line("u-1", [{"type": "text", "text": "look"}, image(MARKER), image(b64(photo))])
    (entry,) = entries_from_lines(SESSION, [line])
    assert entry["content"][1:] == [
        {"type": "image", "imageRef": f"{SESSION}/u-1/0", "mediaType": "image/png"},
        {"type": "image", "imageRef": f"{SESSION}/u-1/1", "mediaType": "image/png"},
    ]
    assert extract_media(line, 0) == {"ok": False, "reason": "no-payload"}
    assert extract_media(line, 1) == {"ok": True, "mediaType": "image/png", "data": photo}


# ---------------------------------------------------------------------------------
# The property: mint, then follow back
# ---------------------------------------------------------------------------------

MEDIA_TYPES = st.sampled_from([*sorted(SERVABLE_MEDIA_TYPES), "image/svg+xml", "image/PNG", None])
TRICKY_TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        [
            '"data":"' + "QUJD" * 300 + '"',
            'he said \\"data\\":\\"hi\\"',
            "naïve café 😀 \u2028 end",
            '{"base64":"' + "A" * 1500 + '"}',
            '"uuid":"u-1"',
            "bbxStrippedMedia",
        ]
    ),
)


@st.composite
def payloads(draw: st.DrawFn) -> str:
    """Base64 of some bytes: short (inline), long (a payload), or huge (makes the line oversize)."""
    seed = draw(st.binary(min_size=1, max_size=24))
    size = draw(
        st.one_of(st.integers(1, 700), st.integers(768, 4000), st.integers(200_000, 240_000))
    )
    return b64((seed * (size // len(seed) + 1))[:size])


@st.composite
def image_blocks_drawn(draw: st.DrawFn) -> JsonObject:
    kind = draw(st.sampled_from(["payload", "payload", "payload", "empty", "missing", "url"]))
    media_type = draw(MEDIA_TYPES)
    source: dict[str, JsonValue] = {"type": "base64" if kind != "url" else "url"}
    if media_type is not None:
        source["media_type"] = media_type
    if kind == "payload":
        source["data"] = draw(payloads())
    elif kind == "empty":
        source["data"] = ""
    elif kind == "url":
        source["url"] = "https://example.com/p.png"
    order = draw(st.permutations(list(source)))
    return {"type": "image", "source": {key: source[key] for key in order}}


@st.composite
def other_blocks(draw: st.DrawFn) -> JsonObject:
    kind = draw(st.sampled_from(["text", "tool_result", "document", "tool_use"]))
    if kind == "text":
        return {"type": "text", "text": draw(TRICKY_TEXT)}
    if kind == "tool_result":
        return {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": [{"type": "text", "text": draw(TRICKY_TEXT)}, draw(image_blocks_drawn())],
        }
    if kind == "document":
        return {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": draw(payloads())},
        }
    return {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/a"}}


@st.composite
def transcripts(draw: st.DrawFn) -> tuple[str, JsonObject, list[str]]:
    """A record with images, and a transcript file holding it among decoys."""
    uuid = draw(st.one_of(st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True), st.just("")))
    content: list[JsonValue] = draw(
        st.lists(st.one_of(image_blocks_drawn(), other_blocks()), min_size=1, max_size=6)
    )
    if draw(st.booleans()):
        content.append({"type": "text", "text": draw(TRICKY_TEXT)})
    record_type = draw(st.sampled_from(["user", "user", "assistant"]))
    fields: dict[str, JsonValue] = {
        "parentUuid": "p-0",
        "type": record_type,
        "message": {"role": record_type, "content": content},
        "timestamp": "2026-03-01T10:00:00.000Z",
    }
    if uuid:
        fields["uuid"] = uuid
    if draw(st.booleans()):
        fields["toolUseResult"] = {"type": "image", "file": {"base64": draw(payloads())}}
    order = draw(st.permutations(list(fields)))
    record = {key: fields[key] for key in order}
    decoys = [
        # The parent-uuid trap and a nested progress copy of the entry's uuid.
        compact({"parentUuid": uuid, "type": "assistant", "uuid": "a-0", "message": {}}),
        compact({"type": "progress", "data": {"message": {"uuid": uuid}}, "uuid": "p-0"}),
        "// a comment line",
        "",
    ]
    before = draw(st.lists(st.sampled_from(decoys), max_size=4))
    return uuid, record, [*before, compact(record)]


def image_data(block: JsonObject) -> JsonValue:
    source = block.get("source")
    return source.get("data") if isinstance(source, dict) else None


def was_payload(block: JsonObject) -> bool:
    """A base64 image whose data the strip rule takes out (on a line it strips)."""
    source = block.get("source")
    data = image_data(block)
    return (
        isinstance(source, dict)
        and source.get("type") == "base64"
        and isinstance(data, str)
        and BASE64_PAYLOAD_RE.fullmatch(f'"data":"{data}"') is not None
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transcripts())
def test_refs_differs_from_original_only_by_stripping_lines_within_the_bound(
    drawn: tuple[str, JsonObject, list[str]],
) -> None:
    _, _, written = drawn
    file_lines = split_transcript_lines("\n".join(written) + "\n")
    original = read_transcript_lines(file_lines, photos="original")
    refs = read_transcript_lines(file_lines, photos="refs")
    for line, as_original, as_refs in zip(file_lines, original, refs, strict=True):
        stripped = strip_inline_media(line)
        if as_original["kind"] == "parseable" and not as_original["mediaStripped"] and stripped:
            # A line within the bound holding a payload: `refs` takes it out.
            assert as_refs == {**as_original, "text": stripped, "mediaStripped": True}
        else:
            assert as_refs == as_original


def test_refs_gives_a_small_photo_a_reference_and_leaves_a_tiny_one_inline() -> None:
    small, tiny = "iVBO" * 1700, "iVBO" * 20  # a 6.8 KB photo; 80 characters
    record = {
        "type": "user",
        "uuid": "u-1",
        "timestamp": "2026-03-01T10:00:00.000Z",
        "message": {
            "role": "user",
            "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                             "data": small}},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                             "data": tiny}},
                {"type": "text", "text": "look"},
            ],
        },
    }  # fmt: skip
    lines = [compact(record)]
    (as_original,) = entries_from_lines(SESSION, lines)
    (as_refs,) = entries_from_lines(SESSION, lines, photos="refs")
    assert [block.get("dataBase64") for block in as_original["content"][:2]] == [small, tiny]
    assert as_refs["content"] == [
        {"type": "image", "imageRef": f"{SESSION}/u-1/0", "mediaType": "image/png"},
        {"type": "image", "mediaType": "image/png", "dataBase64": tiny},
        {"type": "text", "text": "look"},
    ]
    # The reference follows back to the photo, as any minted in `original` does.
    assert extract_media(lines[0], 0) == {
        "ok": True,
        "mediaType": "image/png",
        "data": base64.b64decode(small),
    }


@pytest.mark.parametrize("photos", PHOTO_MODES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transcripts())
def test_every_minted_reference_follows_back_to_its_image(
    photos: PhotoMode, drawn: tuple[str, JsonObject, list[str]]
) -> None:
    uuid, record, written = drawn
    message = record["message"]
    assert isinstance(message, dict)
    content = message["content"]
    assert isinstance(content, list)
    originals = image_blocks(content)
    # A decoy owning the uuid would rightly be found first; a forged marker is its own test.
    assume(uuid not in {"a-0", "p-0"})
    assume(all(image_data(block) != MARKER for block in originals))

    file_lines = split_transcript_lines("\n".join(written) + "\n")
    classified = read_transcript_lines(file_lines, photos=photos)[-1]
    entries = entries_from_lines(SESSION, file_lines, photos=photos)
    ours = [entry for entry in entries if entry["uuid"] == uuid]
    minted = [block for entry in ours for block in entry["content"] if "imageRef" in block]

    # Only a line the guard stripped can carry references.
    stripped = classified["kind"] == "parseable" and classified["mediaStripped"]
    # In `refs` a parsed line keeps no payload: a line of any length is stripped.
    if photos == "refs" and classified["kind"] == "parseable":
        assert stripped == (strip_inline_media(file_lines[-1]) is not None)
    if not stripped or not uuid:
        assert minted == []
        return
    if not ours:
        # (ours) A turn holding a stripped photo is always history, text or not.
        assert not any(was_payload(block) for block in originals)
        return
    (entry,) = ours
    object_blocks = [block for block in content if isinstance(block, dict)]
    assert len(entry["content"]) == len(object_blocks)
    for original, shown in zip(object_blocks, entry["content"], strict=True):
        if original.get("type") != "image":
            assert "imageRef" not in shown
            continue
        source = original["source"]
        assert isinstance(source, dict)
        data = source.get("data")
        if source.get("type") == "base64" and not data:
            # A failed upload never gets a reference.
            assert shown == {"type": "text", "text": IMAGE_NOT_DISPLAYED}
            continue
        # A reference exactly for the payloads the strip took out.
        assert ("imageRef" in shown) == was_payload(original)
        if "imageRef" not in shown:
            continue
        ref = parse_media_ref(shown["imageRef"])
        assert (ref["sessionId"], ref["entryUuid"]) == (SESSION, uuid)
        assert originals[ref["index"]] is original
        found = find_line_by_uuid(file_lines, ref["entryUuid"])
        assert found == {"found": True, "lineNumber": len(file_lines)}
        result = extract_media(file_lines[-1], ref["index"])
        declared = source.get("media_type")
        assert result == {
            "ok": True,
            "mediaType": declared if declared in SERVABLE_MEDIA_TYPES else OCTET_STREAM,
            "data": base64.b64decode(str(data)),
        }
