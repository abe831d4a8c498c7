"""Crash test: a box process with queued messages dies by SIGKILL; a new box drains them.

A child Python process opens the whole-box chat on a box folder with the real stores
(``.beebox/box.sqlite3``, the session-id file) and an engine whose first turn never
ends, so the session stays ``streaming``; then it enqueues messages, printing each one
once `ChatSession.enqueue` has returned (the row is on disk). The test kills the child
with SIGKILL, opens a new session on the same folder and checks the persisted queue
(`docs/design.md#design-5-persisted-queue`; "a session opened on a box with rows drains
them into a fresh run at once", as `ChatSession` states it): every accepted message
goes out exactly once, in order, as the fresh run's first turn; the rows are deleted
once it is sent; the database is intact; no temporary file is left.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from beebox_impl.engine import ScriptedEngine
from beebox_impl.session import ChatSession
from beebox_impl.store import BoxDatabase, SessionIdFile
from beebox_spec.chat_session import QUEUE_SEPARATOR
from beebox_spec.phases import Phase

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX-only"),
]

# The child: argv = box folder, "each" | "all", then the texts to enqueue.
CHILD_CODE = """
import sys
from pathlib import Path

import anyio

from beebox_impl.engine import ScriptedEngine
from beebox_impl.session import ChatSession
from beebox_impl.store import BoxDatabase, SessionIdFile
from beebox_spec.phases import Phase


async def main(box: Path, report: str, texts: list[str]) -> None:
    async with await BoxDatabase.open(box) as database:
        # Accepts the start and the first turn, then never says a word: the turn stays open.
        engine = ScriptedEngine(start_mode="accept")
        async with ChatSession.open(
            engine=engine,
            box_root=box,
            queue_store=database.chat_queue,
            session_id_store=SessionIdFile.for_box(box),
        ) as session:
            assert await session.send("first turn")
            # Enqueue only once the first turn is out, or the start would take the queue.
            with anyio.fail_after(10):
                while session.phase is not Phase.STREAMING or not engine.runs[0].sent:
                    await anyio.sleep(0.001)
            assert engine.runs[0].sent == ["first turn"]
            print("READY", flush=True)
            for text in texts:
                await session.enqueue(text)
                if report == "each":
                    print("ACCEPTED", text, flush=True)
            if report == "all":
                print("ACCEPTED", *texts, flush=True)
            await anyio.sleep_forever()


anyio.run(main, Path(sys.argv[1]), sys.argv[2], sys.argv[3:])
"""

# Generous: a child starts in well under a second; this only bounds a hung one.
LINE_TIMEOUT = 15

# The files a box's `.beebox/` may hold once its database is closed.
BOX_FILES = {"box.sqlite3", "chat-session-id.json"}


async def start_child(box: Path, stderr_path: Path, report: str, texts: list[str]) -> Process:
    with stderr_path.open("wb") as stderr:
        # The child gets its own copy of the descriptor; ours can close at once.
        return await anyio.open_process(
            [sys.executable, "-c", CHILD_CODE, str(box), report, *texts], stderr=stderr
        )


async def read_line(lines: BufferedByteReceiveStream, stderr_path: Path) -> list[str]:
    """The child's next stdout line, split into words."""
    try:
        with anyio.fail_after(LINE_TIMEOUT):
            line = await lines.receive_until(b"\n", 1 << 16)
    except (anyio.IncompleteRead, TimeoutError):
        pytest.fail(f"the child printed no line; its stderr:\n{stderr_path.read_text()}")
    return line.decode().split()


async def kill(process: Process) -> None:
    os.kill(process.pid, signal.SIGKILL)
    with anyio.fail_after(LINE_TIMEOUT):
        returncode = await process.wait()
    assert returncode == -signal.SIGKILL
    await process.aclose()


