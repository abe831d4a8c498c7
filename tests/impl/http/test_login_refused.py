"""A wrong login token: a page for a browser, the JSON error for an API client (issue 34)."""

from __future__ import annotations

from pathlib import Path

import pytest

from beebox_impl.web import CONTENT_SECURITY_POLICY
from tests.impl.http.support import served_box

pytestmark = pytest.mark.anyio

# What Chromium sends when it opens an address.
BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


async def test_a_browser_with_a_wrong_token_gets_a_page(tmp_path: Path) -> None:
    async with served_box(tmp_path) as (_, client, _):
        refused = await client.call(
            "GET", "/?token=nope", auth=False, headers={"Accept": BROWSER_ACCEPT}
        )
        assert refused.status == 401
        assert refused.headers["content-type"] == "text/html; charset=utf-8"
        assert refused.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert "set-cookie" not in refused.headers
        page = refused.body.decode("utf-8")
        assert "That token is not this box's" in page
        assert "bbx serve" in page
        assert ".beebox/token" in page
        assert "nope" not in page


@pytest.mark.parametrize("accept", [None, "application/json", "*/*"])
async def test_an_api_client_with_a_wrong_token_gets_the_json_error(
    tmp_path: Path, accept: str | None
) -> None:
    headers = {} if accept is None else {"Accept": accept}
    async with served_box(tmp_path) as (_, client, _):
        refused = await client.call("GET", "/?token=nope", auth=False, headers=headers)
        assert (refused.status, refused.json()) == (401, {"error": "Unauthorized"})


async def test_the_api_answers_json_to_a_browser_too(tmp_path: Path) -> None:
    async with served_box(tmp_path) as (_, client, _):
        for path in ("/api/chat/bootstrap", "/api/events", "/api/nowhere"):
            refused = await client.call("GET", path, auth=False, headers={"Accept": BROWSER_ACCEPT})
            assert (refused.status, refused.json()) == (401, {"error": "Unauthorized"})
            assert refused.headers["content-type"].startswith("application/json")
