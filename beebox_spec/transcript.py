"""Reading a transcript into history: lines, the oversize guard, entries, slices.

Spec sources, in `docs/sources.md` (a bare §N.M below is its anchor `facts-N-M`):
`docs/sources.md#facts-1-1` (§1.1: `MAX_SESSION_LINE_BYTES`, `SNIFF_CHARS`,
`isOversizeLine`, `oversizeEntry`), `docs/sources.md#facts-1-2` (§1.2:
`readTranscriptLines`, `parseSessionLog`), `docs/sources.md#facts-1-3` (§1.3: a tool
result's summary), `docs/sources.md#facts-2-2` (§2.2: the sender read from a
`<typed>` tag), `docs/sources.md#facts-2-4` (§2.4: `SessionEntry`, `SessionHistory`,
the slice bounds); the transcript format notes `docs/sources.md#format-2`
(§2–§4: what the lines hold) and `docs/sources.md#format-9` (§9 item 1: blank lines,
`//` comment lines and a torn last line are skipped); and
`docs/sources.md#history-photos` (photos stripped from the read).

The history read, top to bottom:

1. **Lines** (`split_transcript_lines`). A transcript file is UTF-8 text split on
   `"\\n"`. Bytes that are not valid UTF-8 decode to U+FFFD (as Node's UTF-8 stream
   decoding does); a byte-order mark is kept, so a first line starting with one does
   not parse. A `"\\r"` ending a line is removed, so `"\\r\\n"` reads as `"\\n"`; a
   `"\\r"` anywhere else is an ordinary character
   (ours, `docs/spec-decisions.md#line-splitting`). A final `"\\n"` ends the last
   line and adds no empty line after it; an empty file has no lines. Every line
   counts for the 1-based line number, blank or not.
2. **The guard** (`read_transcript_lines`, §1.2), in one of two photo modes
   (`PhotoMode`), one table (`STRIPS_EVERY_LINE`):

   | mode       | which lines are stripped                            |
   |------------|-----------------------------------------------------|
   | `original` | only those over `MAX_SESSION_LINE_BYTES` UTF-8 bytes |
   | `refs`     | every line                                          |

   A line the mode does not strip, of at most `MAX_SESSION_LINE_BYTES` UTF-8 bytes,
   is `parseable` as it stands, its images kept. A line the mode strips
   (`beebox_spec.media.strip_inline_media`) is `parseable` with `mediaStripped`
   when something was stripped and the result fits. Otherwise — a line over the
   bound with nothing to strip, or still too long without its payloads — it is
   `oversize` and is never parsed. (In `refs` a line nothing was stripped from
   is read as in `original`: as it stands if it fits, `oversize` if not.)
   `original` is §1.2's rule, and every vector without a mode is read in it;
   `refs` is the box's default (ours, `docs/spec-decisions.md#photos-by-reference`).
   Both modes strip, mint and follow back the same way, so in `refs` the only
   photo bytes a history carries are those the strip rule does not take.
3. **Stubs** (`oversize_entry`, §1.1). An oversize line becomes a placeholder
   entry read from its first `SNIFF_CHARS` characters, or is dropped when that head
   shows a record the parse would drop too (not a user or assistant turn, `isMeta`,
   a synthetic assistant turn, a tool_result plumbing turn, a task notification:
   rule 4). The sniff is textual
   and assumes Claude Code's compact JSON; its accepted limitations are the
   original's. It reads only the head and the line's UTF-8 length, so
   `oversize_entry_from_head` states the rule on those two alone (a streaming
   reader never holds the line). The record's type is the value of the first
   `"type"` key at the top level of the head, outside every nested object, array
   and string (`sniff_record_type`, over `sniff_top_level_keys`)
   (ours, `docs/spec-decisions.md#stub-top-level-type`). Every type but user and
   assistant is dropped, as the parse drops it. A head that shows no top-level
   type is the assistant's when it shows the top-level `message` key every turn
   has (Claude Code writes it among a line's first keys), and is dropped when it
   shows none.
4. **Entries** (`entries_from_lines`, `entry_from_record`). Blank and unparsable
   lines (comments, a half-written last line, anything that is not a JSON object)
   are skipped. A parsed record becomes an entry when it is a user or assistant
   turn with a `message` object, and is not `isMeta`, not a synthetic assistant
   turn (`message.model` `"<synthetic>"`), not an assistant turn without blocks,
   and not a user turn that shows nothing a person put there. A user turn shows
   something when its content has a text block that is neither blank nor harness
   plumbing (`is_plumbing_message`), or a top-level image: an image block of
   `message.content` that reads as a reference, inline bytes or a URL, or as the
   `[image not displayed]` placeholder (a text block, so the first clause already
   counts it). An image block with no source to show (no bytes, URL or reference)
   shows nothing. So tool_result plumbing turns are still dropped — their images,
   if any, sit nested inside the `tool_result`, outside the one enumeration — and
   so are blank turns and turns whose every text is plumbing. An image-only user
   turn is kept (ours, `docs/spec-decisions.md#image-only-turns-kept`); beyond the
   stub's drop rules (§1.1), this rule is an inference, settled in
   `docs/spec-decisions.md#transcript-entries`.

   **Task notifications** (`TASK_NOTIFICATION_TAG`)
   (ours, `docs/spec-decisions.md#task-notifications`). When a task the agent
   started in the background ends (a sub-agent of a Task or Agent call, a
   background command), Claude Code adds a user turn for the agent to read, its
   text opening `<task-notification>` (the task's id, status, summary and, for a
   sub-agent, its whole result); 2.1.332 also writes `origin.kind:
   "task-notification"` and `promptSource: "system"` on the line. Nobody typed it,
   so such a text is harness plumbing (`is_plumbing_message`), and a turn whose
   every text is one shows nothing a person put there. The text decides, not
   `origin`: versions up to 2.1.39 write none, 2.1.332 writes it after `message`
   (out of an oversize line's head), and its kind marks other deliveries too (a
   scheduled task's stored prompt). An oversize user turn (rule 3) is dropped when
   its head shows its message's content opening with the tag, as the string it is
   or as its first block's text, read as written (untrimmed), as the `isMeta`
   reading is.

   **Sub-agent work** (`is_sidechain_record`)
   (ours, `docs/spec-decisions.md#sub-agent-work`). A Task or Agent call starts a
   sub-agent, whose turns Claude Code writes with `isSidechain: true`: in a file of
   their own beside the session's (2.x, every line also naming its `agentId`), or,
   up to 1.0.x, between the session's own lines. Such a turn is neither the
   person's nor the agent's reply, so its entry says so, and a reader groups it
   under the call that started it. Which turns are kept does not change:

   | the line                                                     | its entry            |
   |--------------------------------------------------------------|----------------------|
   | a turn whose `isSidechain` is the JSON `true`                | `sidechain: true`    |
   | an oversize turn whose head shows `"isSidechain":true`       | `sidechain: true`    |
   | any other turn (`isSidechain` false, absent, or not `true`)  | no `sidechain` key   |

   The stub's reading is textual, as its `isMeta` reading is (rule 3).
5. **Tool results ride on their calls** (`attach_tool_result`). The CLI writes a
   tool's result as a user turn of its own after the call — `tool_result` blocks
   naming the call's `tool_use_id` — and rule 4 drops that turn as plumbing, so
   the call would show without what it gave back. Instead, reading in file order,
   each `tool_result` block of a parsed user record (dropped or kept, at the top
   level of `message.content`) answers the call its id names: the latest
   `tool_use` block with that id among the entries before it (a later block with
   an id shadows an earlier one), unless that block is answered already. That
   block gets `resultSummary` (the result's summary, §1.3's
   `summarize_tool_result`), `isError: true` when the result says `is_error:
   true`, and `agentId` when the result names the sub-agent the call started: the
   record holds this one `tool_result` block and its `toolUseResult.agentId` is a
   string of the id grammar (`SAFE_ID_RE`), which names the sub-agent's own
   transcript (ours, `docs/spec-decisions.md#sub-agent-work`). A call is answered
   once; a result whose call is not there to answer (answered already, shadowed,
   never written, an empty id, or in an oversize line, whose stub has no blocks)
   attaches nowhere, and an oversize line is never parsed, so a result in one
   attaches nothing either (ours, `docs/spec-decisions.md#tool-results-on-calls`).
   The content is `transform_content`'d with the line's identity
   `{sessionId, entryUuid}` when the line was stripped and None otherwise, so only
   stripped images get references. `uuid` and `timestamp` read as
   `String(x || "")` (missing → `""`). A user entry carries `user` / `userEmail`
   read from its first text block's `<typed …>` tag by
   `beebox_spec.attribution.user_identity`, the same reading §2.2 gives accepted
   messages (one rule, one place).
6. **Slices** (§2.4). `history_tail` (the last `tail` entries, 1 ≤ tail ≤
   `MAX_SESSION_ENTRIES`) and `history_page` (offset ≥ 0, 1 ≤ limit ≤
   `MAX_SESSION_ENTRIES`) answer a `SessionHistory` whose `total` counts every
   entry; a bound outside its range raises `InvalidHistorySlice`
   (`check_history_tail`, `check_history_page`, which readers that slice without
   a list of entries reuse). An empty history is a history, not an error.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final, Literal, NotRequired, TypeAlias, TypedDict

from beebox_spec.attribution import user_identity
from beebox_spec.entries import (
    MAX_SESSION_ENTRIES,
    JsonObject,
    SessionContentBlock,
    SessionEntry,
    SessionHistory,
)
from beebox_spec.errors import Rejection
from beebox_spec.js_values import (
    js_string_or_empty,
    js_trim,
    parse_json_object_or_none,
    utf8_length,
    utf16_prefix,
)
from beebox_spec.media import (
    SAFE_ID_RE,
    MediaEntryRef,
    strip_inline_media,
    summarize_tool_result,
    transform_content,
)

__all__ = [
    "MAX_SESSION_LINE_BYTES",
    "PHOTO_MODES",
    "SNIFF_CHARS",
    "STRIPS_EVERY_LINE",
    "TASK_NOTIFICATION_TAG",
    "InvalidHistorySlice",
    "OversizeLine",
    "ParseableLine",
    "PhotoMode",
    "ToolResult",
    "TranscriptLine",
    "attach_tool_result",
    "check_history_page",
    "check_history_tail",
    "entries_from_lines",
    "entry_from_record",
    "history_page",
    "history_tail",
    "is_oversize_line",
    "is_plumbing_message",
    "is_sidechain_record",
    "oversize_entry",
    "oversize_entry_from_head",
    "read_transcript_lines",
    "sniff_record_type",
    "sniff_top_level_keys",
    "split_transcript_lines",
    "tool_results_of_record",
]

# The longest line the history read will parse, in UTF-8 bytes (256 KiB). A line
# strictly longer is oversize.
MAX_SESSION_LINE_BYTES: Final = 256 * 1024

# How much of an oversize line's head the stub sniffs, in characters (UTF-16 code
# units, as the original counted; a character the cut would split is left out).
SNIFF_CHARS: Final = 2048

# What the text of a task notification opens with (rule 4): Claude Code's, never typed.
TASK_NOTIFICATION_TAG: Final = "<task-notification>"


# ---------------------------------------------------------------------------------
# 1. Lines
# ---------------------------------------------------------------------------------


def split_transcript_lines(text: str | bytes) -> list[str]:
    """A transcript file's lines: UTF-8 (invalid bytes → U+FFFD), split on "\\n"."""
    decoded = text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text
    # An empty file holds no lines at all.
    if decoded == "":
        return []
    # The final newline terminates the last line; it does not open another.
    if decoded.endswith("\n"):
        decoded = decoded[:-1]
    # "\r\n" is one line break: the "\r" belongs to the terminator, not the line.
    return [line[:-1] if line.endswith("\r") else line for line in decoded.split("\n")]


