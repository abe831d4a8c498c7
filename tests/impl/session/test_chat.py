"""`ChatSession` on the box's real stores: the persisted queue across a crash, the saved
session id, start failures, and what listeners hear. (Its equality with the spec is the
stateful machine's job, ``tests/stateful/``.)"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import anyio
import pytest

from beebox_impl.engine import ScriptedEngine, ScriptedRun, TurnContent
from beebox_impl.engine.messages import init_message, result_message
from beebox_impl.session import ChatSession, Closed, StartFailed
from beebox_impl.session.chat import TurnEndHook
from beebox_impl.store import BoxDatabase, InMemoryQueueStore, InMemorySessionIdStore, SessionIdFile
from beebox_impl.testing import settle
from beebox_spec.phases import Phase

pytestmark = pytest.mark.anyio


def queued(session: ChatSession) -> tuple[str, ...]:
    # Read through a call, for the same reason as `held_session_id`.
    return session.queue


def queues_sends(session: ChatSession) -> bool:
    # Read through a call, for the same reason as `held_session_id`.
    return session.queues_sends


def held_session_id(session: ChatSession) -> str | None:
    # Read through a call: mypy would keep an earlier assert's narrowing of the property.
    return session.session_id


async def test_a_queue_left_by_a_crash_drains_into_a_fresh_run(tmp_path: Path) -> None:
    async with await BoxDatabase.open(tmp_path) as database:
        engine = ScriptedEngine()
        async with ChatSession.open(
            engine=engine,
            box_root=tmp_path,
            queue_store=database.chat_queue,
            session_id_store=SessionIdFile.for_box(tmp_path),
        ) as session:
            assert await session.send("a")
            await session.enqueue("b")
            await session.enqueue("c")
            # Enqueue returns once the row is on disk.
            assert [row.text for row in await database.chat_queue.load()] == ["b", "c"]
        # The box died mid-start: the queue is still on disk.
        assert [row.text for row in await database.chat_queue.load()] == ["b", "c"]

        engine = ScriptedEngine(start_mode="accept")
        async with ChatSession.open(
            engine=engine,
            box_root=tmp_path,
            queue_store=database.chat_queue,
            session_id_store=SessionIdFile.for_box(tmp_path),
        ) as session:
            with anyio.fail_after(5):
                while not engine.runs or not engine.runs[0].sent:
                    await anyio.sleep(0.001)
                while await database.chat_queue.load():
                    await anyio.sleep(0.001)
            assert engine.runs[0].sent == ["b\n\nc"]
            assert session.phase is Phase.STREAMING
            assert session.queue == ()


async def test_stop_deletes_the_persisted_queue(tmp_path: Path) -> None:
    async with await BoxDatabase.open(tmp_path) as database:
        engine = ScriptedEngine(start_mode="accept")
        async with ChatSession.open(
            engine=engine,
            box_root=tmp_path,
            queue_store=database.chat_queue,
            session_id_store=InMemorySessionIdStore(),
        ) as session:
            assert await session.send("a")
            with anyio.fail_after(5):
                while session.phase is not Phase.STREAMING:
                    await anyio.sleep(0.001)
            await session.enqueue("b")
            await session.stop()
            assert session.queue == ()
            assert await database.chat_queue.load() == []


async def test_send_or_enqueue_sends_when_it_can_and_queues_when_refused(tmp_path: Path) -> None:
    engine = ScriptedEngine(start_mode="accept")
    async with ChatSession.open(
        engine=engine,
        box_root=tmp_path,
        queue_store=InMemoryQueueStore(),
        session_id_store=InMemorySessionIdStore(),
    ) as session:
        assert await session.send_or_enqueue("a")
        await settle()
        # A turn is in flight: refused as a turn, so queued, and persisted on return.
        assert not await session.send_or_enqueue("b")
        assert queued(session) == ("b",)
        await engine.last_run.emit(result_message(session_id="s-1", uuid="r-1"))
        await settle()
        # The turn's end drains what was queued.
        assert engine.last_run.sent == ["a", "b"]
        assert queued(session) == ()


async def test_send_or_enqueue_leaves_no_gap_for_a_turn_to_end_in(tmp_path: Path) -> None:
    # The turn ends while the caller is inside the call: the text must not be stranded
    # in the queue of an idle session (as `send` then `enqueue` could leave it).
    engine = ScriptedEngine(start_mode="accept")
    async with ChatSession.open(
        engine=engine,
        box_root=tmp_path,
        queue_store=InMemoryQueueStore(),
        session_id_store=InMemorySessionIdStore(),
    ) as session:
        assert await session.send("a")
        await settle()
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(session.send_or_enqueue, "b")
            task_group.start_soon(
                engine.last_run.emit, result_message(session_id="s-1", uuid="r-1")
            )
        await settle()
        assert engine.last_run.sent == ["a", "b"]
        assert session.queue == ()


async def test_the_session_id_is_saved_and_resumed_after_a_restart(tmp_path: Path) -> None:
    id_file = SessionIdFile.for_box(tmp_path)
    engine = ScriptedEngine(start_mode="accept")
    queue = InMemoryQueueStore()
    async with ChatSession.open(
        engine=engine, box_root=tmp_path, queue_store=queue, session_id_store=id_file
    ) as session:
        await session.send("a")
        await settle()
        await engine.last_run.emit(init_message("s-9"))
        await settle()
        assert session.session_id == "s-9"
    assert await id_file.load() == "s-9"
    async with ChatSession.open(
        engine=engine, box_root=tmp_path, queue_store=queue, session_id_store=id_file
    ) as session:
        assert session.session_id == "s-9"
        await session.send("b")
        await settle()
        assert engine.starts[-1].resume_session_id == "s-9"
        assert engine.starts[-1].cwd == tmp_path
        await session.reset_session()
        await settle()
        assert held_session_id(session) is None
    assert not id_file.path.exists()


async def test_a_failed_start_returns_to_idle_and_the_next_send_starts_again() -> None:
    engine = ScriptedEngine()
    async with ChatSession.open(
        engine=engine,
        box_root=Path("."),
        queue_store=InMemoryQueueStore(),
        session_id_store=InMemorySessionIdStore(),
    ) as session:
        with session.subscribe() as events:
            assert await session.send("a")
            await settle()
            engine.fail_start("no binary")
            await settle()
            assert session.phase is Phase.IDLE
            assert not session.busy
            assert events.drain_nowait() == [StartFailed("no binary", "a")]
            # Nothing was left held: the next send starts a run again.
            assert await session.send("b")
            await settle()
            engine.accept_start()
            await settle()
            assert engine.last_run.sent == ["b"]


async def test_a_listener_that_stops_reading_is_cut_off_not_wedging_the_turn() -> None:
    engine = ScriptedEngine(start_mode="accept")
    async with ChatSession.open(
        engine=engine,
        box_root=Path("."),
        queue_store=InMemoryQueueStore(),
        session_id_store=InMemorySessionIdStore(),
    ) as session:
        with session.subscribe(max_buffer=2) as slow, session.subscribe() as fast:
            await session.send("a")
            await settle()
            await engine.last_run.emit(result_message(session_id="", uuid="u-1"))
            await engine.last_run.end()
            await settle()
            assert session.phase is Phase.IDLE
            assert slow.overflowed
            assert [event.name for event in slow.drain_nowait()] == ["message", "done"]
            with pytest.raises(anyio.EndOfStream):
                await slow.receive()
            assert [event.name for event in fast.drain_nowait()] == ["message", "done", "close"]
            assert not fast.overflowed


async def test_close_codes_tell_a_stop_from_a_death() -> None:
    engine = ScriptedEngine(start_mode="accept")
    async with ChatSession.open(
        engine=engine,
        box_root=Path("."),
        queue_store=InMemoryQueueStore(),
        session_id_store=InMemorySessionIdStore(),
    ) as session:
        with session.subscribe() as events:
            await session.send("a")
            await settle()
            await session.stop()
            await settle()
            await session.send("b")
            await settle()
            await engine.last_run.end()
            await settle()
            closes = [event for event in events.drain_nowait() if isinstance(event, Closed)]
            assert closes == [Closed(0), Closed(None)]


async def test_a_closed_session_refuses_calls() -> None:
    async with ChatSession.open(
        engine=ScriptedEngine(),
        box_root=Path("."),
        queue_store=InMemoryQueueStore(),
        session_id_store=InMemorySessionIdStore(),
    ) as session:
        pass
    with pytest.raises(anyio.ClosedResourceError):
        await session.send("late")


class GatedQueueStore(InMemoryQueueStore):
    """An in-memory queue whose writes wait for ``gate`` and are logged."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = anyio.Event()
        self.writes: list[tuple[list[int], list[str]]] = []

    async def update(self, deleted: Sequence[int], appended: Sequence[str]) -> list[int]:
        await self.gate.wait()
        self.writes.append((list(deleted), list(appended)))
        return await super().update(deleted, appended)


