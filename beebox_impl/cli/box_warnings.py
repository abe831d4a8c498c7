"""The box's own logged warnings, said on stderr as `bbx` says its errors.

A module of its own so that the command line imports `logging` only where a
command may log through it: ``bbx --help``, a malformed command line, ``bbx phases`` and a
read (``chat history``, ``chat media``) end without it (`beebox_impl.cli.main`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from beebox_impl.cli.common import fail

__all__ = ["warnings_said_as_bbx"]


class _SaidAsBbx(logging.Handler):
    """A warning of the box's, said as a `bbx:` line (`fail`)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            fail(record.getMessage())
        except Exception:
            self.handleError(record)


@contextlib.contextmanager
def warnings_said_as_bbx() -> Iterator[None]:
    """For as long as the command runs: a host that calls `main` keeps its logging as
    it was."""
    package = logging.getLogger("beebox_impl")
    handler = _SaidAsBbx(logging.WARNING)
    package.addHandler(handler)
    try:
        yield
    finally:
        package.removeHandler(handler)
