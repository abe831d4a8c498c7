"""Spec handlers for `reconcile/*` vectors: the client-side join of the two records."""

from __future__ import annotations

from typing import Any

from beebox_spec.reconcile import merge_accepted_into_pending, reconcile_pending
from conformance.targets import HandlerTable

__all__ = ["HANDLERS"]


def _pending(case: Any) -> dict[str, list[str]]:
    result = reconcile_pending(case["serverMessages"], case["pendingMessages"])
    return {
        "messages": [entry["uuid"] for entry in result["messages"]],
        "pendingMessages": [entry["uuid"] for entry in result["pendingMessages"]],
    }


def _merge_accepted(case: Any) -> list[str]:
    merged = merge_accepted_into_pending(case["pendingMessages"], case["accepted"])
    return [entry["uuid"] for entry in merged]


HANDLERS: HandlerTable = {
    "reconcile/pending": _pending,
    "reconcile/merge-accepted": _merge_accepted,
}
