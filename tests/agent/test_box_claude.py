"""The box on Claude Code itself: every lifecycle path through `Box.open`, on both loops.

Each test runs the CLI that the ``claude`` extra bundles (`claude_cli.cli_path`)
against the Messages API double and asserts what a host sees: the box's events,
the history read back from the transcript the CLI wrote, the photos fetched back
by reference, and what the CLI sent to the API. None would pass with a stand-in
for the CLI: the transcripts, the resumes and the requests are the CLI's own.
"""

from __future__ import annotations

import base64
import json
import stat
import threading
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from beebox_impl.box import Box
from beebox_impl.engine.claude import STOP_GRACE_S, ClaudeEngine
from beebox_impl.services import Queued, SendRequest, TurnStarted
from beebox_impl.store.acceptance import Attachment
from beebox_impl.transcript import TailSlice
from beebox_impl.transcript.media import MediaFound
from beebox_spec.entries import SessionEntry, SessionHistory
from tests.agent.box_support import EventLog, claude_box, wait_until
from tests.agent.claude_cli import OfflineClaude, claude_processes, cli_path, freeze, kill
from tests.agent.messages_api import (
    Drop,
    Fail,
    Garbled,
    MessagesApiDouble,
    Reply,
    Text,
    ToolUse,
)
from tests.agent.photos import noise_png

pytestmark = pytest.mark.anyio

TOOLS = ["Bash", "Read", "Write"]


async def wait_for_requests(api: MessagesApiDouble, count: int) -> None:
    await anyio.to_thread.run_sync(api.wait_for_messages, count)


async def history_of(box: Box) -> SessionHistory:
    session_id = box.session_id
    assert session_id is not None
    return await box.history(session_id, TailSlice(50))


def shown(history: SessionHistory) -> list[tuple[str, str]]:
    """Each entry's type and text, in order (tool calls as ``[tool Name]``)."""
    return [(entry["type"], text_of(entry)) for entry in history["entries"]]


def text_of(entry: SessionEntry) -> str:
    parts = []
    for block in entry["content"]:
        if block["type"] == "text":
            parts.append(block.get("text", ""))
        elif block["type"] == "tool_use":
            parts.append(f"[tool {block.get('toolName')}]")
        elif block["type"] == "image":
            parts.append("[photo]")
    return " ".join(parts)


def sent(api: MessagesApiDouble) -> list[list[str]]:
    """The user texts of every messages request the CLI made, in order.

    Stripped: the CLI joins user turns with nothing between them (an interrupt's, a
    stop's, an API error's) into one message, and may end each text but the last
    with a newline.
    """
    return [[text.strip() for text in request.user_texts()] for request in api.message_requests]


def user_line_written(claude: OfflineClaude, text: str) -> bool:
    """Does a transcript of the CLI hold a user line of ``text``? (Claude Code 2.1.337
    opens a transcript with lines of its own before the turn's user line.)"""
    for path in claude.transcripts():
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line) if line.strip() else None
            if not isinstance(record, dict) or record.get("type") != "user":
                continue
            content = (record.get("message") or {}).get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            if any(isinstance(block, dict) and block.get("text") == text for block in blocks or []):
                return True
    return False


def held(text: str) -> tuple[Reply, threading.Event]:
    """A reply that streams half of ``text`` and waits for the event (mid-stream)."""
    hold = threading.Event()
    return Reply((Text(text, hold=hold),)), hold


# --- Turns -------------------------------------------------------------------------


async def test_a_text_turn(tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble) -> None:
    api.script(Reply.text("Hello, person of the box"))
    async with claude_box(tmp_path / "box", claude) as (box, log):
        outcome = await box.send(SendRequest("hello there", message_id="m-1"))
        assert isinstance(outcome, TurnStarted)
        (text,) = await log.wait_for_name("turn-text")
        assert text.data == {"text": "Hello, person of the box"}
        history = await history_of(box)
        status = box.status()
    assert shown(history) == [("user", "hello there"), ("assistant", "Hello, person of the box")]
    assert status == {"phase": "ready", "busy": False, "running": True, "queued": 0}
    # The session id the box saved is the CLI's: its transcript is named by it.
    (transcript,) = claude.transcripts()
    assert transcript.stem == history["sessionId"]
    names = log.names()
    assert names[:3] == ["chat-user-message", "chat-turn", "session-id"]
    assert names[-2:] == ["done", "turn-text"]
    assert "turn-error" not in names
    (request,) = api.message_requests
    assert request.user_texts() == ["hello there"]
    assert api.unscripted == 0