async def test_queue_writes_waiting_together_are_one_write(tmp_path: Path) -> None:
    # A busy chat alternates enqueues and deliveries; those waiting on the writer
    # together go in one store write, and a text delivered before its row was
    # written is never written.
    engine = ScriptedEngine(start_mode="accept")
    store = GatedQueueStore()
    async with ChatSession.open(
        engine=engine,
        box_root=tmp_path,
        queue_store=store,
        session_id_store=InMemorySessionIdStore(),
    ) as session:
        assert await session.send("a")
        await settle()
        # The session id is saved now: its write would stand between the queue's.
        await engine.last_run.emit(init_message("s-1"))
        await settle()
        async with anyio.create_task_group() as task_group:
            for text in ("b", "c", "d"):
                task_group.start_soon(session.enqueue, text)
                await settle()
            # "b" is being written (held at the gate), "c" and "d" wait behind it.
            assert queued(session) == ("b", "c", "d")
            await engine.last_run.emit(result_message(session_id="s-1", uuid="r-1"))
            await settle()
            # The turn's end drained all three into one turn, before "c" and "d" were written.
            assert engine.last_run.sent == ["a", "b\n\nc\n\nd"]
            store.gate.set()
        await settle()
        # One write for "b"; then one for the rest: "b"'s row goes, "c" and "d" never came.
        assert store.writes == [([], ["b"]), ([1], [])]
        assert store.texts == ()


