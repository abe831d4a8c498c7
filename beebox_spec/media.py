"""Photos in a replayed conversation: the strip, the reference, the way back.

Spec sources, in `docs/sources.md` (a bare §N.M below is its anchor `facts-N-M`):
`docs/sources.md#history-photos` ("Photos in a replayed conversation"),
`docs/sources.md#facts-1-1` (§1.1: the strip rule), `docs/sources.md#facts-1-3`
(§1.3: `transformContent`), `docs/sources.md#facts-1-4` (§1.4: the reference
grammar), `docs/sources.md#facts-1-5` (§1.5: finding the line again, departed from
as `docs/design.md#design-5-line-lookup` says) and `docs/sources.md#facts-1-6`
(§1.6: extracting one photo). "JSON" means RFC 8259 JSON as JavaScript's
`JSON.parse` reads it (`docs/sources.md#facts-preamble`): `beebox_spec.js_values`'s
`parse_json_text`, the one reading of JSON text every module shares.

A photo attached in chat lives only inside its transcript line, as base64. The
history read strips those payloads textually — from a line bigger than
`MAX_SESSION_LINE_BYTES`, which it never parses whole, or, in the `refs` photo
mode, from every line (`beebox_spec.transcript`, rule 2) — and a stripped image
comes back as a *reference* instead of a placeholder, so the client can fetch that
one photo later, lazily. The rules, in reading order:

1. **The strip rule** (§1.1). `BASE64_PAYLOAD_RE` is the original's pattern,
   ``"(data|base64)":"([0-9+/=A-Za-z]{1024,})"``. `strip_inline_media` replaces the
   payload (group 2) of every match with `STRIPPED_MEDIA_MARKER`, keeping the key,
   and answers None when nothing matched. It is purely textual. On the compact JSON
   Claude Code writes (no whitespace around `:`) its meaning is: *every* object
   member named `data` or `base64` (or, the one oddity, whose key ends in an
   escaped `"` and one of those names) whose value is a string of at least 1,024
   characters from the base64 alphabet becomes the marker — image `source.data`
   at any depth (top level, nested in a `tool_result`), document (PDF) payloads,
   `toolUseResult.file.base64`. A value with any other character (a `data:` URL
   prefix, a `\\/` escape) or pretty-printed JSON does not match. Text that merely
   *contains* `"data":"…` cannot match: inside a JSON string its quotes are
   escaped. The alphabet needs no JSON escaping and the marker is in it, so a
   stripped valid line stays valid JSON; the marker is 16 characters, so it never
   re-matches.
2. **The reference** (§1.4). `<sessionId>/<entryUuid>/<index>`: both ids 1–64
   ASCII letters, digits, `_` or `-` (no `.`, no `/`: they become a file path);
   the index 1–3 ASCII digits, at most `MAX_IMAGE_INDEX` (so `"007"` reads as 7 and
   is re-encoded `"7"`). Exactly three parts. `parse_media_ref` raises
   `MalformedMediaRef` naming the rule that failed; `parse_media_ref_or_none` is the
   wire's answer, one null for every failure (the route says nothing specific).
   `encode_media_ref` is the plain join, and refuses a reference `parse_media_ref`
   would refuse.
3. **The one enumeration** (`docs/sources.md#history-photos`). `image_blocks(content)`: the
   object blocks of `message.content` whose `type` is `"image"`, in document order.
   The index of a reference is a position in this list: following back indexes it,
   and minting counts the same blocks (`is_image_block`) in the same walk, so they
   cannot drift (a test checks every minted index against this list). Images
   nested in a `tool_result`, documents and `toolUseResult` are not in it: they
   are stripped but never addressable.
4. **Minting** (§1.3). `transform_content(content, media_ref)` turns raw
   `message.content` into wire blocks. An image block whose `source` is base64 with
   `data` equal to the marker — an image the strip actually took out — becomes
   `{type: "image", imageRef}` when the caller names the line (`media_ref`, given
   only for stripped lines). A failed upload (base64 source with empty or missing
   `data`) is `IMAGE_NOT_DISPLAYED` text and never gets a reference, so one turn can
   carry a stripped photo (a reference) and a failed upload (a placeholder).
5. **Finding the line** (§1.5 as departed from by
   `docs/design.md#design-5-line-lookup` (§5)).
   `find_line_by_uuid(lines, uuid)`: the lines holding the needle ``"uuid":"<id>"``
   are candidates, in file order; a candidate counts only if it parses as a JSON
   object whose *own* top-level `uuid` is the id. A `parentUuid` never holds the
   needle (a letter precedes its quote); a progress line embedding a copy of the
   message holds it nested, and is passed over. A candidate longer than
   `MAX_MEDIA_LINE_BYTES` (UTF-8) answers `too-large` at once: it is not parsed,
   so it cannot be ruled out. A candidate that does not parse (a half-written last
   line, a torn write) cannot show its own uuid and is passed over; when nothing
   else matches the answer is `not-found` (ours, `docs/spec-decisions.md#line-lookup`).
6. **Following back** (§1.6). `extract_media(line, index)` detaches every payload
   the strip rule would match, putting the token `cb-media-slot-<n>` in its place
   (n counts matches from 0), parses what is left (`unparsable` if it is not
   JSON), takes the `index`-th of `image_blocks(message.content)` (`no-such-image`
   when there is none or its `source` is not an object) and requires its
   `source.data` to be exactly the token of an existing slot (`no-payload`
   otherwise: a failed upload, a short inline image that was never a payload, a
   marker left by an earlier strip). Only that payload is decoded. The media type
   is `source.media_type` when it is in `SERVABLE_MEDIA_TYPES`, else
   `application/octet-stream`. Everything after the detach step is
   `choose_payload(structure, index, payload_count)`, so a reader that detaches
   payloads without holding them asks the same rule which one to decode.

Decisions where the sources are silent or the original's JavaScript leaks through
(each is marked in the code too):

- **Base64 decoding** follows the original's `Buffer.from(payload, "base64")`:
  the data ends at the first `=`; a final group of 2 or 3 characters yields 1 or 2
  bytes, a lone final character yields nothing; leftover bits are ignored.
- **Slot tokens** are read canonically: ``cb-media-slot-`` and a decimal without
  leading zeros (ours, `docs/spec-decisions.md#slot-tokens-canonical`). Inherited
  limitation: a short `data` value that literally reads ``cb-media-slot-<n>`` would
  be taken for slot n of the same line.
- **A reference is minted only if it parses**
  (ours, `docs/spec-decisions.md#refs-minted-only-if-parseable`): a stripped image
  on a line whose ids fall outside the grammar (an entry without a uuid, an id with
  a `.`), or past index 999, reads `IMAGE_NOT_DISPLAYED` rather than carrying a
  reference that could only answer 400.
- **JavaScript values**: the original reads fields with `String(x || "")`,
  template literals, `.length`, `.substring` and `JSON.stringify`. Those readings
  for JSON values (truthiness, `String()` of numbers and arrays, UTF-16 lengths,
  property order) are `beebox_spec.js_values`'s, with its one difference: a cut
  never splits a surrogate pair (the pair is left out whole), so a summary is
  always valid Unicode (ours, `docs/spec-decisions.md#utf16-cut-whole-characters`).
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Sequence
from typing import Final, Literal, TypeAlias, TypedDict

from beebox_spec.entries import (
    IMAGE_NOT_DISPLAYED,
    JsonObject,
    JsonValue,
    SessionContentBlock,
)
from beebox_spec.errors import Rejection
from beebox_spec.js_values import (
    MISSING,
    UnparsableJson,
    js_json_stringify,
    js_or,
    js_string,
    js_string_or_empty,
    js_truthy,
    parse_json_object_or_none,
    parse_json_text,
    utf8_length,
    utf16_length,
    utf16_prefix,
)

__all__ = [
    "BASE64_ALPHABET",
    "BASE64_PAYLOAD_RE",
    "INDEX_RE",
    "MAX_ID_CHARS",
    "MAX_IMAGE_INDEX",
    "MAX_MEDIA_LINE_BYTES",
    "MIN_PAYLOAD_CHARS",
    "OCTET_STREAM",
    "PAYLOAD_KEYS",
    "SAFE_ID_CHARS",
    "SAFE_ID_RE",
    "SERVABLE_MEDIA_TYPES",
    "SESSION_MEDIA_ROUTE",
    "SLOT_PREFIX",
    "STRIPPED_MEDIA_MARKER",
    "ExtractFailureReason",
    "ExtractResult",
    "LineFound",
    "LineLookup",
    "LineNotFound",
    "MalformedMediaRef",
    "MediaEntryRef",
    "MediaExtracted",
    "MediaNotExtracted",
    "MediaRef",
    "PayloadChosen",
    "choose_payload",
    "decode_base64_payload",
    "encode_media_ref",
    "extract_media",
    "find_line_by_uuid",
    "image_blocks",
    "is_image_block",
    "message_content",
    "parse_media_ref",
    "parse_media_ref_or_none",
    "strip_inline_media",
    "summarize_tool_input",
    "summarize_tool_result",
    "transform_content",
]


# ---------------------------------------------------------------------------------
# 1. The strip rule (§1.1)
# ---------------------------------------------------------------------------------

# The parts of the original's `BASE64_PAYLOAD_RE`, exported so a reader that
# matches on bytes builds its search from the same ones: the member names whose
# string values are payloads, the base64 alphabet (spelled out: ASCII only, so no
# other script's digits count), and the shortest payload.
PAYLOAD_KEYS: Final = ("data", "base64")
BASE64_ALPHABET: Final = "0123456789+/=ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
MIN_PAYLOAD_CHARS: Final = 1024

# ``"(data|base64)":"([0-9+/=A-Za-z]{1024,})"``: group 1 is the key, group 2 the
# payload. Shared by the strip and the extraction: one definition of a payload.
BASE64_PAYLOAD_RE: Final = re.compile(
    f'"({"|".join(PAYLOAD_KEYS)})":"([{re.escape(BASE64_ALPHABET)}]{{{MIN_PAYLOAD_CHARS},}})"'
)

# What the strip leaves where a payload was: base64-alphabet only (the line stays
# JSON), shorter than 1,024 (it never re-matches), and distinguishable from the empty
# `data` of a failed upload.
STRIPPED_MEDIA_MARKER: Final = "bbxStrippedMedia"


def strip_inline_media(line: str) -> str | None:
    """The line with every payload replaced by the marker, or None if it has none."""
    stripped, count = BASE64_PAYLOAD_RE.subn(
        lambda match: f'"{match.group(1)}":"{STRIPPED_MEDIA_MARKER}"', line
    )
    # No match anywhere: there is nothing to strip, which callers must be told.
    if count == 0:
        return None
    return stripped


# ---------------------------------------------------------------------------------
# 2. The media reference grammar (§1.4)
# ---------------------------------------------------------------------------------

# The URL segment the media route is mounted at: `GET /api/session-media/<ref>`.
SESSION_MEDIA_ROUTE: Final = "session-media"

# The largest image ordinal a reference may name.
MAX_IMAGE_INDEX: Final = 999

# The characters of an id that becomes a file name, and its longest length: the
# original's `^[\w-]{1,64}$` with JavaScript's ASCII `\w`, spelled out.
SAFE_ID_CHARS: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
MAX_ID_CHARS: Final = 64

# Used with fullmatch: Python's `$` would also match before a trailing newline.
SAFE_ID_RE: Final = re.compile(f"[{re.escape(SAFE_ID_CHARS)}]{{1,{MAX_ID_CHARS}}}")

# The original's `^\d{1,3}$` with JavaScript's ASCII `\d`. Leading zeros are allowed.
INDEX_RE: Final = re.compile(r"[0-9]{1,3}")


class MediaEntryRef(TypedDict):
    """The line half of a reference: which transcript, which entry."""

    sessionId: str
    entryUuid: str


class MediaRef(MediaEntryRef):
    """A whole reference: the line, and the image's ordinal among its image blocks."""

    index: int


