"""`GET /api/chat/history?agent=…`: a sub-agent's own transcript, read as a history.

The session's Task call names its sub-agent (`agentId`, transcript rule 5); the page
asks for that sub-agent's history with the same slices as the session's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from beebox_impl.services.history import SubAgentNotFound
from beebox_impl.transcript import TailSlice
from tests.impl.engine.test_echo import image_block
from tests.impl.http.support import served_box, wait_idle

pytestmark = pytest.mark.anyio

SESSION = "0ccf1a04-1b4c-43b6-8aa5-79e41db43a68"
AGENT = "a9cad17"


def _lines(*records: dict[str, object]) -> str:
    return "".join(json.dumps(record, separators=(",", ":")) + "\n" for record in records)


def _turn(uuid: str, kind: str, content: object, **extra: object) -> dict[str, object]:
    return {
        "parentUuid": None,
        **extra,
        "sessionId": SESSION,
        "type": kind,
        "message": {"role": kind, "content": content},
        "uuid": uuid,
        "timestamp": "2026-03-01T10:00:00.000Z",
    }


def _write_session(transcript: Path) -> None:
    call = {
        "type": "tool_use",
        "id": "toolu_task",
        "name": "Task",
        "input": {"description": "Poem about curry", "prompt": "Write a poem."},
    }
    result = _turn(
        "u-2",
        "user",
        [{"type": "tool_result", "tool_use_id": "toolu_task", "content": "A poem."}],
        isSidechain=False,
    )
    result["toolUseResult"] = {"status": "completed", "agentId": AGENT}
    transcript.parent.mkdir(parents=True, exist_ok=True)
    transcript.write_text(
        _lines(_turn("a-1", "assistant", [call], isSidechain=False), result), encoding="utf-8"
    )
    sub_agents = transcript.with_suffix("") / "subagents"
    sub_agents.mkdir(parents=True)
    side = {"isSidechain": True, "agentId": AGENT}
    (sub_agents / f"agent-{AGENT}.jsonl").write_text(
        _lines(
            _turn("s-1", "user", "Write a poem.", **side),
            _turn("s-2", "assistant", [{"type": "text", "text": "Green and hot."}], **side),
            _turn("s-3", "assistant", [{"type": "text", "text": "A poem."}], **side),
        ),
        encoding="utf-8",
    )


async def test_a_task_call_names_its_sub_agent_whose_history_is_served(tmp_path: Path) -> None:
    async with served_box(tmp_path) as (box, client, _):
        _write_session(box._history_service.transcript_path(SESSION))
        session = (await client.call("GET", f"/api/chat/history?session={SESSION}")).json()
        call = session["entries"][0]["content"][0]
        assert (call["toolName"], call["agentId"]) == ("Task", AGENT)

        tail = await client.call("GET", f"/api/chat/history?session={SESSION}&agent={AGENT}")
        assert tail.status == 200
        body = tail.json()
        assert (body["sessionId"], body["total"]) == (SESSION, 3)
        assert [entry["uuid"] for entry in body["entries"]] == ["s-1", "s-2", "s-3"]
        assert all(entry["sidechain"] is True for entry in body["entries"])

        page = await client.call(
            "GET", f"/api/chat/history?session={SESSION}&agent={AGENT}&offset=1&limit=1"
        )
        assert [entry["uuid"] for entry in page.json()["entries"]] == ["s-2"]
        last = await client.call("GET", f"/api/chat/history?session={SESSION}&agent={AGENT}&tail=1")
        assert [entry["uuid"] for entry in last.json()["entries"]] == ["s-3"]


async def test_the_chats_own_session_is_the_default_and_misses_are_typed(tmp_path: Path) -> None:
    async with served_box(tmp_path) as (box, client, _):
        sent = await client.call("POST", "/api/chat/send", json_body={"message": "hello"})
        assert sent.status == 200
        await wait_idle(box)
        missing = await client.call("GET", f"/api/chat/history?agent={AGENT}")
        assert (missing.status, missing.json()) == (404, {"error": "No such sub-agent"})
        bad = await client.call("GET", "/api/chat/history?agent=..%2F..%2Fetc")
        assert (bad.status, bad.json()) == (400, {"error": '"agent" is not an agent id'})
        # Bootstrap takes no agent: the page reads sub-agents through history alone.
        boot = await client.call("GET", f"/api/chat/bootstrap?agent={AGENT}")
        assert boot.status == 400


async def test_an_embedding_host_reads_a_sub_agent_on_the_loop_too(tmp_path: Path) -> None:
    # `Box.history` (on the loop) takes the same `agent` as `Box.read_history`.
    async with served_box(tmp_path) as (box, _client, _):
        _write_session(box._history_service.transcript_path(SESSION))
        history = await box.history(SESSION, TailSlice(2), agent=AGENT)
        assert (history["total"], [entry["uuid"] for entry in history["entries"]]) == (
            3,
            ["s-2", "s-3"],
        )
        with pytest.raises(SubAgentNotFound):
            await box.history(SESSION, TailSlice(2), agent="a0000000")


async def test_a_photo_of_a_sub_agents_work_is_served_by_its_reference(tmp_path: Path) -> None:
    # A sub-agent's history mints its photos' references under the session's id;
    # the line is in the sub-agent's own transcript, where the media route finds it.
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
    async with served_box(tmp_path) as (box, client, _):
        transcript = box._history_service.transcript_path(SESSION)
        _write_session(transcript)
        screenshot = image_block(png)
        sub_agent = transcript.with_suffix("") / "subagents" / f"agent-{AGENT}.jsonl"
        with sub_agent.open("a", encoding="utf-8") as file:
            file.write(_lines(_turn("s-4", "user", [screenshot], isSidechain=True, agentId=AGENT)))
        tail = await client.call("GET", f"/api/chat/history?session={SESSION}&agent={AGENT}")
        (block,) = tail.json()["entries"][-1]["content"]
        assert block["imageRef"] == f"{SESSION}/s-4/0"
        served = await client.call("GET", f"/api/session-media/{block['imageRef']}")
        assert (served.status, served.headers["content-type"], served.body) == (
            200,
            "image/png",
            png,
        )
        # A reference to no line of the session or its sub-agents is still a miss.
        missing = await client.call("GET", f"/api/session-media/{SESSION}/s-9/0")
        assert missing.status == 404
