"""Real PNG photos for the real CLI, made with the standard library.

Claude Code reads an image's header before it sends it on (random bytes come back
as "[Image could not be processed …]"), so the tests' photos are true PNGs. Noise
does not compress: a ``width`` × ``height`` photo is about ``3 × width × height``
bytes, which is how a test makes a photo line long enough for the strip.
"""

from __future__ import annotations

import random
import struct
import zlib

__all__ = ["noise_png"]


def _chunk(kind: bytes, data: bytes) -> bytes:
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))


def noise_png(width: int, height: int, seed: int) -> bytes:
    """An RGB PNG of random pixels (the same for the same arguments)."""
    rng = random.Random(seed)
    rows = b"".join(b"\x00" + rng.randbytes(3 * width) for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"".join(
        (
            b"\x89PNG\r\n\x1a\n",
            _chunk(b"IHDR", header),
            _chunk(b"IDAT", zlib.compress(rows, 1)),
            _chunk(b"IEND", b""),
        )
    )