# ---------------------------------------------------------------------------------
# 2. The guard (§1.2)
# ---------------------------------------------------------------------------------


class ParseableLine(TypedDict):
    """A line safe to parse: as written, or with its payloads stripped."""

    kind: Literal["parseable"]
    lineNumber: int
    text: str
    mediaStripped: bool


class OversizeLine(TypedDict):
    """A line still too big once stripped: never parsed, only sniffed."""

    kind: Literal["oversize"]
    lineNumber: int
    raw: str


TranscriptLine: TypeAlias = ParseableLine | OversizeLine

# Which photos the history read takes out of its lines (rule 2).
PhotoMode: TypeAlias = Literal["original", "refs"]

# Every photo mode, `original` first (§1.2's rule, the reader's default).
PHOTO_MODES: Final[tuple[PhotoMode, ...]] = ("original", "refs")

# Rule 2's table: whether a mode strips a line of any length, or only one over the bound.
STRIPS_EVERY_LINE: Final[dict[PhotoMode, bool]] = {"original": False, "refs": True}


def is_oversize_line(line: str) -> bool:
    """More than `MAX_SESSION_LINE_BYTES` UTF-8 bytes (the bound itself is fine)."""
    return utf8_length(line) > MAX_SESSION_LINE_BYTES


def read_transcript_lines(
    lines: Sequence[str], *, photos: PhotoMode = "original"
) -> list[TranscriptLine]:
    """Every line, classified against the byte bound in photo mode `photos`, from 1."""
    classified: list[TranscriptLine] = []
    for line_number, line in enumerate(lines, start=1):
        stripped = (
            strip_inline_media(line)
            if STRIPS_EVERY_LINE[photos] or is_oversize_line(line)
            else None
        )
        # Something was stripped and the rest fits: parsed without its payloads.
        if stripped is not None and not is_oversize_line(stripped):
            classified.append(
                {
                    "kind": "parseable",
                    "lineNumber": line_number,
                    "text": stripped,
                    "mediaStripped": True,
                }
            )
        # Nothing stripped, and within the bound: parsed as written, images and all.
        elif stripped is None and not is_oversize_line(line):
            classified.append(
                {
                    "kind": "parseable",
                    "lineNumber": line_number,
                    "text": line,
                    "mediaStripped": False,
                }
            )
        # Nothing to strip, or still too big without its payloads: never parsed.
        else:
            classified.append({"kind": "oversize", "lineNumber": line_number, "raw": line})
    return classified