async def test_a_turns_end_is_reported_with_its_texts_and_whether_it_had_its_result() -> None:
    # The box's delivery ledger hears which texts a turn carried and how it ended.
    ended: list[tuple[tuple[str, ...], bool]] = []
    engine = ScriptedEngine()
    async with ChatSession.open(
        engine=engine,
        box_root=Path("."),
        queue_store=InMemoryQueueStore(),
        session_id_store=InMemorySessionIdStore(),
        on_turn_end=lambda texts, delivered: ended.append((texts, delivered)),
    ) as session:
        # A start that fails ends its caller's first turn undelivered.
        assert await session.send("a")
        await settle()
        engine.fail_start("no binary")
        await settle()
        assert ended == [(("a",), False)]
        # A first turn with what queued behind it, ended by its result.
        assert await session.send("b")
        await session.enqueue("c")
        engine.accept_start()
        await settle()
        await engine.last_run.emit(result_message(session_id="s-1", uuid="r-1"))
        await settle()
        assert ended[1:] == [(("b", "c"), True)]
        # A turn on the open run, ended by its run's death: not delivered.
        assert await session.send("d")
        await settle()
        await engine.last_run.end()
        await settle()
        assert ended[2:] == [(("d",), False)]
        # A result with no turn in flight, and a close with none, report nothing.
        assert await session.send("e")
        await settle()
        engine.accept_start()
        await settle()
        await engine.last_run.emit(result_message(session_id="s-1", uuid="r-2"))
        await engine.last_run.emit(result_message(session_id="s-1", uuid="r-3"))
        await session.stop()
        await settle()
        assert ended[3:] == [(("e",), True)]


async def test_a_turns_end_is_told_only_once_its_queue_rows_are_deleted(tmp_path: Path) -> None:
    # Told earlier, the box could count a send delivered while a queue row that would
    # send it again after a crash is still on disk.
    ended: list[tuple[tuple[str, ...], bool]] = []
    engine = ScriptedEngine(start_mode="accept")
    store = GatedQueueStore()
    store.gate.set()
    async with ChatSession.open(
        engine=engine,
        box_root=tmp_path,
        queue_store=store,
        session_id_store=InMemorySessionIdStore(),
        on_turn_end=lambda texts, delivered: ended.append((texts, delivered)),
    ) as session:
        assert await session.send("a")
        await settle()
        await session.enqueue("b")
        store.gate = anyio.Event()
        await engine.last_run.emit(result_message(session_id="s-1", uuid="r-1"))
        await settle()
        # "b" went out as the next turn; its row's deletion waits at the gate.
        assert engine.last_run.sent == ["a", "b"]
        await engine.last_run.emit(result_message(session_id="s-1", uuid="r-2"))
        await settle()
        told_before_the_deletion = list(ended)
        store.gate.set()
        await settle()
        assert told_before_the_deletion == [(("a",), True)]
        assert ended == [(("a",), True), (("b",), True)]
        assert store.texts == ()


