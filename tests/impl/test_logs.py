"""`beebox_impl.logs`: the read path's messages, without importing `logging` for none."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from beebox_impl.logs import debug, logger


def test_a_debug_line_reaches_the_hosts_handlers(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="beebox_impl.transcript"):
        debug("beebox_impl.transcript.index", "indexed %s: %d lines", "chat.jsonl", 3)
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        ("beebox_impl.transcript.index", logging.DEBUG, "indexed chat.jsonl: 3 lines")
    ]


def test_a_warning_is_said_where_no_one_set_logging_up() -> None:
    # `logger` imports logging, whose last resort says a warning on stderr.
    said = (
        "import sys; from beebox_impl.logs import debug, logger;"
        " debug('beebox_impl.x', 'unread'); print('logging' in sys.modules, flush=True);"
        " logger('beebox_impl.x').warning('could not %s', 'shelve')"
    )
    done = subprocess.run([sys.executable, "-c", said], capture_output=True, text=True, check=True)
    assert done.stdout == "False\n"
    assert done.stderr == "could not shelve\n"


def test_it_is_the_packages_logger() -> None:
    assert logger("beebox_impl.transcript.persist") is logging.getLogger(
        "beebox_impl.transcript.persist"
    )
