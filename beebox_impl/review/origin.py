"""Which machine a chat session ran on: the husk's `origin` and `origin-name` (§4.1, §4.2).

A machine reviews only the sessions it originated ("What qualifies"). The id is
stable per machine and is not a secret, but it lands in git-tracked cards, so the
operating system's machine id is hashed rather than copied: `BBX_MACHINE_ORIGIN`
when set (hosts and tests name the machine themselves), else the content hash of
`/etc/machine-id` (or the D-Bus copy of it), else of the host name. `origin-name`
is the host name, for people reading the card.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from beebox_spec.review.husk import content_hash

__all__ = ["ORIGIN_ENV", "MachineOrigin", "local_origin"]

ORIGIN_ENV: Final = "BBX_MACHINE_ORIGIN"
_MACHINE_ID_FILES: Final = (Path("/etc/machine-id"), Path("/var/lib/dbus/machine-id"))


@dataclass(frozen=True, slots=True)
class MachineOrigin:
    """This machine, as husks record it: `id` decides, `name` is for people."""

    id: str
    name: str


def local_origin(
    environ: Mapping[str, str], machine_id_files: tuple[Path, ...] = _MACHINE_ID_FILES
) -> MachineOrigin:
    """This machine's origin (see the module docstring for where the id comes from)."""
    name = socket.gethostname()
    configured = environ.get(ORIGIN_ENV, "").strip()
    if configured:
        return MachineOrigin(configured, name)
    for candidate in machine_id_files:
        try:
            machine_id = candidate.read_text(encoding="utf-8").strip()
        except OSError:
            continue
        if machine_id:
            return MachineOrigin(content_hash(f"beebox-origin\n{machine_id}"), name)
    # No machine id at all (a minimal container): the host name is what there is.
    return MachineOrigin(content_hash(f"beebox-origin-host\n{name}"), name)
