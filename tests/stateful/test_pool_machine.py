"""`ChatSessionPool` + `ChatThreadSession` against `beebox_spec.thread_pool`, on both loops."""

from __future__ import annotations

from hypothesis import settings

from tests.stateful.pool_machine import PoolMachine

# The profile decides the examples (HYPOTHESIS_PROFILE=deep raises them).
MACHINE_SETTINGS = settings(settings.default, stateful_step_count=30)


class PoolOnAsyncio(PoolMachine):
    backend = "asyncio"


class PoolOnTrio(PoolMachine):
    backend = "trio"


PoolOnAsyncio.TestCase.settings = MACHINE_SETTINGS
PoolOnTrio.TestCase.settings = MACHINE_SETTINGS
TestPoolOnAsyncio = PoolOnAsyncio.TestCase
TestPoolOnTrio = PoolOnTrio.TestCase