async def test_a_turn_with_two_photos(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble
) -> None:
    # Two 154 KB PNGs: their line is over the 256 KiB mark, so the read strips them.
    photos = [noise_png(256, 200, seed) for seed in (1, 2)]
    api.script(Reply.text("Two photos, seen"))
    async with claude_box(tmp_path / "box", claude) as (box, log):
        images = tuple(Attachment("image/png", photo) for photo in photos)
        await box.send(SendRequest("look at these", message_id="m-1", images=images))
        await log.wait_for_name("turn-text")
        history = await history_of(box)
        refs = [
            block["imageRef"]
            for entry in history["entries"]
            for block in entry["content"]
            if "imageRef" in block
        ]
        fetched = [await box.media(ref) for ref in refs]
    assert shown(history) == [
        ("user", "[photo] [photo] look at these"),
        ("assistant", "Two photos, seen"),
    ]
    # One ref a photo, each fetched back byte for byte.
    assert len(refs) == 2
    assert [found.data for found in fetched if isinstance(found, MediaFound)] == photos
    # The CLI sent the photos to the API as they were sent to the box.
    (request,) = api.message_requests
    assert request.images() == photos
    # The CLI also copied the photos into an api-request-blob line: stripped by the
    # read like any long line, and neither an entry nor a second ref.
    (transcript,) = claude.transcripts()
    blob_lines = [
        line
        for line in transcript.read_text(encoding="utf-8").splitlines()
        if json.loads(line).get("type") == "api-request-blob"
    ]
    assert any(photo_b64(photos[0]) in line for line in blob_lines)
    assert "bbxStrippedMedia" not in json.dumps(history)


def photo_b64(photo: bytes) -> str:
    return base64.b64encode(photo).decode("ascii")


async def test_a_tool_turn(tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble) -> None:
    note = tmp_path / "box" / "note.txt"
    api.script(
        Reply(
            (
                Text("Writing it"),
                ToolUse("Write", {"file_path": str(note), "content": "hello file\n"}),
            )
        ),
        Reply((ToolUse("Bash", {"command": "cat note.txt; echo done", "description": "show"}),)),
        Reply((ToolUse("Read", {"file_path": str(note)}),)),
        Reply.text("All three ran"),
    )
    async with claude_box(tmp_path / "box", claude, allowed_tools=TOOLS) as (box, log):
        await box.send(SendRequest("use the tools", message_id="m-1"))
        await log.wait_for_name("turn-text")
        history = await history_of(box)
    # The tools really ran, in the box folder.
    assert note.read_text() == "hello file\n"
    assert shown(history) == [
        ("user", "use the tools"),
        ("assistant", "Writing it"),
        ("assistant", "[tool Write]"),
        ("assistant", "[tool Bash]"),
        ("assistant", "[tool Read]"),
        ("assistant", "All three ran"),
    ]
    calls = [
        block
        for entry in history["entries"]
        for block in entry["content"]
        if block["type"] == "tool_use"
    ]
    # Each call shows its input and what it gave back.
    assert [call.get("inputSummary") for call in calls] == [f"{note} (11 chars)", "show", str(note)]
    results = [call.get("resultSummary", "") for call in calls]
    assert results[0].startswith("File created successfully")
    assert results[1] == "hello file\ndone"
    assert "hello file" in results[2]
    assert not any(call.get("isError") for call in calls)
    # And the CLI handed each result back to the model.
    last = api.message_requests[-1]
    assert [result["tool_use_id"] for result in last.tool_results()] == [
        call.get("toolId") for call in calls
    ]


