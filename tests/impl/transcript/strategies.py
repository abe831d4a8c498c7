"""Hypothesis strategies for transcript files, and the spec's answers about them.

Lines are compact JSON as Claude Code writes them (`json.dumps(obj,
separators=(",", ":"), ensure_ascii=False)`), with the awkward cases mixed in:
images at the top level and nested in tool results, documents,
`toolUseResult.file.base64`, payloads just under, at and over 1,024 characters,
lines over 256 KiB that the strip makes fit (and ones it cannot), text holding
``"data":"`` and escaped quotes, a key ending in an escaped quote, non-ASCII,
keys in other orders, task notifications (small and oversize), pretty-printed
lines, progress lines embedding a copy of another message, `parentUuid` traps,
`//` comments, blank lines, invalid UTF-8, CRLF, and a torn last line. Big payloads
are a few drawn bytes repeated, so a 300 KB line costs one `b64encode`.
"""

from __future__ import annotations

import base64
import json
import string
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from beebox_spec.entries import JsonObject, JsonValue
from beebox_spec.media import (
    LineLookup,
    MediaRef,
    extract_media,
    find_line_by_uuid,
)
from beebox_spec.transcript import MAX_SESSION_LINE_BYTES, TASK_NOTIFICATION_TAG

TIMESTAMP = "2026-03-01T10:00:00.000Z"

# A small pool, so ids repeat: duplicates, nested copies and parentUuid traps.
UUIDS = ["u-1", "u-2", "u-3", "a_B9", "x-long-uuid-0123456789"]
# Tool ids repeat too: results answer calls (the history's rule 5), some twice, some none.
TOOL_IDS = ["toolu_1", "toolu_1", "toolu_2", "toolu_3", ""]
ABSENT_UUIDS = ["u-9", "u", "u-1x", "U-1", 'u-1"', "u-1 ", "", "é"]
SAFE_ID_CHARS = string.ascii_letters + string.digits + "_-"
BASE64_CHARS = string.ascii_letters + string.digits + "+/="


