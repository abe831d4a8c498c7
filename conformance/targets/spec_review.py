"""Spec handlers for the chat-review kinds: the span journal, elision, title ownership, leak scan.

Each handler is a thin call into `beebox_spec.journal` or `beebox_spec.review`;
the vectors' camelCase keys are the spec's own TypedDict keys.
"""

from __future__ import annotations

from typing import Any

from beebox_spec.entries import MAX_SESSION_ENTRIES
from beebox_spec.journal import prefix_hash, resolve_span
from beebox_spec.review import (
    MAX_RENDERED_CHARS,
    TitleOwner,
    elide_middle,
    has_credential,
    resolve_title_owner,
)
from conformance.targets import HandlerTable

__all__ = ["HANDLERS"]


def _prefix_hash(case: Any) -> str:
    return prefix_hash(case["entries"], case["endIndex"])


def _resolve_span(case: Any) -> dict[str, Any]:
    span = resolve_span(case["entries"], case["applied"], case.get("limit", MAX_SESSION_ENTRIES))
    return {
        "entries": [entry["uuid"] for entry in span["entries"]],
        "endIndex": span["endIndex"],
        "bootstrap": span["bootstrap"],
        "clipped": span["clipped"],
    }


def _elide_middle(case: Any) -> str:
    return elide_middle(case["text"], case.get("max", MAX_RENDERED_CHARS))


def _title_owner(case: Any) -> TitleOwner:
    stored = case["stored"]
    return resolve_title_owner(
        stored["titleOwner"], stored["titleHash"], case["liveTitle"], case["snippetTitle"]
    )


def _leak_scan(text: Any) -> dict[str, bool]:
    return {"credential": has_credential(text)}


HANDLERS: HandlerTable = {
    "journal/prefix-hash": _prefix_hash,
    "journal/resolve-span": _resolve_span,
    "review/elide-middle": _elide_middle,
    "review/title-owner": _title_owner,
    "review/leak-scan": _leak_scan,
}
