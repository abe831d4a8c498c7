"""The async test wiring: every anyio test runs on asyncio and on trio."""

from __future__ import annotations

import anyio
import pytest
import sniffio

SEEN_BACKENDS: set[str] = set()


@pytest.mark.anyio
async def test_runs_on_the_backend_the_fixture_names(anyio_backend: str) -> None:
    await anyio.sleep(0)
    assert sniffio.current_async_library() == anyio_backend
    SEEN_BACKENDS.add(anyio_backend)


def test_both_backends_ran() -> None:
    # Runs after the parametrised test above (pytest keeps file order).
    assert {"asyncio", "trio"} == SEEN_BACKENDS
