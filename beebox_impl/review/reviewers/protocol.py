"""The one reviewer protocol, its failures, and how a reviewer is chosen by name (§4.5).

A reviewer reads `beebox_spec.review.reviewer.ReviewArgs` — the session's current
title and account, and the span as rendered, elided and redacted — and returns the
full updated `ReviewOutput`. A failure of any kind (network, provider, a reply
that is not the §4.5 schema) raises `ReviewerFailure`: the run counts it and
tries the span again next night, up to `MAX_REVIEW_ATTEMPTS`.

Backends: `extractive` (deterministic, offline, the default), `anthropic`
(Messages API) and `openai` (any OpenAI-compatible endpoint). The last two need
optional extras; asking for one without its library raises
`ReviewerUnavailable`, which says what to install.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Protocol

from beebox_spec.errors import BeeboxError
from beebox_spec.review.reviewer import ReviewArgs, ReviewOutput

__all__ = [
    "DEFAULT_REVIEWER",
    "REVIEWER_NAMES",
    "Reviewer",
    "ReviewerFailure",
    "ReviewerUnavailable",
    "reviewer_by_name",
]

REVIEWER_NAMES: Final = ("extractive", "anthropic", "openai")
DEFAULT_REVIEWER: Final = "extractive"


class Reviewer(Protocol):
    """Reads one session's new span and writes back the whole account."""

    @property
    def name(self) -> str:
        """The backend's name, as `--reviewer` spells it."""
        ...

    @property
    def is_local(self) -> bool:
        """True when nothing leaves the machine (no redaction would be needed)."""
        ...

    def review(self, args: ReviewArgs) -> ReviewOutput:
        """The updated title, contains and account; raises `ReviewerFailure`."""
        ...


class ReviewerFailure(BeeboxError):
    """The reviewer did not produce a usable review of this span."""


class ReviewerUnavailable(BeeboxError):
    """The reviewer cannot be built here (unknown name, missing extra, missing setting)."""


def reviewer_by_name(name: str, environ: Mapping[str, str]) -> Reviewer:
    """The reviewer `name` configured from `environ` (see each backend for its settings)."""
    # Imported on demand: a backend's module is loaded only when it is chosen.
    if name == "extractive":
        from beebox_impl.review.reviewers.extractive import ExtractiveReviewer  # noqa: PLC0415

        return ExtractiveReviewer()
    if name == "anthropic":
        from beebox_impl.review.reviewers.anthropic_reviewer import (  # noqa: PLC0415
            AnthropicReviewer,
        )

        return AnthropicReviewer.from_environment(environ)
    if name == "openai":
        from beebox_impl.review.reviewers.openai_reviewer import OpenAIReviewer  # noqa: PLC0415

        return OpenAIReviewer.from_environment(environ)
    raise ReviewerUnavailable(
        f"unknown reviewer {name!r}: choose one of {', '.join(REVIEWER_NAMES)}"
    )
