"""A session's sub-agents: where their transcripts are, and what the history read says
of them (`beebox_spec.transcript` rules 4 and 5, `locate_sub_agent_transcript`).

The corpus checks read the real files beside the repository (see `test_corpus.py`)
and skip when they are absent.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from beebox_impl.services.history import ChatHistoryService, SubAgentNotFound
from beebox_impl.transcript import PageSlice, TailSlice, TranscriptIndexCache, read_history
from beebox_impl.transcript.location import (
    MAX_SUB_AGENT_DEPTH,
    InvalidAgentId,
    locate_sub_agent_transcript,
    sub_agent_transcripts,
)
from beebox_spec.entries import MAX_SESSION_ENTRIES, SessionEntry
from beebox_spec.review.turns import count_real_user_turns
from beebox_spec.transcript import entries_from_lines, is_sidechain_record, split_transcript_lines
from tests.impl.transcript.test_corpus import CORPUS

SESSION = "4d5611e5-241a-462a-8d15-5122611a9569"


def _line(record: dict[str, object]) -> str:
    return json.dumps(record, separators=(",", ":"))


def _sub_agent_lines(agent_id: str, reply: str) -> str:
    # A sub-agent's transcript as Claude Code 2.x writes it: every line marked.
    envelope = {"isSidechain": True, "agentId": agent_id, "sessionId": SESSION}
    prompt = {
        **envelope,
        "parentUuid": None,
        "type": "user",
        "message": {"role": "user", "content": "Count the files."},
        "uuid": f"{agent_id}-1",
        "timestamp": "2026-03-01T10:00:00.000Z",
    }
    answer = {
        **envelope,
        "parentUuid": f"{agent_id}-1",
        "type": "assistant",
        "message": {"role": "assistant", "content": [{"type": "text", "text": reply}]},
        "uuid": f"{agent_id}-2",
        "timestamp": "2026-03-01T10:00:01.000Z",
    }
    return _line(prompt) + "\n" + _line(answer) + "\n"


def _session(tmp_path: Path) -> Path:
    transcript = tmp_path / "project" / f"{SESSION}.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text("", encoding="utf-8")
    return transcript


def test_the_direct_file_is_found(tmp_path: Path) -> None:
    transcript = _session(tmp_path)
    folder = transcript.with_suffix("") / "subagents"
    folder.mkdir(parents=True)
    (folder / "agent-a2898e3.jsonl").write_text(_sub_agent_lines("a2898e3", "3"), "utf-8")
    assert locate_sub_agent_transcript(transcript, "a2898e3") == folder / "agent-a2898e3.jsonl"
    assert locate_sub_agent_transcript(transcript, "a000000") is None


def test_a_nested_file_is_found_in_name_order_and_not_too_deep(tmp_path: Path) -> None:
    transcript = _session(tmp_path)
    top = transcript.with_suffix("") / "subagents"
    for run in ("run-b", "run-a"):
        (top / "workflows" / run).mkdir(parents=True)
        (top / "workflows" / run / "agent-aw1.jsonl").write_text(_sub_agent_lines("aw1", run))
    found = locate_sub_agent_transcript(transcript, "aw1")
    assert found == top / "workflows" / "run-a" / "agent-aw1.jsonl"
    deep = top.joinpath(*(f"d{level}" for level in range(MAX_SUB_AGENT_DEPTH + 1)))
    deep.mkdir(parents=True)
    (deep / "agent-adeep.jsonl").write_text(_sub_agent_lines("adeep", "too deep"))
    assert locate_sub_agent_transcript(transcript, "adeep") is None
    (deep.parent / "agent-adeep.jsonl").write_text(_sub_agent_lines("adeep", "just in"))
    assert locate_sub_agent_transcript(transcript, "adeep") == deep.parent / "agent-adeep.jsonl"


def test_links_lead_nowhere(tmp_path: Path) -> None:
    transcript = _session(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "agent-alink.jsonl").write_text(_sub_agent_lines("alink", "outside"))
    session_folder = transcript.with_suffix("")
    session_folder.mkdir()
    # The subagents folder a link: never followed.
    os.symlink(elsewhere, session_folder / "subagents")
    assert locate_sub_agent_transcript(transcript, "alink") is None
    (session_folder / "subagents").unlink()
    top = session_folder / "subagents"
    top.mkdir()
    # A folder below it a link, and the file itself a link: neither followed.
    os.symlink(elsewhere, top / "workflows")
    os.symlink(elsewhere / "agent-alink.jsonl", top / "agent-alink.jsonl")
    assert locate_sub_agent_transcript(transcript, "alink") is None


def test_every_sub_agent_transcript_is_listed_where_one_is_looked_for(tmp_path: Path) -> None:
    # `sub_agent_transcripts`: what `locate_sub_agent_transcript` would find, each
    # once, in the order it looks; no other file, nothing too deep, no link.
    transcript = _session(tmp_path)
    assert sub_agent_transcripts(transcript) == []
    top = transcript.with_suffix("") / "subagents"
    (top / "workflows" / "run-a").mkdir(parents=True)
    (top / "agent-a2.jsonl").write_text(_sub_agent_lines("a2", "direct"))
    (top / "agent-a1.jsonl").write_text(_sub_agent_lines("a1", "direct"))
    (top / "workflows" / "run-a" / "agent-aw1.jsonl").write_text(_sub_agent_lines("aw1", "a"))
    (top / "notes.jsonl").write_text("{}\n")
    (top / "agent-a.b.jsonl").write_text("{}\n")
    deep = top.joinpath(*(f"d{level}" for level in range(MAX_SUB_AGENT_DEPTH + 1)))
    deep.mkdir(parents=True)
    (deep / "agent-adeep.jsonl").write_text(_sub_agent_lines("adeep", "too deep"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "agent-alink.jsonl").write_text(_sub_agent_lines("alink", "outside"))
    os.symlink(elsewhere / "agent-alink.jsonl", top / "agent-alink.jsonl")
    listed = sub_agent_transcripts(transcript)
    assert listed == [
        top / "agent-a1.jsonl",
        top / "agent-a2.jsonl",
        top / "workflows" / "run-a" / "agent-aw1.jsonl",
    ]
    for path in listed:
        agent_id = path.name.removeprefix("agent-").removesuffix(".jsonl")
        assert locate_sub_agent_transcript(transcript, agent_id) == path


@pytest.mark.parametrize("agent_id", ["", "../x", "a/b", "a.jsonl", "x" * 65, "a\x00b", "é"])
def test_an_agent_id_outside_the_grammar_is_refused(tmp_path: Path, agent_id: str) -> None:
    with pytest.raises(InvalidAgentId):
        locate_sub_agent_transcript(_session(tmp_path), agent_id)


def test_the_service_reads_a_sub_agents_slices_and_refuses_one_it_lacks(tmp_path: Path) -> None:
    projects = tmp_path / "projects"
    service = ChatHistoryService(tmp_path / "box", (projects,))
    transcript = service.transcript_path(SESSION)
    folder = transcript.with_suffix("") / "subagents"
    folder.mkdir(parents=True)
    (folder / "agent-a2898e3.jsonl").write_text(_sub_agent_lines("a2898e3", "3 files"))
    tail = service.read_history(SESSION, TailSlice(1), agent="a2898e3")
    assert tail["sessionId"] == SESSION
    assert tail["total"] == 2
    assert [entry["uuid"] for entry in tail["entries"]] == ["a2898e3-2"]
    assert tail["entries"][0].get("sidechain") is True
    page = service.read_history(SESSION, PageSlice(0, 5), agent="a2898e3")
    assert [entry["uuid"] for entry in page["entries"]] == ["a2898e3-1", "a2898e3-2"]
    # The session's own history is untouched by its sub-agents.
    assert service.read_history(SESSION, TailSlice(5))["total"] == 0
    with pytest.raises(SubAgentNotFound):
        service.read_history(SESSION, TailSlice(5), agent="a000000")
    with pytest.raises(InvalidAgentId):
        service.read_history(SESSION, TailSlice(5), agent="../a2898e3")


# --- The corpus --------------------------------------------------------------------


def _corpus(relative: str) -> Path:
    path = CORPUS / relative
    if not path.exists():
        pytest.skip(f"corpus file {relative} not present")
    return path


def _read(path: Path, session_id: str) -> list[SessionEntry]:
    # The spec and the implementation read the same entries (the equivalence tests
    # prove it in general; here on the real files).
    spec = entries_from_lines(session_id, split_transcript_lines(path.read_bytes()))
    impl = read_history(
        path, session_id, PageSlice(0, MAX_SESSION_ENTRIES), cache=TranscriptIndexCache()
    )["entries"]
    assert impl == spec
    return spec


def _calls(entries: list[SessionEntry], name: str) -> list[dict[str, object]]:
    return [
        dict(block)
        for entry in entries
        for block in entry["content"]
        if block["type"] == "tool_use" and block.get("toolName") == name
    ]


INLINE_SIDECHAINS = [
    ("claude-code-viewer/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl", 14),
    ("claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl", 249),
]


@pytest.mark.parametrize(("relative", "sidechain_entries"), INLINE_SIDECHAINS)
def test_inline_sidechains_of_1_0_x_are_marked(relative: str, sidechain_entries: int) -> None:
    path = _corpus(relative)
    entries = _read(path, path.stem)
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    sidechain_uuids = {line["uuid"] for line in lines if line.get("isSidechain") is True}
    marked = [entry for entry in entries if entry.get("sidechain") is True]
    assert len(marked) == sidechain_entries
    # Exactly the entries of sidechain lines are marked, and the session's are not.
    assert {entry["uuid"] for entry in entries if entry["uuid"] in sidechain_uuids} == {
        entry["uuid"] for entry in marked
    }
    # 1.0.x names no sub-agent: its calls carry no agentId.
    assert all("agentId" not in call for call in _calls(entries, "Task"))


@pytest.mark.parametrize(
    ("relative", "agents"),
    [
        (
            "session-share/0ccf1a04-1b4c-43b6-8aa5-79e41db43a68.jsonl",
            ["a9cad17", "aa5ef13", "ac27727", "afbbf75", "a5bdbc1"],
        ),
        ("spotter/subagent.jsonl", None),
    ],
)
def test_task_calls_of_2_x_name_their_sub_agents(relative: str, agents: list[str] | None) -> None:
    path = _corpus(relative)
    entries = _read(path, path.stem)
    named = [call.get("agentId") for call in _calls(entries, "Task")]
    assert all(isinstance(agent, str) for agent in named)
    if agents is not None:
        assert named == agents
        # Each one's transcript is where the call says, every entry of it marked.
        for agent in agents:
            found = locate_sub_agent_transcript(path, agent)
            assert found is not None
            sub_entries = _read(found, path.stem)
            assert sub_entries
            assert all(entry.get("sidechain") is True for entry in sub_entries)
    # The session's own turns are never marked in a 2.x main file.
    assert not any(entry.get("sidechain") for entry in entries)


def test_a_nested_layout_sub_agent_of_the_spotter_session() -> None:
    path = _corpus(f"spotter/{SESSION}.jsonl")
    found = locate_sub_agent_transcript(path, "a2898e3")
    assert found is not None
    entries = _read(found, SESSION)
    assert len(entries) > 10
    assert all(entry.get("sidechain") is True for entry in entries)


@pytest.mark.parametrize(
    ("relative", "persons_turns", "sub_agent_prompts"),
    [(INLINE_SIDECHAINS[0][0], 1, 10), (INLINE_SIDECHAINS[1][0], 2, 161)],
)
def test_the_review_counts_the_persons_turns_not_the_sub_agents_prompts(
    relative: str, persons_turns: int, sub_agent_prompts: int
) -> None:
    # The original counted every Task prompt of a 1.0.x transcript as the person's:
    # 3 and 7 turns here (`review.turns`; docs/spec-decisions.md#sub-agent-work).
    path = _corpus(relative)
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    prompts = [line for line in lines if line["type"] == "user" and is_sidechain_record(line)]
    assert len(prompts) == sub_agent_prompts
    assert count_real_user_turns(lines) == persons_turns
