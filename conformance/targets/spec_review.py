"""Handlers for the chat-review kinds: the span journal, elision, title ownership, leak scan.

`journal_handlers` answers the `journal/*` kinds with any `SpanJournal`, and
`review_rule_handlers` the `review/*` kinds with any `ReviewRules`; the spec
target's `HANDLERS` are those of `beebox_spec.review.journal` and `SpecReviewRules`.
The vectors' camelCase keys are the spec's own TypedDict keys.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from beebox_spec.entries import MAX_SESSION_ENTRIES
from beebox_spec.review import husk, journal, leak_scan, rendering
from beebox_spec.review.husk import TitleOwner
from beebox_spec.review.rendering import MAX_RENDERED_CHARS
from conformance.protocols import ReviewRules, SpanJournal
from conformance.targets import HandlerTable

__all__ = ["HANDLERS", "SpecReviewRules", "journal_handlers", "review_rule_handlers"]


class SpecReviewRules:
    """The spec's `ReviewRules`, each rule taken from the module that states it."""

    elide_middle = staticmethod(rendering.elide_middle)
    resolve_title_owner = staticmethod(husk.resolve_title_owner)
    has_credential = staticmethod(leak_scan.has_credential)


def journal_handlers(make_journal: Callable[[], SpanJournal]) -> HandlerTable:
    """The `journal/*` kinds answered by a fresh ``make_journal()`` each case."""

    def prefix_hash(case: Any) -> str:
        return make_journal().prefix_hash(case["entries"], case["endIndex"])

    def resolve_span(case: Any) -> dict[str, Any]:
        span = make_journal().resolve_span(
            case["entries"], case["applied"], case.get("limit", MAX_SESSION_ENTRIES)
        )
        return {
            "entries": [entry["uuid"] for entry in span["entries"]],
            "endIndex": span["endIndex"],
            "bootstrap": span["bootstrap"],
            "clipped": span["clipped"],
        }

    return {"journal/prefix-hash": prefix_hash, "journal/resolve-span": resolve_span}


def review_rule_handlers(make_rules: Callable[[], ReviewRules]) -> HandlerTable:
    """The `review/*` kinds answered by a fresh ``make_rules()`` each case."""

    def elide_middle(case: Any) -> str:
        return make_rules().elide_middle(case["text"], case.get("max", MAX_RENDERED_CHARS))

    def title_owner(case: Any) -> TitleOwner:
        stored = case["stored"]
        return make_rules().resolve_title_owner(
            stored["titleOwner"], stored["titleHash"], case["liveTitle"], case["snippetTitle"]
        )

    def leak_scan(text: Any) -> dict[str, bool]:
        return {"credential": make_rules().has_credential(text)}

    return {
        "review/elide-middle": elide_middle,
        "review/title-owner": title_owner,
        "review/leak-scan": leak_scan,
    }


HANDLERS: HandlerTable = {
    **journal_handlers(lambda: journal),
    **review_rule_handlers(SpecReviewRules),
}
