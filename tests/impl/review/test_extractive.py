"""The extractive reviewer: title, `contains`, and evidence for the account.

The evidence is what the person said and what the agent added. Two rules, each
with the failure that prompted it (issue 34):

- An agent's sentence that repeats the person is not evidence again: the echo
  engine's `You said: "…"` answers once became a second copy of every note.
- A sentence that states a decision is a decision: "Decision: we will buy…" was
  once filed as a follow-up, because the follow-up wording was checked first.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import anyio
import pytest

from beebox_impl.engine import EchoEngine, StartOptions
from beebox_impl.engine.echo import describe_turn
from beebox_impl.engine.protocol import TurnContent
from beebox_impl.review.cards import ensure_chat_husk
from beebox_impl.review.reviewers import ExtractiveReviewer
from beebox_impl.review.reviewers.extractive import parse_rendered_span
from beebox_impl.review.walk import first_message_title
from beebox_impl.transcript.location import transcript_path
from beebox_spec.entries import SessionEntry
from beebox_spec.review.leak_scan import REDACTED_CREDENTIAL
from beebox_spec.review.rendering import render_entries
from beebox_spec.review.reviewer import (
    ReviewArgs,
    ReviewOutput,
    render_account,
    validate_review_output,
)
from tests.impl.review.boxes import FILLER, ReviewBox, Session


def _entry(role: str, text: str) -> SessionEntry:
    return {
        "uuid": "u",
        "type": "user" if role == "user" else "assistant",
        "timestamp": "2026-07-01T10:00:00Z",
        "content": [{"type": "text", "text": text}],
    }


TRIP = render_entries(
    [
        _entry("user", "<typed>Hi! Can you plan a road trip to keene for july 8-11?</typed>"),
        _entry(
            "assistant",
            "Sure. Keene is about four hours away. The Lakeside Inn in Keene has rooms. "
            "Email bob@example.com at https://example.com/booking for the group rate.",
        ),
        _entry("user", "Let's go with the Lakeside Inn for three nights. My budget is $900."),
        _entry("assistant", "Great, the Lakeside Inn it is. I'll draft a packing list for Keene."),
        _entry("user", "I'm not sure whether we should bring the canoe. What about parking?"),
    ]
)


def test_extractive_writes_a_specific_title_a_sentence_and_an_account() -> None:
    args = ReviewArgs("s", "Hi! Can you plan a road trip to keene for july 8-11?", None, TRIP, True)

    output = ExtractiveReviewer().review(args)

    assert validate_review_output(dict(output)) == output  # type: ignore[arg-type]
    assert output["title"] == "Plan a road trip to Keene for july 8-11"
    assert "@" not in output["title"]
    assert output["contains"].endswith(".")
    assert output["contains"].count(". ") == 0
    kinds = {note["kind"]: note["text"] for note in output["notes"]}
    assert "Lakeside Inn for three nights" in kinds["decision"]
    assert "canoe" in kinds["open-thread"] or "parking" in kinds["open-thread"]
    assert "packing list" in kinds["follow-up"]


def test_extractive_is_deterministic() -> None:
    args = ReviewArgs("s", None, None, TRIP, True)
    assert ExtractiveReviewer().review(args) == ExtractiveReviewer().review(args)


def test_extractive_extends_the_previous_account_and_keeps_the_title() -> None:
    previous = render_account(
        [
            {"kind": "open-thread", "text": "Which hotel in Keene for the three nights?"},
            {"kind": "learned", "text": "The boxholder travels with Indigo."},
        ]
    )
    span = render_entries(
        [_entry("user", "We decided on the Lakeside Inn hotel in Keene for the three nights.")]
    )

    output = ExtractiveReviewer().review(
        ReviewArgs("s", "Road trip to Keene", previous, span, False)
    )

    assert output["title"] == ""
    assert "road trip to keene" in output["contains"].lower()
    texts = [note["text"] for note in output["notes"]]
    assert "The boxholder travels with Indigo." in texts
    assert "Which hotel in Keene for the three nights?" not in texts
    assert any("Lakeside Inn" in text for text in texts)


def test_extractive_never_titles_with_a_redaction_marker() -> None:
    span = render_entries(
        [_entry("user", f"{REDACTED_CREDENTIAL} please rotate the staging deploy credentials now")]
    )
    output = ExtractiveReviewer().review(ReviewArgs("s", None, None, span, True))
    assert REDACTED_CREDENTIAL not in output["title"]
    assert "staging deploy" in output["title"].lower()


def test_a_rendered_span_reads_back_into_turns() -> None:
    turns = parse_rendered_span(TRIP + "\n\n… (5 chars of conversation elided) …\n\n")
    assert [turn.is_user for turn in turns] == [True, False, True, False, True]


def review(*turns: tuple[str, str]) -> ReviewOutput:
    """The extractive review of a conversation read from the top."""
    span = render_entries([_entry(role, text) for role, text in turns])
    return ExtractiveReviewer().review(ReviewArgs("s", None, None, span, True))


def notes_of(output: ReviewOutput) -> list[tuple[str, str]]:
    return [(note["kind"], note["text"]) for note in output["notes"]]


def kind_of(sentence: str, role: str = "user") -> str | None:
    """The kind of note one sentence makes (None: no note)."""
    notes = review((role, sentence))["notes"]
    assert len(notes) <= 1
    return notes[0]["kind"] if notes else None


# What a person says to the offline box, each a note of its own.
PERSON: tuple[tuple[str, str], ...] = (
    ("follow-up", "I'll need to order compost and mulch by friday."),
    ("decision", "Decided: we will plant tomatoes along the south fence."),
    ("open-thread", "Not sure whether the shed needs a new roof this year?"),
)
PHOTO: TurnContent = [
    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"}},
    {"type": "text", "text": "Decision: we will buy the raised beds in this photo."},
]


def echo_conversation() -> list[tuple[str, str]]:
    """The person's messages, each answered as the echo engine answers it."""
    turns: list[tuple[str, str]] = []
    messages: list[TurnContent] = [
        "Can you help me plan the garden beds for this spring?",
        *(text for _kind, text in PERSON),
        # Two sentences, and two lines: the echo quotes them all.
        "The soil test came back acidic. We will add lime in March.\nI prefer raised beds now.",
        PHOTO,
    ]
    for content in messages:
        said = content if isinstance(content, str) else str(content[1]["text"])
        turns += [("user", said), ("assistant", describe_turn(content))]
    return turns


