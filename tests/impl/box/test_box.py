"""`bbx init` / `init_box`, the token, the schedule card, `Box.open`, the acceptance record."""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from beebox_impl.box import Box, BoxPaths, NotABox, init_box
from beebox_impl.cli import main as bbx
from beebox_impl.review.schedule_card import REVIEW_SCHEDULE
from beebox_impl.services.send import SendRequest
from beebox_impl.session.clock import ManualClock
from beebox_impl.store.acceptance import (
    CHAT_USER_MESSAGE,
    MESSAGE_ID_TTL,
    AcceptanceStore,
    AlreadyClaimed,
    Attachment,
    Recorded,
)
from beebox_impl.store.database import MIGRATIONS, BoxDatabase
from beebox_impl.transcript import TailSlice

START = datetime(2026, 8, 1, 12, 0, tzinfo=UTC)


def test_init_makes_the_layout_with_a_private_token(tmp_path: Path) -> None:
    paths = init_box(tmp_path / "box")
    assert paths.husk_dir.is_dir()
    assert paths.review_state_dir.is_dir()
    with contextlib.closing(sqlite3.connect(paths.database)) as database:
        (version,) = database.execute("PRAGMA user_version").fetchone()
    assert version == len(MIGRATIONS)
    assert stat.S_IMODE(paths.token.stat().st_mode) == 0o600
    assert stat.S_IMODE(paths.state_dir.stat().st_mode) == 0o700
    # 256 random bits in hex: nothing a command line reads as an option ("-..."),
    # nothing a URL or a header must escape.
    assert re.fullmatch(r"[0-9a-f]{64}", paths.token.read_text().strip())
    card = paths.schedule_card.read_text()
    assert card.startswith("---\n")
    assert "enabled: false" in card
    assert "cron: 0 4 * * *" in card


def test_init_is_idempotent_and_keeps_box_owned_fields(tmp_path: Path) -> None:
    paths = init_box(tmp_path / "box")
    token = paths.token.read_text()
    edited = paths.schedule_card.read_text().replace("enabled: false", "enabled: true  # mine")
    edited = edited.replace("cron: 0 4 * * *\n", "")
    paths.schedule_card.write_text(edited + "my notes\n")
    paths.token.chmod(0o644)
    assert bbx(["init", str(tmp_path / "box")]) == 0
    again = BoxPaths(paths.root)
    assert again.token.read_text() == token
    card = again.schedule_card.read_text()
    assert "enabled: true  # mine" in card
    # A missing template field is added back; the body the boxholder wrote stays.
    assert "cron: 0 4 * * *" in card
    assert card.endswith("my notes\n")
    init_box(paths.root)
    assert again.schedule_card.read_text() == card
    assert set(REVIEW_SCHEDULE) <= {line.split(":")[0] for line in card.splitlines() if ":" in line}


@pytest.mark.anyio
async def test_open_refuses_a_folder_that_is_not_a_box_when_told_not_to_create(
    tmp_path: Path,
) -> None:
    with pytest.raises(NotABox):
        async with Box.open(tmp_path / "nothing", create=False):
            pass
    async with Box.open(tmp_path / "made", projects_root=tmp_path / "p") as box:
        assert box.token == box.paths.token.read_text().strip()
        assert box.paths.database.is_file()


@pytest.mark.anyio
async def test_the_blocking_reads_refuse_the_event_loops_thread(tmp_path: Path) -> None:
    async with Box.open(tmp_path / "box", projects_root=tmp_path / "p") as box:
        session = "0f3c2e8a-1111-4222-8333-444455556666"
        with pytest.raises(RuntimeError, match=r"await Box\.history"):
            box.read_history(session, TailSlice(5))
        with pytest.raises(RuntimeError, match=r"await Box\.media"):
            box.read_media(f"{session}/u-1/0")
        # From a thread of its own, the same read answers (no transcript: empty).
        history = await anyio.to_thread.run_sync(box.read_history, session, TailSlice(5))
        assert history == {"sessionId": session, "entries": [], "total": 0}
        assert await box.history(session, TailSlice(5)) == history


