"""Every deliberately broken session must be caught by the stateful machines.

Each mutant (`chat_mutants`, `pool_mutants`) breaks one rule. The machine that
checks its class is run against it, on asyncio and on trio, as Hypothesis runs
it but generating only (a failure is enough; no need to shrink it), and must
fail. A mutant that passes means the machines lost their teeth for that rule.
The same hunt run on the real classes must pass: the control.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from beebox_impl.session import ChatSession, ChatSessionPool
from tests.mutants.chat_mutants import CHAT_MUTANTS
from tests.mutants.pool_mutants import POOL_MUTANTS
from tests.stateful.chat_machine import ChatSessionMachine
from tests.stateful.pool_machine import PoolMachine

# Enough examples to reach every rule's breaking interleaving (each mutant here
# falls within a few hundred, most within a few dozen); derandomized, so a mutant
# caught today is caught tomorrow.
HUNT = settings(
    max_examples=400,
    stateful_step_count=30,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
)
CONTROL = settings(HUNT, max_examples=50)
# A second hunt, over another derandomized stream of longer runs, for a mutant the
# first one missed: a full suite on two loaded cores has let two mutants through the
# first hunt that it catches alone (ParkLeavesAsksWaiting on trio, ClosingRunStreams-
# LiveText on asyncio) — the sessions' tasks interleave with the machine's steps, and
# load moves where a step lands. A mutant survives only if it survives both.
SECOND_HUNT = settings(HUNT, stateful_step_count=50)

BACKENDS = ["asyncio", "trio"]


def chat_machine_for(session: type[ChatSession], backend: str) -> type[RuleBasedStateMachine]:
    name = f"{session.__name__}On{backend.title()}"
    return type(name, (ChatSessionMachine,), {"backend": backend, "session_class": session})


def pool_machine_for(pool: type[ChatSessionPool], backend: str) -> type[RuleBasedStateMachine]:
    name = f"{pool.__name__}On{backend.title()}"
    return type(name, (PoolMachine,), {"backend": backend, "pool_class": pool})


def is_caught(machine: type[RuleBasedStateMachine], *hunts: settings) -> bool:
    """Whether any of ``hunts`` (default: `HUNT`, then `SECOND_HUNT`) finds a failure."""
    for hunt in hunts or (HUNT, SECOND_HUNT):
        try:
            run_state_machine_as_test(machine, settings=hunt)
        except Exception:
            return True
    return False


def test_there_are_at_least_five_mutants_of_each_machine() -> None:
    assert len(CHAT_MUTANTS) >= 5
    assert len(POOL_MUTANTS) >= 5


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CHAT_MUTANTS))
def test_the_chat_machine_catches(name: str, backend: str) -> None:
    assert is_caught(chat_machine_for(CHAT_MUTANTS[name], backend)), f"{name} survived"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(POOL_MUTANTS))
def test_the_pool_machine_catches(name: str, backend: str) -> None:
    assert is_caught(pool_machine_for(POOL_MUTANTS[name], backend)), f"{name} survived"


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_real_classes_pass_the_same_hunt(backend: str) -> None:
    assert not is_caught(chat_machine_for(ChatSession, backend), CONTROL)
    assert not is_caught(pool_machine_for(ChatSessionPool, backend), CONTROL)
