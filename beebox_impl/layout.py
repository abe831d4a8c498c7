"""The one name every part of a box's machine-local state hangs off.

A box keeps what belongs to this machine and this running box — its token, its
database, caches, the offline engine's transcripts — in one folder, ``.beebox``,
at its root (`docs/design.md#design-3`; `beebox_impl.box` lists what is in it). Every module
that files something there asks `state_dir` rather than spelling the name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

__all__ = ["STATE_DIR_NAME", "state_dir"]

STATE_DIR_NAME: Final = ".beebox"


def state_dir(box_root: Path) -> Path:
    """The box's machine-local state folder."""
    return box_root / STATE_DIR_NAME
