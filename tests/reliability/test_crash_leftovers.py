"""A process killed mid-write leaves nothing behind once the box opens again (issue 9 §3).

Found by `bench/faults.py`: a `bbx serve` killed while it shelved a transcript
index left ``.beebox/cache/transcript-index/.<random>.idx.tmp``; the next process
never removed it (171 of 200 restarts still saw one). Opening the box now
removes such leftovers, and only those.
"""

from __future__ import annotations

from pathlib import Path

from anyio.from_thread import start_blocking_portal

from beebox_impl.box import Box, init_box


def test_opening_a_box_removes_the_index_saves_a_kill_left(tmp_path: Path) -> None:
    paths = init_box(tmp_path / "box")
    shelf = paths.state_dir / "cache" / "transcript-index"
    shelf.mkdir(parents=True)
    leftover = shelf / ".xmo3vqkj.idx.tmp"
    leftover.write_bytes(b"half an index")
    kept = [shelf / "0123456789abcdef0123456789abcdef.idx", shelf / "notes.tmp"]
    for path in kept:
        path.write_bytes(b"x")
    with (
        start_blocking_portal("asyncio") as portal,
        portal.wrap_async_context_manager(
            Box.open(paths.root, projects_root=tmp_path / "projects")
        ),
    ):
        assert not leftover.exists()
        assert all(path.exists() for path in kept)