def in_memory_session(
    engine: ScriptedEngine, queue_store: InMemoryQueueStore, on_turn_end: TurnEndHook | None = None
) -> AbstractAsyncContextManager[ChatSession]:
    """A session on ``engine`` and ``queue_store``, its session id kept in memory."""
    return ChatSession.open(
        engine=engine,
        box_root=Path("."),
        queue_store=queue_store,
        session_id_store=InMemorySessionIdStore(),
        on_turn_end=on_turn_end,
    )


def told(ended: list[tuple[tuple[str, ...], bool]]) -> TurnEndHook:
    """A turn-end hook that writes each turn's end down in ``ended``."""
    return lambda texts, delivered: ended.append((texts, delivered))


async def test_a_text_whose_caller_wrote_its_row_is_queued_with_no_write() -> None:
    # The box's send writes the row in the transaction that records the send; the
    # session then only holds the text, and deletes the row once its turn is sent.
    engine = ScriptedEngine(start_mode="accept")
    store = GatedQueueStore()
    store.gate.set()
    async with in_memory_session(engine, store) as session:
        assert not queues_sends(session)
        assert await session.send("a")
        await settle()
        assert queues_sends(session)
        row_id = await store.append("b")
        assert not await session.send_or_enqueue("b", queued_row=row_id)
        assert queued(session) == ("b",)
        await session.enqueue("c", queued_row=await store.append("c"))
        assert queued(session) == ("b", "c")
        assert store.writes == []
        await engine.last_run.emit(result_message(session_id="s-1", uuid="r-1"))
        await settle()
        assert engine.last_run.sent == ["a", "b\n\nc"]
        assert store.writes == [([row_id, row_id + 1], [])]
        assert store.texts == ()


async def test_a_text_with_a_row_taken_as_a_turn_after_all_loses_its_row_once_sent() -> None:
    # The caller's reading of `queues_sends` was stale: the session was idle (or
    # ready) by the time the text came. The row goes once the turn is sent.
    engine = ScriptedEngine(start_mode="accept")
    store = InMemoryQueueStore()
    async with in_memory_session(engine, store) as session:
        # From idle: the run starts with it as its first turn.
        assert await session.send_or_enqueue("a", queued_row=await store.append("a"))
        await settle()
        assert engine.last_run.sent == ["a"]
        assert store.texts == ()
        await engine.last_run.emit(result_message(session_id="s-1", uuid="r-1"))
        await settle()
        # Onto the open run.
        assert not queues_sends(session)
        assert await session.send_or_enqueue("b", queued_row=await store.append("b"))
        await settle()
        assert engine.last_run.sent == ["a", "b"]
        assert store.texts == ()


async def test_texts_left_waiting_in_an_idle_session_say_a_send_belongs_behind_them() -> None:
    # A drained start that failed leaves the session idle with its texts queued: a
    # send handed over now should join them (`enqueue_then_drain`), not go first.
    engine = ScriptedEngine(start_mode="accept")
    store = InMemoryQueueStore()
    async with in_memory_session(engine, store) as session:
        assert await session.send("a")
        await settle()
        await session.enqueue("b")
        engine.start_mode = "fail"
        await engine.last_run.end()
        await settle()
        assert session.phase is Phase.IDLE
        assert queued(session) == ("b",)
        assert queues_sends(session)
        engine.start_mode = "accept"
        session.enqueue_then_drain("c", queued_row=await store.append("c"))
        await settle()
        assert engine.last_run.sent == ["b\n\nc"]


async def test_a_failed_start_drops_the_callers_text_with_its_row() -> None:
    engine = ScriptedEngine()
    store = InMemoryQueueStore()
    async with in_memory_session(engine, store) as session:
        with session.subscribe() as events:
            assert await session.send_or_enqueue("a", queued_row=await store.append("a"))
            await settle()
            assert queues_sends(session), "a run starting takes no turn"
            engine.fail_start("no binary")
            await settle()
            assert events.drain_nowait() == [StartFailed("no binary", "a")]
            assert store.texts == ()
            assert queued(session) == ()


