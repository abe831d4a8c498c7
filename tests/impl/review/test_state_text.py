"""`ReviewStateText` writes the spec's bytes, however the state changed since the last save."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from beebox_impl.review import store
from beebox_impl.review.store import ReviewStateText
from beebox_spec.entries import JsonObject
from beebox_spec.review import journal
from beebox_spec.review.journal import (
    ReviewState,
    SessionReviewState,
    fresh_review_state,
    serialize_review_state,
    state_after_run,
    with_session,
)
from tests.spec.test_journal import ANY_TEXT, review_states, session_states

# A run's saves: replace (or add) one session's entry, drop one, or stamp the run's end.
Change = tuple[str, str, SessionReviewState | None]
changes: st.SearchStrategy[list[Change]] = st.lists(
    st.tuples(
        st.sampled_from(["with", "drop", "run"]), ANY_TEXT, st.none() | session_states(ANY_TEXT)
    ),
    max_size=8,
)


def apply(state: ReviewState, change: Change) -> ReviewState:
    kind, session_id, session = change
    if kind == "with" and session is not None:
        return with_session(state, session_id, session)
    if kind == "drop":
        sessions = {key: value for key, value in state["sessions"].items() if key != session_id}
        return {"lastRunAt": state["lastRunAt"], "sessions": sessions}
    return state_after_run(state, session_id)


@given(review_states(ANY_TEXT), changes)
def test_every_save_is_the_spec_text(state: ReviewState, steps: list[Change]) -> None:
    text = ReviewStateText()
    assert text(state) == serialize_review_state(state)
    for change in steps:
        state = apply(state, change)
        assert text(state) == serialize_review_state(state)


def test_an_unchanged_entry_is_not_serialised_again(monkeypatch: pytest.MonkeyPatch) -> None:
    session: SessionReviewState = {
        "applied": {},
        "titleOwner": "unmanaged",
        "titleHash": None,
        "attempts": 0,
    }
    state = with_session(with_session(fresh_review_state(), "a", session), "b", {**session})
    text = ReviewStateText()
    text(state)
    serialised: list[SessionReviewState] = []
    real = journal.session_state_json

    def counting(entry: SessionReviewState) -> JsonObject:
        serialised.append(entry)
        return real(entry)

    monkeypatch.setattr(store, "session_state_json", counting)
    changed = with_session(state, "b", {**session, "attempts": 1})
    assert text(changed) == serialize_review_state(changed)
    assert serialised == [changed["sessions"]["b"]]
