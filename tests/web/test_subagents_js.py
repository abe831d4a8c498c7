"""The page's `subagents.js`: which entries are a sub-agent's, and under which call.

Claude Code up to 1.0.x wrote a sub-agent's turns into the session's own transcript,
one run after another once each sub-agent finished, its first turn the call's
prompt (the corpus's claude-code-viewer sessions: parallel Task calls, then their
runs back to back, the results between them being plumbing the history drops).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from beebox_spec.transcript import entries_from_lines, split_transcript_lines
from tests.impl.transcript.test_corpus import CORPUS

SUBAGENTS_JS = Path(__file__).resolve().parents[2] / "beebox_impl" / "web" / "subagents.js"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed: cannot run the JS")


def group(entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """`groupSidechains(entries)` as uuids: main, byCall (tool id → uuids), loose."""
    assert NODE is not None
    script = (
        f"import({json.dumps(SUBAGENTS_JS.as_uri())}).then(({{ groupSidechains }}) => {{"
        "  const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "  const { main, byCall, loose } = groupSidechains(input);"
        "  const uuids = (list) => list.map((entry) => entry.uuid);"
        "  console.log(JSON.stringify({ main: uuids(main),"
        "    byCall: Object.fromEntries([...byCall].map(([id, list]) => [id, uuids(list)])),"
        "    loose: loose.map((g) => ({ after: g.after, entries: uuids(g.entries) })) }));"
        "});"
    )
    finished = subprocess.run(
        [NODE, "-e", script],
        input=json.dumps(entries),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    answer: dict[str, Any] = json.loads(finished.stdout)
    return answer


def entry(uuid: str, kind: str, text: str, *, sidechain: bool = False) -> dict[str, Any]:
    shown: dict[str, Any] = {"uuid": uuid, "type": kind, "timestamp": "", "content": []}
    shown["content"] = [{"type": "text", "text": text}]
    if sidechain:
        shown["sidechain"] = True
    return shown


def calls(uuid: str, *prompts: str, agent_id: str | None = None) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    for number, prompt in enumerate(prompts):
        block: dict[str, Any] = {"type": "tool_use", "toolName": "Task", "toolId": f"t{number}"}
        block["input"] = {"description": f"task {number}", "prompt": prompt}
        if agent_id is not None:
            block["agentId"] = agent_id
        blocks.append(block)
    return {"uuid": uuid, "type": "assistant", "timestamp": "", "content": blocks}


def test_parallel_calls_each_take_the_run_their_prompt_starts() -> None:
    answer = group(
        [
            entry("u1", "user", "do two things"),
            calls("a1", "first thing", "second thing"),
            entry("s1", "user", "second thing", sidechain=True),
            entry("s2", "assistant", "did the second", sidechain=True),
            entry("s3", "user", "first thing", sidechain=True),
            entry("s4", "assistant", "did the first", sidechain=True),
            entry("a2", "assistant", "both done"),
        ]
    )
    assert answer == {
        "main": ["u1", "a1", "a2"],
        "byCall": {"t1": ["s1", "s2"], "t0": ["s3", "s4"]},
        "loose": [],
    }


def test_a_run_whose_call_is_not_shown_stands_where_it_is() -> None:
    # The call is on a page not loaded yet: the run is a group of its own.
    answer = group(
        [
            entry("s1", "assistant", "still working", sidechain=True),
            entry("s2", "assistant", "done", sidechain=True),
            entry("a2", "assistant", "both done"),
            calls("a3", "later task"),
            entry("s3", "user", "something else", sidechain=True),
        ]
    )
    assert answer == {
        "main": ["a2", "a3"],
        "byCall": {},
        "loose": [
            {"after": None, "entries": ["s1", "s2"]},
            {"after": "a3", "entries": ["s3"]},
        ],
    }


def test_a_call_naming_its_sub_agent_takes_no_inline_run() -> None:
    # 2.x: the sub-agent's turns are in their own transcript, read when opened.
    answer = group([calls("a1", "a task", agent_id="a9cad17"), entry("u2", "user", "a task")])
    assert answer == {"main": ["a1", "u2"], "byCall": {}, "loose": []}


@pytest.mark.parametrize(
    ("name", "groups"),
    [
        ("fe5e1c67-53e7-4862-81ae-d0e013e3270b", [13, 53, 59, 41, 83]),
        ("5c0375b4-57a5-4f26-b12d-d022ee4e51b7", [5, 9]),
    ],
)
def test_every_sidechain_turn_of_the_1_0_x_corpus_stands_under_its_call(
    name: str, groups: list[int]
) -> None:
    path = CORPUS / "claude-code-viewer" / f"{name}.jsonl"
    if not path.exists():
        pytest.skip(f"corpus file {path.name} not present")
    entries = entries_from_lines(name, split_transcript_lines(path.read_bytes()))
    answer = group(entries)
    assert [len(run) for run in answer["byCall"].values()] == groups
    assert answer["loose"] == []
    assert len(answer["main"]) + sum(groups) == len(entries)