async def test_turn_ends_do_not_split_the_queue_writes_waiting_around_them() -> None:
    # A turn with queue rows is told ended behind its rows' deletion, in the same
    # batch as the writes around it: a busy chat's enqueues, deletions and turn ends
    # alternate, and each tell between them would otherwise cost a store write.
    ended: list[tuple[tuple[str, ...], bool]] = []
    engine = ScriptedEngine(start_mode="accept")
    store = GatedQueueStore()
    store.gate.set()
    async with in_memory_session(engine, store, on_turn_end=told(ended)) as session:
        assert await session.send("a")
        await settle()
        await engine.last_run.emit(init_message("s-1"))
        await settle()
        await session.enqueue("b")
        store.gate = anyio.Event()
        async with anyio.create_task_group() as task_group:
            # "x" is being written, held at the gate.
            task_group.start_soon(session.enqueue, "x")
            await settle()
            # The turn ends: "b" and "x" go out as the next turn (their rows to go),
            # which ends too (to be told), and "c" is queued behind.
            await engine.last_run.emit(result_message(session_id="s-1", uuid="r-1"))
            await settle()
            await engine.last_run.emit(result_message(session_id="s-1", uuid="r-2"))
            await settle()
            task_group.start_soon(session.enqueue, "c")
            await settle()
            assert engine.last_run.sent == ["a", "b\n\nx"]
            assert ended == [(("a",), True)]
            store.gate.set()
        await settle()
        assert store.writes == [([], ["b"]), ([], ["x"]), ([1, 2], ["c"])]
        assert ended == [(("a",), True), (("b", "x"), True)]
        assert store.texts == ("c",)


async def test_a_drained_turn_the_run_refuses_rides_a_fresh_run() -> None:
    # Rule 8: left streaming a turn no engine took, the session was busy for good and
    # every later send queued behind it.
    engine = ScriptedEngine(start_mode="accept")
    store = InMemoryQueueStore()
    ended: list[tuple[tuple[str, ...], bool]] = []
    async with in_memory_session(engine, store, on_turn_end=told(ended)) as session:
        assert await session.send("a")
        await settle()
        await session.enqueue("b")
        await session.enqueue("c")
        refused = engine.last_run
        refused.refuse_next_send()
        with session.subscribe() as events:
            await refused.emit(result_message(session_id="s-1", uuid="r-1"))
            await settle()
            assert refused.closed, "the session closed the run that refused the turn"
            assert Closed(None) in events.drain_nowait()
        fresh = engine.last_run
        assert fresh is not refused
        assert fresh.sent == ["b\n\nc"]
        assert session.phase is Phase.STREAMING
        # The rows stayed until the turn was sent; its end is told once, by the turn
        # that carried it.
        assert store.texts == ()
        await fresh.emit(result_message(session_id="s-1", uuid="r-2"))
        await settle()
        assert ended == [(("a",), True), (("b", "c"), True)]
        assert not session.busy


async def one_whole_turn(session: ChatSession, engine: ScriptedEngine) -> None:
    """Send "a" and answer it: the session is ``ready`` on an open run."""
    assert await session.send("a")
    await settle()
    await engine.last_run.emit(result_message(session_id="s-1", uuid="r-1"))
    await settle()


async def test_a_callers_turn_the_run_refuses_closes_the_run() -> None:
    engine = ScriptedEngine(start_mode="accept")
    async with in_memory_session(engine, InMemoryQueueStore()) as session:
        await one_whole_turn(session, engine)
        engine.last_run.refuse_next_send(RuntimeError("could not be sent"))
        # The caller hears it, and is the one to queue the text again.
        with pytest.raises(RuntimeError, match="could not be sent"):
            await session.send_or_enqueue("b")
        await settle()
        assert engine.last_run.closed
        assert session.phase is Phase.IDLE
        assert not session.busy
        assert queued(session) == ()
        assert len(engine.runs) == 1, "nothing queued: no fresh run"


async def test_a_refused_first_turn_is_not_put_back() -> None:
    # A fresh run refusing its first turn again and again would start runs without end.
    engine = ScriptedEngine()
    store = InMemoryQueueStore()
    ended: list[tuple[tuple[str, ...], bool]] = []
    async with in_memory_session(engine, store, on_turn_end=told(ended)) as session:
        assert await session.send("a")
        await settle()
        await session.enqueue("b")
        engine.accept_start().refuse_next_send()
        await settle()
        assert engine.last_run.closed
        assert session.phase is Phase.IDLE
        assert queued(session) == ()
        # Ended with the run, undelivered; "b"'s row stays for the box's next open.
        assert ended == [(("a", "b"), False)]
        assert store.texts == ("b",)
        assert len(engine.runs) == 1


