"""`journal/*` and `review/*` vectors against the implementation of chat review.

`journal/prefix-hash` and `journal/resolve-span` go through the implementation's
streaming walk (`beebox_impl.review.walk`): the case's entries are served as
§4.3 pages — of a few entries, so a boundary falls mid-page and pages end
short — and the prefix hash is folded entry by entry as the walk goes.
`review/*` kinds are answered by the spec's handlers: the implementation calls
those very functions (`elide_middle`, `resolve_title_owner`, the credential
scan) and re-implements none of them — one rule, one place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from beebox_impl.review.walk import PrefixHasher, entries_from_pages, resolve_span_walk
from beebox_spec.entries import MAX_SESSION_ENTRIES, SessionEntry, SessionHistory
from beebox_spec.review.journal import JournalBoundary, ResolvedSpan
from conformance.targets import HandlerTable
from conformance.targets.spec_review import HANDLERS as SPEC_REVIEW

__all__ = ["IMPL_REVIEW_HANDLERS", "PagedSpanJournal"]

# Small pages, so the paged walk crosses page boundaries on every vector.
_PAGE_ENTRIES: Final = 2


class PagedSpanJournal:
    """The journal rules as the implementation computes them: folded, paged, streamed.

    Shaped like `beebox_spec.review.journal` (`prefix_hash`, `resolve_span`), so a
    check written against the spec module takes this object too.
    """

    def __init__(self, page_entries: int = _PAGE_ENTRIES) -> None:
        self.page_entries = page_entries

    def prefix_hash(self, entries: Sequence[SessionEntry], end_index: int, /) -> str:
        """The prefix hash through `end_index`, folded entry by entry."""
        hasher = PrefixHasher()
        for entry in entries[: end_index + 1]:
            hasher.fold(entry)
        return hasher.digest()

    def resolve_span(
        self,
        entries: Sequence[SessionEntry],
        applied: JournalBoundary | None,
        limit: int = MAX_SESSION_ENTRIES,
        /,
    ) -> ResolvedSpan:
        """The unread span, walked over §4.3 pages of `page_entries` entries."""

        def read_page(offset: int, count: int) -> SessionHistory:
            return {
                "sessionId": "conformance",
                "entries": list(entries[offset : offset + count]),
                "total": len(entries),
            }

        return resolve_span_walk(
            lambda: entries_from_pages(read_page, self.page_entries), applied, limit
        ).span


def _prefix_hash(case: Any) -> str:
    return PagedSpanJournal().prefix_hash(case["entries"], case["endIndex"])


def _resolve_span(case: Any) -> dict[str, Any]:
    span = PagedSpanJournal().resolve_span(
        case["entries"], case["applied"], case.get("limit", MAX_SESSION_ENTRIES)
    )
    return {
        "entries": [entry["uuid"] for entry in span["entries"]],
        "endIndex": span["endIndex"],
        "bootstrap": span["bootstrap"],
        "clipped": span["clipped"],
    }


IMPL_REVIEW_HANDLERS: HandlerTable = {
    "journal/prefix-hash": _prefix_hash,
    "journal/resolve-span": _resolve_span,
    "review/elide-middle": SPEC_REVIEW["review/elide-middle"],
    "review/title-owner": SPEC_REVIEW["review/title-owner"],
    "review/leak-scan": SPEC_REVIEW["review/leak-scan"],
}
