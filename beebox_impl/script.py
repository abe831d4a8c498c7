"""The ``bbx`` script and ``python -m beebox_impl``: `bbx serve` restarted before the imports.

`bbx serve` executes its process again with glibc's per-thread caches off
(`beebox_impl.allocator.restart_for_serving`). Done from `beebox_impl.cli`, after
the box's modules are imported, every start paid those imports twice: about 0.6 s
of a 1.3 s start. This entry imports only the allocator's module before it
restarts, and hands the command to `beebox_impl.cli.main` afterwards, with the
arguments passed explicitly so that `main` does not restart the process a second
time. Any other command runs as it would from `beebox_impl.cli`, in the one
interpreter it started in: not even the allocator's module is imported for it."""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main"]


def main() -> int:
    """Run the command line of this process as `bbx`."""
    arguments = sys.argv[1:]
    if starts_a_server(arguments):
        from beebox_impl.allocator import restart_for_serving  # noqa: PLC0415

        restart_for_serving()
    # Imported after the restart, so that the process imports the box once.
    from beebox_impl.cli import main as run_command  # noqa: PLC0415

    return run_command(arguments)


def starts_a_server(arguments: Sequence[str]) -> bool:
    """Whether ``arguments`` name `bbx serve` (its only place: the first argument)."""
    return arguments[:1] == ["serve"]
