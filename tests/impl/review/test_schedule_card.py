"""The chat-review schedule card: installed disabled; a re-sync keeps the box's `enabled`."""

from __future__ import annotations

from pathlib import Path

from beebox_impl.review.cards import read_card
from beebox_impl.review.schedule_card import REVIEW_SCHEDULE, install_review_schedule_card


def test_install_writes_the_disabled_nightly_card(tmp_path: Path) -> None:
    path = install_review_schedule_card(tmp_path)

    assert path == tmp_path / "_config/schedules/chat-review.scheduled-script.card"
    card = read_card(path)
    assert dict(card.fields) == REVIEW_SCHEDULE
    assert card.fields["cron"] == "0 4 * * *"
    assert card.fields["lockGroup"] == "retro"
    assert card.fields["enabled"] is False
    assert "enabled: false\n" in path.read_text()


def test_a_resync_keeps_enabled_and_the_box_edits(tmp_path: Path) -> None:
    path = install_review_schedule_card(tmp_path)
    text = path.read_text()
    edited = (
        text.replace("enabled: false", "enabled: true  # turned on for prod")
        .replace("cron: 0 4 * * *", "cron: 0 5 * * *")
        .replace("runs: bbx chat review run\n", "runs: bbx chat review run\nowner: ian\n")
        + "My notes.\n"
    )
    path.write_text(edited)

    install_review_schedule_card(tmp_path)

    assert path.read_text() == edited.replace("cron: 0 5 * * *", "cron: 0 4 * * *")
    assert read_card(path).fields["enabled"] is True


def test_a_resync_of_an_unchanged_card_changes_nothing(tmp_path: Path) -> None:
    path = install_review_schedule_card(tmp_path)
    before = path.read_bytes()
    install_review_schedule_card(tmp_path)
    assert path.read_bytes() == before