def hold_sends(run: ScriptedRun) -> anyio.Event:
    """``run``'s sends wait until the event returned is set (then send, or raise)."""
    send, gate = run.send, anyio.Event()

    async def after_the_gate(content: TurnContent) -> None:
        await gate.wait()
        await send(content)

    run.send = after_the_gate  # type: ignore[method-assign]
    return gate


async def test_a_drain_whose_run_closed_before_its_send_returned_goes_back_all_the_same() -> None:
    # A restart between a drain's decision and its send: the close handler runs first
    # (finding nothing queued), then the send raises. The texts were never sent: they
    # go back and ride a fresh run, not wait on disk for the box's next open.
    engine = ScriptedEngine(start_mode="accept")
    store = InMemoryQueueStore()
    ended: list[tuple[tuple[str, ...], bool]] = []
    async with in_memory_session(engine, store, on_turn_end=told(ended)) as session:
        await one_whole_turn(session, engine)
        first = engine.last_run
        gate = hold_sends(first)
        session.enqueue_then_drain("b", queued_row=await store.append("b"))
        await settle()
        await session.restart()
        await settle()
        assert first.closed
        assert session.phase is Phase.IDLE, "the close handler found nothing to drain"
        gate.set()
        await settle()
        fresh = engine.last_run
        assert fresh is not first
        assert fresh.sent == ["b"]
        await fresh.emit(result_message(session_id="s-1", uuid="r-2"))
        await settle()
        # "b" is told once, by the turn that carried it; its row went once it was sent.
        assert ended == [(("a",), True), (("b",), True)]
        assert store.texts == ()


async def test_a_drain_back_after_its_runs_close_leads_the_fresh_runs_first_turn() -> None:
    engine = ScriptedEngine(start_mode="accept")
    store = InMemoryQueueStore()
    async with in_memory_session(engine, store) as session:
        await one_whole_turn(session, engine)
        gate = hold_sends(engine.last_run)
        session.enqueue_then_drain("b", queued_row=await store.append("b"))
        await session.enqueue("c")
        engine.start_mode = "wait"
        await session.restart()
        await settle()
        # The close drained "c" into a fresh run, still starting when "b" comes back.
        assert session.phase is Phase.STARTING
        gate.set()
        await settle()
        engine.accept_start()
        await settle()
        assert engine.last_run.sent == ["b\n\nc"]


async def test_a_drain_whose_run_a_stop_closed_does_not_come_back() -> None:
    engine = ScriptedEngine(start_mode="accept")
    store = InMemoryQueueStore()
    async with in_memory_session(engine, store) as session:
        await one_whole_turn(session, engine)
        gate = hold_sends(engine.last_run)
        session.enqueue_then_drain("b", queued_row=await store.append("b"))
        await settle()
        await session.stop()
        await settle()
        gate.set()
        await settle()
        assert session.phase is Phase.IDLE
        assert queued(session) == ()
        assert len(engine.runs) == 1
        # The stop cleared every queued row, this unsent turn's too.
        assert store.texts == ()


async def test_a_reset_takes_no_session_id_back_from_the_run_it_stopped(tmp_path: Path) -> None:
    # Rule 9: a run slow to close, as a CLI shutting down is, still delivers messages
    # that carry the session id the reset forgot.
    id_file = SessionIdFile.for_box(tmp_path)
    engine = ScriptedEngine(start_mode="accept")
    async with ChatSession.open(
        engine=engine, box_root=tmp_path, queue_store=InMemoryQueueStore(), session_id_store=id_file
    ) as session:
        await session.send("a")
        await settle()
        run = engine.last_run
        await run.emit(init_message("s-1"))
        await settle()
        assert session.session_id == "s-1"
        close, closing = run.close, anyio.Event()

        async def slow_close() -> None:
            await closing.wait()
            await close()

        run.close = slow_close  # type: ignore[method-assign]
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(session.reset_session)
            try:
                await settle()
                assert session.phase is Phase.STOPPING
                await run.emit(result_message(session_id="s-1", uuid="r-1"))
                await settle()
                assert held_session_id(session) is None
            finally:
                # Failing or not, the run closes (the session's own exit closes it too).
                closing.set()
        await session.send("b")
        await settle()
        assert engine.starts[-1].resume_session_id is None, "a new session, as asked"
    # Nor was it saved again after the reset forgot it (the writer is done once closed).
    assert await id_file.load() is None