class MalformedMediaRef(Rejection):
    """A media reference this box will not act on; `rule` says which check failed.

    The HTTP route answers every one of these with the same 400 and does not say
    which rule failed (naming it would describe the file layout to a prober); the
    rule is for logs and tests.
    """

    def __init__(self, raw: str, rule: str) -> None:
        super().__init__(f"malformed media reference {raw!r}: {rule}")
        self.raw = raw
        self.rule = rule

    @property
    def public_message(self) -> str:
        """One answer for every malformed reference: which rule failed is for logs."""
        return "Malformed media reference"


def parse_media_ref(raw: str) -> MediaRef:
    """Read `<sessionId>/<entryUuid>/<index>`, or raise `MalformedMediaRef`."""
    parts = raw.split("/")
    # Exactly three parts: `..` segments and extra slashes change the count.
    if len(parts) != 3:
        raise MalformedMediaRef(raw, f"expected 3 '/'-separated parts, got {len(parts)}")
    session_id, entry_uuid, raw_index = parts
    # The session id becomes a file name: ASCII letters, digits, `_`, `-` only.
    if SAFE_ID_RE.fullmatch(session_id) is None:
        raise MalformedMediaRef(raw, "session id must be 1-64 of [A-Za-z0-9_-]")
    # The entry uuid is matched against the transcript: the same alphabet.
    if SAFE_ID_RE.fullmatch(entry_uuid) is None:
        raise MalformedMediaRef(raw, "entry uuid must be 1-64 of [A-Za-z0-9_-]")
    # The index is one to three ASCII digits: no sign, no space, no other script.
    if INDEX_RE.fullmatch(raw_index) is None:
        raise MalformedMediaRef(raw, "index must be 1-3 ASCII digits")
    index = int(raw_index)
    # At most MAX_IMAGE_INDEX (implied by three digits today; stated as the original does).
    if index > MAX_IMAGE_INDEX:
        raise MalformedMediaRef(raw, f"index must be at most {MAX_IMAGE_INDEX}")
    return {"sessionId": session_id, "entryUuid": entry_uuid, "index": index}


