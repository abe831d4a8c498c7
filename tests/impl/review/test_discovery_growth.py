"""Discovery counts a grown transcript on from where it stopped, and agrees with a full walk.

Each scenario grows transcripts between two `status` runs; after the second, the
facts the cache holds (turns, snippet, span size, bootstrap, where counting
stopped) and what discovery decided must equal those of a walk from the top
with no cache at all — and, where the shortcut applies, fewer bytes were read.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest

from beebox_impl.review.discovery import span_measure
from beebox_impl.review.run import ReviewPlan
from beebox_impl.review.store import CachedTranscript, DiscoveryCache
from beebox_spec.entries import MAX_SESSION_ENTRIES, SessionEntry
from beebox_spec.review.journal import span_size
from tests.impl.review.boxes import ReviewBox, Session, conversation


@pytest.fixture
def box(tmp_path: Path) -> ReviewBox:
    return ReviewBox.create(tmp_path)


def cached_facts(box: ReviewBox) -> dict[str, CachedTranscript]:
    cache = DiscoveryCache(box.root)
    return dict(cache._transcripts)


def plan_without_cache(box: ReviewBox) -> tuple[ReviewPlan, dict[str, CachedTranscript]]:
    box.root.joinpath(".beebox", "chat-review", "discovery-cache.json").unlink(missing_ok=True)
    plan = box.plan()
    return plan, cached_facts(box)


def decisions(plan: ReviewPlan) -> tuple[object, ...]:
    found = plan.discovery
    return (
        [dataclasses.astuple(session) for session in found.qualified],
        dict(found.skipped),
    )


def assert_counted_on_equals_walked(box: ReviewBox) -> tuple[int, int]:
    """Plan with the cache, then without; equal facts and decisions. Bytes each read."""
    counted = box.plan()
    counted_facts = cached_facts(box)
    walked, walked_facts = plan_without_cache(box)
    assert counted_facts == walked_facts
    assert decisions(counted) == decisions(walked)
    return counted.discovery.transcript_bytes_read, walked.discovery.transcript_bytes_read


def grow(box: ReviewBox, session: Session, exchanges: int, topic: str) -> None:
    box.append(session, conversation(exchanges, topic=topic), age=timedelta(hours=1))


def test_a_session_never_reviewed_is_counted_on(box: ReviewBox) -> None:
    session = box.add_session(conversation(3))
    box.plan()
    size_before = session.transcript.stat().st_size
    grow(box, session, 4, "later")
    read, _ = assert_counted_on_equals_walked(box)
    # Only the appended bytes were read (and the first walk's cache was used).
    assert read == session.transcript.stat().st_size - size_before


def test_a_reviewed_session_is_counted_on_night_after_night(box: ReviewBox) -> None:
    session = box.add_session(conversation(4))
    box.run()
    for night in range(3):
        size_before = session.transcript.stat().st_size
        grow(box, session, 2 + night, f"night {night}")
        read, _ = assert_counted_on_equals_walked(box)
        assert read == session.transcript.stat().st_size - size_before


def test_a_transcript_changed_before_where_counting_stopped_is_walked(box: ReviewBox) -> None:
    session = box.add_session(conversation(4))
    box.run()
    grow(box, session, 2, "more")
    box.plan()
    # Rewritten in place (same length, an early line changed), then appended to.
    text = session.transcript.read_text(encoding="utf-8")
    assert "Answer 1 " in text
    session.transcript.write_text(text.replace("Answer 1 ", "Answer X ", 1), encoding="utf-8")
    grow(box, session, 2, "after the rewrite")
    read, walked = assert_counted_on_equals_walked(box)
    # Walked from the top (and again for the rewrite), as with no cache at all.
    assert read == walked >= session.transcript.stat().st_size


def test_a_half_written_last_line_is_read_again_once_complete(box: ReviewBox) -> None:
    session = box.add_session(conversation(3))
    box.plan()
    whole = session.transcript.read_text(encoding="utf-8")
    box.append(session, conversation(2, topic="cut"))
    grown = session.transcript.read_text(encoding="utf-8")
    # The last line as it is while it is being written: no newline yet.
    session.transcript.write_text(grown[: len(grown) - 40], encoding="utf-8")
    box.set_age(session, timedelta(hours=1))
    assert_counted_on_equals_walked(box)
    session.transcript.write_text(grown, encoding="utf-8")
    box.set_age(session, timedelta(hours=1))
    assert_counted_on_equals_walked(box)
    assert session.transcript.read_text(encoding="utf-8").startswith(whole)


def test_a_span_past_a_page_stops_at_the_page(box: ReviewBox) -> None:
    session = box.add_session(conversation(MAX_SESSION_ENTRIES // 2 - 3))
    box.plan()
    grow(box, session, 6, "past the page")
    assert_counted_on_equals_walked(box)
    size_before = session.transcript.stat().st_size
    grow(box, session, 2, "and on")
    # Clipped, the span stays the page it was: only the turns are counted on.
    read, _ = assert_counted_on_equals_walked(box)
    assert read == session.transcript.stat().st_size - size_before


def test_after_a_run_clipped_at_a_page_growth_is_counted_on(box: ReviewBox) -> None:
    session = box.add_session(conversation(MAX_SESSION_ENTRIES // 2 + 40))
    summary = box.run()
    assert summary.clipped == [session.session_id]
    size_before = session.transcript.stat().st_size
    grow(box, session, 3, "after the clipped run")
    read, walked = assert_counted_on_equals_walked(box)
    assert read == session.transcript.stat().st_size - size_before < walked


def test_span_measure_is_span_size(box: ReviewBox) -> None:
    # The measure adds up rendered entries: it must be the spec's length exactly.
    entries: list[SessionEntry] = [
        {"uuid": "u", "type": "user", "timestamp": "t", "content": []},
        {
            "uuid": "a",
            "type": "assistant",
            "timestamp": "t",
            "content": [{"type": "text", "text": "one\n\n---\n\ntwo"}],
        },
        {"uuid": "b", "type": "user", "timestamp": "t", "content": [{"type": "text", "text": "x"}]},
    ]
    for end in range(len(entries) + 1):
        span = {
            "entries": entries[:end],
            "endIndex": end - 1,
            "endPrefixHash": None,
            "bootstrap": None,
            "clipped": False,
        }
        assert span_measure(entries[:end])[0] == span_size(span)  # type: ignore[arg-type]
