"""Property-based API fuzzing from the served `/api/openapi.json` (Hypothesis over the document).

Every operation the document lists is called with the token and with what
Hypothesis draws from the document itself: query parameters of the documented
types and of any other text, path parameters of any text, and bodies that either
follow the documented schema or are any JSON at all. The box must never answer
5xx, must answer only a status the document lists for that operation, and its
JSON answers must follow the documented schema (the error shape included).

The event stream (``GET /api/events``) is called only with parameters it does
not take (its 400): a good request is an endless stream, covered by the e2e tests.
"""

from __future__ import annotations

import json
import os
import string
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.impl.http.support import PHOTO_BASE64
from tests.reliability.support import Served, served_box_sync

Json = Any
# 30 an operation in CI; BBX_API_FUZZ_EXAMPLES=300 for the figures in docs/reliability.md.
EXAMPLES = settings(
    max_examples=int(os.environ.get("BBX_API_FUZZ_EXAMPLES", "30")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served_box_sync(tmp_path_factory.mktemp("api-fuzz")) as served:
        yield served


@pytest.fixture(scope="module")
def document(served: Served) -> Json:
    answer = served.client.request("GET", "/api/openapi.json")
    assert answer.status == 200
    return answer.json()


def operations() -> list[tuple[str, str]]:
    # Read from the same table the server writes the document from (a route added
    # later is fuzzed too); the test then reads each one from the served document.
    from beebox_impl.http.openapi import openapi_document  # noqa: PLC0415

    paths = openapi_document()["paths"]
    assert isinstance(paths, dict)
    return [
        (path, method)
        for path, item in paths.items()
        if isinstance(item, dict) and path.startswith("/api/")
        for method in item
        if method in ("get", "head", "post", "put", "patch", "delete")
    ]


# --- from JSON Schema to strategies and checks ----------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


def from_schema(schema: Json) -> st.SearchStrategy[Json]:
    """Values that follow ``schema`` (the subset of JSON Schema the document uses)."""
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties", {})
        required = set(schema.get("required", []))
        fixed = {name: from_schema(properties[name]) for name in required}
        optional = {
            name: from_schema(sub) for name, sub in properties.items() if name not in required
        }
        return st.fixed_dictionaries(fixed, optional=optional)
    if kind == "array":
        return st.lists(from_schema(schema.get("items", {})), max_size=3)
    if kind == "string":
        if schema.get("contentEncoding") == "base64":
            return st.sampled_from([PHOTO_BASE64[:4096], "QUJD", "!!", ""])
        return st.text(
            min_size=schema.get("minLength", 0), max_size=min(schema.get("maxLength", 40), 40)
        )
    if kind == "integer":
        return st.integers(-10, 6000)
    if kind == "boolean":
        return st.booleans()
    return JSON_VALUES


def follows(value: Json, schema: Json) -> bool:
    """Does ``value`` follow ``schema`` (the same subset)?"""
    kind = schema.get("type")
    if kind == "object":
        if not isinstance(value, dict):
            return False
        if not set(schema.get("required", [])) <= set(value):
            return False
        properties = schema.get("properties", {})
        if schema.get("additionalProperties") is False and not set(value) <= set(properties):
            return False
        return all(follows(value[name], sub) for name, sub in properties.items() if name in value)
    if kind == "array":
        return isinstance(value, list) and all(
            follows(item, schema.get("items", {})) for item in value
        )
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    return True


def _parameters(operation: Json, where: str) -> list[Json]:
    return [p for p in operation.get("parameters", []) if p.get("in") == where]


@st.composite
def requests(draw: st.DrawFn, path: str, method: str, operation: Json) -> tuple[str, Any]:
    query: list[tuple[str, str]] = []
    for parameter in _parameters(operation, "query"):
        if draw(st.booleans()):
            good = from_schema(parameter["schema"]).map(str)
            query.append((parameter["name"], draw(good | st.text(max_size=12))))
    if draw(st.integers(0, 5)) == 0 or (operation.get("operationId") == "events" and not query):
        query.append((draw(st.text(string.ascii_letters, min_size=1, max_size=6)), "1"))
    concrete = path
    for parameter in _parameters(operation, "path"):
        raw = draw(
            st.sampled_from(["sess/u/0", "a/b/999", "../x/0", "s/u/1000"]) | st.text(max_size=30)
        )
        concrete = concrete.replace("{" + parameter["name"] + "}", quote(raw, safe="/%"))
    body: Any = None
    if method == "post":
        schema = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
        body = draw(from_schema(schema.get("schema", {})) | JSON_VALUES)
    target = concrete + ("?" + urlencode(query) if query else "")
    return target, body


def _checked(path: str, method: str, document: Json, served: Served, asked: Any) -> None:
    target, body = asked
    operation = document["paths"][path][method]
    options: dict[str, Any] = {"timeout": 30}
    if method == "post":
        options["body"] = json.dumps(body).encode()
        options["headers"] = {"Content-Type": "application/json"}
    answer = served.client.request(method.upper(), target, **options)
    assert answer.status < 500, (target, body, answer.status, answer.body[:300])
    documented = operation["responses"]
    assert str(answer.status) in documented, (target, answer.status, sorted(documented))
    content = documented[str(answer.status)].get("content", {})
    media_type = answer.headers.get("content-type", "").split(";")[0]
    if not content or method == "head":
        return
    if "application/json" in content:
        assert media_type == "application/json", (target, media_type)
        schema = content["application/json"].get("schema", {})
        assert follows(answer.json(), schema), (target, answer.body[:300], schema)
    elif "image/*" in content or any(kind.startswith("image/") for kind in content):
        assert media_type.startswith("image/") or media_type == "application/octet-stream"


@pytest.mark.parametrize(("path", "method"), operations())
def test_every_operation_answers_as_documented(
    path: str, method: str, served: Served, document: Json
) -> None:
    operation = document["paths"][path][method]

    @EXAMPLES
    @given(requests(path, method, operation))
    def check(asked: tuple[str, Any]) -> None:
        _checked(path, method, document, served, asked)

    check()


def test_every_documented_status_has_a_description(document: Json) -> None:
    for path, method in operations():
        for status, response in document["paths"][path][method]["responses"].items():
            assert 100 <= int(status) < 600
            assert response.get("description"), (path, method, status)
    # Nothing served under /api is left out of the document.
    assert len(operations()) >= 10