def test_the_echo_engines_answers_are_not_evidence() -> None:
    output = review(*echo_conversation())

    assert notes_of(output) == [
        *PERSON,
        ("decision", "We will add lime in March."),
        ("learned", "I prefer raised beds now."),
        ("decision", "Decision: we will buy the raised beds in this photo."),
    ]
    # Nor is an echo what the conversation keeps returning to.
    assert "said" not in output["contains"].lower()


@pytest.mark.parametrize(
    ("person", "agent"),
    [
        # Restated with a frame of its own: no quotation marks, no "You said".
        (
            "Let's go with the Lakeside Inn for three nights.",
            "Got it, we'll go with the Lakeside Inn for three nights.",
        ),
        # Near-identical: a pronoun turned round, the words otherwise the person's.
        (
            "I'll call the Lakeside Inn about parking tomorrow morning.",
            "So you'll call the Lakeside Inn about parking tomorrow morning.",
        ),
        # The repeat of one sentence of a longer message.
        (
            "Hi there. We decided on the Lakeside Inn for three nights in July.",
            "Okay: you decided on the Lakeside Inn for three nights in July!",
        ),
    ],
)
def test_an_agent_repeating_the_person_makes_no_second_note(person: str, agent: str) -> None:
    output = review(("user", person), ("assistant", agent))

    assert [text for _kind, text in notes_of(output)] == [person.removeprefix("Hi there. ")]


def test_what_the_agent_adds_to_a_repeat_is_evidence() -> None:
    output = review(
        ("user", "Let's go with the Lakeside Inn for three nights."),
        ("assistant", "We'll go with the Lakeside Inn for three nights, and I'll book it today."),
    )

    assert notes_of(output) == [
        ("decision", "Let's go with the Lakeside Inn for three nights."),
        ("follow-up", "We'll go with the Lakeside Inn for three nights, and I'll book it today."),
    ]


@pytest.mark.parametrize(
    ("person", "agent"),
    [
        # The answer borrows a phrase of the question, not the question.
        (
            "Should we book the Lakeside Inn or the Harbor Hotel for the three nights?",
            "We decided on the Harbor Hotel for the three nights, as you asked.",
        ),
        # The person's words, but not in one piece: the agent's own stand between.
        ("The Harbor Hotel has parking.", "The Harbor Hotel, we decided, has parking."),
        # Too few content words to be anyone's in particular.
        ("Yes, I will.", "Yes, I will book the Lakeside Inn for you tonight."),
    ],
)
def test_the_persons_words_in_the_agents_own_sentence_are_no_repeat(
    person: str, agent: str
) -> None:
    output = review(("user", person), ("assistant", agent), ("user", "Thanks, that works."))

    assert [text for _kind, text in notes_of(output)] == [agent]


