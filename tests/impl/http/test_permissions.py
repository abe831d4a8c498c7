"""The permission routes on the wire: answer, list, and every refusal without a 500.

A `ScriptedEngine` run asks (as Claude Code's ``can_use_tool`` does through
`ClaudeEngine`); the real CLI answering through these routes is in
``tests/agent/test_permissions_claude.py`` and the page's browser test.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from anyio.abc import TaskGroup

from beebox_impl.box import Box
from beebox_impl.cli import main as bbx
from beebox_impl.engine.scripted import ScriptedEngine, ScriptedRun
from beebox_impl.http.server import cookie_name
from beebox_spec.permissions import (
    DENIED_MESSAGE,
    MAX_DENY_MESSAGE_CHARS,
    STOPPED_MESSAGE,
    PermissionReply,
    PermissionRequest,
)
from tests.impl.http.support import Client, served_box, wait_until

pytestmark = pytest.mark.anyio

PREFIX = "/api/chat/permissions/"


def request(request_id: str) -> PermissionRequest:
    return {
        "id": request_id,
        "toolName": "Bash",
        "input": {"command": "touch x", "description": "Create x"},
        "toolUseId": f"toolu_{request_id}",
        "canAlwaysAllow": True,
        "title": "Claude wants to run touch x",
        "displayName": "Run command",
    }


@asynccontextmanager
async def asking_box(
    tmp_path: Path,
) -> AsyncIterator[tuple[Box, Client, ScriptedRun, TaskGroup]]:
    """A served box whose run is open mid-turn, and a task group for its asks."""
    engine = ScriptedEngine("accept")
    async with (
        served_box(tmp_path, engine=engine) as (box, client, _),
        anyio.create_task_group() as asks,
    ):
        answer = await client.call("POST", "/api/chat/send", json_body={"message": "go"})
        assert answer.status == 200
        await wait_until(lambda: bool(engine.runs) and bool(engine.runs[0].sent))
        yield box, client, engine.runs[0], asks
        asks.cancel_scope.cancel()


async def ask(run: ScriptedRun, asks: TaskGroup, box: Box, request_id: str) -> None:
    asks.start_soon(run.ask, request(request_id))
    await wait_until(lambda: any(held["id"] == request_id for held in box.pending_permissions()))


async def test_an_answer_from_the_page_reaches_the_run(tmp_path: Path) -> None:
    async with asking_box(tmp_path) as (box, client, run, asks):
        await ask(run, asks, box, "p-1")
        listed = await client.call("GET", "/api/chat/permissions")
        assert listed.status == 200
        assert listed.json()["pending"] == [request("p-1")]
        boot = await client.call("GET", "/api/chat/bootstrap")
        assert boot.json()["permissions"] == [request("p-1")]

        answer = await client.call("POST", PREFIX + "p-1", json_body={"decision": "allow"})
        assert (answer.status, answer.json()) == (
            200,
            {"ok": True, "id": "p-1", "decision": "allow"},
        )
        await wait_until(lambda: "p-1" in run.answers and run.answers["p-1"] is not None)
        assert run.answers["p-1"] == PermissionReply("allow")

        again = await client.call("POST", PREFIX + "p-1", json_body={"decision": "deny"})
        assert again.status == 409
        assert "ended" in again.json()["error"]
        listed = (await client.call("GET", "/api/chat/permissions?limit=5")).json()
    assert listed["pending"] == []
    (decision,) = listed["decisions"]
    assert decision["id"] == "p-1"
    assert decision["request"] == request("p-1")
    assert (decision["how"], decision["decision"], decision["answeredBy"]) == (
        "answered",
        "allow",
        "page",
    )
    assert decision["askedAt"] <= decision["endedAt"]


async def test_a_denial_carries_its_message_or_the_boxs(tmp_path: Path) -> None:
    async with asking_box(tmp_path) as (box, client, run, asks):
        await ask(run, asks, box, "p-1")
        await ask(run, asks, box, "p-2")
        said = await client.call(
            "POST", PREFIX + "p-2", json_body={"decision": "deny", "message": "not there"}
        )
        silent = await client.call("POST", PREFIX + "p-1", json_body={"decision": "deny"})
        assert (said.status, silent.status) == (200, 200)
        await wait_until(lambda: None not in (run.answers.get("p-1"), run.answers.get("p-2")))
    assert run.answers["p-2"] == PermissionReply("deny", "not there")
    assert run.answers["p-1"] == PermissionReply("deny", DENIED_MESSAGE)


async def test_unknown_ids_and_bad_bodies_are_refused_without_a_500(tmp_path: Path) -> None:
    async with asking_box(tmp_path) as (box, client, run, asks):
        await ask(run, asks, box, "p-1")
        cases = [
            (PREFIX + "p-404", {"decision": "allow"}, 404),
            (PREFIX + "", {"decision": "allow"}, 404),
            (PREFIX + "a/b", {"decision": "allow"}, 404),
            (PREFIX + "x" * 300, {"decision": "allow"}, 404),
            (PREFIX + "%00%ff", {"decision": "allow"}, 404),
            (PREFIX + "p-1", {}, 400),
            (PREFIX + "p-1", {"decision": "maybe"}, 400),
            (PREFIX + "p-1", {"decision": "allow", "colour": "red"}, 400),
            (PREFIX + "p-1", {"decision": "deny", "always": True}, 400),
            (PREFIX + "p-1", {"decision": "allow", "always": "yes"}, 400),
            (PREFIX + "p-1", {"decision": "deny", "message": 3}, 400),
            (
                PREFIX + "p-1",
                {"decision": "deny", "message": "x" * (MAX_DENY_MESSAGE_CHARS + 1)},
                400,
            ),
            (PREFIX + "p-1", ["allow"], 400),
        ]
        for path, body, status in cases:
            answer = await client.call("POST", path, json_body=body)
            assert answer.status == status, (path[:40], body, answer.json())
            assert set(answer.json()) == {"error"}
        malformed = await client.call(
            "POST", PREFIX + "p-1", body=b"{nope", headers={"Content-Type": "application/json"}
        )
        assert malformed.status == 400
        bad_limit = await client.call("GET", "/api/chat/permissions?limit=0")
        assert bad_limit.status == 400
        wrong_method = await client.call("GET", PREFIX + "p-1")
        assert wrong_method.status == 405
        # None of that touched the pending request.
        assert [held["id"] for held in box.pending_permissions()] == ["p-1"]
        assert "p-1" in run.answers
        assert run.answers["p-1"] is None


async def test_only_the_token_holder_answers_and_never_cross_site(tmp_path: Path) -> None:
    async with asking_box(tmp_path) as (box, client, run, asks):
        await ask(run, asks, box, "p-1")
        body = json.dumps({"decision": "allow"}).encode()
        # No token, or a wrong one: 401, and nothing said about the request.
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            answer = await client.call(
                "POST",
                PREFIX + "p-1",
                body=body,
                headers={"Content-Type": "application/json", **headers},
                auth=False,
            )
            assert answer.status == 401
        # What a cross-site form could send: a form's type, even with the cookie (a
        # browser withholds the SameSite=Strict cookie from another site anyway).
        cookie = f"{cookie_name(client.port)}={client.token}"
        for content_type in ("application/x-www-form-urlencoded", "text/plain"):
            answer = await client.call(
                "POST",
                PREFIX + "p-1",
                body=b"decision=allow",
                headers={"Content-Type": content_type, "Cookie": cookie},
                auth=False,
            )
            assert answer.status == 415
        assert [held["id"] for held in box.pending_permissions()] == ["p-1"]
        # The page's own request (the cookie, JSON) is answered.
        answer = await client.call(
            "POST",
            PREFIX + "p-1",
            body=body,
            headers={"Content-Type": "application/json", "Cookie": cookie},
            auth=False,
        )
        assert answer.status == 200


async def test_stop_denies_whats_pending_and_the_record_says_so(tmp_path: Path) -> None:
    async with asking_box(tmp_path) as (box, client, run, asks):
        await ask(run, asks, box, "p-1")
        stopped = await client.call("POST", "/api/chat/stop")
        assert stopped.status == 200
        await wait_until(lambda: run.answers.get("p-1") is not None)
        late = await client.call("POST", PREFIX + "p-1", json_body={"decision": "allow"})
        assert late.status == 409
        listed = (await client.call("GET", "/api/chat/permissions")).json()
    assert run.answers["p-1"] == PermissionReply("deny", STOPPED_MESSAGE)
    (decision,) = listed["decisions"]
    assert (decision["how"], decision["answeredBy"]) == ("stopped", "stop")


async def test_a_box_reopened_knows_its_ended_requests(tmp_path: Path) -> None:
    async with asking_box(tmp_path) as (box, client, run, asks):
        await ask(run, asks, box, "p-1")
        await client.call("POST", PREFIX + "p-1", json_body={"decision": "allow"})
    # A page left open across the restart answers again: the record says it ended.
    async with served_box(tmp_path, engine=ScriptedEngine("accept")) as (box, client, _):
        late = await client.call("POST", PREFIX + "p-1", json_body={"decision": "allow"})
        assert late.status == 409
        unknown = await client.call("POST", PREFIX + "p-2", json_body={"decision": "allow"})
        assert unknown.status == 404
        assert box.pending_permissions() == []


async def test_a_request_pending_as_the_box_closes_is_denied_and_recorded(tmp_path: Path) -> None:
    engine = ScriptedEngine("accept")
    # The ask's task outlives the box: the box's close answers it.
    async with (
        anyio.create_task_group() as asks,
        served_box(tmp_path, engine=engine) as (box, client, _),
    ):
        await client.call("POST", "/api/chat/send", json_body={"message": "go"})
        await wait_until(lambda: bool(engine.runs) and bool(engine.runs[0].sent))
        run = engine.runs[0]
        await ask(run, asks, box, "p-1")
    assert run.answers["p-1"] == PermissionReply("deny", STOPPED_MESSAGE)
    async with served_box(tmp_path, engine=ScriptedEngine("accept")) as (box, client, _):
        late = await client.call("POST", PREFIX + "p-1", json_body={"decision": "allow"})
        assert late.status == 409
        (decision,) = await box.permission_decisions()
    assert (decision.how, decision.decision, decision.answered_by) == ("stopped", "deny", "stop")


async def test_a_withdrawn_request_is_recorded_as_nobodys(tmp_path: Path) -> None:
    async with asking_box(tmp_path) as (box, client, run, asks):
        await ask(run, asks, box, "p-1")
        run.withdraw("p-1")
        await wait_until(lambda: box.pending_permissions() == [])
        gone = await client.call("POST", PREFIX + "p-1", json_body={"decision": "allow"})
        assert gone.status == 409
        (decision,) = (await client.call("GET", "/api/chat/permissions")).json()["decisions"]
    assert (decision["how"], decision["decision"], decision["answeredBy"]) == (
        "withdrawn",
        None,
        "nobody",
    )
    assert run.answers["p-1"] is None


async def test_bbx_chat_permissions_lists_the_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    box_dir = tmp_path / "box"
    assert bbx(["chat", "permissions", "--box", str(box_dir)]) == 1
    assert "is not a box" in capsys.readouterr().err
    async with asking_box(tmp_path) as (box, client, run, asks):
        await ask(run, asks, box, "p-1")
        await client.call("POST", PREFIX + "p-1", json_body={"decision": "allow", "always": True})
        await ask(run, asks, box, "p-2")
        await client.call("POST", PREFIX + "p-2", json_body={"decision": "deny"})
        await box.permission_decisions()  # written
        # Beside the running box (SQLite's WAL lets it read), as a command of its own.
        listing = ["chat", "permissions", "--box", str(box_dir)]
        assert await anyio.to_thread.run_sync(bbx, listing) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("  ", 1)[1] for line in lines] == [
        "deny by page (answered)  Bash: touch x",
        "allow always by page (answered)  Bash: touch x",
    ]
    as_json = ["chat", "permissions", "--box", str(box_dir), "--json", "--limit", "1"]
    assert await anyio.to_thread.run_sync(bbx, as_json) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    assert (listed["id"], listed["decision"], listed["message"]) == ("p-2", "deny", "")
    with pytest.raises(SystemExit):
        bbx(["chat", "permissions", "--box", str(box_dir), "--limit", "0"])