async def test_a_failed_tool_shows_as_failed(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble
) -> None:
    api.script(
        Reply((ToolUse("Bash", {"command": "echo oops >&2; exit 3", "description": "fail"}),)),
        Reply.text("It failed"),
    )
    async with claude_box(tmp_path / "box", claude, allowed_tools=TOOLS) as (box, log):
        await box.send(SendRequest("run the failing one", message_id="m-1"))
        await log.wait_for_name("turn-text")
        history = await history_of(box)
    (call,) = [
        block
        for entry in history["entries"]
        for block in entry["content"]
        if block["type"] == "tool_use"
    ]
    assert call.get("isError") is True
    assert "oops" in call.get("resultSummary", "")


# --- The queue and the controls ----------------------------------------------------------


async def test_a_message_sent_mid_turn_is_queued_and_drained_into_the_next_turn(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble
) -> None:
    first, hold = held("a long first answer")
    api.script(first, Reply.text("second answer"))
    async with claude_box(tmp_path / "box", claude) as (box, log):
        assert isinstance(await box.send(SendRequest("first", message_id="m-1")), TurnStarted)
        await wait_for_requests(api, 1)
        assert isinstance(await box.send(SendRequest("second", message_id="m-2")), Queued)
        assert isinstance(await box.send(SendRequest("third", message_id="m-3")), Queued)
        assert box._session.queue == ("second", "third")
        assert box.status()["busy"]
        hold.set()
        texts = await log.wait_for_name("turn-text", count=2)
        history = await history_of(box)
    assert [event.data["text"] for event in texts] == ["a long first answer", "second answer"]
    # The queue reached the same CLI as one turn, its texts joined as the spec says.
    assert sent(api) == [["first"], ["first", "second\n\nthird"]]
    assert shown(history) == [
        ("user", "first"),
        ("assistant", "a long first answer"),
        ("user", "second\n\nthird"),
        ("assistant", "second answer"),
    ]


async def test_stop_mid_stream(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble
) -> None:
    first, hold = held("an answer that is never finished")
    api.script(first, Reply.text("later"))
    async with claude_box(tmp_path / "box", claude) as (box, log):
        await box.send(SendRequest("long", message_id="m-1"))
        await wait_for_requests(api, 1)
        assert isinstance(await box.send(SendRequest("dropped", message_id="m-2")), Queued)
        (pid,) = claude_processes(claude.config)
        session_id = box.session_id
        await box.stop()
        hold.set()
        # Stopped: the CLI is gone, the queue cleared, nothing busy; no error to show.
        assert box.status() == {"phase": "idle", "busy": False, "running": False, "queued": 0}
        assert not claude_processes(claude.config)
        # Relayed to the box's listeners by a task of its own: waited for.
        (closed,) = await log.wait_for_name("close")
        assert closed.data == {"code": 0}
        await box.send(SendRequest("after the stop", message_id="m-3"))
        await log.wait_for_name("turn-text")
        (new_pid,) = claude_processes(claude.config)
        history = await history_of(box)
    assert new_pid != pid
    # The next turn resumed the same session in a fresh CLI; the stop interrupted
    # the turn (the CLI recorded it so) rather than waiting for the CLI to exit.
    assert history["sessionId"] == session_id
    assert sent(api)[-1][0] == "long"
    assert sent(api)[-1][-2:] == ["[Request interrupted by user]", "after the stop"]
    assert all("dropped" not in texts for texts in sent(api))
    assert "turn-error" not in log.names()


