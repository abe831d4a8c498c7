"""Reviewers behind one protocol: `extractive` (offline default), `anthropic`, `openai`."""

from __future__ import annotations

from beebox_impl.review.reviewers.extractive import ExtractiveReviewer
from beebox_impl.review.reviewers.protocol import (
    DEFAULT_REVIEWER,
    REVIEWER_NAMES,
    Reviewer,
    ReviewerFailure,
    ReviewerUnavailable,
    reviewer_by_name,
)

__all__ = [
    "DEFAULT_REVIEWER",
    "REVIEWER_NAMES",
    "ExtractiveReviewer",
    "Reviewer",
    "ReviewerFailure",
    "ReviewerUnavailable",
    "reviewer_by_name",
]
