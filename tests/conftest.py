"""Shared test configuration.

Async tests run on both event loops beebox supports: the anyio pytest plugin uses
this fixture, and we name both backends explicitly rather than rely on a default.
"""

from __future__ import annotations

import pytest


@pytest.fixture(params=[pytest.param("asyncio", id="asyncio"), pytest.param("trio", id="trio")])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Every ``@pytest.mark.anyio`` test runs once on asyncio and once on trio."""
    backend: str = request.param
    return backend
