"""One open Box a folder, and a closed Box refuses (issue 35)."""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio.to_thread
import pytest

from beebox_impl import (
    Box,
    BoxClosed,
    BoxInUse,
    BoxStateError,
    MalformedMediaRef,
    PageSlice,
    PermissionReply,
    SendRequest,
    TailSlice,
)
from tests.impl.http.support import read_address, start_serve, stop_serve

pytestmark = pytest.mark.anyio


async def test_a_second_open_of_an_open_folder_is_refused_naming_the_holder(
    tmp_path: Path,
) -> None:
    async with Box.open(tmp_path / "box", projects_root=tmp_path / "projects"):
        with pytest.raises(BoxInUse) as refused:
            async with Box.open(tmp_path / "box", projects_root=tmp_path / "projects"):
                pass
        assert refused.value.holder == f"an open Box pid {os.getpid()}"
        assert "one box folder is one open Box at a time" in str(refused.value)
    # Closed, the folder is free again.
    async with Box.open(tmp_path / "box", projects_root=tmp_path / "projects") as again:
        assert again.status()["phase"] == "idle"


async def test_a_box_served_by_another_process_is_in_use(tmp_path: Path) -> None:
    process = start_serve(tmp_path / "box", tmp_path / "projects")
    try:
        read_address(process, tmp_path / "box")
        with pytest.raises(BoxInUse, match="is open in another Box"):
            async with Box.open(tmp_path / "box", projects_root=tmp_path / "projects"):
                pass
    finally:
        code, errors = stop_serve(process)
    assert code == 0, errors


async def settled(call: Callable[[], Awaitable[object] | object]) -> object:
    """What ``call`` gives, awaited when it is awaitable."""
    result = call()
    return await result if isinstance(result, Awaitable) else result


async def test_every_method_of_a_closed_box_raises_box_closed(tmp_path: Path) -> None:
    async with Box.open(tmp_path / "box", projects_root=tmp_path / "projects") as box:
        pass
    calls: dict[str, Callable[[], Awaitable[object] | object]] = {
        "send": lambda: box.send(SendRequest("too late")),
        "history": lambda: box.history("s-1", TailSlice(1)),
        "bootstrap": lambda: box.bootstrap(window=TailSlice(1)),
        "media": lambda: box.media("s-1/u-1/0"),
        "status": box.status,
        "stop": box.stop,
        "restart": box.restart,
        "reset": box.reset,
        "subscribe": box.subscribe,
        "pending_permissions": box.pending_permissions,
        "answer_permission": lambda: box.answer_permission("p-1", PermissionReply("allow")),
        "permission_decisions": box.permission_decisions,
    }
    for name, call in calls.items():
        with pytest.raises(BoxClosed):
            await settled(call)
        assert name
    assert issubclass(BoxClosed, BoxStateError)
    # The blocking variants too, from a thread of their own.
    for blocking in (
        lambda: box.read_history("s-1", PageSlice(0, 1)),
        lambda: box.read_media("s-1/u-1/0"),
    ):
        with pytest.raises(BoxClosed):
            await anyio.to_thread.run_sync(blocking)


async def test_an_error_raised_in_the_block_comes_out_as_itself(tmp_path: Path) -> None:
    # Not wrapped in the ExceptionGroups of the box's task groups.
    with pytest.raises(MalformedMediaRef) as raised:
        async with Box.open(tmp_path / "box", projects_root=tmp_path / "projects") as box:
            await box.media("not a reference")
    assert raised.value.public_message == "Malformed media reference"
    assert raised.value.status_hint == 400


async def test_end_event_streams_ends_every_subscription(tmp_path: Path) -> None:
    async with Box.open(tmp_path / "box", projects_root=tmp_path / "projects") as box:
        with box.subscribe() as events:
            box.end_event_streams()
            with anyio.fail_after(5):
                assert [event async for event in events] == []


async def test_bbx_serve_on_a_box_a_host_holds_says_so_in_one_line(tmp_path: Path) -> None:
    async with Box.open(tmp_path / "box", projects_root=tmp_path / "projects"):
        process = await anyio.run_process(
            [sys.executable, "-m", "beebox_impl", "serve", "--box", str(tmp_path / "box")],
            check=False,
        )
    errors = process.stderr.decode()
    assert process.returncode == 1
    assert errors.startswith("bbx: cannot serve: ")
    assert "is open in another Box (an open Box pid" in errors
    assert "Traceback" not in errors