def parse_media_ref_or_none(raw: str) -> MediaRef | None:
    """The wire's reading: the reference, or one null for every malformed one."""
    try:
        return parse_media_ref(raw)
    except MalformedMediaRef:
        return None


def encode_media_ref(ref: MediaRef) -> str:
    """`<sessionId>/<entryUuid>/<index>`: a plain join of a reference that parses.

    No URL-encoding is needed: every allowed character is URL-safe. A reference
    `parse_media_ref` would refuse is refused here too, so every encoded reference
    round-trips.
    """
    index = ref["index"]
    # The index is a plain integer (a bool is not an ordinal) within 0..999.
    if isinstance(index, bool) or not 0 <= index <= MAX_IMAGE_INDEX:
        raise MalformedMediaRef(repr(ref), f"index must be an integer 0-{MAX_IMAGE_INDEX}")
    encoded = f"{ref['sessionId']}/{ref['entryUuid']}/{index}"
    # Parsing the result applies every id rule, and a `/` inside an id shows up as
    # the wrong number of parts.
    parse_media_ref(encoded)
    return encoded


# ---------------------------------------------------------------------------------
# 3. The one enumeration of image blocks (`docs/sources.md#history-photos`)
# ---------------------------------------------------------------------------------


def is_image_block(block: JsonValue) -> bool:
    """An object block whose `type` is exactly `"image"`."""
    return isinstance(block, dict) and block.get("type") == "image"


