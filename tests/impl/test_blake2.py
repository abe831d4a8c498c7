"""`beebox_impl.blake2` hands out hashlib's own BLAKE2b, without importing hashlib."""

from __future__ import annotations

import hashlib
import subprocess
import sys

from beebox_impl.blake2 import blake2b


def test_it_is_hashlibs_own_constructor() -> None:
    assert blake2b is hashlib.blake2b
    assert (
        blake2b(b"beebox", digest_size=16).digest()
        == hashlib.blake2b(b"beebox", digest_size=16).digest()
    )


def test_importing_it_loads_no_openssl() -> None:
    report = (
        "import sys, beebox_impl.blake2; print(sorted({'hashlib', '_hashlib'} & set(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", report], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"
