"""Reviewers by name, and the two model backends against fake local servers (the
extractive default: `test_extractive.py`).

The model backends are driven through their official clients pointed at a
capturing HTTP server on 127.0.0.1, so the tests see exactly what would leave
the machine (and prove credential shapes never do).
"""

from __future__ import annotations

import importlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from beebox_impl.review.reviewers import ReviewerFailure, ReviewerUnavailable, reviewer_by_name
from beebox_impl.review.reviewers.remote import outbound_prompt, read_model_reply
from beebox_spec.review.leak_scan import REDACTED_CREDENTIAL, has_credential
from beebox_spec.review.reviewer import ReviewArgs, ReviewOutput

KEY = "sk-" + "proj-" + "Zx9" * 10


def test_the_outbound_prompt_redacts_every_text() -> None:
    args = ReviewArgs("s", f"title {KEY}", f"- decision: use {KEY}", f"span {KEY}", False)

    prompt = outbound_prompt(args)

    assert KEY not in prompt.user
    assert not has_credential(prompt.user)
    assert prompt.user.count(REDACTED_CREDENTIAL) == 3
    assert "would the boxholder wince" in prompt.system
    assert '"notes"' in prompt.system


@pytest.mark.parametrize(
    "reply",
    [
        '{"title": "", "contains": "A trip.", "notes": []}',
        'Here it is:\n```json\n{"title": "", "contains": "A trip.", "notes": []}\n```',
    ],
)
def test_a_model_reply_is_read_and_checked(reply: str) -> None:
    expected: ReviewOutput = {"title": "", "contains": "A trip.", "notes": []}
    assert read_model_reply(reply) == expected


@pytest.mark.parametrize(
    "reply",
    ["no json here", '{"title": 1}', '{"title": "", "contains": "", "notes": []}', "{NaN}"],
)
def test_a_bad_model_reply_is_a_failure(reply: str) -> None:
    with pytest.raises(ReviewerFailure):
        read_model_reply(reply)


@dataclass
class FakeProvider:
    """A local HTTP server that records request bodies and answers with `reply`."""

    reply: dict[str, Any]
    status: int = 200
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    fake = FakeProvider({})

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            fake.requests.append({"path": self.path, "body": json.loads(body)})
            payload = json.dumps(fake.reply).encode()
            self.send_response(fake.status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


ANSWER: ReviewOutput = {
    "title": "Road trip to Keene",
    "contains": "Planning a July trip.",
    "notes": [],
}
SECRET_ARGS = ReviewArgs("s", None, None, f"**User** (t)\nmy key is {KEY}", True)


def test_the_anthropic_reviewer_sends_a_redacted_prompt(provider: FakeProvider) -> None:
    provider.reply = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-haiku-4-5",
        "content": [{"type": "text", "text": json.dumps(ANSWER)}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    reviewer = reviewer_by_name(
        "anthropic", {"ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": provider.url}
    )

    assert reviewer.review(SECRET_ARGS) == ANSWER
    [request] = provider.requests
    assert request["path"] == "/v1/messages"
    assert request["body"]["model"] == "claude-haiku-4-5"
    sent = json.dumps(request["body"])
    assert KEY not in sent
    assert REDACTED_CREDENTIAL in sent


def test_the_openai_reviewer_talks_to_any_compatible_endpoint(provider: FakeProvider) -> None:
    provider.reply = {
        "id": "c1",
        "object": "chat.completion",
        "created": 0,
        "model": "local",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": json.dumps(ANSWER)},
            }
        ],
    }
    reviewer = reviewer_by_name(
        "openai", {"BBX_OPENAI_BASE_URL": provider.url + "/v1", "BBX_REVIEW_MODEL": "local"}
    )

    assert reviewer.review(SECRET_ARGS) == ANSWER
    [request] = provider.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["body"]["model"] == "local"
    assert request["body"]["response_format"] == {"type": "json_object"}
    assert KEY not in json.dumps(request["body"])


@pytest.mark.parametrize("name", ["anthropic", "openai"])
def test_a_provider_error_is_a_reviewer_failure(provider: FakeProvider, name: str) -> None:
    provider.status = 400
    provider.reply = {"type": "error", "error": {"type": "invalid_request_error", "message": "no"}}
    reviewer = reviewer_by_name(
        name,
        {
            "ANTHROPIC_API_KEY": "test",
            "ANTHROPIC_BASE_URL": provider.url,
            "BBX_OPENAI_BASE_URL": provider.url + "/v1",
        },
    )
    with pytest.raises(ReviewerFailure):
        reviewer.review(SECRET_ARGS)


@pytest.mark.parametrize("name", ["anthropic", "openai"])
def test_a_missing_extra_says_what_to_install(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.import_module

    def refuse(module: str, package: str | None = None) -> Any:
        if module == name:
            raise ImportError(module)
        return real(module, package)

    monkeypatch.setattr(importlib, "import_module", refuse)
    with pytest.raises(ReviewerUnavailable, match=rf"beebox\[{name}\]"):
        reviewer_by_name(name, {})


def test_an_unknown_reviewer_is_refused() -> None:
    with pytest.raises(ReviewerUnavailable, match="extractive"):
        reviewer_by_name("gpt-human", {})