def image_blocks(content: JsonValue) -> list[JsonObject]:
    """The image blocks of `message.content`, in document order.

    A reference's index is a position in this list. Not a list → no images.
    """
    # `message.content` may be a string (a plain prompt): it holds no image blocks.
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, dict) and is_image_block(block)]


def message_content(record: JsonValue) -> JsonValue:
    """`record.message.content`, or None when the record or its message is not an object."""
    # A transcript record is an object …
    if not isinstance(record, dict):
        return None
    message = record.get("message")
    # … whose `message` is an object too.
    if not isinstance(message, dict):
        return None
    return message.get("content")


# ---------------------------------------------------------------------------------
# 4. Minting: transform_content (§1.3)
# ---------------------------------------------------------------------------------


def transform_content(
    content: JsonValue, media_ref: MediaEntryRef | None
) -> list[SessionContentBlock]:
    """Raw `message.content` as history blocks, minting references for stripped images.

    `media_ref` names the line, and is given only when the strip took something out
    of it; ordinary lines pass None (and so do readers that will never serve).
    """
    # A plain string prompt is one text block, kept verbatim.
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    # Anything else that is not an array holds no blocks.
    if not isinstance(content, list):
        return []
    # The ordinal of the next image block: its position in `image_blocks(content)`,
    # which lists the same blocks (objects that pass `is_image_block`) in the order
    # this walk meets them; no branch before the image branch takes type "image".
    image_index = 0
    blocks: list[SessionContentBlock] = []
    for block in content:
        # Items that are not objects (strings, numbers, arrays, null) are skipped.
        if not isinstance(block, dict):
            continue
        block_type = block.get("type", MISSING)
        if block_type == "text":
            blocks.append({"type": "text", "text": js_string_or_empty(block.get("text"))})
        elif block_type == "tool_use":
            raw_input = block.get("input")
            tool_input: JsonObject = raw_input if isinstance(raw_input, dict) else {}
            tool_name = js_string_or_empty(block.get("name"))
            blocks.append(
                {
                    "type": "tool_use",
                    "toolName": tool_name,
                    "toolId": js_string_or_empty(block.get("id")),
                    "input": tool_input,
                    "inputSummary": summarize_tool_input(tool_name, tool_input),
                }
            )
        elif block_type == "tool_result":
            blocks.append(
                {
                    "type": "tool_result",
                    "toolUseId": js_string_or_empty(block.get("tool_use_id")),
                    "resultSummary": summarize_tool_result(block.get("content")),
                }
            )
        elif block_type == "thinking":
            # The original writes `String(block.thinking || "")`: a thinking block
            # without its text still carries `text: ""` on the wire.
            blocks.append({"type": "thinking", "text": js_string_or_empty(block.get("thinking"))})
        elif block_type == "redacted_thinking":
            blocks.append({"type": "thinking", "text": "[redacted]"})
        elif is_image_block(block):
            # Every image block counts, stripped, failed or intact (§1.3).
            blocks.append(_image_content_block(block, media_ref, image_index))
            image_index += 1
        else:
            # An unknown type (a document, something new) shows as its name.
            blocks.append({"type": "text", "text": f"[{js_string(block_type)}]"})
    return blocks


