"""Review spans leave the machine redacted (issue 9 §4), end to end through a review run.

`tests/impl/review/test_reviewers.py` holds each remote reviewer to redacting
the prompt it is given. Here the whole run is: a box whose transcript carries
one of each credential shape the scan knows — in the user's turns and in the
assistant's, in the first page and in later growth — is reviewed by the OpenAI
backend pointed at a capturing OpenAI-compatible server on 127.0.0.1, twice
(the second run sends the grown span and the previous account). Nothing the
server received holds any of the secrets; the card written holds none either.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from beebox_impl.review.reviewers import reviewer_by_name
from beebox_spec.review.leak_scan import REDACTED_CREDENTIAL
from tests.impl.review.boxes import FILLER, ReviewBox, Role, conversation

# One of each shape (assembled here so no scanner flags this file).
SECRETS = (
    "sk-" + "proj-" + "Q7w" * 9,
    "AIza" + "Sy" + "B" * 33,
    "ghp_" + "a1B2" * 6,
    "xoxb-" + "1234-5678-abcdEFGH",
    "eyJ" + "hbGciOiJIUzI1" + "." + "eyJzdWIiOiIxMjM0" + "." + "SflKxwRJSMeKKF2QT4",
    "0123456789abcdef" * 3,
)


@pytest.fixture
def provider() -> Iterator[list[dict[str, Any]]]:
    captured: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            captured.append({"path": self.path, "body": body.decode("utf-8")})
            answer = {"title": "", "contains": "A trip is planned.", "notes": []}
            payload = json.dumps(
                {
                    "id": "c1",
                    "object": "chat.completion",
                    "created": 0,
                    "model": "local",
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": json.dumps(answer)},
                        }
                    ],
                }
            ).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    captured.append({"url": f"http://127.0.0.1:{server.server_address[1]}/v1"})
    try:
        yield captured
    finally:
        server.shutdown()
        server.server_close()


def test_no_credential_shape_reaches_a_remote_reviewer(
    tmp_path: Path, provider: list[dict[str, Any]]
) -> None:
    url = provider.pop(0)["url"]
    box = ReviewBox.create(tmp_path)
    turns = conversation(4)
    # Secrets in both voices, mid-sentence, in the first span.
    turns[1] = ("assistant", f"Use the key {SECRETS[0]} and {SECRETS[1]}. " + FILLER * 12)
    turns[2] = ("user", f"My token is {SECRETS[2]}, slack {SECRETS[3]}. " + FILLER * 3)
    session = box.add_session(turns)
    reviewer = reviewer_by_name("openai", {"BBX_OPENAI_BASE_URL": url, "BBX_REVIEW_MODEL": "local"})
    first = box.run(reviewer)
    assert first.reviewed == 1
    # Growth: more secrets in the new span; the previous account goes out with it.
    grown: list[tuple[Role, str]] = [
        ("user", f"Session cookie {SECRETS[4]} and hash {SECRETS[5]}. " + FILLER * 3),
        ("assistant", "Noted. " + FILLER * 12),
    ] * 3
    box.append(session, grown)
    box.run(reviewer)
    bodies = [request["body"] for request in provider]
    assert len(bodies) >= 2
    for body in bodies:
        for secret in SECRETS:
            assert secret not in body
            assert json.dumps(secret)[1:-1] not in body
    assert any(
        REDACTED_CREDENTIAL in json.loads(body)["messages"][-1]["content"] for body in bodies
    )
    card = session.husk.read_text(encoding="utf-8")
    assert not any(secret in card for secret in SECRETS)