async def test_interrupt_mid_stream(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble
) -> None:
    first, hold = held("an answer that is never finished")
    api.script(first, Reply.text("later"))
    async with claude_box(tmp_path / "box", claude) as (box, log):
        await box.send(SendRequest("long", message_id="m-1"))
        await wait_for_requests(api, 1)
        (pid,) = claude_processes(claude.config)
        await box._session.interrupt()
        await log.wait_for_name("done")
        hold.set()
        # The turn ended; the CLI stays up for the next one.
        assert box.status() == {"phase": "ready", "busy": False, "running": True, "queued": 0}
        await box.send(SendRequest("after the interrupt", message_id="m-2"))
        await log.wait_for_name("done", count=2)
        history = await history_of(box)
        assert claude_processes(claude.config) == [pid]
    # What the CLI had streamed before the interrupt may be kept (a partial answer).
    entries = shown(history)
    assert entries[0] == ("user", "long")
    assert ("user", "[Request interrupted by user]") in entries
    assert entries[-2:] == [("user", "after the interrupt"), ("assistant", "later")]
    assert "turn-error" not in log.names()


async def test_restart_drains_the_queue_into_a_fresh_cli(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble
) -> None:
    first, hold = held("an answer cut by the restart")
    api.script(first, Reply.text("fresh"))
    async with claude_box(tmp_path / "box", claude) as (box, log):
        await box.send(SendRequest("long", message_id="m-1"))
        await wait_for_requests(api, 1)
        (pid,) = claude_processes(claude.config)
        session_id = box.session_id
        assert isinstance(await box.send(SendRequest("queued", message_id="m-2")), Queued)
        await box.restart()
        hold.set()
        (text,) = await log.wait_for_name("turn-text")
        (new_pid,) = claude_processes(claude.config)
        assert box.session_id == session_id
    assert new_pid != pid
    assert text.data == {"text": "fresh"}
    # The queue went to a fresh CLI, which resumed the session (the cut turn included).
    assert sent(api) == [["long"], ["long", "[Request interrupted by user]", "queued"]]
    assert log.named("close")[-1].data == {"code": None}


async def test_reset_starts_a_new_session(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble
) -> None:
    api.script(Reply.text("one"), Reply.text("two"))
    async with claude_box(tmp_path / "box", claude) as (box, log):
        await box.send(SendRequest("before the reset", message_id="m-1"))
        await log.wait_for_name("turn-text")
        first = box.session_id
        await box.reset()
        forgotten = box.session_id
        await box.send(SendRequest("after the reset", message_id="m-2"))
        await log.wait_for_name("turn-text", count=2)
        second = box.session_id
        history = await history_of(box)
    assert forgotten is None
    assert second not in (None, first)
    # The new session carries nothing of the old one.
    assert sent(api) == [["before the reset"], ["after the reset"]]
    assert shown(history) == [("user", "after the reset"), ("assistant", "two")]
    assert len(claude.transcripts()) == 2


async def test_a_box_opened_again_resumes_its_session(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble
) -> None:
    api.script(Reply.text("one"), Reply.text("two"))
    async with claude_box(tmp_path / "box", claude) as (box, log):
        await box.send(SendRequest("first life", message_id="m-1"))
        await log.wait_for_name("turn-text")
        first = box.session_id
    assert not claude_processes(claude.config)
    async with claude_box(tmp_path / "box", claude) as (box, log):
        assert box.session_id == first
        await box.send(SendRequest("second life", message_id="m-2"))
        await log.wait_for_name("turn-text")
        history = await history_of(box)
    assert history["sessionId"] == first
    assert sent(api) == [["first life"], ["first life", "second life"]]
    assert shown(history) == [
        ("user", "first life"),
        ("assistant", "one"),
        ("user", "second life"),
        ("assistant", "two"),
    ]


