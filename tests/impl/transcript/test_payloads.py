"""The SIMD fast paths answer exactly as the plain rules, with libbase64 and without."""

from __future__ import annotations

import base64
import os

import pybase64
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from beebox_impl.transcript import payloads
from beebox_impl.transcript.payloads import BASE64_ALPHABET, decode_payload, is_alphabet_run
from beebox_spec.media import decode_base64_payload


@pytest.fixture(params=["libbase64", "plain"])
def fast_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    # Every test runs as on a machine with pybase64's C extension and as on one without.
    if request.param == "plain":
        monkeypatch.setattr(payloads, "_SIMD", False)
    elif not payloads._SIMD:
        pytest.skip("pybase64's C extension is not active here")
    return str(request.param)


def plainly_alphabet(data: bytes) -> bool:
    return all(byte in BASE64_ALPHABET for byte in data)


def test_libbase64_is_in_use_where_it_is_built() -> None:
    # The fixture's first case must not silently test the plain path twice.
    simd_built = "C extension active" in pybase64.get_version()
    assert simd_built == payloads._SIMD


@pytest.mark.usefixtures("fast_path")
@pytest.mark.parametrize("byte", range(256))
def test_every_byte_outside_the_alphabet_breaks_a_canonical_run(byte: int) -> None:
    run = base64.b64encode(bytes(range(256)) * 6)
    for position in (0, 1, 2, 3, len(run) // 2, len(run) - 3, len(run) - 1):
        changed = bytearray(run)
        changed[position] = byte
        for data in (bytes(changed), bytes(changed) + b"==", b"x" + bytes(changed) + b"x"):
            start = 1 if data.startswith(b"x") else 0
            stop = len(data) - start
            assert is_alphabet_run(data, start, stop) == plainly_alphabet(data[start:stop])


runs = st.one_of(
    # Canonical base64, as photos are written.
    st.binary(max_size=3000).map(base64.b64encode),
    # Any string of the alphabet: `=` anywhere, any length.
    st.text(alphabet=BASE64_ALPHABET.decode(), max_size=3000).map(str.encode),
    # Alphabet with a stray byte or few.
    st.lists(
        st.one_of(st.sampled_from(list(BASE64_ALPHABET)), st.integers(0, 255)), max_size=200
    ).map(bytes),
)


@pytest.mark.usefixtures("fast_path")
@given(run=runs, before=st.binary(max_size=40), after=st.binary(max_size=40))
@example(run=b"QUJD" * 300, before=b"", after=b"")
@example(run=b"QUJD" * 300 + b"=", before=b"", after=b"")
@example(run=b"QU=D" * 300, before=b"\xff", after=b'"')
def test_alphabet_check_is_the_plain_one(run: bytes, before: bytes, after: bytes) -> None:
    data = before + run + after
    assert is_alphabet_run(data, len(before), len(before) + len(run)) == plainly_alphabet(run)


@pytest.mark.usefixtures("fast_path")
@given(st.text(alphabet=BASE64_ALPHABET.decode(), max_size=3000))
@example("")
@example("QUJD" * 300 + "QQ==")
@example("QUJD" * 300 + "QUI=")
@example("QUJD" * 300 + "Q")
@example("QUJDAB==QUJD")
@example("=QUJD")
def test_decode_is_the_spec_decode(payload: str) -> None:
    assert decode_payload(payload.encode("ascii")) == decode_base64_payload(payload)


@pytest.mark.usefixtures("fast_path")
def test_a_photo_decodes_to_its_bytes() -> None:
    photo = os.urandom(750_001)
    assert decode_payload(base64.b64encode(photo)) == photo