# ---------------------------------------------------------------------------------
# 3. Stubs for oversize lines (§1.1)
# ---------------------------------------------------------------------------------

_SNIFF_UUID_RE: Final = re.compile(r'"uuid":"([^"]*)"')
_SNIFF_TIMESTAMP_RE: Final = re.compile(r'"timestamp":"([^"]*)"')
# A message content opening with a task notification: the string, or its first block's text.
_SNIFF_TASK_NOTIFICATION_RE: Final = re.compile(
    r'"content":(?:"|\[\{"type":"text","text":")' + re.escape(TASK_NOTIFICATION_TAG)
)


def oversize_entry(line: str, line_number: int) -> SessionEntry | None:
    """The placeholder entry for a line too big to parse, or None to drop it."""
    return oversize_entry_from_head(utf16_prefix(line, SNIFF_CHARS), utf8_length(line), line_number)


def oversize_entry_from_head(head: str, utf8_bytes: int, line_number: int) -> SessionEntry | None:
    """`oversize_entry` from what it reads of the line: its head and its size.

    `head` is the line's first `SNIFF_CHARS` characters (`utf16_prefix`) and
    `utf8_bytes` its length in UTF-8 bytes (`utf8_length`); nothing else of the
    line is read, so a reader can stub a line it never holds whole.
    """
    keys = sniff_top_level_keys(head)
    envelope = _record_type(keys)
    # Only user and assistant turns are history.
    if envelope is not None and envelope not in ("user", "assistant"):
        return None
    # Untyped: a turn's only when the head shows the `message` every turn has.
    if envelope is None and not any(key == "message" for key, _ in keys):
        return None
    # An SDK meta prompt is plumbing, whatever its type.
    if '"isMeta":true' in head:
        return None
    # A synthetic assistant turn was generated locally, not by the model.
    if envelope == "assistant" and '"model":"<synthetic>"' in head:
        return None
    # A user turn carrying a tool_result is API plumbing (dropped whole, even with text).
    if envelope == "user" and '"type":"tool_result"' in head:
        return None
    # A task notification is the harness's, however long the result it carries (rule 4).
    if envelope == "user" and _SNIFF_TASK_NOTIFICATION_RE.search(head) is not None:
        return None
    kilobytes = (utf8_bytes + 512) // 1024  # Math.round(bytes / 1024), halves up
    sniffed_uuid = _sniff_string(head, _SNIFF_UUID_RE)
    stub: SessionEntry = {
        "uuid": sniffed_uuid if sniffed_uuid != "" else f"oversize-{line_number}",
        # An unattributed stub is the assistant's: a false "user" would count as one.
        "type": "user" if envelope == "user" else "assistant",
        "timestamp": _sniff_string(head, _SNIFF_TIMESTAMP_RE),
        "content": [{"type": "text", "text": f"[message too large to display: ~{kilobytes} KB]"}],
    }
    # A sub-agent's turn stays one, however big (rule 4's table).
    if '"isSidechain":true' in head:
        stub["sidechain"] = True
    return stub


