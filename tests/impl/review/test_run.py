"""The scenarios of chat review, end to end on generated boxes (issue 6, §4.7).

Each test builds a box in `tmp_path`, runs the pass with a fixed clock, and
checks the husk, the journal and the run summary.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest

from beebox_impl.review import cards, discovery, walk
from beebox_impl.review.cards import (
    FIELD_CONTAINS,
    FIELD_EVIDENCE,
    FIELD_REVIEW_SPAN,
    FIELD_TITLE,
    HuskCard,
)
from beebox_impl.review.lock import REVIEW_LOCK_GROUP, LockHeldError, hold_lock_group
from beebox_impl.review.reviewers import ExtractiveReviewer, ReviewerFailure
from beebox_impl.review.run import RunSummary, review_chat_sessions, run_chat_review
from beebox_impl.review.store import ReviewStateFile
from beebox_spec.review.husk import content_hash
from beebox_spec.review.journal import METADATA_CONSUMER
from beebox_spec.review.qualification import QualifiedSession
from beebox_spec.review.reviewer import ReviewArgs, ReviewOutput
from tests.impl.review.boxes import (
    ELSEWHERE,
    FILLER,
    RecordingReviewer,
    ReviewBox,
    Role,
    conversation,
    fixed_output,
)


@pytest.fixture
def box(tmp_path: Path) -> ReviewBox:
    return ReviewBox.create(tmp_path)


def test_first_review_bootstraps_and_writes_the_husk(box: ReviewBox) -> None:
    session = box.add_session(conversation(4))
    snippet = box.field(session, FIELD_TITLE)
    reviewer = RecordingReviewer()

    summary = box.run(reviewer)

    assert (summary.reviewed, summary.bootstrapped, summary.rewritten) == (1, 1, 0)
    [args] = reviewer.calls
    assert args.bootstrap is True
    assert args.current_account is None
    assert args.current_title == snippet
    title = box.field(session, FIELD_TITLE)
    assert title is not None
    assert title != snippet
    assert "Keene" in title
    assert box.field(session, FIELD_CONTAINS)
    journal = box.state()["sessions"][session.session_id]
    applied = journal["applied"][METADATA_CONSUMER]
    assert applied["endUuid"] == session.uuids[-1]
    assert box.field(session, FIELD_REVIEW_SPAN) == applied["spanId"]
    assert journal["titleOwner"] == "generated"
    assert journal["titleHash"] == content_hash(title)


def test_an_immediate_rerun_calls_no_model(box: ReviewBox) -> None:
    session = box.add_session(conversation(4))
    box.run()
    card_before = session.husk.read_bytes()
    reviewer = RecordingReviewer()

    summary = box.run(reviewer)

    assert reviewer.calls == []
    assert summary.reviewed == 0
    assert summary.below_threshold == 1
    assert session.husk.read_bytes() == card_before
    assert box.plan().discovery.qualified == []


def test_growth_sends_only_the_new_span_and_the_previous_account(box: ReviewBox) -> None:
    session = box.add_session(conversation(4, topic="alpha"))
    box.run()
    account = box.field(session, FIELD_EVIDENCE)
    title = box.field(session, FIELD_TITLE)
    box.append(
        session, conversation(3, opening="Now the budget for lodging " + FILLER, topic="beta")
    )
    reviewer = RecordingReviewer()

    summary = box.run(reviewer)

    assert summary.reviewed == 1
    assert summary.bootstrapped == 0
    [args] = reviewer.calls
    assert args.bootstrap is False
    assert args.current_account == account
    assert args.current_title == title
    assert "beta" in args.span
    assert "alpha" not in args.span
    assert "Can you plan a road trip" not in args.span


def test_a_hand_edited_title_survives_later_reviews(box: ReviewBox) -> None:
    session = box.add_session(conversation(4))
    box.run()
    text = session.husk.read_text(encoding="utf-8")
    generated = box.field(session, FIELD_TITLE)
    assert generated is not None
    session.husk.write_text(text.replace(generated, "Summer trip, my notes"), encoding="utf-8")
    box.append(session, conversation(3, topic="more"))

    summary = box.run(RecordingReviewer(lambda _args: fixed_output("A new title", "Trip.", [])))

    assert summary.reviewed == 1
    assert box.field(session, FIELD_TITLE) == "Summer trip, my notes"
    assert box.state()["sessions"][session.session_id]["titleOwner"] == "manual"


def test_a_title_edited_by_hand_while_the_reviewer_works_wins(box: ReviewBox) -> None:
    # The run read the card before calling the reviewer; the write must see the card
    # as it is when written, not as it was read (the card is read again when changed).
    session = box.add_session(conversation(4))
    snippet = box.field(session, FIELD_TITLE)
    assert snippet is not None

    def edit_by_hand(_args: ReviewArgs) -> None:
        text = session.husk.read_text(encoding="utf-8")
        session.husk.write_text(text.replace(snippet, "Mine, by hand"), encoding="utf-8")

    summary = box.run(
        RecordingReviewer(lambda _args: fixed_output("A new title", "Trip.", []), edit_by_hand)
    )

    assert summary.reviewed == 1
    assert box.field(session, FIELD_TITLE) == "Mine, by hand"
    assert box.field(session, FIELD_CONTAINS) == "Trip."
    assert box.state()["sessions"][session.session_id]["titleOwner"] == "manual"


def test_a_snippet_title_is_replaced_and_another_pre_existing_title_kept(box: ReviewBox) -> None:
    snippet_husk = box.add_session(conversation(4))
    hand_titled = box.add_session(conversation(4))
    text = hand_titled.husk.read_text(encoding="utf-8")
    hand_titled.husk.write_text(
        text.replace(str(box.field(hand_titled, FIELD_TITLE)), "Keene, the July plan"),
        encoding="utf-8",
    )

    box.run(RecordingReviewer(lambda _args: fixed_output("Road trip to Keene", "Trip.", [])))

    assert box.field(snippet_husk, FIELD_TITLE) == "Road trip to Keene"
    assert box.field(hand_titled, FIELD_TITLE) == "Keene, the July plan"
    sessions = box.state()["sessions"]
    assert sessions[snippet_husk.session_id]["titleOwner"] == "generated"
    assert sessions[hand_titled.session_id]["titleOwner"] == "manual"
    assert sessions[hand_titled.session_id]["titleHash"] is None


def test_a_credential_title_is_rejected_and_the_span_not_advanced(box: ReviewBox) -> None:
    session = box.add_session(conversation(4))
    snippet = box.field(session, FIELD_TITLE)
    key = "sk-" + "a1B2c3D4e5F6g7H8i9J0k1L2"
    output = fixed_output(
        f"Deploy with {key}", "Mail bob@example.com about the July trip to Keene.", []
    )

    summary = box.run(RecordingReviewer(lambda _args: output))

    assert summary.rejected == [f"{session.session_id}:title"]
    assert summary.reviewed == 0
    assert box.field(session, FIELD_TITLE) == snippet
    assert box.field(session, FIELD_CONTAINS) == output["contains"]
    assert box.field(session, FIELD_REVIEW_SPAN) is None
    journal = box.state()["sessions"][session.session_id]
    assert journal["applied"] == {}
    assert journal["attempts"] == 1
    assert key not in session.husk.read_text(encoding="utf-8")


class _Crash(BaseException):
    """Stands for the process dying: not an error the run may contain."""


def test_a_crash_between_card_write_and_state_save_is_recognised(
    box: ReviewBox, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = box.add_session(conversation(4))

    def crash(self: ReviewStateFile, state: object) -> None:
        raise _Crash

    with monkeypatch.context() as patch:
        patch.setattr(ReviewStateFile, "save", crash)
        with pytest.raises(_Crash):
            box.run()
    written = session.husk.read_bytes()
    assert box.field(session, FIELD_REVIEW_SPAN) is not None
    assert box.state()["sessions"] == {}
    reviewer = RecordingReviewer()

    summary = box.run(reviewer)

    assert reviewer.calls == []
    assert summary.already_applied == 1
    assert session.husk.read_bytes() == written
    applied = box.state()["sessions"][session.session_id]["applied"][METADATA_CONSUMER]
    assert applied["spanId"] == box.field(session, FIELD_REVIEW_SPAN)


def test_reviewer_failure_twice_gives_up_until_the_span_grows(box: ReviewBox) -> None:
    session = box.add_session(conversation(4))

    def fail(_args: ReviewArgs) -> ReviewOutput:
        raise ReviewerFailure("provider overloaded")

    failing = RecordingReviewer(fail)
    first, second, third = box.run(failing), box.run(failing), box.run(failing)

    assert (first.reviewer_failures, second.reviewer_failures, third.reviewer_failures) == (1, 1, 0)
    assert third.exhausted == 1
    assert len(failing.calls) == 2
    assert box.state()["sessions"][session.session_id]["attempts"] == 2
    box.append(session, conversation(3, topic="grown"))
    working = RecordingReviewer()

    grown = box.run(working)

    assert grown.reviewed == 1
    assert len(working.calls) == 1
    assert box.state()["sessions"][session.session_id]["attempts"] == 0


def test_invalid_reviewer_output_counts_as_a_failure(box: ReviewBox) -> None:
    session = box.add_session(conversation(4))
    bad = fixed_output("x" * 81, "Too long a title.", [])

    summary = box.run(RecordingReviewer(lambda _args: bad))

    assert summary.reviewer_failures == 1
    assert box.field(session, FIELD_CONTAINS) is None


def test_max_sessions_caps_the_run_oldest_first(box: ReviewBox) -> None:
    newest = box.add_session(conversation(4), age=timedelta(hours=3))
    oldest = box.add_session(conversation(4), age=timedelta(hours=9))
    middle = box.add_session(conversation(4), age=timedelta(hours=6))
    plan = box.plan(max_sessions=2)
    assert [q.session_id for q in plan.planned] == [oldest.session_id, middle.session_id]
    assert plan.overflow == 1
    reviewer = RecordingReviewer()

    summary = box.run(reviewer, max_sessions=2)

    assert [args.session_id for args in reviewer.calls] == [oldest.session_id, middle.session_id]
    assert summary.overflow == 1
    later = RecordingReviewer()
    box.run(later, max_sessions=2)
    assert [args.session_id for args in later.calls] == [newest.session_id]


def test_a_transcript_deleted_or_appended_mid_run(box: ReviewBox) -> None:
    first = box.add_session(conversation(4), age=timedelta(hours=9))
    deleted = box.add_session(conversation(4), age=timedelta(hours=6))
    appended = box.add_session(conversation(4), age=timedelta(hours=3))

    def meddle(args: ReviewArgs) -> None:
        if args.session_id == first.session_id:
            deleted.transcript.unlink()
            box.append(appended, conversation(1, topic="late"), age=timedelta(minutes=1))

    reviewer = RecordingReviewer(before=meddle)
    summary = box.run(reviewer)

    assert [args.session_id for args in reviewer.calls] == [first.session_id]
    assert summary.reviewed == 1
    assert summary.missing_transcripts == 1
    assert summary.deferred_active == 1
    assert box.field(appended, FIELD_REVIEW_SPAN) is None


def test_a_transcript_rewritten_in_place_reads_from_the_top_and_keeps_the_account(
    box: ReviewBox,
) -> None:
    session = box.add_session(conversation(4, topic="early"))
    box.run()
    account = box.field(session, FIELD_EVIDENCE)
    assert account
    # Compaction rewrites the history in place: same uuids, other words.
    text = session.transcript.read_text(encoding="utf-8")
    session.transcript.write_text(text.replace("Answer 1 early", "Summary 1"), encoding="utf-8")
    box.append(session, conversation(2, topic="after"))
    reviewer = RecordingReviewer()
    warnings: list[str] = []

    summary = box.run(reviewer, warnings=warnings)

    assert (summary.bootstrapped, summary.rewritten, summary.reviewed) == (1, 1, 1)
    [args] = reviewer.calls
    assert args.bootstrap is True
    assert args.current_account == account
    assert any("prefix-rewritten" in warning for warning in warnings)
    new_account = box.field(session, FIELD_EVIDENCE)
    assert new_account is not None
    for line in account.split("\n"):
        assert line in new_account


def test_a_rewrite_between_discovery_and_the_review_is_read_from_the_top(
    box: ReviewBox,
) -> None:
    # The review step takes the prefix as discovery hashed it only while the file's
    # identity holds; a rewrite of the same size changes the mtime, and is caught.
    first = box.add_session(conversation(4, topic="first"), age=timedelta(hours=9))
    later = box.add_session(conversation(4, topic="early"), age=timedelta(hours=6))
    box.run()
    box.append(
        first, conversation(3, opening="More " + FILLER, topic="more"), age=timedelta(hours=2)
    )
    box.append(
        later, conversation(3, opening="Then " + FILLER, topic="after"), age=timedelta(hours=1)
    )

    def rewrite_later(args: ReviewArgs) -> None:
        if args.session_id == first.session_id:
            text = later.transcript.read_text(encoding="utf-8")
            rewritten = text.replace("Answer 1 early", "Summary 1 same")
            assert rewritten != text
            assert len(rewritten.encode()) == len(text.encode())
            later.transcript.write_text(rewritten, encoding="utf-8")
            box.set_age(later, timedelta(minutes=50))

    reviewer = RecordingReviewer(before=rewrite_later)
    warnings: list[str] = []

    summary = box.run(reviewer, warnings=warnings)

    assert [args.session_id for args in reviewer.calls] == [first.session_id, later.session_id]
    assert [args.bootstrap for args in reviewer.calls] == [False, True]
    assert (summary.reviewed, summary.rewritten) == (2, 1)
    assert any(later.session_id in w and "prefix-rewritten" in w for w in warnings)


def test_a_run_hashes_a_grown_transcripts_prefix_once(
    box: ReviewBox, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = box.add_session(conversation(40, topic="alpha"))
    box.run()
    before = session.transcript.stat().st_size
    box.append(session, conversation(3, opening="Now " + FILLER, topic="beta"))
    after = session.transcript.stat().st_size
    hashed: list[int] = []
    real_hash_on = walk.hash_on

    def counting_hash_on(
        hashed_so_far: walk.Blake2b, path: Path, start: int, stop: int, block_size: int = 1 << 20
    ) -> walk.Blake2b | None:
        hashed.append(stop - start)
        return real_hash_on(hashed_so_far, path, start, stop, block_size)

    monkeypatch.setattr(walk, "hash_on", counting_hash_on)
    monkeypatch.setattr(discovery, "hash_on", counting_hash_on)

    summary = box.run()

    assert summary.reviewed == 1
    # The prefix once (discovery's resume point); the appended bytes twice (the
    # growth marks of discovery and of the review step, each going on from it).
    assert sum(hashed) == before + 2 * (after - before)
    assert box.plan().discovery.transcript_bytes_read == 0


def test_the_growth_marks_a_resumed_run_records_hold_for_the_next_status(box: ReviewBox) -> None:
    # Those marks are digests gone on from the resume point: right, the next status
    # counts on from them and reads only what was appended since.
    session = box.add_session(conversation(40, topic="alpha"))
    box.run()
    for topic in ("beta", "gamma"):
        box.append(session, conversation(3, opening="Now " + FILLER, topic=topic))
        assert box.run().reviewed == 1
    before = session.transcript.stat().st_size
    box.append(session, conversation(1, topic="delta"))

    found = box.plan().discovery

    assert found.transcript_bytes_read == session.transcript.stat().st_size - before


def test_growth_past_one_page_is_finished_over_several_runs(box: ReviewBox) -> None:
    turns: list[tuple[Role, str]] = [
        ("user" if n % 2 == 0 else "assistant", f"entry {n} " + "x" * 30) for n in range(12_001)
    ]
    session = box.add_session(turns)
    warnings: list[str] = []
    reviewer = RecordingReviewer()
    for _ in range(4):
        box.run(reviewer, warnings=warnings)

    applied = box.state()["sessions"][session.session_id]["applied"][METADATA_CONSUMER]
    assert applied["endIndex"] == 12_000
    assert box.plan().discovery.transcript_bytes_read == 0
    assert applied["endUuid"] == session.uuids[-1]
    assert len(reviewer.calls) == 3
    assert [args.bootstrap for args in reviewer.calls] == [True, False, False]
    assert sum("more than 5000 new entries" in warning for warning in warnings) == 2


def test_sessions_of_another_machine_are_counted_never_reviewed(box: ReviewBox) -> None:
    box.add_session(conversation(4), origin=ELSEWHERE)
    ours = box.add_session(conversation(4))
    reviewer = RecordingReviewer()

    summary = box.run(reviewer)

    assert [args.session_id for args in reviewer.calls] == [ours.session_id]
    assert summary.foreign_origin == 1


def test_per_session_errors_are_contained(box: ReviewBox) -> None:
    broken = box.add_session(conversation(4), age=timedelta(hours=9))
    fine = box.add_session(conversation(4), age=timedelta(hours=3))

    def break_card(_args: ReviewArgs) -> None:
        broken.husk.write_text("not a card")

    reviewer = RecordingReviewer(before=break_card)
    warnings: list[str] = []

    summary = box.run(reviewer, warnings=warnings)

    assert summary.session_errors == 1
    assert summary.reviewed == 1
    assert box.field(fine, FIELD_REVIEW_SPAN) is not None
    assert any(broken.session_id in warning for warning in warnings)


def test_a_second_run_is_refused_while_one_holds_the_lock(box: ReviewBox) -> None:
    box.add_session(conversation(4))
    with (
        hold_lock_group(box.root, REVIEW_LOCK_GROUP, "chat-review"),
        pytest.raises(LockHeldError, match="chat-review"),
    ):
        box.run()
    assert box.run().reviewed == 1


def test_a_qualified_session_is_scalars_only(box: ReviewBox) -> None:
    box.add_session(conversation(4))
    [qualified] = box.plan().discovery.qualified

    assert isinstance(qualified, QualifiedSession)
    assert [f.name for f in dataclasses.fields(qualified)] == [
        "session_id",
        "husk_path",
        "log_path",
        "engine",
        "mtime",
        "span_chars",
        "bootstrap",
        "snippet_title",
    ]
    for value in dataclasses.astuple(qualified):
        assert not isinstance(value, list | dict)


def test_after_a_clipped_run_status_needs_no_read_and_agrees_with_one(box: ReviewBox) -> None:
    turns: list[tuple[Role, str]] = [
        ("user" if n % 2 == 0 else "assistant", f"entry {n} " + "y" * 30) for n in range(7_001)
    ]
    box.add_session(turns)
    box.run()

    cached = box.plan()
    (box.root / ".beebox/chat-review/discovery-cache.json").unlink()
    walked = box.plan()

    assert cached.discovery.transcript_bytes_read == 0
    assert walked.discovery.transcript_bytes_read > 0
    assert cached.discovery.qualified == walked.discovery.qualified
    assert cached.discovery.qualified[0].bootstrap is None


def test_an_unchanged_box_reads_no_transcript_bytes(box: ReviewBox) -> None:
    for _ in range(3):
        box.add_session(conversation(4))
    box.add_session(conversation(1))
    box.run()

    read_husks: list[Path] = []
    real_read_husk = cards.read_husk

    def counting_read_husk(path: Path) -> HuskCard:
        read_husks.append(path)
        return real_read_husk(path)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(discovery, "read_husk", counting_read_husk)
        plan = box.plan()

    assert plan.discovery.transcript_bytes_read == 0
    assert read_husks == []
    assert plan.discovery.skipped
    grown = next(iter(box.sessions.values()))
    box.append(grown, conversation(3, topic="more"))
    assert box.plan().discovery.transcript_bytes_read > 0


def test_the_state_file_is_the_journal_shape_and_written_atomically(box: ReviewBox) -> None:
    box.add_session(conversation(4))
    box.run()
    path = box.root / ".beebox/chat-review/state.json"
    text = path.read_text(encoding="utf-8")

    assert text.endswith("}\n")
    assert '\n  "lastRunAt": "2026-08-01T12:00:00.000Z",\n' in text
    assert ReviewStateFile(box.root).load().problem is None
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".state")] == []


@pytest.mark.anyio
async def test_the_async_entry_point_runs_the_pass_in_a_thread(box: ReviewBox) -> None:
    box.add_session(conversation(4))
    summary = await review_chat_sessions(
        box.root,
        ExtractiveReviewer(),
        origin=box.origin,
        clock=lambda: box.now,
        locate=box.locate,
    )
    assert summary.reviewed == 1


def trip_review(args: ReviewArgs) -> ReviewOutput:
    """A fixed review, whatever the span."""
    return fixed_output("A trip to Keene", "Planning a road trip.", [])


def run_including_active(box: ReviewBox, reviewer: RecordingReviewer) -> RunSummary:
    """`box.run`, with the sessions active within 30 minutes included (``--now``)."""
    return run_chat_review(
        box.root,
        reviewer,
        origin=box.origin,
        clock=lambda: box.now,
        locate=box.locate,
        include_active=True,
    )


def test_including_active_sessions_reviews_them_now(box: ReviewBox) -> None:
    active = box.add_session(conversation(4), age=timedelta(minutes=5))
    # A modification time ahead of the clock (skew) is not "written by now".
    ahead = box.add_session(conversation(4), age=-timedelta(minutes=10))

    assert box.run(RecordingReviewer(trip_review)).deferred_active == 2
    reviewer = RecordingReviewer(trip_review)
    summary = run_including_active(box, reviewer)

    assert [args.session_id for args in reviewer.calls] == [active.session_id]
    assert (summary.reviewed, summary.deferred_active) == (1, 1)
    assert box.field(active, FIELD_REVIEW_SPAN) is not None
    assert box.field(ahead, FIELD_REVIEW_SPAN) is None


def test_including_active_sessions_holds_when_one_turns_active_mid_run(box: ReviewBox) -> None:
    first = box.add_session(conversation(4), age=timedelta(hours=9))
    later = box.add_session(conversation(4), age=timedelta(hours=3))

    def meddle(args: ReviewArgs) -> None:
        # Step 1 re-stats the transcript after discovery: it is active by then.
        if args.session_id == first.session_id:
            box.append(later, conversation(1, topic="late"), age=timedelta(minutes=1))

    reviewer = RecordingReviewer(trip_review, before=meddle)
    summary = run_including_active(box, reviewer)

    assert [args.session_id for args in reviewer.calls] == [first.session_id, later.session_id]
    assert (summary.reviewed, summary.deferred_active) == (2, 0)
