"""The chat's session-id file: ``{"sessionId": …}``, written atomically, read leniently."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from beebox_impl.store import InMemorySessionIdStore, SessionIdFile, SessionIdStore

pytestmark = pytest.mark.anyio


async def test_save_load_forget(tmp_path: Path) -> None:
    store = SessionIdFile.for_box(tmp_path)
    assert store.path == tmp_path / ".beebox" / "chat-session-id.json"
    assert await store.load() is None
    await store.save("s-1")
    assert json.loads(store.path.read_text(encoding="utf-8")) == {"sessionId": "s-1"}
    await store.save("s-2")
    assert await store.load() == "s-2"
    # The temporary file of the atomic write never stays behind.
    assert sorted(path.name for path in store.path.parent.iterdir()) == [store.path.name]
    await store.forget()
    await store.forget()
    assert await store.load() is None
    assert not store.path.exists()


@pytest.mark.parametrize(
    "content", ["", "{not json", "[]", '{"sessionId": 7}', '{"sessionId": ""}', '{"other": "x"}']
)
async def test_an_unreadable_file_reads_as_no_id(tmp_path: Path, content: str) -> None:
    store = SessionIdFile.for_box(tmp_path)
    store.path.parent.mkdir(parents=True)
    store.path.write_text(content, encoding="utf-8")
    assert await store.load() is None


async def test_the_in_memory_store_behaves_the_same() -> None:
    store: SessionIdStore = InMemorySessionIdStore()
    assert await store.load() is None
    await store.save("s-1")
    assert await store.load() == "s-1"
    await store.forget()
    assert await store.load() is None
