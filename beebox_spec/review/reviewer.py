"""The reviewer: what it is given, its prompts, and the schema its output must meet.

Spec sources, in `docs/sources.md` (a bare §N.M below is its anchor `facts-N-M`):
`docs/sources.md#facts-4-5` (§4.5: the reviewer) and `docs/sources.md#review-titles`
("Titles hold back; everything else doesn't").

The user prompt has four parts; the system prompt carries the title rules; the
output is checked by `validate_review_output`, a typed rejection naming the field.
A review is one tool-less request a session, its input the rendered span cut to
`beebox_spec.review.rendering.MAX_RENDERED_CHARS` and its output capped by the
reviewer: there is no turn or budget to count
**(ours, `docs/spec-decisions.md#reviewer-one-request`)**.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal, TypedDict

from beebox_spec.entries import JsonValue, is_json_object
from beebox_spec.errors import Rejection

__all__ = [
    "CONTAINS_MAX",
    "NOTES_MAX",
    "NOTE_KINDS",
    "NOTE_MAX",
    "REVIEWER_SYSTEM_PROMPT",
    "TITLE_MAX",
    "NoteKind",
    "ReviewArgs",
    "ReviewNote",
    "ReviewOutput",
    "ReviewOutputRejection",
    "build_user_prompt",
    "render_account",
    "validate_review_output",
]

# §4.5 output schema bounds.
TITLE_MAX: Final = 80
CONTAINS_MAX: Final = 200
NOTES_MAX: Final = 40
NOTE_MAX: Final = 280

NoteKind = Literal["decision", "open-thread", "follow-up", "learned"]
NOTE_KINDS: Final[tuple[NoteKind, ...]] = ("decision", "open-thread", "follow-up", "learned")
_NOTE_KIND_BY_NAME: Final[dict[str, NoteKind]] = {kind: kind for kind in NOTE_KINDS}


class ReviewNote(TypedDict):
    """One item of the running account."""

    kind: NoteKind
    text: str


class ReviewOutput(TypedDict):
    """What a reviewer returns: `title` "" keeps the existing one; `notes` is the FULL account."""

    title: str
    contains: str
    notes: list[ReviewNote]


class ReviewOutputRejection(Rejection):
    """A reviewer's output breaks the §4.5 schema; `field` says where (e.g. `notes[2].kind`)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"review output {field}: {problem}")
        self.field = field
        self.problem = problem


def _string_field(value: JsonValue, field: str, min_len: int, max_len: int) -> str:
    # The field must be a string.
    if not isinstance(value, str):
        raise ReviewOutputRejection(field, "must be a string")
    # Too short: an empty `contains` or note says nothing.
    if len(value) < min_len:
        raise ReviewOutputRejection(field, f"must be at least {min_len} characters")
    # Too long for where it is shown.
    if len(value) > max_len:
        raise ReviewOutputRejection(field, f"must be at most {max_len} characters")
    return value


def validate_review_output(obj: JsonValue) -> ReviewOutput:
    """Check a reviewer's output against the §4.5 schema; return it with unknown keys dropped.

    `title`: a string of at most 80 characters with no "\\n" ("" keeps the
    existing title). `contains`: 1..200 characters. `notes`: a list of at most
    40 objects, each `{kind, text}` with `kind` one of `NOTE_KINDS` and `text`
    1..280 characters. The first violation raises `ReviewOutputRejection`
    naming its field. Unknown keys are dropped, as the original's zod object
    schema does. **(inference: zod's default `strip`)**
    """
    # The output must be an object.
    if not is_json_object(obj):
        raise ReviewOutputRejection("(output)", "must be an object")
    # Every field must be present.
    for field in ("title", "contains", "notes"):
        if field not in obj:
            raise ReviewOutputRejection(field, "is missing")
    title = _string_field(obj["title"], "title", 0, TITLE_MAX)
    # A title is one line.
    if "\n" in title:
        raise ReviewOutputRejection("title", "must be a single line")
    contains = _string_field(obj["contains"], "contains", 1, CONTAINS_MAX)
    raw_notes = obj["notes"]
    # The account must be a list.
    if not isinstance(raw_notes, list):
        raise ReviewOutputRejection("notes", "must be a list")
    # The account must stay short enough to read.
    if len(raw_notes) > NOTES_MAX:
        raise ReviewOutputRejection("notes", f"must have at most {NOTES_MAX} items")
    notes: list[ReviewNote] = []
    for index, raw_note in enumerate(raw_notes):
        where = f"notes[{index}]"
        # Each note must be an object.
        if not is_json_object(raw_note):
            raise ReviewOutputRejection(where, "must be an object")
        raw_kind = raw_note.get("kind")
        kind = _NOTE_KIND_BY_NAME.get(raw_kind) if isinstance(raw_kind, str) else None
        # A note's kind must be one of the four.
        if kind is None:
            raise ReviewOutputRejection(f"{where}.kind", f"must be one of {', '.join(NOTE_KINDS)}")
        text = _string_field(raw_note.get("text"), f"{where}.text", 1, NOTE_MAX)
        notes.append({"kind": kind, "text": text})
    return {"title": title, "contains": contains, "notes": notes}


