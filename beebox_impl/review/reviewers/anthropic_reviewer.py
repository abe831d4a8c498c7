"""The `anthropic` reviewer: Claude through the official `anthropic` client (optional extra).

Settings (environment): `ANTHROPIC_API_KEY` (read by the client), optional
`ANTHROPIC_BASE_URL`, and `BBX_REVIEW_MODEL` for the model (default
`DEFAULT_ANTHROPIC_MODEL`, the haiku §4.5 names). One tool-less
Messages API call per session; the prompt is redacted before it is sent
(`beebox_impl.review.reviewers.remote`).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, Final

from beebox_impl.review.reviewers.protocol import ReviewerFailure, ReviewerUnavailable
from beebox_impl.review.reviewers.remote import outbound_prompt, read_model_reply
from beebox_spec.review.reviewer import ReviewArgs, ReviewOutput

__all__ = ["DEFAULT_ANTHROPIC_MODEL", "MODEL_ENV", "AnthropicReviewer"]

# §4.5 names the model family "haiku"; this is its current API name.
DEFAULT_ANTHROPIC_MODEL: Final = "claude-haiku-4-5"
MODEL_ENV: Final = "BBX_REVIEW_MODEL"
# Room for a title, a sentence and 40 notes of 280 characters.
MAX_OUTPUT_TOKENS: Final = 4096


class AnthropicReviewer:
    """Reviews with Claude. `client` is an `anthropic.Anthropic` (or a test's stand-in)."""

    name: Final = "anthropic"
    is_local: Final = False

    def __init__(self, client: Any, model: str = DEFAULT_ANTHROPIC_MODEL) -> None:
        self._client = client
        self.model = model

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> AnthropicReviewer:
        """A reviewer with a real client, configured from `environ`."""
        try:
            anthropic = importlib.import_module("anthropic")
        except ImportError:
            raise ReviewerUnavailable(
                "the anthropic reviewer needs its extra: pip install 'beebox[anthropic]'"
            ) from None
        base_url = environ.get("ANTHROPIC_BASE_URL") or None
        client = anthropic.Anthropic(
            api_key=environ.get("ANTHROPIC_API_KEY") or None, base_url=base_url, timeout=120.0
        )
        return cls(client, environ.get(MODEL_ENV) or DEFAULT_ANTHROPIC_MODEL)

    def review(self, args: ReviewArgs) -> ReviewOutput:
        prompt = outbound_prompt(args)
        try:
            message = self._client.messages.create(
                model=self.model,
                max_tokens=MAX_OUTPUT_TOKENS,
                system=prompt.system,
                messages=[{"role": "user", "content": prompt.user}],
            )
        except Exception as error:
            # Any client error (network, auth, rate limit, overload) fails this span only.
            raise ReviewerFailure(f"anthropic: {type(error).__name__}: {error}") from error
        text = "".join(
            str(getattr(block, "text", ""))
            for block in getattr(message, "content", [])
            if getattr(block, "type", None) == "text"
        )
        return read_model_reply(text)
