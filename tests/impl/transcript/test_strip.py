"""The byte strip equals the spec's regex strip, whole and in chunks of any size."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from beebox_impl.transcript import strip_inline_media_bytes
from beebox_impl.transcript.lines import UuidValueCollector
from beebox_impl.transcript.payloads import BASE64_ALPHABET, is_alphabet_run
from beebox_impl.transcript.strip import (
    MIN_PAYLOAD_CHARS,
    PAYLOAD_KEYS,
    PayloadScanner,
    find_quoted,
    strip_inline_media_chunks,
)
from beebox_spec.media import BASE64_PAYLOAD_RE, STRIPPED_MEDIA_MARKER, strip_inline_media
from tests.impl.transcript.strategies import BASE64_CHARS, SAFE_ID_CHARS, compact, lines

# The spec's pattern over bytes: where its matches are, for the span checks.
BYTES_PAYLOAD_RE = re.compile(BASE64_PAYLOAD_RE.pattern.encode("ascii"))


def decoded_equal(line: bytes, ours: bytes | None) -> bool:
    # The strip is compared on the decoded text, as the history read sees it.
    theirs = strip_inline_media(line.decode("utf-8", "replace"))
    if theirs is None or ours is None:
        return theirs is None and ours is None
    return ours.decode("utf-8", "replace") == theirs


def chunked(data: bytes, size: int) -> list[bytes]:
    return [data[start : start + size] for start in range(0, len(data), size)] or [b""]


@pytest.mark.parametrize("byte", range(256))
def test_the_alphabet_check_is_the_spec_patterns_class_byte_by_byte(byte: int) -> None:
    # The byte fast path imports the spec's parts; this holds the check it makes of
    # them to the spec's compiled pattern, for every byte there is.
    run = bytes([byte]) * MIN_PAYLOAD_CHARS
    line = b'"data":"' + run + b'"'
    spec_takes = BASE64_PAYLOAD_RE.fullmatch(line.decode("latin-1")) is not None
    assert is_alphabet_run(run, 0, len(run)) == spec_takes
    assert (strip_inline_media_bytes(line) is not None) == (spec_takes and byte < 128)


@given(st.sampled_from([*PAYLOAD_KEYS, b'"date":"', b'"Data":"', b'"base":"']),
       st.integers(MIN_PAYLOAD_CHARS - 2, MIN_PAYLOAD_CHARS + 2))  # fmt: skip
def test_the_keys_and_the_floor_are_the_spec_patterns(key: bytes, length: int) -> None:
    line = b"{" + key + b"A" * length + b'"}'
    assert decoded_equal(line, strip_inline_media_bytes(line))


# Adversarial pieces: keys, quotes, runs around the floor, breaks, non-ASCII, escapes.
PIECES = [
    b'"data":"',
    b'"base64":"',
    b'"data":"data":"',
    b'"data":"base64":"',
    b'"',
    b"\\",
    b":",
    b"A" * 1023,
    b"A" * 1024,
    b"B" * 1025,
    b"=" * 7,
    b"+/",
    b"abc",
    b"\xc3\xa9",
    b"\xf0\x9f",
    b"\xff",
    b"-",
    b" ",
    b'\\"data\\":\\"',
]


adversarial = st.lists(st.sampled_from(PIECES), max_size=12).map(b"".join)


@settings(max_examples=400)
@given(adversarial)
@example(b'"data":"' + b"A" * 1023 + b'"')
@example(b'"data":"' + b"A" * 1024 + b'"')
@example(b'"data":"' + b"A" * 10 + b'"data":"' + b"B" * 2000 + b'"')
@example(b'"data":"' + b"A" * 1024 + b'"data":"' + b"B" * 2000 + b'"')
@example(b'"data":"data":"' + b"A" * 1024 + b'"')
@example(b'"base64":"' + b"A" * 2000 + b"-" + b'"')
@example(b'"data":"' + b"A" * 2000)
def test_adversarial_lines_strip_as_the_spec_does(line: bytes) -> None:
    assert decoded_equal(line, strip_inline_media_bytes(line))


@settings(max_examples=300)
@given(adversarial, st.integers(1, 40))
@example(b'"data":"' + b"A" * 2000 + b'"', 8)
@example(b'xx"base64":"' + b"A" * 3000 + b'-"data":"' + b"C" * 1500 + b'"', 1)
def test_chunk_boundaries_anywhere_change_nothing(line: bytes, size: int) -> None:
    whole = strip_inline_media_bytes(line)
    assert strip_inline_media_chunks(chunked(line, size)) == whole
    assert decoded_equal(line, whole)


@settings(max_examples=150)
@given(lines(), st.sampled_from([1, 3, 9, 10, 11, 64, 1023, 1024, 1025, 4096]))
def test_transcript_lines_strip_as_the_spec_does(line: bytes, size: int) -> None:
    ours = strip_inline_media_bytes(line)
    assert decoded_equal(line, ours)
    assert strip_inline_media_chunks(chunked(line, size)) == ours


@settings(max_examples=200)
@given(adversarial, st.integers(1, 64), st.integers(0, 3000))
def test_spans_and_the_output_limit(line: bytes, size: int, limit: int) -> None:
    scanner = PayloadScanner(keep_limit=limit)
    for chunk in chunked(line, size):
        scanner.feed(chunk)
    scanned = scanner.finish()
    # The spans are the regex's group-2 spans (on bytes, as argued in strip.py).
    assert list(scanned.payloads) == [match.span(2) for match in BYTES_PAYLOAD_RE.finditer(line)]
    full = strip_inline_media_bytes(line)
    expected = line if full is None else full
    assert scanned.output_length == len(expected)
    # Kept only while it fits; complete whenever it is kept.
    if len(expected) <= limit:
        assert scanned.output == expected
    else:
        assert scanned.output is None


@settings(max_examples=200)
@given(adversarial, st.integers(1, 64))
@example(b'"data":"' + b"A" * 1100 + b"\xc3\xa9" + b"A" * 300 + b'"', 50)
def test_a_feed_answers_only_alphabet_that_continues_a_run(line: bytes, size: int) -> None:
    # What a feed answers is skipped by the UTF-8 count and the uuid collector:
    # it must be base64 alphabet (ASCII, no quote), following alphabet.
    scanner = PayloadScanner()
    fed = 0
    for chunk in chunked(line, size):
        answered = scanner.feed(chunk)
        assert 0 <= answered <= len(chunk)
        if answered:
            assert fed > 0
            assert all(byte in BASE64_ALPHABET for byte in line[fed - 1 : fed + answered])
        fed += len(chunk)


def test_a_chunk_inside_a_long_run_is_answered_whole() -> None:
    # The skip is real: a photo's middle chunks are not looked at again.
    line = b'{"data":"' + b"A" * 5000 + b'"}'
    scanner = PayloadScanner()
    answers = [scanner.feed(chunk) for chunk in chunked(line, 1000)]
    # The run opens in the second chunk (the first holds too little of it to
    # decide) and closes 9 bytes into the sixth.
    assert answers == [0, 0, 1000, 1000, 1000, 9]


def test_slot_tokens_replace_in_order() -> None:
    line = b'{"a":[{"data":"' + b"A" * 1500 + b'"},{"base64":"' + b"B" * 1500 + b'"}]}'
    scanner = PayloadScanner(replacement=lambda n: f"slot-{n}".encode())
    scanner.feed(line)
    assert scanner.finish().output == b'{"a":[{"data":"slot-0"},{"base64":"slot-1"}]}'


def test_a_photo_line_strips_to_the_marker() -> None:
    photo = "QUJD" * 300_000
    line = compact({"type": "user", "message": {"content": [{"source": {"data": photo}}]}})
    stripped = strip_inline_media_bytes(line.encode())
    assert stripped == line.replace(photo, STRIPPED_MEDIA_MARKER).encode()


@settings(max_examples=300)
@given(
    st.lists(
        st.sampled_from([b'"', b"a", b"b", b"data", b"base64", b'":"', b"x" * 50]), max_size=30
    ),
    st.integers(0, 5),
)
def test_find_quoted_is_the_leftmost_find(parts: list[bytes], start: int) -> None:
    window = b"".join(parts) * 40  # longer than the search span
    found = [
        (window.find(needle, start), which)
        for which, needle in enumerate(PAYLOAD_KEYS)
        if window.find(needle, start) != -1
    ]
    assert find_quoted(window, PAYLOAD_KEYS, start) == (min(found) if found else (-1, -1))


@settings(max_examples=200)
@given(
    st.lists(
        st.one_of(
            st.sampled_from([b'"uuid":"', b'"', b"u-1", b'"uuid":"u-2"', b"\xc3"]),
            st.text(alphabet=SAFE_ID_CHARS, max_size=70).map(str.encode),
        ),
        max_size=12,
    ),
    st.integers(1, 200),
)
def test_uuid_values_are_the_needles_present(parts: list[bytes], size: int) -> None:
    line = b"".join(parts)
    collector = UuidValueCollector()
    for chunk in chunked(line, size):
        collector.feed(chunk)
    values = collector.values()
    assert values is not None
    text = line.decode("utf-8", "replace")
    # For a grammar id X: X is collected exactly when `"uuid":"X"` is in the line.
    candidates = {match.group(1) for match in re.finditer(r'"uuid":"([A-Za-z0-9_-]*)', text)}
    for candidate in candidates | {"u-1", "u-2"}:
        is_id = 1 <= len(candidate) <= 64
        assert (candidate in values) == (is_id and f'"uuid":"{candidate}"' in text)


def test_uuid_values_give_up_past_their_bound() -> None:
    collector = UuidValueCollector()
    collector.feed(b"".join(b'"uuid":"id-%d",' % number for number in range(1000)))
    assert collector.values() is None


@pytest.mark.parametrize("run", [1023, 1024])
def test_the_floor_is_inclusive(run: int) -> None:
    line = b'{"data":"' + b"A" * run + b'"}'
    stripped = strip_inline_media_bytes(line)
    assert (stripped is not None) == (run >= MIN_PAYLOAD_CHARS)
    assert decoded_equal(line, stripped)


def test_alphabet_constant_is_the_class() -> None:
    assert set(BASE64_CHARS) == set(BASE64_ALPHABET.decode())


@pytest.mark.parametrize("gap", range(4088, 4102))
@pytest.mark.parametrize("key", PAYLOAD_KEYS)
def test_a_key_right_at_the_search_span_is_found(gap: int, key: bytes) -> None:
    # A quote, then text without a key for about one search span, then the key.
    window = b'"' + b"x" * gap + key + b"A" * 1100 + b'"'
    assert find_quoted(window, PAYLOAD_KEYS, 0) == (1 + gap, PAYLOAD_KEYS.index(key))
    assert decoded_equal(window, strip_inline_media_bytes(window))
