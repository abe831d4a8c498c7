"""A background task's notification is the harness's, not the person's (issue 37).

When a sub-agent or a background command the agent started ends, Claude Code adds
a user turn whose text opens ``<task-notification>``. The history read
(`beebox_spec.transcript` rules 3 and 4) and the review's real user turns
(`beebox_spec.review.turns`) read it as plumbing through the one rule they share,
`is_plumbing_message`. The corpus tests skip where the shared corpus is absent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from beebox_spec.entries import JsonObject, JsonValue
from beebox_spec.js_values import parse_json_object_or_none
from beebox_spec.review.turns import (
    count_real_user_turns,
    first_real_user_snippet,
    real_user_turn_text,
)
from beebox_spec.transcript import (
    MAX_SESSION_LINE_BYTES,
    TASK_NOTIFICATION_TAG,
    entries_from_lines,
    entry_from_record,
    is_plumbing_message,
    oversize_entry,
    split_transcript_lines,
)

TS = "2026-12-05T21:28:30.929Z"
BIG = "z" * (MAX_SESSION_LINE_BYTES + 10)

# Claude Code 2.1.332's notification of a background Agent call, as it wrote it.
NOTE_2_1_332 = (
    "<task-notification>\n<task-id>a233b22d10ab94f0b</task-id>\n"
    "<tool-use-id>toolu_double_0001</tool-use-id>\n"
    "<output-file>/tmp/claude-0/tasks/a233b22d10ab94f0b.output</output-file>\n"
    "<status>completed</status>\n"
    '<summary>Agent "Count curry adjectives" finished</summary>\n'
    "<result>SUBAGENT-SAYS: fragrant, creamy and hot.</result>\n"
    "<usage><subagent_tokens>15</subagent_tokens><tool_uses>0</tool_uses>"
    "<duration_ms>109</duration_ms></usage>\n</task-notification>"
)
# 2.1.39's, of a background command: words after the closing tag.
NOTE_2_1_39 = (
    "<task-notification>\n<task-id>b7636e2</task-id>\n<status>completed</status>\n"
    '<summary>Background command "Run the tests" completed (exit code 0)</summary>\n'
    "</task-notification>\nRead the output file to retrieve the result: /tmp/b7636e2.output"
)


def compact(value: Any) -> str:
    """A transcript line as Claude Code writes it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def text(value: str) -> JsonObject:
    return {"type": "text", "text": value}


def notification_line(content: JsonValue, **extra: JsonValue) -> JsonObject:
    """A user line in 2.1.332's key order: `message` before `uuid` and `origin`."""
    record: JsonObject = {
        "parentUuid": "a-2",
        "isSidechain": False,
        "promptId": "p-2",
        "type": "user",
        "message": {"role": "user", "content": content},
        "uuid": "u-note",
        "timestamp": TS,
        "origin": {"kind": "task-notification", "producer": "session-task"},
        "promptSource": "system",
    }
    record.update(extra)
    return record


def person_line(content: JsonValue, **extra: JsonValue) -> JsonObject:
    record: JsonObject = {
        "type": "user",
        "message": {"role": "user", "content": content},
        "uuid": "u-person",
        "timestamp": TS,
    }
    record.update(extra)
    return record


# ---------------------------------------------------------------------------------
# The rule: the JavaScript-trimmed text opens with the tag
# ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "plumbing"),
    [
        pytest.param(NOTE_2_1_332, True, id="2.1.332"),
        pytest.param(NOTE_2_1_39, True, id="words after the closing tag"),
        pytest.param(TASK_NOTIFICATION_TAG, True, id="the tag alone"),
        pytest.param("\ufeff\n  " + NOTE_2_1_332 + "\n", True, id="JavaScript blanks around"),
        pytest.param("Look: " + NOTE_2_1_332, False, id="not at the start"),
        pytest.param("<Task-Notification>x", False, id="another case"),
        pytest.param("<task-notification", False, id="the tag unclosed"),
        pytest.param("\x85" + NOTE_2_1_332, False, id="U+0085 is not JavaScript's blank"),
    ],
)
def test_a_task_notification_is_plumbing(value: str, plumbing: bool) -> None:
    assert is_plumbing_message(value) is plumbing


def test_the_tag_is_what_claude_code_writes() -> None:
    assert TASK_NOTIFICATION_TAG == "<task-notification>"


# ---------------------------------------------------------------------------------
# The history read (rule 4)
# ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "record",
    [
        pytest.param(notification_line(NOTE_2_1_332), id="2.1.332, its origin and all"),
        pytest.param(person_line(NOTE_2_1_39), id="no origin (2.1.39)"),
        pytest.param(person_line([text(NOTE_2_1_39)]), id="as a text block"),
        pytest.param(person_line([text(NOTE_2_1_332), text(" ")]), id="beside a blank"),
    ],
)
def test_a_turn_of_notifications_is_not_history(record: JsonObject) -> None:
    assert entry_from_record(record, None) is None


@pytest.mark.parametrize(
    "content",
    [
        pytest.param([text(NOTE_2_1_332), text("And the red one?")], id="a person's words"),
        pytest.param(
            [
                text(NOTE_2_1_332),
                {"type": "image", "source": {"type": "url", "url": "https://e.x/p.png"}},
            ],
            id="a photo",
        ),
    ],
)
def test_what_a_person_put_beside_a_notification_keeps_the_turn(content: JsonValue) -> None:
    entry = entry_from_record(person_line(content), None)
    assert entry is not None
    assert entry["type"] == "user"


