"""The package's log, with `logging` imported only when a message has a reader.

A transcript read says nothing as a rule, and importing `logging` took ~4 ms of a
`bbx chat history` of ~60 (issue 38). So the modules of the read path
(`beebox_impl.transcript`) say their messages through these functions, and never
import `logging` themselves:

- `debug` drops a message while `logging` has not been imported: then no handler
  and no level has been set anywhere, and the message would be dropped anyway;
- `logger` imports it, for a warning (which reaches `logging.lastResort` even
  where no one configured logging).

Their messages are the same records on the same loggers: a host's handlers on
``beebox_impl`` see them as before.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import logging

__all__ = ["debug", "logger"]


def logger(name: str) -> logging.Logger:
    """`logging.getLogger(name)`, importing `logging` if no one has yet."""
    import logging  # noqa: PLC0415 - the point of this module

    return logging.getLogger(name)


def debug(name: str, message: str, *args: object) -> None:
    """``logger(name).debug(message, *args)`` where `logging` is in use; else nothing."""
    if "logging" in sys.modules:
        logger(name).debug(message, *args)
