"""What a model-backed reviewer sends and how its reply is read (shared by both backends).

**Before a span leaves the machine** (`docs/design.md#design-5-leak-scan`) every
text of the prompt is passed through the spec's `redact_credentials`: the span
(already redacted by `reviewer_span_text`; redacting again changes nothing) and also
the current title and account, which come from the card and may carry a key a person
pasted.

The system prompt is the spec's `REVIEWER_SYSTEM_PROMPT` — the title rules of
`docs/sources.md#review-titles` live there, once — followed by the answer format:
one JSON object of the §4.5 schema, its bounds taken from the spec's constants. The reply
is read as JSON (a fenced block or surrounding prose is tolerated) and checked
with `validate_review_output`; anything else is a `ReviewerFailure`.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Final

from beebox_impl.review.reviewers.protocol import ReviewerFailure
from beebox_spec.js_values import UnparsableJson, parse_json_text
from beebox_spec.review.leak_scan import redact_credentials
from beebox_spec.review.reviewer import (
    CONTAINS_MAX,
    NOTE_KINDS,
    NOTE_MAX,
    NOTES_MAX,
    REVIEWER_SYSTEM_PROMPT,
    TITLE_MAX,
    ReviewArgs,
    ReviewOutput,
    ReviewOutputRejection,
    build_user_prompt,
    validate_review_output,
)

__all__ = ["ANSWER_FORMAT", "OutboundPrompt", "outbound_prompt", "read_model_reply"]

ANSWER_FORMAT: Final = f"""
## Your answer

Answer with exactly one JSON object and nothing else:
{{"title": "...", "contains": "...", "notes": [{{"kind": "...", "text": "..."}}]}}

- `title`: at most {TITLE_MAX} characters on one line, or "" to keep the current title.
- `contains`: one sentence of 1 to {CONTAINS_MAX} characters.
- `notes`: the whole updated account, at most {NOTES_MAX} notes; each `kind` is one of \
{", ".join(NOTE_KINDS)}, each `text` 1 to {NOTE_MAX} characters.
"""


class OutboundPrompt:
    """The two texts a model receives: the system prompt and the user prompt, redacted."""

    __slots__ = ("system", "user")

    def __init__(self, system: str, user: str) -> None:
        self.system = system
        self.user = user


def outbound_prompt(args: ReviewArgs) -> OutboundPrompt:
    """The prompt for `args`, every credential shape in it redacted."""
    title, account = args.current_title, args.current_account
    redacted = replace(
        args,
        current_title=None if title is None else redact_credentials(title),
        current_account=None if account is None else redact_credentials(account),
        span=redact_credentials(args.span),
    )
    return OutboundPrompt(REVIEWER_SYSTEM_PROMPT + ANSWER_FORMAT, build_user_prompt(redacted))


_FENCED = re.compile(r"```(?:json)?\s*(\{.*\})\s*```", re.DOTALL)


def read_model_reply(text: str) -> ReviewOutput:
    """The review a model wrote, checked against §4.5; `ReviewerFailure` otherwise."""
    fenced = _FENCED.search(text)
    candidate = fenced.group(1) if fenced else text
    start, end = candidate.find("{"), candidate.rfind("}")
    # No object at all in the reply.
    if start == -1 or end < start:
        raise ReviewerFailure("the model's reply holds no JSON object")
    try:
        parsed = parse_json_text(candidate[start : end + 1])
    except UnparsableJson as error:
        raise ReviewerFailure(f"the model's reply is not JSON: {error}") from None
    try:
        return validate_review_output(parsed)
    except ReviewOutputRejection as error:
        raise ReviewerFailure(str(error)) from None
