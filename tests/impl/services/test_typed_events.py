"""The box's events are what their types say (issue 35).

`BoxEvent` pairs each event name with its data's `TypedDict`; the hub's publishers
keep to the pairs only by convention (one `cast`), so this holds what a real box
publishes — a send, a turn, a photo, a stop, a failed start — to them, key by key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args, get_type_hints

import anyio
import pytest

from beebox_impl import Attachment, Box, BoxEvent, SendRequest, TurnStarted
from beebox_impl.services.box_events import BOX_EVENT_NAMES, BoxEventOf
from tests.impl.http.support import PHOTO_BYTES

pytestmark = pytest.mark.anyio


def data_types() -> dict[str, type[Any]]:
    """Each event name and its data's `TypedDict`, read off the `BoxEvent` union."""
    pairs: dict[str, type[Any]] = {}
    for member in get_args(BoxEvent):
        name_type, data_type = get_args(member)
        (name,) = get_args(name_type)
        pairs[name] = data_type
    return pairs


def test_the_names_are_the_unions_names() -> None:
    assert tuple(data_types()) == BOX_EVENT_NAMES
    assert all(get_args(member)[0] for member in get_args(BoxEvent))


def assert_is_its_type(event: BoxEventOf[Any, Any]) -> None:
    data_type = data_types()[event.name]
    hints = get_type_hints(data_type)
    assert set(event.data) == set(hints), (event.name, event.data)


async def test_what_a_box_publishes_is_what_its_types_say(tmp_path: Path) -> None:
    seen: list[BoxEvent] = []
    async with Box.open(tmp_path / "box", projects_root=tmp_path / "projects") as box:
        with box.subscribe() as events:
            outcome = await box.send(
                SendRequest("look", images=(Attachment("image/png", PHOTO_BYTES),))
            )
            assert isinstance(outcome, TurnStarted)
            async for event in events:
                seen.append(event)
                if event.name == "done":
                    break
            await box.stop()
            await anyio.sleep(0.1)
            seen.extend(events.drain_nowait())
    names = [event.name for event in seen]
    for expected in (
        "chat-user-message",
        "chat-turn",
        "session-id",
        "turn-delta",
        "message",
        "done",
    ):
        assert expected in names
    for event in seen:
        assert_is_its_type(event)
    # A host narrows by the name and reads typed data.
    texts = [event.data["text"] for event in seen if event.name == "turn-text"]
    assert texts
    assert all(isinstance(text, str) for text in texts)
