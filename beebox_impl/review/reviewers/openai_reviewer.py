"""The `openai` reviewer: any OpenAI-compatible endpoint through the official `openai` client.

Point it at OpenAI, or at a local llama.cpp, vLLM or Ollama server. Settings
(environment): `BBX_OPENAI_BASE_URL` (else `OPENAI_BASE_URL`, else OpenAI's
own), `OPENAI_API_KEY` (a local server usually needs none: a placeholder is
sent), and `BBX_REVIEW_MODEL` (default `DEFAULT_OPENAI_MODEL`). One chat
completion per session, asking for a JSON object; the prompt is redacted
before it is sent (`beebox_impl.review.reviewers.remote`).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, Final

from beebox_impl.review.reviewers.protocol import ReviewerFailure, ReviewerUnavailable
from beebox_impl.review.reviewers.remote import outbound_prompt, read_model_reply
from beebox_spec.review.reviewer import ReviewArgs, ReviewOutput

__all__ = ["BASE_URL_ENV", "DEFAULT_OPENAI_MODEL", "OpenAIReviewer"]

DEFAULT_OPENAI_MODEL: Final = "gpt-4o-mini"
BASE_URL_ENV: Final = "BBX_OPENAI_BASE_URL"
MODEL_ENV: Final = "BBX_REVIEW_MODEL"
# What a keyless local server is sent: the client refuses to start without some key.
_NO_KEY: Final = "no-key"


class OpenAIReviewer:
    """Reviews with a chat-completions model. `client` is an `openai.OpenAI` (or a stand-in)."""

    name: Final = "openai"
    is_local: Final = False

    def __init__(self, client: Any, model: str = DEFAULT_OPENAI_MODEL) -> None:
        self._client = client
        self.model = model

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> OpenAIReviewer:
        """A reviewer with a real client, configured from `environ`."""
        try:
            openai = importlib.import_module("openai")
        except ImportError:
            raise ReviewerUnavailable(
                "the openai reviewer needs its extra: pip install 'beebox[openai]'"
            ) from None
        base_url = environ.get(BASE_URL_ENV) or environ.get("OPENAI_BASE_URL") or None
        client = openai.OpenAI(
            api_key=environ.get("OPENAI_API_KEY") or _NO_KEY, base_url=base_url, timeout=300.0
        )
        return cls(client, environ.get(MODEL_ENV) or DEFAULT_OPENAI_MODEL)

    def review(self, args: ReviewArgs) -> ReviewOutput:
        prompt = outbound_prompt(args)
        try:
            completion = self._client.chat.completions.create(
                model=self.model,
                messages=[
                    {"role": "system", "content": prompt.system},
                    {"role": "user", "content": prompt.user},
                ],
                response_format={"type": "json_object"},
            )
        except Exception as error:
            # Any client error (connection refused, 4xx/5xx, timeout) fails this span only.
            raise ReviewerFailure(f"openai: {type(error).__name__}: {error}") from error
        choices = getattr(completion, "choices", None) or []
        # A reply without a choice says nothing.
        if not choices:
            raise ReviewerFailure("openai: the reply has no choices")
        content = getattr(getattr(choices[0], "message", None), "content", None)
        if not isinstance(content, str):
            raise ReviewerFailure("openai: the reply has no text")
        return read_model_reply(content)
