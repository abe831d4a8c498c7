"""Where a box's transcripts live: Claude Code's projects layout.

`docs/design.md#design-3` and `docs/sources.md#format-1` (§1): the engine writes a
session's transcript to ``<projects root>/<encoded box path>/<sessionId>.jsonl``. The
projects root is where Claude Code itself writes: ``$CLAUDE_CONFIG_DIR/projects``
when that is set, else ``~/.claude/projects``; ``BBX_CLAUDE_PROJECTS_DIR`` overrides
both (tests and hosts point it elsewhere). The offline echo engine files its
made-up transcripts inside the box instead, under ``.beebox/projects`` in the same
layout (`box_projects_root`): in Claude Code's folder they would show in its own
session list. So a box's transcripts are looked for under every root it may have
written to (`transcript_roots`), the first holding the session's file winning
(`locate_transcript`); session ids are UUIDs, one file each. The encoded path is the box's
canonical absolute path (symlinks resolved, Unicode NFC) with every character
other than an ASCII letter or digit replaced by ``-``.

Paths longer than `MAX_ENCODED_LENGTH` are where the writers disagree: the CLI and
the SDKs both keep the first 200 characters and append ``-`` and a hash of the
path, but not the same hash. So a long path is found by its 200-character prefix
— the folder whose name starts with it — never by recomputing a hash.

A sub-agent (the work a Task or Agent call starts) has a transcript of its own,
beside the session's: ``<sessionId>/subagents/agent-<agentId>.jsonl``, or deeper
under ``subagents`` (``subagents/workflows/<runId>/agent-<agentId>.jsonl``), as
Claude Code 2.x files them (`docs/sources.md#format-1`). `locate_sub_agent_transcript`
finds it there and nowhere else: the direct path first, then the first match in
name order at most `MAX_SUB_AGENT_DEPTH` folders down, never through a link.

The transcript is never ours to rewrite: this module only says where to read.
A session id, and an agent id, is checked against the media-reference id grammar
first, so a hostile id can never name a path outside the projects folder.
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from collections.abc import Iterator, Mapping
from pathlib import Path

from beebox_impl.layout import state_dir
from beebox_spec.errors import Rejection
from beebox_spec.media import SAFE_ID_RE

__all__ = [
    "CLAUDE_CONFIG_DIR_ENV",
    "MAX_ENCODED_LENGTH",
    "MAX_SUB_AGENT_DEPTH",
    "PROJECTS_DIR_ENV",
    "InvalidAgentId",
    "InvalidSessionId",
    "box_projects_root",
    "claude_projects_root",
    "encode_project_dir",
    "locate_sub_agent_transcript",
    "locate_transcript",
    "locate_transcript_named",
    "project_dir",
    "projects_root",
    "sub_agent_transcripts",
    "transcript_in",
    "transcript_path",
    "transcript_roots",
]

PROJECTS_DIR_ENV = "BBX_CLAUDE_PROJECTS_DIR"
# Claude Code's own config folder; it files transcripts under its `projects/`.
CLAUDE_CONFIG_DIR_ENV = "CLAUDE_CONFIG_DIR"
# `docs/sources.md#format-1`: longer encoded names are cut here and given a hash suffix.
MAX_ENCODED_LENGTH = 200

_NOT_ALPHANUMERIC = re.compile(r"[^A-Za-z0-9]")


# How many folders below `<sessionId>/subagents` a sub-agent's transcript may sit
# (Claude Code's workflows put it two down).
MAX_SUB_AGENT_DEPTH = 4


class InvalidSessionId(Rejection):
    """A session id that is not 1–64 ASCII letters, digits, ``_`` or ``-``."""


class InvalidAgentId(Rejection):
    """An agent id that is not 1–64 ASCII letters, digits, ``_`` or ``-``."""


def projects_root(environ: Mapping[str, str], home: Path) -> Path:
    """The folder holding every project's transcripts.

    ``BBX_CLAUDE_PROJECTS_DIR`` when set; else the ``projects`` folder of Claude
    Code's ``CLAUDE_CONFIG_DIR`` when that is set; else ``~/.claude/projects``.
    """
    configured = environ.get(PROJECTS_DIR_ENV, "")
    if configured:
        return Path(configured).expanduser()
    return claude_projects_root(environ, home)


def claude_projects_root(environ: Mapping[str, str], home: Path) -> Path:
    """Where Claude Code run with ``environ`` and ``home`` writes its transcripts:
    ``$CLAUDE_CONFIG_DIR/projects``, else ``~/.claude/projects``."""
    config = environ.get(CLAUDE_CONFIG_DIR_ENV, "")
    if config:
        return Path(config).expanduser() / "projects"
    return home / ".claude" / "projects"


def box_projects_root(box_root: Path) -> Path:
    """The projects root inside the box, where the offline echo engine writes."""
    return state_dir(box_root) / "projects"


def transcript_roots(box_root: Path, environ: Mapping[str, str], home: Path) -> tuple[Path, ...]:
    """Every projects root the box's transcripts may be under, in lookup order.

    ``BBX_CLAUDE_PROJECTS_DIR`` alone when set (the box was told where: every
    engine writes there); else the box's own (`box_projects_root`) and then
    Claude Code's (`claude_projects_root`).
    """
    if environ.get(PROJECTS_DIR_ENV, ""):
        return (projects_root(environ, home),)
    return (box_projects_root(box_root), claude_projects_root(environ, home))


def locate_transcript(box_root: Path, session_id: str, roots: tuple[Path, ...]) -> Path:
    """The transcript of ``session_id``: under the first of ``roots`` (at least one)
    that holds it, else where the first would (`InvalidSessionId` as
    `transcript_path`). Blocking: it looks at the files."""
    return locate_transcript_named(encode_project_dir(box_root), session_id, roots)


def locate_transcript_named(encoded: str, session_id: str, roots: tuple[Path, ...]) -> Path:
    """`locate_transcript` for a box whose `encode_project_dir` is ``encoded``."""
    paths = [transcript_in(project_dir_named(encoded, root), session_id) for root in roots]
    # One place to look: nothing to choose between.
    if len(paths) == 1:
        return paths[0]
    return next((path for path in paths if path.is_file()), paths[0])


def encode_project_dir(box_root: Path) -> str:
    """The folder name Claude Code gives ``box_root`` (not cut: see `project_dir`)."""
    canonical = unicodedata.normalize("NFC", os.path.realpath(box_root))
    return _NOT_ALPHANUMERIC.sub("-", canonical)


def project_dir(box_root: Path, root: Path) -> Path:
    """The box's folder under the projects root.

    A name over `MAX_ENCODED_LENGTH` characters carries a writer-specific hash
    suffix: the first folder (in name order) whose name is the 200-character
    prefix followed by ``-`` is the one, and the prefix alone when there is none.
    """
    return project_dir_named(encode_project_dir(box_root), root)


def project_dir_named(encoded: str, root: Path) -> Path:
    """`project_dir` for a box whose `encode_project_dir` is ``encoded`` (a caller that
    resolves its box's folder once)."""
    if len(encoded) <= MAX_ENCODED_LENGTH:
        return root / encoded
    prefix = encoded[:MAX_ENCODED_LENGTH]
    try:
        names = sorted(entry.name for entry in os.scandir(root) if entry.is_dir())
    except OSError:
        names = []
    for name in names:
        if name.startswith(prefix + "-"):
            return root / name
    return root / prefix


def transcript_path(box_root: Path, session_id: str, root: Path) -> Path:
    """The transcript of ``session_id`` for the box at ``box_root``.

    Raises `InvalidSessionId` when the id could name anything but one file in the
    box's project folder.
    """
    return transcript_in(project_dir(box_root, root), session_id)


def transcript_in(project: Path, session_id: str) -> Path:
    """The transcript of ``session_id`` in the project folder ``project``
    (`InvalidSessionId` as `transcript_path`)."""
    # The id becomes a file name: only the reference grammar's safe characters.
    if SAFE_ID_RE.fullmatch(session_id) is None:
        raise InvalidSessionId(f"not a session id: {session_id!r}")
    return project / f"{session_id}.jsonl"


def locate_sub_agent_transcript(session_transcript: Path, agent_id: str) -> Path | None:
    """The transcript of sub-agent ``agent_id`` of the session whose transcript is
    ``session_transcript``, or None when the session has no such sub-agent.

    Raises `InvalidAgentId` when the id could name anything but one file name.
    Blocking: it looks at the files.
    """
    # The id becomes part of a file name: only the reference grammar's safe characters.
    if SAFE_ID_RE.fullmatch(agent_id) is None:
        raise InvalidAgentId(f"not an agent id: {agent_id!r}")
    name = f"agent-{agent_id}.jsonl"
    top = _sub_agents_folder(session_transcript)
    if top is None:
        return None
    direct = top / name
    if _is_regular_file(direct):
        return direct
    return next((path for path in _sub_agent_files(top) if path.name == name), None)


def sub_agent_transcripts(session_transcript: Path) -> list[Path]:
    """Every sub-agent transcript of the session whose transcript is
    ``session_transcript``, where `locate_sub_agent_transcript` looks, in the order it
    looks (the direct ones first). Blocking: it looks at the files."""
    top = _sub_agents_folder(session_transcript)
    return [] if top is None else list(_sub_agent_files(top))


def _sub_agents_folder(session_transcript: Path) -> Path | None:
    session_folder = session_transcript.with_suffix("")
    top = session_folder / "subagents"
    # A link on the way would lead out of the projects folder.
    if not _is_real_folder(session_folder) or not _is_real_folder(top):
        return None
    return top


def _sub_agent_files(top: Path) -> Iterator[Path]:
    # Name order, so the same tree always answers the same file; no deeper than
    # MAX_SUB_AGENT_DEPTH, never through a link.
    for folder, folders, files in os.walk(top, followlinks=False):
        depth = len(Path(folder).relative_to(top).parts)
        folders.sort()
        if depth >= MAX_SUB_AGENT_DEPTH:
            folders.clear()
        for name in sorted(files):
            if _names_a_sub_agent(name) and _is_regular_file(Path(folder) / name):
                yield Path(folder) / name


def _names_a_sub_agent(file_name: str) -> bool:
    # ``agent-<agentId>.jsonl``, its id one of the id grammar's.
    agent_id = file_name.removeprefix("agent-").removesuffix(".jsonl")
    return file_name == f"agent-{agent_id}.jsonl" and SAFE_ID_RE.fullmatch(agent_id) is not None


def _is_real_folder(path: Path) -> bool:
    # A folder itself, not a link to one.
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _is_regular_file(path: Path) -> bool:
    # A file itself, not a link, a FIFO or a device.
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False