@pytest.mark.parametrize("written", [False, True], ids=["unwritten", "written"])
async def test_the_cli_killed_mid_turn(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble, written: bool
) -> None:
    # Killed before the CLI wrote its new session's transcript (it flushes within a
    # second or two), or after: either way the session recovers and nothing the box
    # accepted is lost.
    first, hold = held("an answer cut by a kill")
    api.script(first, Reply.text("fresh"), Reply.text("owed, now delivered"))
    async with claude_box(tmp_path / "box", claude) as (box, log):
        await box.send(SendRequest("doomed", message_id="m-1"))
        # Found and queued once the turn is on the CLI, before its request: the CLI
        # writes its transcript some 50 ms after the request, and the kill of the
        # unwritten case must come sooner.
        await wait_until(lambda: box.status()["phase"] == "streaming")
        (pid,) = claude_processes(claude.config)
        if not written:
            # Frozen the moment its request arrives, in the double's own thread: the
            # CLI writes its transcript some 50 ms later, which a loaded machine's
            # event loop could let pass before the kill.
            api.on_message = lambda: freeze(pid)
        assert isinstance(await box.send(SendRequest("queued", message_id="m-2")), Queued)
        await wait_for_requests(api, 1)
        api.on_message = None
        # Written or not is the turn's user line, not the file: Claude Code 2.1.337
        # opens the file with lines of its own before it.
        if written:
            await wait_until(lambda: user_line_written(claude, "doomed"))
        elif user_line_written(claude, "doomed"):
            kill(pid)
            pytest.skip("this CLI writes the turn before its request: no kill comes sooner")
        kill(pid)
        hold.set()
        # The lifecycle's close handler: the queue drains into a fresh CLI.
        await log.wait_for_name("turn-text")
        assert log.named("close")[0].data == {"code": None}
        assert box.status()["busy"] is False
        killed_session = box.session_id
        history = await history_of(box)
        # The killed turn's send is still marked owed: no turn that carried it ended.
        owed = [json.dumps(row.payload) for row in await box._acceptance.undelivered_messages()]
        assert any('"doomed"' in payload for payload in owed)
    if written:
        # The CLI had written the turn: the fresh CLI resumed it, and closed the cut
        # turn with an answer of its own (2.1.332 and 2.1.337 alike: a synthetic
        # "No response requested.", which the history does not show), so its model
        # answered the queued text alone.
        assert sent(api) == [["doomed"], ["doomed", "queued"]]
        assert shown(history)[:2] == [("user", "doomed"), ("user", "queued")]
    else:
        # Nothing on disk to resume: a new session, and the killed text is owed.
        assert sent(api) == [["doomed"], ["queued"]]
        assert history["sessionId"] == killed_session
        assert shown(history) == [("user", "queued"), ("assistant", "fresh")]
    async with claude_box(tmp_path / "box", claude) as (box, log):
        # Opened again, the box sends what it still owed, once: the text nobody
        # answered, whether the transcript holds it or not.
        await log.wait_for_name("turn-text")
        history = await history_of(box)
    assert sent(api)[-1] == (["doomed", "queued", "doomed"] if written else ["queued", "doomed"])
    assert shown(history)[-2:] == [("user", "doomed"), ("assistant", "owed, now delivered")]
    assert len(api.message_requests) == 3


# --- API errors ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(Fail(429, "rate limited", retry_after=0), id="429"),
        pytest.param(Drop(), id="drop"),
    ],
)
async def test_a_429_or_a_dropped_stream_is_retried_and_the_turn_succeeds(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble, failure: Fail | Drop
) -> None:
    api.script(failure, Reply.text("after a wait"))
    async with claude_box(tmp_path / "box", claude) as (box, log):
        await box.send(SendRequest("hello", message_id="m-1"))
        (text,) = await log.wait_for_name("turn-text")
    assert text.data == {"text": "after a wait"}
    assert len(api.message_requests) == 2
    assert "turn-error" not in log.names()