@pytest.mark.anyio
async def test_record_claims_once_in_one_transaction_and_claims_expire(tmp_path: Path) -> None:
    init_box(tmp_path)
    async with await BoxDatabase.open(tmp_path) as database:
        store = AcceptanceStore(database)
        photo = Attachment("image/png", b"\x89PNG")
        first = await store.record_user_message(
            {"message": "a"}, message_id="m-1", now=START, attachments=[photo]
        )
        assert isinstance(first, Recorded)
        again = await store.record_user_message({"message": "a"}, message_id="m-1", now=START)
        assert again == AlreadyClaimed(first.row_id)
        plain = await store.record_user_message({"message": "b"}, message_id=None, now=START)
        assert isinstance(plain, Recorded)
        rows = await store.recent_events(CHAT_USER_MESSAGE, 50)
        assert [row.payload for row in rows] == [{"message": "a"}, {"message": "b"}]
        assert await store.attachments(first.row_id) == [photo]
        assert await store.undelivered_with_photos() == {first.row_id}
        assert await store.claimed_row("m-1") == first.row_id
        # Exactly at the TTL the claim still holds; a millisecond past, the id is new.
        at_ttl = await store.record_user_message(
            {"message": "a"}, message_id="m-1", now=START + MESSAGE_ID_TTL
        )
        assert isinstance(at_ttl, AlreadyClaimed)
        later = START + MESSAGE_ID_TTL + timedelta(milliseconds=1)
        reused = await store.record_user_message({"message": "c"}, message_id="m-1", now=later)
        assert isinstance(reused, Recorded)
        assert await store.attachments(first.row_id) == []
        assert await store.undelivered_with_photos() == set()
        last = await store.recent_events(CHAT_USER_MESSAGE, 1)
        assert [row.payload for row in last] == [{"message": "c"}]


@pytest.mark.anyio
async def test_the_photos_of_many_sends_come_in_one_read(tmp_path: Path) -> None:
    init_box(tmp_path)
    async with await BoxDatabase.open(tmp_path) as database:
        store = AcceptanceStore(database)
        rows: list[int] = []
        for number in range(1200):
            photos = [
                Attachment("image/png", bytes([number % 256, position])) for position in (0, 1)
            ]
            recorded = await store.record_user_message(
                {"message": str(number)},
                message_id=None,
                now=START,
                attachments=photos if number % 3 == 0 else [],
            )
            assert isinstance(recorded, Recorded)
            rows.append(recorded.row_id)
        found = await store.attachments_of([*reversed(rows), rows[0]])
        # Every send with photos (more than one slice of ids), its photos in order.
        assert sorted(found) == rows[::3]
        for row_id in rows[::3]:
            assert found[row_id] == await store.attachments(row_id)
        assert await store.attachments_of([]) == {}


@pytest.mark.anyio
async def test_a_failed_record_writes_nothing(tmp_path: Path) -> None:
    init_box(tmp_path)
    async with await BoxDatabase.open(tmp_path) as database:
        store = AcceptanceStore(database)
        with pytest.raises(ValueError, match="Out of range float"):
            await store.record_user_message({"message": float("nan")}, message_id="m-2", now=START)
        assert await store.claimed_row("m-2") is None
        assert await store.recent_events(CHAT_USER_MESSAGE, 5) == []


@pytest.mark.anyio
async def test_the_box_clock_dates_the_bus_row(tmp_path: Path) -> None:
    clock = ManualClock(START)
    async with Box.open(tmp_path / "box", clock=clock, projects_root=tmp_path / "p") as box:
        await box.send(SendRequest("dated"))
        (row,) = await box._acceptance.recent_events(CHAT_USER_MESSAGE, 5)
        assert isinstance(row.payload, dict)
        assert row.payload["timestamp"] == "2026-08-01T12:00:00.000Z"
        assert json.dumps(row.payload["sessionId"]) == "null"