def sniff_top_level_keys(head: str) -> list[tuple[str, str | None]]:
    """The keys of a line's outer object that its head shows, in order, each with its
    value when that is a whole string in the head (raw: escapes are not decoded).

    Read as compact JSON: a key opens at depth 1 — inside the outer object, outside
    any nested object, array or string — right after the object's `{` or a `,`. A
    head that does not open with an object shows no keys.
    """
    keys: list[tuple[str, str | None]] = []
    at = len(head) - len(head.lstrip())
    # Only an object has keys: a head that opens with anything else shows none.
    if not head.startswith("{", at):
        return keys
    depth = 0
    previous = ""
    while at < len(head):
        char = head[at]
        if char == '"':
            end = _string_end(head, at)
            # A string the head cuts off ends the reading.
            if end is None:
                break
            if depth == 1 and previous in ("{", ","):
                keys.append((head[at + 1 : end], _string_value_after(head, end + 1)))
            at, previous = end + 1, '"'
            continue
        if char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
        # The outer object has closed: what follows is not its.
        if depth <= 0 and not char.isspace():
            break
        if not char.isspace():
            previous = char
        at += 1
    return keys


def _string_end(text: str, start: int) -> int | None:
    # Where the string opening at `start` closes (a backslash escapes one character).
    at = start + 1
    while at < len(text):
        if text[at] == "\\":
            at += 2
            continue
        if text[at] == '"':
            return at
        at += 1
    return None