def _image_content_block(
    block: JsonObject, media_ref: MediaEntryRef | None, index: int
) -> SessionContentBlock:
    raw_source = block.get("source")
    source: JsonObject = raw_source if isinstance(raw_source, dict) else {}
    is_base64 = source.get("type") == "base64"
    # Rule 1: the strip took this image's payload out (keyed on the marker, not on
    # "something on this line was stripped").
    if is_base64 and source.get("data") == STRIPPED_MEDIA_MARKER:
        image_ref = _mint_image_ref(media_ref, index)
        # No line to name (a reader that never serves), or ids outside the grammar.
        if image_ref is None:
            return {"type": "text", "text": IMAGE_NOT_DISPLAYED}
        minted: SessionContentBlock = {"type": "image", "imageRef": image_ref}
        # The media type rides along only when the source declares a truthy one.
        if js_truthy(source.get("media_type")):
            minted["mediaType"] = js_string(source.get("media_type"))
        return minted
    # Rule 2: a base64 source with nothing behind it is a failed upload: no reference.
    if is_base64 and not js_truthy(source.get("data")):
        return {"type": "text", "text": IMAGE_NOT_DISPLAYED}
    # Rule 3: an image still carrying its bytes (or a URL) passes them through.
    image: SessionContentBlock = {"type": "image"}
    if js_truthy(source.get("media_type")):
        image["mediaType"] = js_string(source.get("media_type"))
    if is_base64 and js_truthy(source.get("data")):
        image["dataBase64"] = js_string(source.get("data"))
    if source.get("type") == "url" and js_truthy(source.get("url")):
        image["imageUrl"] = js_string(source.get("url"))
    return image


def _mint_image_ref(media_ref: MediaEntryRef | None, index: int) -> str | None:
    # Ordinary lines are read without a line identity: nothing to mint.
    if media_ref is None:
        return None
    try:
        return encode_media_ref(
            {
                "sessionId": media_ref["sessionId"],
                "entryUuid": media_ref["entryUuid"],
                "index": index,
            }
        )
    except MalformedMediaRef:
        # A reference that would not parse is never handed out
        # (ours, `docs/spec-decisions.md#refs-minted-only-if-parseable`).
        return None


# Input summaries per tool (§1.3). Each reads its fields the way the original's
# JavaScript does: `String(x || "")`, template literals (a missing field reads
# "undefined"), `.length` and `.substring` in UTF-16 code units.
BASH_SUMMARY_CHARS: Final = 120
TASK_SUMMARY_CHARS: Final = 120
UNKNOWN_TOOL_SUMMARY_CHARS: Final = 150
TOOL_RESULT_SUMMARY_CHARS: Final = 500


