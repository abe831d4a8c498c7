"""Base64 payloads at SIMD speed: the strip's alphabet check and a photo's decode.

These are the two costs a photo line puts on the box: every history pass checks
that a payload is all alphabet before stripping it, and a photo fetch decodes one.
`pybase64` (libbase64: AVX2/NEON) validates and decodes canonical base64 at many
GB/s, against ~2.7 GB/s for the best check in CPython itself (`bytes.translate`
deleting the alphabet) and ~0.5 GB/s for `binascii.a2b_base64`.

The strip's alphabet takes `=` anywhere and a run of any length; libbase64 takes
canonical base64 only. But the bytes before a run's first `=`, cut to a whole
number of 4-byte groups, are canonical base64 exactly when each is one of the 64
digits (`A-Z a-z 0-9 + /`; the bits of a last group are not checked). So
libbase64 answers for those, and the few bytes after them (a partial group, the
padding) are checked, or decoded, by the plain statement of the rule.
`tests/impl/transcript/test_payloads.py` checks both against the spec's
`decode_base64_payload` and the alphabet byte by byte.

Without libbase64 (pybase64 built from source with no compiler runs on the
standard library), the fast paths would be slower than the plain ones, so they are
used only when its C extension is active.
"""

from __future__ import annotations

import binascii
from typing import Final

import pybase64

from beebox_spec.media import BASE64_ALPHABET as SPEC_BASE64_ALPHABET
from beebox_spec.media import decode_base64_payload

__all__ = ["BASE64_ALPHABET", "decode_payload", "is_alphabet_run"]

# The strip rule's alphabet, as the bytes it is (`beebox_spec.media.BASE64_ALPHABET`).
BASE64_ALPHABET: Final = SPEC_BASE64_ALPHABET.encode("ascii")

_SIMD: Final = "C extension active" in pybase64.get_version()
# The alphabet check goes over pieces this long: a slice that size stays in the
# allocator's small-object arenas and the CPU cache (measured ~2x faster than one
# 1 MB slice, which costs a fresh mapping each time).
_CHECK_PIECE_BYTES: Final = 32 * 1024
# Up to this fraction of a run's length outside it, the run is checked through its
# complement (measured ~1.3x faster than pieces: no copy of the run at all).
_COMPLEMENT_RATIO: Final = 4
_PADDING: Final = b"="


def _accepted_by_libbase64(data: bytes | memoryview) -> bytes | None:
    # The decoded bytes when libbase64 takes `data` as canonical base64, else None.
    if not _SIMD:
        return None
    try:
        return pybase64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def _count_non_alphabet(data: bytes) -> int:
    return len(data.translate(None, BASE64_ALPHABET))


def is_alphabet_run(data: bytes, start: int, stop: int) -> bool:
    """Whether every byte of `data[start:stop]` is in the strip's base64 alphabet."""
    if not _SIMD:
        return _is_alphabet_plainly(data, start, stop)
    # Up to the first `=`, whole groups of four bytes are canonical base64 exactly
    # when every byte is one of the 64 digits; what follows (a partial group, the
    # padding, or whatever a run broken off at a block's end holds) is short, and
    # checked plainly.
    padding_at = data.find(_PADDING, start, stop)
    digits_stop = stop if padding_at == -1 else padding_at
    groups_stop = digits_stop - (digits_stop - start) % 4
    if _accepted_by_libbase64(memoryview(data)[start:groups_stop]) is None:
        return False
    return _is_alphabet_plainly(data, groups_stop, stop)


def _is_alphabet_plainly(data: bytes, start: int, stop: int) -> bool:
    # Deleting every alphabet byte leaves nothing exactly when all of them are.
    outside = len(data) - (stop - start)
    if outside <= (stop - start) // _COMPLEMENT_RATIO:
        # The run is most of `data` (a photo's line, or the block holding it):
        # count over all of it, uncopied, less what lies outside the run.
        inside = _count_non_alphabet(data) - (
            _count_non_alphabet(data[:start]) + _count_non_alphabet(data[stop:])
        )
        return inside == 0
    for piece_start in range(start, stop, _CHECK_PIECE_BYTES):
        piece_stop = min(piece_start + _CHECK_PIECE_BYTES, stop)
        if data[piece_start:piece_stop].translate(None, BASE64_ALPHABET):
            return False
    return True


def decode_payload(payload: bytes) -> bytes:
    """`beebox_spec.media.decode_base64_payload` of an alphabet payload's bytes."""
    # The spec decodes up to the first `=`; a whole number of 4-character groups
    # of that is canonical base64, and the few characters after it are padded.
    digits = payload.find(_PADDING)
    if digits == -1:
        digits = len(payload)
    whole_groups = digits - digits % 4
    head = _accepted_by_libbase64(memoryview(payload)[:whole_groups])
    if head is None:
        return decode_base64_payload(payload.decode("ascii"))
    if whole_groups == digits:
        return head
    return head + decode_base64_payload(payload[whole_groups:digits].decode("ascii"))