async def reopen_and_drain(box: Path, expected: list[str]) -> None:
    """Open a new session on ``box``: ``expected`` (the rows on disk) drain exactly once."""
    async with await BoxDatabase.open(box) as database:
        assert [row.text for row in await database.chat_queue.load()] == expected
        engine = ScriptedEngine(start_mode="accept")
        async with ChatSession.open(
            engine=engine,
            box_root=box,
            queue_store=database.chat_queue,
            session_id_store=SessionIdFile.for_box(box),
        ) as session:
            if not expected:
                # Nothing queued: no run is started.
                assert engine.starts == []
                assert session.phase is Phase.IDLE
            else:
                with anyio.fail_after(LINE_TIMEOUT):
                    while not engine.runs or not engine.runs[0].sent:
                        await anyio.sleep(0.001)
                    # The drained rows are deleted once the turn is sent.
                    while await database.chat_queue.load():
                        await anyio.sleep(0.001)
                assert len(engine.starts) == 1
                assert engine.starts[0].resume_session_id is None
                assert len(engine.runs) == 1
                assert engine.runs[0].sent == [QUEUE_SEPARATOR.join(expected)]
                assert session.phase is Phase.STREAMING
                assert session.queue == ()
        # Closing the session neither brings rows back nor sends anything more.
        assert await database.chat_queue.load() == []
        assert len(engine.runs) <= 1
        assert all(len(run.sent) == 1 for run in engine.runs)
        integrity = await database.read(lambda c: c.execute("PRAGMA integrity_check").fetchall())
        assert integrity == [("ok",)]

    # Closed: the WAL is checkpointed away and no temporary file is left.
    leftovers = {path.name for path in (box / ".beebox").iterdir()}
    assert leftovers <= BOX_FILES, leftovers

    # A further restart has nothing left to send: delivered once, not again.
    async with await BoxDatabase.open(box) as database:
        engine = ScriptedEngine(start_mode="accept")
        async with ChatSession.open(
            engine=engine,
            box_root=box,
            queue_store=database.chat_queue,
            session_id_store=SessionIdFile.for_box(box),
        ) as session:
            assert engine.starts == []
            assert session.queue == ()


async def test_a_killed_box_drains_its_whole_queue_into_a_fresh_run(tmp_path: Path) -> None:
    box = tmp_path / "box"
    box.mkdir()
    texts = [f"m{n}" for n in range(1, 6)]
    stderr_path = tmp_path / "child.stderr"
    process = await start_child(box, stderr_path, "all", texts)
    try:
        assert process.stdout is not None
        lines = BufferedByteReceiveStream(process.stdout)
        assert await read_line(lines, stderr_path) == ["READY"]
        assert await read_line(lines, stderr_path) == ["ACCEPTED", *texts]
        await kill(process)
    finally:
        if process.returncode is None:
            process.kill()
            with anyio.CancelScope(shield=True):
                await process.aclose()

    # The child was killed mid-turn: its first turn is not queued, the five are.
    await reopen_and_drain(box, texts)


@pytest.mark.parametrize("kill_after", [0, 1, 3, 7])
async def test_a_box_killed_between_enqueues_loses_nothing_it_accepted(
    tmp_path: Path, kill_after: int
) -> None:
    box = tmp_path / "box"
    box.mkdir()
    # More than the test waits for: the child keeps enqueueing, so the kill lands at
    # whatever point its writes have reached (possibly mid-transaction).
    texts = [f"m{n}" for n in range(1, 41)]
    stderr_path = tmp_path / "child.stderr"
    process = await start_child(box, stderr_path, "each", texts)
    try:
        assert process.stdout is not None
        lines = BufferedByteReceiveStream(process.stdout)
        assert await read_line(lines, stderr_path) == ["READY"]
        accepted = []
        for _ in range(kill_after):
            word, text = await read_line(lines, stderr_path)
            assert word == "ACCEPTED"
            accepted.append(text)
        await kill(process)
    finally:
        if process.returncode is None:
            process.kill()
            with anyio.CancelScope(shield=True):
                await process.aclose()
    assert accepted == texts[:kill_after]

    # What the dead box left on disk: every accepted text, then perhaps a few it wrote
    # but had not yet reported; always a prefix of what it enqueued, in order, once each.
    async with await BoxDatabase.open(box) as database:
        on_disk = [row.text for row in await database.chat_queue.load()]
    assert on_disk[: len(accepted)] == accepted
    assert on_disk == texts[: len(on_disk)]

    await reopen_and_drain(box, on_disk)
