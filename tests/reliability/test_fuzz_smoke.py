"""The fuzz targets, briefly, in CI: each seed plus a fixed-seed batch of mutations of them.

The long coverage-guided runs are `fuzz/fuzz_<target>.py` (atheris, ≥ 10 minutes
each; `nox -s fuzz`). Here every target runs on its seed corpus (`fuzz.seeds`,
built from the tests' inputs) and on mutations drawn from `random.Random` with a
fixed seed — the same inputs every run — so a regression in any property the
targets check fails CI, without atheris installed.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from beebox_impl.http.server import HttpLimits
from fuzz.seeds import seeds
from fuzz.targets import (
    FUZZ_TOKEN,
    MACRO,
    HttpTarget,
    _Handler1,
    card,
    media_extract,
    media_ref,
    transcript,
)

# Bytes a mutation likes to put in: line ends, quotes, the macro, escapes, traversal.
TOKENS = (
    b"\n",
    b"\r",
    b"\r\n",
    b'"',
    b"\\",
    b"\x00",
    b"\xff",
    b"\xc3",
    bytes((MACRO, 0x80)),
    b'"uuid":"',
    b'"data":"',
    b"/",
    b"%2e%2e",
    b"---\n",
    b": ",
    b"{",
    b"}",
    b"Content-Length: 99999\r\n",
    b"Authorization: Bearer x\r\n",
)


def mutations(corpus: list[bytes], count: int, seed: int) -> Iterator[bytes]:
    """``count`` mutants of ``corpus``, the same ones for the same seed."""
    chooser = random.Random(seed)
    for _ in range(count):
        data = bytearray(chooser.choice(corpus))
        for _ in range(chooser.randint(1, 4)):
            where = chooser.randint(0, len(data))
            operation = chooser.randrange(6)
            if operation == 0 and data:
                data[min(where, len(data) - 1)] ^= 1 << chooser.randrange(8)
            elif operation == 1:
                data[where:where] = chooser.choice(TOKENS)
            elif operation == 2:
                del data[where : where + chooser.randint(1, 64)]
            elif operation == 3:
                data[where:where] = data[where : where + chooser.randint(1, 256)]
            elif operation == 4:
                other = chooser.choice(corpus)
                cut = chooser.randint(0, len(other))
                data[where:] = other[cut:]
            else:
                data[where:where] = bytes(chooser.randrange(256) for _ in range(4))
        yield bytes(data)


def run(target: Callable[[bytes], None], inputs: list[bytes]) -> None:
    for data in inputs:
        try:
            target(data)
        except Exception as error:
            raise AssertionError(f"fuzz input {data!r:.400}") from error


@pytest.mark.parametrize(
    ("name", "target", "count"),
    [
        ("media_ref", media_ref, 3000),
        ("media_extract", media_extract, 300),
        ("card", card, 400),
    ],
)
def test_small_targets(name: str, target: Callable[[bytes], None], count: int) -> None:
    corpus = seeds(name)
    assert corpus
    run(target, corpus)
    run(target, list(mutations(corpus, count, seed=9)))


def test_transcript_target() -> None:
    # The smallest seeds: a differential pass costs a read of the whole input.
    corpus = sorted(seeds("transcript"), key=len)[:40]
    assert corpus
    run(transcript, corpus)
    run(transcript, list(mutations(corpus, 60, seed=9)))


def test_http_target(tmp_path: Path) -> None:
    target = HttpTarget(tmp_path)
    try:
        corpus = seeds("http")
        # The seeds reach the box: a right token opens the API, a wrong one does not.
        openapi = [seed for seed in corpus if seed.startswith(b"GET /api/openapi.json ")]
        answers = [target.exchange(seed) for seed in openapi]
        assert sorted(b'"openapi"' in answer for answer in answers) == [False, True]
        run(target, corpus)
        run(target, list(mutations(corpus, 150, seed=9)))
    finally:
        target.close()


def test_http_target_client_gone_before_its_reply(tmp_path: Path) -> None:
    # Regression (found by `bench/held_objects.py --streams`): a reply left in the
    # handler's write buffer when the client had gone made the standard library's
    # `finish` raise `BrokenPipeError` from closing that buffer — a traceback on the
    # server's stderr for every such client.
    target = HttpTarget(tmp_path)
    try:
        for request in (
            b"GET /api/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n",
            b"GET /api/chat/history?tail=5 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            + FUZZ_TOKEN.encode()
            + b"\r\n\r\n",
            b"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n",
        ):
            assert target.exchange(request, hang_up=True) == b""
        # And the box still answers the next client.
        assert target.exchange(b"GET /api/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n")
    finally:
        target.close()


class _CountingSocket(socket.socket):
    """The server's side of a connection, counting its sends that timed out."""

    timeouts = 0

    def send(self, data: Any, flags: int = 0) -> int:
        try:
            return super().send(data, flags)
        except TimeoutError:
            self.timeouts += 1
            raise


def test_a_client_that_stops_reading_costs_one_write_timeout(tmp_path: Path) -> None:
    # A reply left buffered for a client that stopped reading was flushed twice more
    # as the connection closed, each flush waiting out `write_timeout` again.
    limits = HttpLimits(write_timeout=0.2, linger_seconds=0.05, sse_heartbeat_seconds=0.0)
    target = HttpTarget(tmp_path, limits)
    client, served = socket.socketpair()
    try:
        served.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        counting = _CountingSocket(fileno=served.detach())
        request = (
            b"GET /api/openapi.json HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            + FUZZ_TOKEN.encode()
            + b"\r\n\r\n"
        )
        client.sendall(request)
        client.shutdown(socket.SHUT_WR)  # and never reads
        with counting:
            _Handler1(counting, ("127.0.0.1", 1), target._server)
        assert counting.timeouts == 1
    finally:
        client.close()
        target.close()
