"""Handlers for `reconcile/*` vectors: the client-side join of the two records.

`reconcile_handlers` answers the kinds with any `Reconciler`; the spec target's
`HANDLERS` are those of `beebox_spec.reconcile` itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import beebox_spec.reconcile
from conformance.protocols import Reconciler
from conformance.targets import HandlerTable

__all__ = ["HANDLERS", "reconcile_handlers"]


def reconcile_handlers(make_reconciler: Callable[[], Reconciler]) -> HandlerTable:
    """The `reconcile/*` kinds answered by a fresh ``make_reconciler()`` each case."""

    def pending(case: Any) -> dict[str, list[str]]:
        result = make_reconciler().reconcile_pending(
            case["serverMessages"], case["pendingMessages"]
        )
        return {
            "messages": [entry["uuid"] for entry in result["messages"]],
            "pendingMessages": [entry["uuid"] for entry in result["pendingMessages"]],
        }

    def merge_accepted(case: Any) -> list[str]:
        merged = make_reconciler().merge_accepted_into_pending(
            case["pendingMessages"], case["accepted"]
        )
        return [entry["uuid"] for entry in merged]

    return {"reconcile/pending": pending, "reconcile/merge-accepted": merge_accepted}


HANDLERS: HandlerTable = reconcile_handlers(lambda: beebox_spec.reconcile)