@pytest.mark.parametrize(
    ("failures", "words"),
    [
        pytest.param([Fail(401, "invalid x-api-key")], "Invalid API key", id="401"),
        pytest.param([Fail(529, "Overloaded")] * 3, "529", id="529"),
        # Three streamed tries, then one not streamed: all cut.
        pytest.param([Drop("half an answer")] * 4, "Connection to the API was lost", id="dropped"),
        # An answer the CLI cannot use: streamed, then not streamed (its own retry).
        pytest.param([Garbled()] * 2, "malformed response", id="garbled"),
    ],
)
async def test_an_api_error_is_a_readable_event_and_the_next_send_works(
    tmp_path: Path,
    claude: OfflineClaude,
    api: MessagesApiDouble,
    failures: list[Fail | Drop | Garbled],
    words: str,
) -> None:
    # The CLI retries twice here (`CLAUDE_RETRIES`): three failures are final.
    api.script(*failures, Reply.text("working again"))
    async with claude_box(tmp_path / "box", claude) as (box, log):
        await box.send(SendRequest("hello", message_id="m-1"))
        (error,) = await log.wait_for_name("turn-error")
        await log.wait_for_name("turn-text")
        assert box.status()["busy"] is False
        await box.send(SendRequest("again", message_id="m-2"))
        texts = await log.wait_for_name("turn-text", count=2)
    said = error.data["error"]
    assert isinstance(said, str)
    assert words in said
    assert texts[-1].data == {"text": "working again"}
    assert len(log.named("turn-error")) == 1
    # The error event comes with the failed turn's result, before its done.
    names = log.names()
    assert names.index("turn-error") < names.index("done")


# --- Starts that fail ------------------------------------------------------------------


@pytest.mark.parametrize("problem", ["missing", "not-executable"])
async def test_a_cli_that_cannot_run_says_what_to_do(
    tmp_path: Path, claude: OfflineClaude, problem: str
) -> None:
    binary = tmp_path / "bin" / "claude"
    if problem == "not-executable":
        binary.parent.mkdir()
        binary.write_bytes(cli_path().read_bytes()[:4096])
        binary.chmod(stat.S_IRUSR | stat.S_IWUSR)
    engine = ClaudeEngine(cli_path=binary, env=claude.env)
    log = EventLog()
    async with (
        Box.open(tmp_path / "box", engine=engine, projects_root=claude.projects) as box,
        anyio.create_task_group() as tasks,
    ):
        await tasks.start(log.follow, box)
        await box.send(SendRequest("hello", message_id="m-1"))
        (failed,) = await log.wait_for_name("start-failed")
        assert box.status()["phase"] == "idle"
        tasks.cancel_scope.cancel()
    reason = failed.data["reason"]
    assert isinstance(reason, str)
    assert str(binary) in reason
    assert "cli_path" in reason


async def test_a_cli_that_hangs_on_start_fails_within_the_start_timeout(
    tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble, caplog: pytest.LogCaptureFixture
) -> None:
    # A SessionStart hook that never ends holds the real CLI's start (its answer to the
    # SDK's initialize): the box gives up after its start timeout, and the CLI is
    # stopped (SIGTERM, then SIGKILL after `STOP_GRACE_S`), its hook with it.
    hook_pid = tmp_path / "hook.pid"
    hook = f"echo $$ > {hook_pid}; exec sleep 600"
    settings = {"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": hook}]}]}}
    (claude.config / "settings.json").write_text(json.dumps(settings))
    timeout = 2.0
    log = EventLog()
    async with (
        Box.open(
            tmp_path / "box",
            engine=claude.engine(),
            projects_root=claude.projects,
            start_timeout=timeout,
        ) as box,
        anyio.create_task_group() as tasks,
    ):
        await tasks.start(log.follow, box)
        await box.send(SendRequest("hello", message_id="m-1"))
        # A bound on the wait, not a timing claim: the SDK alone would wait 60 s.
        (failed,) = await log.wait_for_name("start-failed", timeout=timeout + STOP_GRACE_S + 20)
        assert box.status()["phase"] == "idle"
        tasks.cancel_scope.cancel()
    assert failed.data == {
        "reason": f"the engine did not start a run within {timeout:g} s",
        "failedText": "hello",
    }
    assert not claude_processes(claude.config)
    # Stopped by the engine as the start was given up on, not left to the SDK's own
    # wait for it to exit (5 s more, then SIGTERM).
    assert "Claude Code's start was given up on: stopping it" in caplog.messages
    # The hook the CLI started went with it.
    await wait_until(lambda: not Path(f"/proc/{hook_pid.read_text().strip()}").exists())
    assert api.message_requests == []
