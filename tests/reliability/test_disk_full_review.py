"""A full disk during a review run (issue 9 §3): state.json and the cards stay intact.

Every file the review writes (the husk cards and the journal, `state.json`) goes
through `beebox_impl.atomic.write_atomic`. Here the disk fills after the first
``room`` of those writes, for every ``room`` from 0 to one past what a whole run
writes, and fails the way a full disk does: in ``write`` (no block left for the
data) or in ``fsync`` (a delayed allocation that finds none). After the failed
run: every card reads as a card with its body as it was, state.json (when there
is one) reads as a journal, and no temporary file is left beside them. Once there
is room again, the next run finishes the work: every session reviewed, its card's
``review-span`` the one the journal says was applied.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Literal

import pytest

from beebox_impl import atomic
from beebox_impl.review.cards import FIELD_REVIEW_SPAN, read_card
from beebox_impl.review.store import ReviewStateFile
from beebox_spec.review.journal import METADATA_CONSUMER
from tests.impl.review.boxes import ReviewBox, conversation

SESSIONS = 3
FailAt = Literal["write", "fsync"]


class _FullDisk:
    """`os` for `beebox_impl.atomic`, except that writes fail once ``room`` files are written."""

    def __init__(self, room: int, fail_at: FailAt) -> None:
        self.room = room
        self.fail_at = fail_at
        self.refused = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def _spend(self) -> None:
        if self.room == 0:
            self.refused += 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= 1

    def fdopen(self, descriptor: int, *args: Any, **kwargs: Any) -> IO[Any]:
        file: IO[Any] = os.fdopen(descriptor, *args, **kwargs)
        if self.fail_at == "write":
            real_write: Callable[[bytes], int] = file.write

            def write(data: bytes) -> int:
                self._spend()
                return real_write(data)

            file.write = write  # type: ignore[method-assign,assignment]
        return file

    def fsync(self, descriptor: int) -> None:
        # Only a file's data can find the disk full (the folder sync has no blocks to find).
        if self.fail_at == "fsync" and os.path.isfile(f"/proc/self/fd/{descriptor}"):
            self._spend()
        os.fsync(descriptor)


def _run_or_refusal(box: ReviewBox, warnings: list[str]) -> OSError | None:
    try:
        box.run(warnings=warnings)
    except OSError as error:
        return error
    return None


def _leftovers(folder: Path) -> list[str]:
    # `write_atomic`'s temporary files are ".<name>.<random>" beside the file.
    return sorted(
        path.name for path in folder.rglob(".*") if path.is_file() and path.name.count(".") >= 2
    )


def _writes_of_a_whole_run(tmp_path: Path) -> int:
    box = _box(tmp_path / "count")
    counting = _FullDisk(room=1_000_000, fail_at="fsync")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(atomic, "os", counting)
        box.run()
    return 1_000_000 - counting.room


def _box(folder: Path) -> ReviewBox:
    folder.mkdir()
    box = ReviewBox.create(folder)
    for _ in range(SESSIONS):
        box.add_session(conversation(4))
    return box


@pytest.mark.parametrize("fail_at", ["write", "fsync"])
def test_a_review_run_that_fills_the_disk_leaves_state_and_cards_intact(
    tmp_path: Path, fail_at: FailAt
) -> None:
    whole_run = _writes_of_a_whole_run(tmp_path)
    # A card and a journal save per session, at least.
    assert whole_run >= 2 * SESSIONS
    for room in range(whole_run + 1):
        box = _box(tmp_path / f"{fail_at}-{room}")
        bodies = {sid: read_card(session.husk).body for sid, session in box.sessions.items()}
        full_disk = _FullDisk(room, fail_at)
        warnings: list[str] = []
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(atomic, "os", full_disk)
            # Stopping is a fine answer, as long as it is for the full disk.
            refusal = _run_or_refusal(box, warnings)
        assert refusal is None or refusal.errno == errno.ENOSPC, refusal
        assert (full_disk.refused > 0) == (room < whole_run), (room, warnings)
        # Every card still reads, its body untouched; the journal reads if it exists.
        for sid, session in box.sessions.items():
            assert read_card(session.husk).body == bodies[sid], (room, sid)
        ReviewStateFile(box.root).load()
        assert _leftovers(box.root) == [], room
        # With room again, the next run finishes what the full disk stopped.
        box.run()
        state = box.state()
        for sid, session in box.sessions.items():
            applied = state["sessions"][sid]["applied"][METADATA_CONSUMER]
            assert applied["spanId"] == read_card(session.husk).text(FIELD_REVIEW_SPAN), (
                room,
                sid,
            )
        assert _leftovers(box.root) == [], room