def summarize_tool_input(tool_name: str, tool_input: JsonObject) -> str:
    """The one-line summary of a tool call's input (§1.3)."""
    if tool_name in ("Read", "Edit"):
        return js_string_or_empty(tool_input.get("file_path"))
    if tool_name == "Write":
        path = js_string(tool_input.get("file_path", MISSING))
        written = utf16_length(js_string_or_empty(tool_input.get("content")))
        return f"{path} ({written} chars)"
    if tool_name == "Bash":
        said = js_or(tool_input.get("description"), tool_input.get("command"), "")
        return utf16_prefix(js_string(said), BASH_SUMMARY_CHARS)
    if tool_name == "Glob":
        return js_string_or_empty(tool_input.get("pattern"))
    if tool_name == "Grep":
        pattern = js_string(tool_input.get("pattern", MISSING))
        where = js_string(js_or(tool_input.get("path"), "."))
        return f"{pattern} in {where}"
    if tool_name == "TodoWrite":
        return "update todos"
    if tool_name == "Task":
        said = js_or(tool_input.get("description"), tool_input.get("prompt"), "")
        return utf16_prefix(js_string(said), TASK_SUMMARY_CHARS)
    # Any other tool: its input as compact JSON, cut.
    return utf16_prefix(js_json_stringify(tool_input), UNKNOWN_TOOL_SUMMARY_CHARS)


def summarize_tool_result(content: JsonValue) -> str:
    """The first 500 characters of a tool result's text (§1.3).

    A list of parts is joined by `"\\n"` with *every* part in it: a part without
    text (an image, a number) joins as `""`, so `[text a, image, text b]` reads
    `"a\\n\\nb"`. §1.3's "text of string items / `.text` items joined by `\\n`" is
    shorthand; the original (`cli/lib/session-content.ts` `summarizeToolResult`)
    maps each part to its text or `""` and then joins, filtering nothing.
    """
    if isinstance(content, str):
        return utf16_prefix(content, TOOL_RESULT_SUMMARY_CHARS)
    if isinstance(content, list):
        # map-then-join, as the original does: textless parts leave empty lines.
        parts = [_result_part_text(part) for part in content]
        return utf16_prefix("\n".join(parts), TOOL_RESULT_SUMMARY_CHARS)
    # Neither a string nor a list of parts: nothing to summarise.
    return ""


def _result_part_text(part: JsonValue) -> str:
    # A bare string part is its own text …
    if isinstance(part, str):
        return part
    # … an object part contributes its `text` when that is a string …
    if isinstance(part, dict):
        text = part.get("text")
        if isinstance(text, str):
            return text
    # … and anything else (an image part, a number) contributes "" to the join.
    return ""


# ---------------------------------------------------------------------------------
# 5. Finding the line again (§1.5, departed from by `docs/design.md#design-5-line-lookup`)
# ---------------------------------------------------------------------------------

# The longest line the media route will materialise, in UTF-8 bytes (16 MiB; a
# comment in the original route said 8 MB, its code and doctest say 16 MiB).
MAX_MEDIA_LINE_BYTES: Final = 16 * 1024 * 1024


class LineFound(TypedDict):
    """The entry's line, by its 1-based line number (every line counts)."""

    found: Literal[True]
    lineNumber: int


class LineNotFound(TypedDict):
    """No line to serve from: none is the entry's, or the candidate is too large."""

    found: Literal[False]
    reason: Literal["not-found", "too-large"]


LineLookup: TypeAlias = LineFound | LineNotFound


def find_line_by_uuid(lines: Sequence[str], uuid: str) -> LineLookup:
    """The first line whose own top-level `uuid` is `uuid`, checked in file order."""
    needle = f'"uuid":"{uuid}"'
    for line_number, line in enumerate(lines, start=1):
        # A candidate holds the needle somewhere; `parentUuid` never does.
        if needle not in line:
            continue
        # Too big to parse on a client's say-so: answered before it is verified.
        if utf8_length(line) > MAX_MEDIA_LINE_BYTES:
            return {"found": False, "reason": "too-large"}
        record = parse_json_object_or_none(line)
        # A candidate that does not parse (half-written) cannot show its own uuid.
        if record is None:
            continue
        # Only the line's own uuid counts, not a copy nested inside it.
        if record.get("uuid") == uuid:
            return {"found": True, "lineNumber": line_number}
    return {"found": False, "reason": "not-found"}


# ---------------------------------------------------------------------------------
# 6. Following a reference back (§1.6)
# ---------------------------------------------------------------------------------

# What the detach step writes in place of payload n: `cb-media-slot-<n>`.
SLOT_PREFIX: Final = "cb-media-slot-"

