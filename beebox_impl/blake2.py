"""BLAKE2b, the hash of the transcript index, without loading OpenSSL.

`hashlib.blake2b` is CPython's own `_blake2.blake2b`: hashlib never hands BLAKE2 to
OpenSSL. Importing `hashlib` still loads OpenSSL's `_hashlib` first, about 2 ms of
a `bbx chat history` that needs BLAKE2 alone (issue 38). So the constructor is
taken from `_blake2` where the interpreter has it, and from `hashlib` where it does
not; `tests/impl/test_blake2.py` holds the first to be hashlib's very own.
"""

from __future__ import annotations

try:
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter without CPython's module
    from hashlib import blake2b

__all__ = ["blake2b"]
