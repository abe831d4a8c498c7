"""One set of send rules: `Box.send` refuses what ``POST /api/chat/send`` refuses (issue 35).

Every bad send of the HTTP vectors (`conformance/vectors/http/send.json`, a 400 with
its error) is made again in-process, as a host would make it — a `SendRequest` of
the same values — and must be refused with the same words; and a box refuses it
before recording anything.
"""

from __future__ import annotations

import base64
import binascii
import json
from pathlib import Path
from typing import Any

import pytest

from beebox_impl import Attachment, Box, InvalidRequest, SendRequest, TailSlice
from beebox_impl.services.send import parse_send_body

VECTORS = Path(__file__).resolve().parents[3] / "conformance" / "vectors" / "http" / "send.json"


def refused_sends() -> list[tuple[str, Any, str]]:
    """(case name, JSON body, the error the route answers) of every refused send."""
    cases = json.loads(VECTORS.read_text(encoding="utf-8"))["cases"]
    refused = []
    for case in cases:
        (request,) = case["input"]["requests"][:1]
        answer = case["expect"][0]
        if answer["status"] == 400 and "json" in request and "json" in answer:
            refused.append((case["name"], request["json"], answer["json"]["error"]))
    return refused


REFUSED = refused_sends()


def test_the_vectors_hold_the_bad_sends_a_host_can_make() -> None:
    names = {name for name, _, _ in REFUSED}
    assert "an empty message without photos is 400" in names
    assert "a message id over 200 characters is 400" in names
    assert "a photo of a type the box would not serve back is 400" in names


def in_process_refusal(body: Any) -> str | None:
    """What a host building a `SendRequest` of the body's values is told, or None
    when the body is not one a Python caller could write (a wrong JSON type, a
    missing field, text that is not base64: the route's alone to refuse)."""
    if not isinstance(body, dict) or set(body) - {"message", "messageId", "images"}:
        return None
    message, message_id = body.get("message"), body.get("messageId")
    if not isinstance(message, str) or not isinstance(message_id, str | None):
        return None
    images = []
    for image in body.get("images", []):
        try:
            data = base64.b64decode(image["data"], validate=True)
        except (binascii.Error, ValueError):
            return None
        images.append(Attachment(image["mediaType"], data))
    try:
        SendRequest(message, message_id, tuple(images))
    except InvalidRequest as refused:
        return str(refused)
    return "accepted"


@pytest.mark.parametrize(("name", "body", "error"), REFUSED, ids=[name for name, _, _ in REFUSED])
def test_a_send_the_route_refuses_is_refused_in_process_in_the_same_words(
    name: str, body: Any, error: str
) -> None:
    with pytest.raises(InvalidRequest) as over_http:
        parse_send_body(body)
    assert str(over_http.value) == error, name
    assert in_process_refusal(body) in (error, None), name


def test_most_refused_sends_are_ones_a_host_could_make() -> None:
    expressible = [name for name, body, _ in REFUSED if in_process_refusal(body) is not None]
    assert len(expressible) >= 5


@pytest.mark.anyio
async def test_a_box_refuses_a_bad_send_before_recording_it(tmp_path: Path) -> None:
    async with Box.open(tmp_path / "box", projects_root=tmp_path / "projects") as box:
        # A host cannot even build a send the route would refuse.
        with pytest.raises(InvalidRequest):
            await box.send(SendRequest("x", "m" * 300))
        with pytest.raises(InvalidRequest):
            await box.send(SendRequest("", images=(Attachment("image/bmp", b"BM"),)))
        with pytest.raises(InvalidRequest):
            await box.send(SendRequest(""))
        bootstrap = await box.bootstrap(window=TailSlice(5))
        assert bootstrap["pending"] == []