def render_account(notes: Sequence[ReviewNote]) -> str:
    """The account as `contains-evidence` holds it: `- <kind>: <text>` lines ("" for none)."""
    return "\n".join(f"- {note['kind']}: {note['text']}" for note in notes)


@dataclass(frozen=True)
class ReviewArgs:
    """What the reviewer is given for one session (§4.5 `ReviewArgs`).

    `current_title` and `current_account` are the husk's fields (None when
    absent or empty); `span` is already rendered and elided; `bootstrap` is
    true when the span is the conversation read from the top.
    """

    session_id: str
    current_title: str | None
    current_account: str | None
    span: str
    bootstrap: bool


def build_user_prompt(args: ReviewArgs) -> str:
    """The per-session prompt: the four parts of §4.5 joined by "\\n\\n"."""
    title_part = (
        "This conversation has no title yet."
        if args.current_title is None
        else f"Current title: {args.current_title}"
    )
    account_part = (
        "You have not summarized this conversation before."
        if args.current_account is None
        else f"The account you wrote last time:\n\n{args.current_account}"
    )
    span_intro = (
        "What follows is the whole conversation so far. If it is long, its middle may be elided."
        if args.bootstrap
        else "What follows is only the NEW part of the conversation since you last looked."
    )
    return "\n\n".join([title_part, account_part, span_intro, args.span])


# §4.5 and `docs/sources.md#review-titles` ("Titles hold back; everything else doesn't").
REVIEWER_SYSTEM_PROMPT: Final = """\
You read one conversation between a person (the boxholder) and their assistant, \
and you write down what it came to: a title, a one-sentence `contains`, and an \
account made of short, kinded notes.

Most of the time you are shown only the NEW part of a conversation you have \
summarized before, together with the account you wrote last time. Extend that \
account rather than starting over: carry forward the notes that still hold, \
revise the ones the new material changes, drop the ones that are settled and no \
longer worth keeping, and add what is new. The earlier conversation is not in \
front of you; your previous account is the only record of it. Return the whole \
updated account, not just the changes.

Report only what the conversation shows. Do not invent anything. An empty list \
of notes is a normal result for a routine conversation.

## contains and the account: explicit and specific

`contains` is one sentence saying what can be found in this conversation. Each \
note is one line of one kind: decision (something settled), open-thread \
(something raised and still open), follow-up (something someone meant to do) or \
learned (something lasting about the boxholder, their situation or their \
preferences). Both are the lasting record of a conversation whose transcript \
will be deleted, so make them as explicit and specific as they need to be: \
names, amounts, dates, the actual property, the actual question, what was \
decided. Whatever you leave out is lost. The restraint described below for \
titles does not apply here.

## The title: the one place to hold back

Titles are shown in lists, and lists get read in places the conversation never \
anticipated: on a shared screen, over someone's shoulder, in a screenshot. So \
the test is not "is this private?" but: would the boxholder wince if someone \
nearby read this title?

- Names, places, dates, figures and other specifics are fine; they are what \
makes a title findable again. "Road trip to Keene, July 8-11" and "Indigo's \
custodial account paperwork" are good titles. Do not strip them out.
- Avoid the wince: health problems, money trouble, conflict with a named \
person, anything intimate, anything that reflects badly on someone or reveals \
a judgement about them.
- When a conversation genuinely is about one of those, name the shape rather \
than the sting: enough to find it again, not enough to embarrass anyone who \
reads it cold.
- Most conversations need none of this. Give them a clear, specific title.

A title is also a human-readable label, not a data dump: no email addresses, \
URLs, ids or long numbers. They are not secret, but in a list they read as noise \
and crowd out the words that help someone recognise the conversation; if such a \
detail matters, put it in `contains` or the account.

Keep the title to one line of at most 80 characters. Return an empty title when \
the current title still fits the conversation, so titles do not churn from one \
night to the next.

Use no tools. Work only from the text you are given.
"""