def _string_value_after(text: str, colon_at: int) -> str | None:
    # A key's value, when it is a string the text holds whole (`"key":"value"`).
    if not text.startswith(':"', colon_at):
        return None
    end = _string_end(text, colon_at + 1)
    return None if end is None else text[colon_at + 2 : end]


def sniff_record_type(head: str) -> str | None:
    """The record's type as its head shows it (see rule 3): its first top-level
    `"type"` string, or None when the head shows none."""
    return _record_type(sniff_top_level_keys(head))


def _record_type(keys: list[tuple[str, str | None]]) -> str | None:
    # The first top-level `type` key's string, if the head showed one.
    return next((value for key, value in keys if key == "type"), None)


def _sniff_string(head: str, pattern: re.Pattern[str]) -> str:
    # The first `"key":"value"` in the head, raw (escapes are not decoded), or "".
    match = pattern.search(head)
    return match.group(1) if match is not None else ""


# ---------------------------------------------------------------------------------
# 4. Entries (§1.2, §2.4)
# ---------------------------------------------------------------------------------

_SYNTHETIC_MODEL: Final = "<synthetic>"


def entries_from_lines(
    session_id: str, lines: Sequence[str], *, photos: PhotoMode = "original"
) -> list[SessionEntry]:
    """The history read in photo mode `photos`: every entry, in file order."""
    entries: list[SessionEntry] = []
    # Rule 5: the calls not yet answered, by id (the latest block with the id
    # shadows an earlier one, answered or not).
    unanswered: dict[str, SessionContentBlock] = {}
    for line in read_transcript_lines(lines, photos=photos):
        if line["kind"] == "oversize":
            stub = oversize_entry(line["raw"], line["lineNumber"])
            # The sniff recognised a record the parse would have dropped.
            if stub is not None:
                entries.append(stub)
            continue
        record = parse_json_object_or_none(line["text"])
        # Blank, a comment, half-written, or not an object: skipped silently.
        if record is None:
            continue
        media_session_id = session_id if line["mediaStripped"] else None
        entry = entry_from_record(record, media_session_id)
        # The record is a turn history shows.
        if entry is not None:
            entries.append(entry)
            for block in entry["content"]:
                # A call with an id can be answered by a later result.
                if block["type"] == "tool_use" and block.get("toolId", "") != "":
                    unanswered[block.get("toolId", "")] = block
        for result in tool_results_of_record(record):
            call = unanswered.pop(result["toolUseId"], None)
            # Only an unanswered call with the result's id takes it.
            if call is not None:
                attach_tool_result(call, result)
    return entries


