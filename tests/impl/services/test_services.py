"""The chat services through `Box`: bootstrap kinds and pending, photos to the engine, dedup."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

import beebox_impl.transcript.index as index_module
from beebox_impl.box import Box
from beebox_impl.engine.echo import EchoEngine
from beebox_impl.engine.messages import result_message
from beebox_impl.engine.scripted import ScriptedEngine
from beebox_impl.review.cards import FIELD_ORIGIN, FIELD_TITLE, find_husk_for_session, read_card
from beebox_impl.review.origin import ORIGIN_ENV
from beebox_impl.services.attachments import photo_marker, split_photo_markers, without_markers
from beebox_impl.services.send import (
    MAX_WAITING_PHOTO_BYTES,
    Deduplicated,
    InvalidRequest,
    PhotosWaiting,
    Queued,
    Sender,
    SendRequest,
    TurnStarted,
    parse_send_body,
)
from beebox_impl.session.clock import ManualClock
from beebox_impl.store.acceptance import CHAT_USER_MESSAGE, Attachment
from beebox_impl.transcript import TailSlice, TranscriptIndex
from beebox_spec.entries import PendingMessage
from beebox_spec.reconcile import ACCEPTED_WINDOW, reconcile_pending
from tests.impl.http.support import wait_idle, wait_until

pytestmark = pytest.mark.anyio

START = datetime(2026, 8, 1, 12, 0, tzinfo=UTC)
TAIL = TailSlice(50)


async def test_empty_bootstrap_shows_session_less_sends_for_ten_minutes(tmp_path: Path) -> None:
    clock = ManualClock(START)
    engine = ScriptedEngine(start_mode="wait")
    async with Box.open(
        tmp_path / "box", engine=engine, clock=clock, projects_root=tmp_path
    ) as box:
        outcome = await box.send(SendRequest("<typed>hi</typed>"), Sender("a@x.org", "Ann"))
        assert isinstance(outcome, TurnStarted)
        boot = await box.bootstrap(window=TAIL, viewer_email="a@x.org")
        assert boot["kind"] == "empty"
        (pending,) = boot["pending"]
        # Attribution is the spec's: the sender is named in the tag.
        assert pending["user"] == "Ann"
        assert pending["userEmail"] == "a@x.org"
        # A session-less row from a named sender is hidden from other viewers.
        assert (await box.bootstrap(window=TAIL, viewer_email="b@x.org"))["pending"] == []
        clock.advance(ACCEPTED_WINDOW)
        assert len((await box.bootstrap(window=TAIL, viewer_email="a@x.org"))["pending"]) == 1
        clock.advance(timedelta(milliseconds=1))
        assert (await box.bootstrap(window=TAIL, viewer_email="a@x.org"))["pending"] == []


async def test_unavailable_and_resumable_with_baselined_pending(tmp_path: Path) -> None:
    clock = ManualClock(START)
    engine = EchoEngine(tmp_path / "projects", clock.now)
    async with Box.open(
        tmp_path / "box", engine=engine, clock=clock, projects_root=tmp_path / "projects"
    ) as box:
        missing = await box.bootstrap(session="no-such-session", window=TAIL)
        assert missing["kind"] == "unavailable"
        assert missing.get("reason") == "missing-local-transcript"
        await box.send(SendRequest("first"))
        await wait_idle(box)
        clock.advance(timedelta(seconds=1))
        second = await box.send(SendRequest("second"))
        assert isinstance(second, TurnStarted)
        await wait_idle(box)
        boot = await box.bootstrap(window=TAIL)
        assert boot["kind"] == "resumable"
        assert boot["sessionId"] == box.session_id
        history = boot["history"]
        assert history is not None
        # "first" was recorded before the session had an id: not this session's pending.
        (pending,) = boot["pending"]
        assert pending["content"][0]["text"] == "second"
        first_turn = [entry["uuid"] for entry in history["entries"][:2]]
        # The entries written before "second" was accepted are its baseline.
        assert pending["reconcileKnownUuids"] == first_turn
        # The client's join retires it: the transcript holds it now.
        joined = reconcile_pending(history["entries"], boot["pending"])
        assert joined["pendingMessages"] == []


async def test_photos_reach_the_engine_as_image_blocks(tmp_path: Path) -> None:
    engine = ScriptedEngine(start_mode="accept")
    async with Box.open(tmp_path / "box", engine=engine, projects_root=tmp_path) as box:
        request = SendRequest(
            'look <bbx-photos row="1"/>', images=(Attachment("image/png", b"\x01\x02"),)
        )
        await box.send(request)
        await wait_until(lambda: bool(engine.runs) and bool(engine.runs[0].sent))
        (turn,) = engine.runs[0].sent
        assert turn == [
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": "AQI="},
            },
            {"type": "text", "text": "look "},
        ]


async def test_in_flight_duplicates_share_the_answer_and_later_ones_dedup(tmp_path: Path) -> None:
    engine = ScriptedEngine(start_mode="accept")
    async with Box.open(tmp_path / "box", engine=engine, projects_root=tmp_path) as box:
        answers: list[object] = []

        async def send() -> None:
            answers.append(await box.send(SendRequest("once", message_id="id-1")))

        async with anyio.create_task_group() as group:
            for _ in range(5):
                group.start_soon(send)
        started = [a for a in answers if isinstance(a, TurnStarted)]
        assert started
        assert all(a == started[0] or isinstance(a, Deduplicated) for a in answers)
        assert await box.send(SendRequest("once", message_id="id-1")) == Deduplicated()
        await wait_until(lambda: bool(engine.runs) and bool(engine.runs[0].sent))
        assert engine.runs[0].sent == ["once"]
        # Busy now (the scripted turn never ends): the next send is queued.
        assert await box.send(SendRequest("later")) == Queued()
        assert box._session.queue == ("later",)


def test_markers_are_the_boxs_alone() -> None:
    text = "hi" + photo_marker(12) + "\n\nmore" + photo_marker(13)
    assert split_photo_markers(text) == ("hi\n\nmore", [12, 13])
    assert split_photo_markers("plain") == ("plain", [])
    assert without_markers('a<bbx-photos row="3"/>b<bbx-photos x>c') == "abc"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"message": "x", "session": "new"}, 'unexpected field "session"'),
        ({"messageId": "m"}, 'missing field "message"'),
        ({"message": "x", "images": {}}, '"images" must be a list'),
        (
            {"message": "x", "images": [{"mediaType": "image/png", "data": "QQ==", "n": 1}]},
            'unexpected field "images[0].n"',
        ),
        ({"message": "x", "messageId": "m" * 201}, '"messageId"'),
    ],
)
def test_send_bodies_are_strict(body: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidRequest, match=field.replace("[", r"\[").replace("]", r"\]")):
        parse_send_body(body)  # type: ignore[arg-type]


def test_a_photo_only_send_is_a_send() -> None:
    parsed = parse_send_body(
        {"message": "", "images": [{"mediaType": "image/gif", "data": "R0lG"}]}
    )
    assert parsed.images == (Attachment("image/gif", b"GIF"),)


async def test_each_turn_is_indexed_so_a_reopened_box_reads_without_a_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = ManualClock(START)
    projects = tmp_path / "projects"
    engine = EchoEngine(projects, clock.now)
    box_root = tmp_path / "box"
    async with Box.open(box_root, engine=engine, clock=clock, projects_root=projects) as box:
        await box.send(SendRequest("first"))
        await wait_idle(box)
        session_id = box.session_id
        assert session_id is not None
        await box.send(SendRequest("second"))
        await wait_idle(box)
        path = box._history_service.transcript_path(session_id)
        # The indexer follows the turn's end; wait for it to have read the whole file.
        await wait_until(
            lambda: (
                (index := box._history_service.cache.cached(path)) is not None
                and index.identity.size == path.stat().st_size
            )
        )
        expected = await box.history(session_id, TAIL)
    shelved = list((tmp_path / "box" / ".beebox" / "cache" / "transcript-index").iterdir())
    assert [entry.suffix for entry in shelved] == [".idx"]
    # A box opened again (a restart) reads the chat through the shelved index.
    builds: list[int] = []
    real_build = index_module.build_index

    def counting_build(*args: object, **kwargs: object) -> TranscriptIndex:
        index = real_build(*args, **kwargs)  # type: ignore[arg-type]
        builds.append(index.scanned_from)
        return index

    monkeypatch.setattr(index_module, "build_index", counting_build)
    async with Box.open(box_root, engine=engine, clock=clock, projects_root=projects) as box:
        assert await box.history(session_id, TAIL) == expected
    assert builds == []


async def test_a_box_indexes_its_chat_at_start_when_no_index_is_shelved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = ManualClock(START)
    projects = tmp_path / "projects"
    engine = EchoEngine(projects, clock.now)
    box_root = tmp_path / "box"
    async with Box.open(box_root, engine=engine, clock=clock, projects_root=projects) as box:
        await box.send(SendRequest("first"))
        await wait_idle(box)
        session_id = box.session_id
        assert session_id is not None
        path = box._history_service.transcript_path(session_id)
    # The shelf is gone (a box new to this chat): the index is built at start. (It may
    # never have been written: a box that closes before its indexing pass after a
    # turn has nothing to shelve.)
    shelf = box_root / ".beebox" / "cache"
    if shelf.exists():
        shutil.rmtree(shelf)
    builds: list[Path] = []
    real_build = index_module.build_index

    def counting_build(built_path: Path, *args: object, **kwargs: object) -> TranscriptIndex:
        builds.append(built_path)
        return real_build(built_path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(index_module, "build_index", counting_build)
    async with Box.open(box_root, engine=engine, clock=clock, projects_root=projects) as box:
        await wait_until(lambda: box._history_service.cache.cached(path) is not None)
        assert builds == [path]
        # The first request reads through it.
        history = await box.history(session_id, TAIL)
        assert builds == [path]
    assert [entry["type"] for entry in history["entries"]] == ["user", "assistant"]


async def test_the_first_finished_turn_makes_the_husk_and_boot_stamps_old_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ORIGIN_ENV, "machine-a")
    clock = ManualClock(START)
    projects = tmp_path / "projects"
    engine = EchoEngine(projects, clock.now)
    box_root = tmp_path / "box"
    async with Box.open(box_root, engine=engine, clock=clock, projects_root=projects) as box:
        await box.send(SendRequest("<typed>Plan the canoe trip to Keene</typed>"))
        await wait_idle(box)
        session_id = box.session_id
        assert session_id is not None
        await wait_until(lambda: find_husk_for_session(box.root, session_id) is not None)
        husk_path = find_husk_for_session(box.root, session_id)
        assert husk_path is not None
        card = read_card(husk_path)
        assert husk_path.name == f"2026-08-01_{session_id[:8]}.chat.card"
        assert card.text(FIELD_ORIGIN) == "machine-a"
        assert "canoe trip" in (card.text(FIELD_TITLE) or "")
        # Another turn makes no second husk.
        await box.send(SendRequest("and the ferry"))
        await wait_idle(box)
        assert len(list((box.root / "_content" / "chat" / "web").glob("*.chat.card"))) == 1
    # A husk from before origins, whose transcript is here, is stamped at the next boot.
    text = husk_path.read_text(encoding="utf-8")
    unstamped = "\n".join(
        line for line in text.splitlines() if not line.startswith(("origin:", "origin-name:"))
    )
    husk_path.write_text(unstamped + "\n", encoding="utf-8")
    assert read_card(husk_path).text(FIELD_ORIGIN) is None
    async with Box.open(box_root, engine=engine, clock=clock, projects_root=projects):
        assert read_card(husk_path).text(FIELD_ORIGIN) == "machine-a"


def photos(mib: float) -> tuple[Attachment, ...]:
    return (Attachment("image/jpeg", b"\xff" * int(mib * 1024 * 1024)),)


async def bus_messages(box: Box) -> list[str]:
    rows = await box._acceptance.recent_events(CHAT_USER_MESSAGE, 100)
    return [str(row.payload["message"]) for row in rows if isinstance(row.payload, dict)]


async def test_photos_wait_for_a_turn_only_within_the_bound(tmp_path: Path) -> None:
    # A drain joins every queued send into one turn: its photos must stay fetchable.
    assert MAX_WAITING_PHOTO_BYTES == 10 * 1024 * 1024
    engine = ScriptedEngine(start_mode="accept")
    async with Box.open(tmp_path / "box", engine=engine, projects_root=tmp_path) as box:
        assert isinstance(await box.send(SendRequest("first")), TurnStarted)
        await wait_until(lambda: bool(engine.runs) and bool(engine.runs[0].sent))
        # The turn is in flight: sends queue, and their photos wait for the next turn.
        assert await box.send(SendRequest("six", "m-6", photos(6))) == Queued()
        refused = await box.send(SendRequest("six more", "m-6b", photos(6)))
        assert refused == PhotosWaiting()
        assert await box.send(SendRequest("one", "m-1", photos(1))) == Queued()
        assert await box.send(SendRequest("no photo", "m-0")) == Queued()
        # Refused means not recorded: the same id may be sent again.
        assert "six more" not in await bus_messages(box)
        run = engine.runs[0]
        run.emit_nowait(result_message(session_id="s-1", uuid="r-1"))
        await wait_until(lambda: len(run.sent) == 2)
        drained = run.sent[1]
        assert isinstance(drained, list)
        assert [block["type"] for block in drained] == ["image", "image", "text"]
        # The next turn is in flight and nothing waits: a send alone is never too big.
        assert await box.send(SendRequest("six more", "m-6b", photos(6))) == Queued()
        assert await box.send(SendRequest("twelve", "m-12", photos(12))) == PhotosWaiting()


async def test_a_starting_runs_first_turn_counts_as_waiting(tmp_path: Path) -> None:
    engine = ScriptedEngine(start_mode="wait")
    async with Box.open(tmp_path / "box", engine=engine, projects_root=tmp_path) as box:
        assert isinstance(await box.send(SendRequest("start", "m-a", photos(8))), TurnStarted)
        # The start has not answered: what is sent now joins the first turn.
        assert await box.send(SendRequest("too", "m-b", photos(3))) == PhotosWaiting()
        assert await box.send(SendRequest("fits", "m-c", photos(1))) == Queued()
        await engine.wait_start_requested()
        engine.accept_start()
        await wait_until(lambda: bool(engine.runs) and bool(engine.runs[0].sent))
        (first,) = engine.runs[0].sent
        assert isinstance(first, list)
        assert [block["type"] for block in first] == ["image", "image", "text"]


async def test_what_a_stop_dropped_is_marked_dropped(tmp_path: Path) -> None:
    # The stop cleared the queue on purpose: a page opened after it must show the
    # dropped message as not sent, not as on its way (it would wait ten minutes).
    engine = ScriptedEngine(start_mode="accept")
    async with Box.open(tmp_path / "box", engine=engine, projects_root=tmp_path) as box:
        assert isinstance(await box.send(SendRequest("first")), TurnStarted)
        await wait_until(lambda: bool(engine.runs) and bool(engine.runs[0].sent))
        assert await box.send(SendRequest("queued then dropped", "m-2")) == Queued()
        assert [entry.get("dropped") for entry in await pending_of(box)] == [None, None]
        await box.stop()
        assert [entry.get("dropped") for entry in await pending_of(box)] == [True, True]
        # A send after the stop is pending as ever.
        await box.send(SendRequest("after the stop", "m-3"))
        marks = [
            (entry["content"][0].get("text"), entry.get("dropped"))
            for entry in await pending_of(box)
        ]
        assert marks[-1] == ("after the stop", None)
        assert ("queued then dropped", True) in marks


async def pending_of(box: Box) -> list[PendingMessage]:
    return (await box.bootstrap(window=TAIL))["pending"]
