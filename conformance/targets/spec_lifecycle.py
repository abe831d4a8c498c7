"""Spec handlers for `lifecycle/*` and `session/scenario` vectors."""

from __future__ import annotations

from typing import Any

from beebox_spec.lifecycle import Phase, is_busy, is_legal_transition, is_running
from conformance.scenario import run_spec_scenario
from conformance.targets import HandlerTable

__all__ = ["HANDLERS"]


def _transition(case: Any) -> dict[str, bool]:
    return {"legal": is_legal_transition(Phase(case["from"]), Phase(case["to"]))}


def _flags(case: Any) -> dict[str, bool]:
    phase = Phase(case["phase"])
    return {
        "running": is_running(phase),
        "busy": is_busy(phase, was_busy=bool(case.get("wasBusy", False))),
    }


HANDLERS: HandlerTable = {
    "lifecycle/transition": _transition,
    "lifecycle/flags": _flags,
    "session/scenario": run_spec_scenario,
}