class ToolResult(TypedDict):
    """What one `tool_result` block says of its call (rule 5)."""

    toolUseId: str
    resultSummary: str
    isError: bool
    agentId: NotRequired[str]


def tool_results_of_record(record: JsonObject) -> list[ToolResult]:
    """The `tool_result` blocks of a user record's top-level content, in order (rule 5)."""
    # Only a user turn carries results, in its message's content list.
    if record.get("type") != "user":
        return []
    message = record.get("message")
    if not isinstance(message, dict):
        return []
    content = message.get("content")
    if not isinstance(content, list):
        return []
    results: list[ToolResult] = []
    for block in content:
        # A result block names its call; anything else is not a result.
        if not isinstance(block, dict) or block.get("type") != "tool_result":
            continue
        results.append(
            {
                "toolUseId": js_string_or_empty(block.get("tool_use_id")),
                "resultSummary": summarize_tool_result(block.get("content")),
                "isError": block.get("is_error") is True,
            }
        )
    agent_id = _sub_agent_id(record)
    # The line's `toolUseResult` is one tool's: it names the sub-agent of its only result.
    if agent_id is not None and len(results) == 1:
        results[0]["agentId"] = agent_id
    return results


def _sub_agent_id(record: JsonObject) -> str | None:
    # `toolUseResult.agentId`, when it is an id that can name a transcript.
    tool_use_result = record.get("toolUseResult")
    agent_id = tool_use_result.get("agentId") if isinstance(tool_use_result, dict) else None
    if isinstance(agent_id, str) and SAFE_ID_RE.fullmatch(agent_id) is not None:
        return agent_id
    return None


def attach_tool_result(call: SessionContentBlock, result: ToolResult) -> None:
    """Give ``call`` (a `tool_use` block) what ``result`` says of it (rule 5)."""
    call["resultSummary"] = result["resultSummary"]
    # Only a failed result says so; a block carries no `isError: false`.
    if result["isError"]:
        call["isError"] = True
    # Only a call that started a sub-agent names one.
    if "agentId" in result:
        call["agentId"] = result["agentId"]


def entry_from_record(record: JsonObject, media_session_id: str | None) -> SessionEntry | None:
    """What one parsed record contributes to history: an entry, or None to drop it.

    `media_session_id` is the session's id when the record's line was stripped (its
    images can be fetched back by reference), None for an ordinary line.
    """
    record_type = record.get("type")
    # Only user and assistant turns are history (system, progress, metadata are not).
    if record_type not in ("user", "assistant"):
        return None
    message = record.get("message")
    # A turn without a message object has nothing to show.
    if not isinstance(message, dict):
        return None
    # An SDK meta prompt is plumbing.
    if record.get("isMeta") is True:
        return None
    # A synthetic assistant turn was generated locally, not by the model.
    if record_type == "assistant" and message.get("model") == _SYNTHETIC_MODEL:
        return None
    uuid = js_string_or_empty(record.get("uuid"))
    timestamp = js_string_or_empty(record.get("timestamp"))
    media_ref: MediaEntryRef | None = (
        {"sessionId": media_session_id, "entryUuid": uuid} if media_session_id is not None else None
    )
    content = transform_content(message.get("content"), media_ref)
    if record_type == "assistant":
        # An assistant turn with no blocks at all shows nothing.
        if not content:
            return None
        reply: SessionEntry = {
            "uuid": uuid,
            "type": "assistant",
            "timestamp": timestamp,
            "content": content,
        }
        return _marked_sidechain(reply, record)
    # Nothing a person put there — no real text, no photo: plumbing or blank
    # (ours, `docs/spec-decisions.md#image-only-turns-kept`).
    if not any(_shows_something(block) for block in content):
        return None
    entry: SessionEntry = {"uuid": uuid, "type": "user", "timestamp": timestamp, "content": content}
    _marked_sidechain(entry, record)
    user = user_identity(content, "user")
    # The sender's name rides along only when the typed tag names one.
    if user is not None:
        entry["user"] = user
    user_email = user_identity(content, "user-email")
    # Likewise the sender's email.
    if user_email is not None:
        entry["userEmail"] = user_email
    return entry


