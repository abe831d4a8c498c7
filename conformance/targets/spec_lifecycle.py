"""Handlers for `lifecycle/*` vectors, and the spec's `session/scenario` handler.

`lifecycle_handlers` answers the lifecycle kinds with any `LifecycleTable`; the
spec target's `HANDLERS` are those of the phase table itself (`beebox_spec.phases`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import beebox_spec.phases
from beebox_spec.phases import Phase
from conformance.protocols import LifecycleTable
from conformance.scenario import run_spec_scenario
from conformance.targets import HandlerTable

__all__ = ["HANDLERS", "lifecycle_handlers"]


def lifecycle_handlers(make_table: Callable[[], LifecycleTable]) -> HandlerTable:
    """The `lifecycle/*` kinds answered by a fresh ``make_table()`` each case."""

    def transition(case: Any) -> dict[str, bool]:
        return {"legal": make_table().is_legal_transition(Phase(case["from"]), Phase(case["to"]))}

    def flags(case: Any) -> dict[str, bool]:
        table, phase = make_table(), Phase(case["phase"])
        return {
            "running": table.is_running(phase),
            "busy": table.is_busy(phase, was_busy=bool(case.get("wasBusy", False))),
        }

    return {"lifecycle/transition": transition, "lifecycle/flags": flags}


HANDLERS: HandlerTable = {
    **lifecycle_handlers(lambda: beebox_spec.phases),
    "session/scenario": run_spec_scenario,
}
