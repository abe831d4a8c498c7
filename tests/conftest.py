"""Shared test configuration.

Async tests run on both event loops beebox supports: the anyio pytest plugin uses
this fixture, and we name both backends explicitly rather than rely on a default.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings


@pytest.fixture(params=[pytest.param("asyncio", id="asyncio"), pytest.param("trio", id="trio")])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Every ``@pytest.mark.anyio`` test runs once on asyncio and once on trio."""
    backend: str = request.param
    return backend


# Hypothesis: no per-example deadline (machines here are shared and noisy, and a
# deadline turns a slow moment into a red run). Under CI the examples are derived
# from each test's name, so a run is repeatable; deep runs
# raise max_examples with HYPOTHESIS_PROFILE=deep (`nox -s deep`).
settings.register_profile("dev", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True)
settings.register_profile("deep", deadline=None, max_examples=5_000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