def compact(value: Any) -> str:
    """A transcript line as Claude Code writes it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def repeated_base64(seed: bytes, raw_length: int) -> str:
    """The base64 of `seed` repeated to `raw_length` bytes."""
    raw = (seed * (raw_length // len(seed) + 1))[:raw_length]
    return base64.b64encode(raw).decode("ascii")


@st.composite
def payloads(draw: st.DrawFn, *, big: bool = False) -> str:
    """A `data` value: empty, short, around the 1,024 floor, long, or line-sized."""
    seed = draw(st.binary(min_size=1, max_size=6))
    if big:
        # Enough to push a line over 256 KiB by itself.
        return repeated_base64(seed, draw(st.integers(200_000, 215_000)))
    kind = draw(st.sampled_from(["empty", "short", "edge", "long", "odd"]))
    if kind == "empty":
        return ""
    if kind == "short":
        return repeated_base64(seed, draw(st.integers(1, 300)))
    if kind == "edge":
        # Exactly around the floor, cut anywhere (alphabet strings, not always base64).
        return repeated_base64(seed, 800)[: draw(st.integers(1020, 1028))]
    if kind == "long":
        return repeated_base64(seed, draw(st.integers(800, 4000)))
    # Alphabet characters only, '=' anywhere: still a payload to the strip rule.
    return draw(st.text(alphabet=BASE64_CHARS, min_size=1020, max_size=1100))


MEDIA_TYPES = ["image/png", "image/jpeg", "image/webp", "image/svg+xml", "IMAGE/PNG", ""]


@st.composite
def image_blocks(draw: st.DrawFn, *, big: bool = False) -> JsonObject:
    """An image block: base64 (any payload), failed upload, URL, or sourceless."""
    shape = "base64" if big else draw(st.sampled_from(["base64"] * 5 + ["none", "url", "nodata"]))
    if shape == "none":
        return {"type": "image"}
    if shape == "url":
        return {"type": "image", "source": {"type": "url", "url": "https://example.com/p.png"}}
    source: JsonObject = {"type": "base64", "media_type": draw(st.sampled_from(MEDIA_TYPES))}
    if shape != "nodata":
        source["data"] = draw(payloads(big=big))
    if draw(st.booleans()):
        # Claude Code writes `type` first, but the order is not the rule's business.
        source = dict(reversed(list(source.items())))
    return {"type": "image", "source": source}


TRICKY_TEXTS = [
    '"data":"' + "A" * 1100 + '"',
    'say \\"data\\":\\"' + "B" * 1030,
    "Tool loaded.",
    "Todos have been modified",
    # A background task's notification (transcript rule 4): at the start, behind
    # blanks, after words, in another case.
    "<task-notification>\n<status>completed</status>\n</task-notification>",
    " \n<task-notification><result>r</result></task-notification>",
    "see <task-notification>",
    "<Task-Notification>",
    '<typed user="Ann" user-email="ann@example.com">hi</typed>',
    "  ",
    "é→😀 naïve ☃",
    '"uuid":"u-1"',
]


@st.composite
def texts(draw: st.DrawFn) -> str:
    return draw(st.one_of(st.sampled_from(TRICKY_TEXTS), st.text(max_size=40)))


@st.composite
def tool_use_blocks(draw: st.DrawFn) -> JsonObject:
    tool = draw(st.sampled_from(["Bash", "Read", "Write", "Grep", "Mystery"]))
    return {
        "type": "tool_use",
        "id": draw(st.sampled_from(TOOL_IDS)),
        "name": tool,
        "input": {"command": draw(texts()), "file_path": "/x", "content": "abc"},
    }


@st.composite
def tool_result_blocks(draw: st.DrawFn) -> JsonObject:
    nested: list[JsonValue] = [{"type": "text", "text": draw(texts())}]
    if draw(st.booleans()):
        nested.append(draw(image_blocks()))
    result: JsonObject = {
        "type": "tool_result",
        "tool_use_id": draw(st.sampled_from(TOOL_IDS)),
        "content": nested if draw(st.integers(0, 3)) else draw(texts()),
    }
    if draw(st.integers(0, 3)) == 0:
        result["is_error"] = draw(st.sampled_from([True, False, "true", None]))
    return result


@st.composite
def content_blocks(draw: st.DrawFn) -> JsonObject:
    kind = draw(
        st.sampled_from(
            ["text", "text", "image", "image", "tool_use", "tool_result", "document", "thinking"]
        )
    )
    if kind == "text":
        return {"type": "text", "text": draw(texts())}
    if kind == "image":
        return draw(image_blocks())
    if kind == "tool_use":
        return draw(tool_use_blocks())
    if kind == "tool_result":
        return draw(tool_result_blocks())
    if kind == "document":
        data = draw(payloads())
        return {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": data},
        }
    return {"type": "thinking", "thinking": draw(texts())}


def _ordered(draw: st.DrawFn, record: JsonObject) -> JsonObject:
    # Keys in Claude Code's order, or shuffled (the uuid may land past the head).
    if draw(st.integers(0, 3)) == 0:
        keys = draw(st.permutations(list(record)))
        return {key: record[key] for key in keys}
    return record


@st.composite
def records(draw: st.DrawFn) -> JsonObject:
    """One transcript record, of any of the shapes a history read meets."""
    uuid = draw(st.sampled_from(UUIDS))
    parent = draw(st.sampled_from([None, *UUIDS]))
    kind = draw(
        st.sampled_from(
            [
                "user",
                "user",
                "assistant",
                "assistant",
                "tool_call",
                "tool_user",
                "tool_user",
                "progress",
                "system",
                "meta",
            ]
        )
    )
    # A sub-agent's turn now and then (transcript rule 4's sidechain mark).
    envelope: JsonObject = {
        "parentUuid": parent,
        "isSidechain": draw(st.sampled_from([False, False, False, True])),
    }
    if kind in ("user", "meta"):
        content: JsonValue = (
            draw(texts())
            if draw(st.integers(0, 3)) == 0
            else list[JsonValue](draw(st.lists(content_blocks(), max_size=4)))
        )
        record: JsonObject = {
            **envelope,
            "type": "user",
            "message": {"role": "user", "content": content},
            "uuid": uuid,
            "timestamp": TIMESTAMP,
        }
        if kind == "meta":
            record["isMeta"] = True
        if draw(st.integers(0, 5)) == 0:
            # The one oddity the strip rule matches: a key ending in an escaped quote.
            record["extra"] = {'x"data': draw(payloads()), "base64": draw(payloads())}
        return _ordered(draw, record)
    if kind == "assistant":
        model = draw(st.sampled_from(["claude-opus-4-1", "<synthetic>"]))
        blocks: list[JsonValue] = list(draw(st.lists(content_blocks(), max_size=3)))
        return _ordered(
            draw,
            {
                **envelope,
                "type": "assistant",
                "message": {"role": "assistant", "model": model, "content": blocks},
                "uuid": uuid,
                "timestamp": TIMESTAMP,
            },
        )
    if kind == "tool_call":
        # A model's call, one line a call as Claude Code writes them (two at times).
        calls = draw(st.lists(tool_use_blocks(), min_size=1, max_size=2))
        return {
            **envelope,
            "type": "assistant",
            "message": {"role": "assistant", "model": "claude-opus-4-1", "content": list(calls)},
            "uuid": uuid,
            "timestamp": TIMESTAMP,
        }
    if kind == "tool_user":
        results = draw(st.lists(tool_result_blocks(), min_size=1, max_size=3))
        return {
            **envelope,
            "type": "user",
            "message": {"role": "user", "content": list[JsonValue](results)},
            "uuid": uuid,
            "timestamp": TIMESTAMP,
            "toolUseResult": {
                "type": "image",
                "file": {"base64": draw(payloads())},
                # The sub-agent a Task call started, named by its result (rule 5).
                "agentId": draw(st.sampled_from(["a2898e3", "../x", 7, None])),
            },
        }
    if kind == "progress":
        # A progress line carrying a copy of another message, its uuid nested.
        copied = draw(st.sampled_from(UUIDS))
        return {
            **envelope,
            "type": "progress",
            "data": {"message": {"type": "user", "uuid": copied, "message": {"content": "copy"}}},
            "uuid": uuid,
        }
    if kind == "system":
        return {**envelope, "type": "system", "uuid": uuid, "content": draw(texts())}
    raise AssertionError(kind)


@st.composite
def photo_records(draw: st.DrawFn) -> JsonObject:
    """A user turn over 256 KiB because of its photos: the strip makes it fit."""
    blocks: list[JsonValue] = [draw(image_blocks(big=True))]
    blocks += draw(st.lists(st.one_of(image_blocks(), content_blocks()), max_size=2))
    order = draw(st.permutations(blocks))
    return _ordered(
        draw,
        {
            "parentUuid": draw(st.sampled_from([None, *UUIDS])),
            "type": "user",
            "message": {"role": "user", "content": list(order)},
            "uuid": draw(st.sampled_from(UUIDS)),
            "timestamp": TIMESTAMP,
        },
    )


@st.composite
def oversize_records(draw: st.DrawFn) -> JsonObject:
    """A turn too big even stripped: text past the bound (now and then a task
    notification's, as a string or a block), a photo or not."""
    filler = draw(st.sampled_from(["z", "é", "😀", "a\\"]))
    width = len(filler.encode("utf-8"))
    # A sub-agent's whole result in a task notification now and then (rules 3 and 4).
    text = draw(st.sampled_from(["", "", TASK_NOTIFICATION_TAG, "\n" + TASK_NOTIFICATION_TAG]))
    text += filler * (MAX_SESSION_LINE_BYTES // width + draw(st.integers(1, 2000)))
    blocks: list[JsonValue] = [{"type": "text", "text": text}]
    if draw(st.booleans()):
        blocks.append(draw(image_blocks(big=True)))
    # Claude Code writes a typed prompt or a notification as a string.
    content: JsonValue = text if draw(st.integers(0, 3)) == 0 else blocks
    record: JsonObject = {
        "type": draw(st.sampled_from(["user", "assistant", "system"])),
        "uuid": draw(st.sampled_from([*UUIDS, ""])),
        "timestamp": TIMESTAMP,
        "message": {"role": "user", "content": content},
    }
    if draw(st.integers(0, 4)) == 0:
        record["isMeta"] = True
    if draw(st.integers(0, 3)) == 0:
        record["isSidechain"] = True
    return _ordered(draw, record)


@st.composite
def long_garbage(draw: st.DrawFn) -> bytes:
    """A long line of arbitrary bytes (invalid UTF-8, stray quotes, cut characters)."""
    seed = draw(st.binary(min_size=1, max_size=24)).replace(b"\n", b" ")
    seed += draw(st.sampled_from([b"", b"\xf0\x9f\x98\x80", b"\xe2\x82", b'"uuid":"u-1"']))
    length = MAX_SESSION_LINE_BYTES + draw(st.integers(1, 5000))
    return (seed * (length // len(seed) + 1))[:length]


RAW_LINES = [
    b"",
    b"// Source: a comment line",
    b"\xff\xfe\x00garbage\x80",
    b'{"type":"user","message":{"content":"x"},"n":NaN,"uuid":"u-2"}',
    b"[1,2]",
    b"{not json",
    b'{"type":"user","uuid":"u-3","timestamp":"t","message":{"content":"caf\xe9"}}',
    b"\xef\xbb\xbf"
    + compact({"type": "user", "uuid": "u-1", "message": {"content": "bom"}}).encode(),
    b'{"type": "user", "uuid": "u-2", "message": {"content": "spaced"}}',
    b'{"type":"summary","summary":"t","leafUuid":"u-1"}',
    b"\r",
]


@st.composite
def lines(draw: st.DrawFn) -> bytes:
    """One line's bytes, without its terminator."""
    kind = draw(st.sampled_from(["record"] * 6 + ["raw", "pretty"]))
    if kind == "raw":
        return draw(st.sampled_from(RAW_LINES))
    record = draw(records())
    if kind == "pretty":
        return json.dumps(record, ensure_ascii=False).encode("utf-8")
    return compact(record).encode("utf-8")


@dataclass(frozen=True)
class GeneratedTranscript:
    """A transcript file's bytes and the session id it is read under."""

    data: bytes
    session_id: str


@st.composite
def transcripts(draw: st.DrawFn, *, max_lines: int = 12) -> GeneratedTranscript:
    """A whole file: lines, terminators, and how it ends."""
    body = draw(st.lists(lines(), max_size=max_lines))
    # At most a couple of big lines: enough to strip, few enough to stay quick.
    for big in draw(st.lists(st.sampled_from(["photo", "oversize", "garbage"]), max_size=2)):
        if big == "garbage":
            line = draw(long_garbage())
        else:
            record = draw(photo_records() if big == "photo" else oversize_records())
            line = compact(record).encode("utf-8")
        body.insert(draw(st.integers(0, len(body))), line)
    out = bytearray()
    for line in body:
        out += line + draw(st.sampled_from([b"\n", b"\n", b"\r\n"]))
    ending = draw(st.sampled_from(["newline", "none", "torn"]))
    if body and ending != "newline":
        # Drop the last terminator; a torn line is cut anywhere (mid-payload too).
        out = out.rstrip(b"\n")
        if ending == "torn":
            last_start = out.rfind(b"\n") + 1
            cut = draw(st.integers(last_start, len(out)))
            del out[cut:]
    # Mostly ids of the reference grammar (references are minted); sometimes not.
    session_id = draw(
        st.sampled_from(["sess-1", "sess-1", "4d5611e5-241a-462a-8d15-5122611a9569", "b.d"])
    )
    return GeneratedTranscript(bytes(out), session_id)


def spec_fetch(file_lines: list[str], ref: MediaRef) -> tuple[str, str | bytes]:
    """The media route in spec terms: ("ok", bytes + type) or ("missing", reason)."""
    lookup: LineLookup = find_line_by_uuid(file_lines, ref["entryUuid"])
    if not lookup["found"]:
        return "missing", lookup["reason"]
    extracted = extract_media(file_lines[lookup["lineNumber"] - 1], ref["index"])
    if not extracted["ok"]:
        return "missing", extracted["reason"]
    return "ok", extracted["mediaType"].encode() + b"\0" + extracted["data"]