def test_the_origin_alone_makes_no_notification() -> None:
    # 2.1.332 gives the kind to a scheduled task's stored prompt as well.
    scheduled = person_line(
        "Water the plants.",
        origin={"kind": "task-notification", "subkind": "scheduled-trigger"},
        promptSource="system",
    )
    assert entry_from_record(scheduled, None) is not None


def test_an_assistant_text_opening_with_the_tag_is_a_reply() -> None:
    record: JsonObject = {
        "type": "assistant",
        "uuid": "a-1",
        "timestamp": TS,
        "message": {"role": "assistant", "content": [text(NOTE_2_1_39)]},
    }
    assert entry_from_record(record, None) is not None


def test_the_agents_answer_stays_and_the_notification_goes() -> None:
    lines = [
        compact(person_line("Use a helper in the background.")),
        compact(notification_line(NOTE_2_1_332)),
        compact(
            {
                "type": "assistant",
                "uuid": "a-3",
                "timestamp": TS,
                "message": {"role": "assistant", "content": [text("The helper said three.")]},
            }
        ),
    ]
    entries = entries_from_lines("s-1", lines)
    assert [(entry["uuid"], entry["type"]) for entry in entries] == [
        ("u-person", "user"),
        ("a-3", "assistant"),
    ]


# ---------------------------------------------------------------------------------
# The stub (rule 3): a huge notification is never the person's stub
# ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "record",
    [
        pytest.param(notification_line(NOTE_2_1_332 + BIG), id="2.1.332's key order"),
        pytest.param(person_line(NOTE_2_1_332 + BIG), id="uuid before the message"),
        pytest.param(person_line([text(NOTE_2_1_332 + BIG)]), id="its first block's text"),
        pytest.param(
            person_line([text(NOTE_2_1_332 + BIG), text("more")]), id="a second block unseen"
        ),
    ],
)
def test_an_oversize_notification_is_dropped_by_its_head(record: JsonObject) -> None:
    assert oversize_entry(compact(record), 5) is None


@pytest.mark.parametrize(
    ("record", "kind"),
    [
        pytest.param(person_line("Read this: " + NOTE_2_1_332 + BIG), "user", id="tag later"),
        pytest.param(
            person_line([text("Read this:"), text(NOTE_2_1_332 + BIG)]),
            "user",
            id="a later block",
        ),
        pytest.param(
            {
                "type": "assistant",
                "uuid": "a-1",
                "timestamp": TS,
                "message": {"role": "assistant", "content": NOTE_2_1_332 + BIG},
            },
            "assistant",
            id="the assistant's",
        ),
    ],
)
def test_an_oversize_turn_not_opening_with_a_notification_is_a_stub(
    record: JsonObject, kind: str
) -> None:
    stub = oversize_entry(compact(record), 5)
    assert stub is not None
    assert stub["type"] == kind


def test_accepted_limitation_the_stub_reads_the_tag_as_written() -> None:
    # The parse trims, the head is read as written: a notification behind blanks
    # (Claude Code writes none) is dropped by the parse and stubbed when oversize.
    record = person_line("\n" + NOTE_2_1_332 + BIG)
    assert entry_from_record(record, None) is None
    assert oversize_entry(compact(record), 5) is not None


# ---------------------------------------------------------------------------------
# The review's real user turns (§4.2)
# ---------------------------------------------------------------------------------


def test_a_notification_is_not_a_turn_the_person_took() -> None:
    lines: list[JsonValue] = [
        notification_line(NOTE_2_1_332),
        person_line("Book the Keene trip"),
        person_line([text(NOTE_2_1_39)]),
        person_line("and the hotel"),
    ]
    assert real_user_turn_text(lines[0]) is None
    assert real_user_turn_text(lines[2]) is None
    assert count_real_user_turns(lines) == 2
    # The snippet is the person's first words, not the notification's.
    assert first_real_user_snippet(lines) == "Book the Keene trip"


# ---------------------------------------------------------------------------------
# The corpus: Claude Code 2.1.15/2.1.16 and 2.1.39 sessions with notifications
# ---------------------------------------------------------------------------------

CORPUS_CANDIDATES = [
    Path(__file__).resolve().parents[3] / "shared" / "corpus" / "claude-transcripts",
    Path("/work/shared/corpus/claude-transcripts"),
]
CORPUS = next((path for path in CORPUS_CANDIDATES if path.is_dir()), None)
NOTIFIED = [
    "session-share/0ccf1a04-1b4c-43b6-8aa5-79e41db43a68.jsonl",
    "spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl",
]


@pytest.mark.skipif(CORPUS is None, reason="the transcript corpus (shared/corpus) is absent")
@pytest.mark.parametrize("name", NOTIFIED)
def test_the_corpus_notifications_are_neither_history_nor_turns(name: str) -> None:
    assert CORPUS is not None
    path = CORPUS / name
    if not path.exists():
        pytest.skip(f"{name} is absent")
    lines = split_transcript_lines(path.read_bytes())
    records = [record for line in lines if (record := parse_json_object_or_none(line))]
    notifications = [
        record
        for record in records
        if record.get("type") == "user"
        and TASK_NOTIFICATION_TAG in json.dumps(record.get("message"))
    ]
    assert notifications, "the corpus file holds user turns with a notification"
    entries = entries_from_lines(path.stem, lines)
    shown = {entry["uuid"] for entry in entries}
    assert not any(record.get("uuid") in shown for record in notifications)
    assert all(real_user_turn_text(record) is None for record in notifications)
    # The person's own turns still count.
    assert count_real_user_turns(records) > 0
