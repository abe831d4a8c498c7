"""Where transcripts are looked for: the projects root, the encoded box path, safe ids."""

from __future__ import annotations

from pathlib import Path

import pytest

from beebox_impl.transcript.location import (
    CLAUDE_CONFIG_DIR_ENV,
    MAX_ENCODED_LENGTH,
    PROJECTS_DIR_ENV,
    InvalidSessionId,
    encode_project_dir,
    project_dir,
    projects_root,
    transcript_path,
)


def test_projects_root_defaults_to_the_home_claude_folder(tmp_path: Path) -> None:
    assert projects_root({}, tmp_path) == tmp_path / ".claude" / "projects"
    assert projects_root({PROJECTS_DIR_ENV: ""}, tmp_path) == tmp_path / ".claude" / "projects"
    assert projects_root({PROJECTS_DIR_ENV: "/srv/projects"}, tmp_path) == Path("/srv/projects")


def test_projects_root_is_where_claude_code_writes_under_its_config_folder(tmp_path: Path) -> None:
    # Claude Code files transcripts under $CLAUDE_CONFIG_DIR/projects when that is set.
    config = {CLAUDE_CONFIG_DIR_ENV: "/srv/claude"}
    assert projects_root(config, tmp_path) == Path("/srv/claude/projects")
    assert projects_root({CLAUDE_CONFIG_DIR_ENV: ""}, tmp_path) == tmp_path / ".claude" / "projects"
    # The box's own setting still wins.
    both = {**config, PROJECTS_DIR_ENV: "/srv/projects"}
    assert projects_root(both, tmp_path) == Path("/srv/projects")


def test_every_character_but_ascii_letters_and_digits_becomes_a_dash(tmp_path: Path) -> None:
    box = tmp_path / "a.b" / "my_proj é"
    box.mkdir(parents=True)
    encoded = encode_project_dir(box)
    assert encoded.endswith("-a-b-my-proj--")
    assert set(encoded) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")


def test_symlinks_are_resolved_before_encoding(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    assert encode_project_dir(link) == encode_project_dir(real)


def test_a_long_path_is_found_by_its_prefix(tmp_path: Path) -> None:
    box = tmp_path / ("x" * 250)
    box.mkdir()
    root = tmp_path / "projects"
    root.mkdir()
    prefix = encode_project_dir(box)[:MAX_ENCODED_LENGTH]
    assert project_dir(box, root) == root / prefix, "no folder yet: the prefix alone"
    (root / f"{prefix}-k3j9x2").mkdir()
    assert project_dir(box, root) == root / f"{prefix}-k3j9x2"


def test_transcript_path(tmp_path: Path) -> None:
    root = tmp_path / "projects"
    path = transcript_path(tmp_path, "4d5611e5-241a-462a-8d15-5122611a9569", root)
    assert (
        path == root / encode_project_dir(tmp_path) / "4d5611e5-241a-462a-8d15-5122611a9569.jsonl"
    )


@pytest.mark.parametrize("session_id", ["", "../x", "a/b", ".", "a.b", "x" * 65, "é", "a\n"])
def test_a_session_id_that_could_name_another_path_is_rejected(
    tmp_path: Path, session_id: str
) -> None:
    with pytest.raises(InvalidSessionId):
        transcript_path(tmp_path, session_id, tmp_path)