# The media types the route will serve under their own name (§1.6).
SERVABLE_MEDIA_TYPES: Final = frozenset(
    {
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
        "image/avif",
        "image/heic",
        "image/heif",
    }
)

# Everything else is served as opaque bytes, which a browser will not render.
OCTET_STREAM: Final = "application/octet-stream"

# A canonical slot number: ASCII digits, no leading zero, no sign.
_SLOT_NUMBER_RE: Final = re.compile(r"0|[1-9][0-9]*")

ExtractFailureReason: TypeAlias = Literal["unparsable", "no-such-image", "no-payload"]


class MediaExtracted(TypedDict):
    """The one photo: its servable media type and its decoded bytes."""

    ok: Literal[True]
    mediaType: str
    data: bytes


class MediaNotExtracted(TypedDict):
    """Why there is no photo to serve (all three are the route's 404)."""

    ok: Literal[False]
    reason: ExtractFailureReason


ExtractResult: TypeAlias = MediaExtracted | MediaNotExtracted


def extract_media(line: str, index: int) -> ExtractResult:
    """The `index`-th image of `message.content` on `line`, decoded."""
    payloads: list[str] = []

    def detach(match: re.Match[str]) -> str:
        payloads.append(match.group(2))
        return f'"{match.group(1)}":"{SLOT_PREFIX}{len(payloads) - 1}"'

    structure = BASE64_PAYLOAD_RE.sub(detach, line)
    chosen = choose_payload(structure, index, len(payloads))
    # No photo behind the index: the reason is the answer.
    if not chosen["ok"]:
        return chosen
    return {
        "ok": True,
        "mediaType": chosen["mediaType"],
        "data": decode_base64_payload(payloads[chosen["slot"]]),
    }


class PayloadChosen(TypedDict):
    """Which detached payload the image names, and the media type it is served as."""

    ok: Literal[True]
    slot: int
    mediaType: str


def choose_payload(
    structure: str, index: int, payload_count: int
) -> PayloadChosen | MediaNotExtracted:
    """The slot the `index`-th image of a detached line names, and its media type.

    `structure` is the line with its `payload_count` payloads detached (payload n
    replaced by the token `cb-media-slot-<n>`). Everything `extract_media` decides
    but the decoding: a reader that detaches payloads its own way (without holding
    them) asks this which one to decode.
    """
    try:
        record = parse_json_text(structure)
    except UnparsableJson:
        # Half-written, or not JSON at all: there is no image to serve from it.
        return {"ok": False, "reason": "unparsable"}
    images = image_blocks(message_content(record))
    # The ordinal must name one of the line's top-level image blocks.
    if not 0 <= index < len(images):
        return {"ok": False, "reason": "no-such-image"}
    source = images[index].get("source")
    # An image block without a source object has no bytes to point at.
    if not isinstance(source, dict):
        return {"ok": False, "reason": "no-such-image"}
    slot = _slot_number(source.get("data"))
    # The data must name a detached payload; a failed upload or a short inline
    # image never became one.
    if slot is None or slot >= payload_count:
        return {"ok": False, "reason": "no-payload"}
    declared = source.get("media_type")
    # Only an allow-listed media type is served under its own name.
    media_type = (
        declared if isinstance(declared, str) and declared in SERVABLE_MEDIA_TYPES else None
    )
    return {
        "ok": True,
        "slot": slot,
        "mediaType": media_type if media_type is not None else OCTET_STREAM,
    }


def _slot_number(data: JsonValue) -> int | None:
    # Only a string can be a slot token …
    if not isinstance(data, str) or not data.startswith(SLOT_PREFIX):
        return None
    digits = data[len(SLOT_PREFIX) :]
    # … and only with a canonical decimal after the prefix.
    if _SLOT_NUMBER_RE.fullmatch(digits) is None:
        return None
    return int(digits)


def decode_base64_payload(payload: str) -> bytes:
    """Decode a payload the way the original's `Buffer.from(payload, "base64")` does.

    The payload is the strip rule's alphabet (`A-Z a-z 0-9 + / =`). Decoding stops
    at the first `=`; a final group of two or three characters gives one or two
    bytes and a lone final character gives none; bits left over are ignored.
    """
    data = payload.split("=", 1)[0]
    # A single character left over holds fewer than 8 bits: it yields no byte.
    if len(data) % 4 == 1:
        data = data[:-1]
    padded = data + "=" * (-len(data) % 4)
    return binascii.a2b_base64(padded.encode("ascii"))