@pytest.mark.parametrize(
    "sentence",
    [
        "Decision: we will buy the blue sofa from Harlow's on Saturday.",
        "Decided: the blue sofa from Harlow's, delivered next week.",
        "Agreed: I'll pay the deposit for the blue sofa tomorrow.",
        "We decided to order the blue sofa tomorrow.",
        "We will buy the blue sofa from Harlow's on Saturday.",
        "We'll go with the blue sofa; I'll order it by friday.",
        "Let's go with the blue sofa and order it next week.",
        "**Decision:** the blue sofa, ordered tomorrow.",
    ],
)
@pytest.mark.parametrize("role", ["user", "assistant"])
def test_a_sentence_that_states_a_decision_is_a_decision(sentence: str, role: str) -> None:
    assert kind_of(sentence, role) == "decision"


@pytest.mark.parametrize(
    ("sentence", "kind"),
    [
        # A decision word, denied: the decision is still to be made.
        ("We haven't decided on the sofa colour yet.", "open-thread"),
        ("The sofa colour is still to be decided.", "open-thread"),
        ("We will see about the rug after the sofa arrives.", "open-thread"),
        ("The delivery from Harlow's isn't confirmed yet.", "open-thread"),
        # Doubt, before the decision wording it holds.
        ("I'm not sure we will have room for the armchair.", "open-thread"),
        # A label names the kind, whatever wording follows it.
        ("TODO: decide on the sofa colour with Sam.", "follow-up"),
        ("Open question: will we keep the old armchair?", "open-thread"),
        # Without a decision, a plan with a time is a follow-up.
        ("I'll measure the den door before Saturday.", "follow-up"),
        ("We'll measure the den door tomorrow.", "follow-up"),
        # Something to do, before what it waits for.
        ("I'll figure out the delivery window with Harlow's.", "follow-up"),
        ("Still waiting for Harlow's to quote the delivery.", "open-thread"),
    ],
)
def test_the_rules_apply_in_their_order(sentence: str, kind: str) -> None:
    assert kind_of(sentence) == kind


def test_only_the_person_is_learned_about_and_the_agents_plan_still_counts() -> None:
    sentence = "I like to confirm deliveries, so I'll call Harlow's tomorrow."

    assert kind_of(sentence, "user") == "learned"
    assert kind_of(sentence, "assistant") == "follow-up"


def test_a_real_conversation() -> None:
    output = review(
        ("user", "Which hotel in Keene has free parking, the Lakeside Inn or the Harbor Hotel?"),
        (
            "assistant",
            "Only the Harbor Hotel has free parking in Keene; the Lakeside Inn charges $20 "
            "a night. So the Harbor Hotel is the better fit for three nights.",
        ),
        ("user", "Decision: we will stay at the Harbor Hotel for three nights."),
        (
            "assistant",
            "Great, we will stay at the Harbor Hotel for three nights. "
            "I booked the early check-in at 2pm so you can park before the lot fills.",
        ),
    )

    # The person's decision once (the agent's restatement is no second copy), the
    # agent's own decision, and no open thread: the question was answered.
    assert notes_of(output) == [
        ("decision", "Decision: we will stay at the Harbor Hotel for three nights."),
        ("decision", "I booked the early check-in at 2pm so you can park before the lot fills."),
    ]


# ---------------------------------------------------------------------------
# The card a review writes for a conversation with the echo engine
# ---------------------------------------------------------------------------


async def echo_session(box: ReviewBox, messages: list[TurnContent]) -> Session:
    """A session the echo engine writes into `box`, as the offline box does, and its husk."""
    engine = EchoEngine(box.projects, lambda: box.now, offload_io=False)
    run = await engine.start(StartOptions(cwd=box.root))
    stream = run.messages()
    for content in messages:
        await run.send(content)
        with anyio.fail_after(5):
            while (await stream.__anext__())["type"] != "result":
                pass
    await run.close()
    path = transcript_path(box.root, run.session_id, box.projects)
    husk = ensure_chat_husk(
        box.root,
        run.session_id,
        origin=box.origin,
        created=box.now.date(),
        title=first_message_title(path, run.session_id),
        engine="echo",
    )
    session = Session(run.session_id, path, husk)
    box.set_age(session, timedelta(hours=2))
    return session


@pytest.mark.anyio
async def test_the_card_of_an_echo_conversation_holds_only_the_persons_notes(
    tmp_path: Path,
) -> None:
    box = ReviewBox.create(tmp_path)
    # Long enough to pass the review's size threshold, echoes and all.
    messages: list[TurnContent] = [
        "Can you help me plan the garden beds for this spring? " + FILLER * 8,
        *(f"{text} {FILLER * 8}" for _kind, text in PERSON),
        PHOTO,
    ]
    session = await echo_session(box, messages)

    box.run()

    expected = [*PERSON, ("decision", "Decision: we will buy the raised beds in this photo.")]
    assert box.field(session, "contains-evidence") == "\n".join(
        f"- {kind}: {text}" for kind, text in expected
    )