def is_sidechain_record(record: JsonObject) -> bool:
    """A sub-agent's turn: its `isSidechain` is the JSON `true` (rule 4's table)."""
    return record.get("isSidechain") is True


def _marked_sidechain(entry: SessionEntry, record: JsonObject) -> SessionEntry:
    # Rule 4's table: a sub-agent's entry says so; any other carries no key.
    if is_sidechain_record(record):
        entry["sidechain"] = True
    return entry


def _shows_something(block: SessionContentBlock) -> bool:
    """A user turn's block that a person put there: real text, or an image to show."""
    if block.get("type") == "image":
        # A top-level image shown by reference, inline bytes or URL (the placeholder
        # for one that cannot be shown is a text block, and counts below).
        return any(key in block for key in ("imageRef", "dataBase64", "imageUrl"))
    if block.get("type") == "text":
        text = block.get("text", "")
        # Blank text and Claude Code's own notices are not anyone's words.
        return js_trim(text) != "" and not is_plumbing_message(text)
    # tool_use, tool_result and thinking blocks are not what a user turn shows.
    return False


def is_plumbing_message(text: str) -> bool:
    """Claude Code's own notices in a user position, not typed by anyone.

    Read on the JavaScript-trimmed text: exactly "Tool loaded.", or anything that
    starts "Todos have been modified" or `TASK_NOTIFICATION_TAG` (rule 4). The
    history read (§2.4 entries) and chat review's real user turns (§4.2,
    `beebox_spec.review.turns`) share this one rule.

    The first two are not in the spec sources: they are the original's code,
    `cli/lib/session-text.ts` `plumbingPatterns` (`/^Tool loaded\\.$/` and
    `/^Todos have been modified/`, tested on `text.trim()`), read for this rule.
    The task notification is not among them
    (ours, `docs/spec-decisions.md#task-notifications`).
    """
    trimmed = js_trim(text)
    return trimmed == "Tool loaded." or trimmed.startswith(_PLUMBING_OPENINGS)


# What `is_plumbing_message` reads by its start (only "Tool loaded." is read whole).
_PLUMBING_OPENINGS: Final = ("Todos have been modified", TASK_NOTIFICATION_TAG)


# ---------------------------------------------------------------------------------
# 6. Slices (§2.4)
# ---------------------------------------------------------------------------------


class InvalidHistorySlice(Rejection):
    """A history slice asked for outside §2.4's bounds."""


def check_history_tail(tail: int) -> None:
    """Raise `InvalidHistorySlice` unless `tail` is within §2.4's bounds."""
    # `tail` is an integer from 1 to MAX_SESSION_ENTRIES.
    if isinstance(tail, bool) or not 1 <= tail <= MAX_SESSION_ENTRIES:
        raise InvalidHistorySlice(f"tail must be an integer 1-{MAX_SESSION_ENTRIES}, got {tail!r}")


def check_history_page(offset: int, limit: int) -> None:
    """Raise `InvalidHistorySlice` unless `offset` and `limit` are within §2.4's bounds."""
    # `offset` is a non-negative integer; past the end the page is empty.
    if isinstance(offset, bool) or offset < 0:
        raise InvalidHistorySlice(f"offset must be an integer >= 0, got {offset!r}")
    # `limit` is an integer from 1 to MAX_SESSION_ENTRIES.
    if isinstance(limit, bool) or not 1 <= limit <= MAX_SESSION_ENTRIES:
        raise InvalidHistorySlice(
            f"limit must be an integer 1-{MAX_SESSION_ENTRIES}, got {limit!r}"
        )


def history_tail(session_id: str, entries: Sequence[SessionEntry], tail: int) -> SessionHistory:
    """The last `tail` entries (all of them when there are fewer), and the total."""
    check_history_tail(tail)
    return {
        "sessionId": session_id,
        "entries": list(entries[-tail:]),
        "total": len(entries),
    }


def history_page(
    session_id: str, entries: Sequence[SessionEntry], offset: int, limit: int
) -> SessionHistory:
    """Entries `offset` to `offset + limit` (fewer past the end), and the total."""
    check_history_page(offset, limit)
    return {
        "sessionId": session_id,
        "entries": list(entries[offset : offset + limit]),
        "total": len(entries),
    }
