"""`ChunkedIntArray` against a list: appends, prefixes that share chunks, searches.

A stateful test keeps several sequences, each with the list it should equal; a
prefix is a new sequence whose list is the first values of its parent's, and
appending to either must leave the other as its list says.
"""

from __future__ import annotations

import bisect
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
)

import beebox_impl.transcript.chunked as chunked_module
from beebox_impl.transcript.chunked import ChunkedIntArray

INT64 = st.integers(-(2**63), 2**63 - 1)
# Few distinct values, so searches find some and miss some.
SMALL = st.integers(-3, 40)


class _Tracked:
    # A sequence under test and the list it should equal.
    def __init__(self, sequence: ChunkedIntArray, model: list[int]) -> None:
        self.sequence = sequence
        self.model = model


class ChunkedAgainstList(RuleBasedStateMachine):
    tracked = Bundle("tracked")

    @initialize(target=tracked, chunk_items=st.integers(1, 5), values=st.lists(SMALL))
    def start(self, chunk_items: int, values: list[int]) -> _Tracked:
        self.all: list[_Tracked] = []
        return self._keep(ChunkedIntArray(values, chunk_items=chunk_items), list(values))

    def _keep(self, sequence: ChunkedIntArray, model: list[int]) -> _Tracked:
        tracked = _Tracked(sequence, model)
        self.all.append(tracked)
        return tracked

    @rule(target=tracked, source=tracked, data=st.data())
    def take_a_prefix(self, source: _Tracked, data: st.DataObject) -> _Tracked:
        length = data.draw(st.integers(0, len(source.model)), label="length")
        return self._keep(source.sequence.prefix(length), source.model[:length])

    @rule(which=tracked, values=st.lists(SMALL, min_size=1, max_size=7))
    def append(self, which: _Tracked, values: list[int]) -> None:
        for value in values:
            which.sequence.append(value)
        which.model.extend(values)

    @rule(which=tracked, values=st.lists(SMALL, max_size=7))
    def extend(self, which: _Tracked, values: list[int]) -> None:
        which.sequence.extend(values)
        which.model.extend(values)

    @rule(which=tracked, value=SMALL)
    def find_the_first(self, which: _Tracked, value: int) -> None:
        if value in which.model:
            assert which.sequence.index(value) == which.model.index(value)
        else:
            with pytest.raises(ValueError, match="not in the sequence"):
                which.sequence.index(value)

    @rule(which=tracked, value=SMALL)
    def bisect_sorted_values(self, which: _Tracked, value: int) -> None:
        # Searched as a sorted sequence: a sorted copy of its values.
        ordered = ChunkedIntArray(sorted(which.model), chunk_items=which.sequence._chunk_items)
        assert ordered.bisect_left(value) == bisect.bisect_left(sorted(which.model), value)

    @rule(which=tracked, data=st.data())
    def read_a_range(self, which: _Tracked, data: st.DataObject) -> None:
        stop = data.draw(st.integers(0, len(which.model)), label="stop")
        start = data.draw(st.integers(0, stop), label="start")
        assert which.sequence.values_between(start, stop) == which.model[start:stop]

    @rule(which=tracked)
    def round_trip_through_bytes(self, which: _Tracked) -> None:
        data = which.sequence.tobytes()
        assert len(data) == 8 * len(which.model)
        again = ChunkedIntArray.from_bytes(data, chunk_items=3)
        assert list(again) == which.model
        assert again == which.sequence

    @invariant()
    def each_equals_its_list(self) -> None:
        for tracked in getattr(self, "all", []):
            sequence, model = tracked.sequence, tracked.model
            assert len(sequence) == len(model)
            assert list(sequence) == model
            for position in range(-len(model), len(model)):
                assert sequence[position] == model[position]
            for position in (len(model), -len(model) - 1):
                with pytest.raises(IndexError):
                    sequence[position]


TestChunkedAgainstList = ChunkedAgainstList.TestCase
TestChunkedAgainstList.settings = settings(max_examples=150, stateful_step_count=30)


@given(st.lists(INT64, max_size=40), st.integers(1, 9))
def test_every_64_bit_value_round_trips_little_endian(values: list[int], chunk_items: int) -> None:
    sequence = ChunkedIntArray(values, chunk_items=chunk_items)
    data = sequence.tobytes()
    assert data == b"".join(value.to_bytes(8, "little", signed=True) for value in values)
    assert list(ChunkedIntArray.from_bytes(data)) == values


@given(st.lists(SMALL, max_size=20), st.lists(SMALL, max_size=20), st.integers(1, 4))
def test_equal_by_values_whatever_the_chunks(
    first: list[int], second: list[int], chunk_items: int
) -> None:
    assert (ChunkedIntArray(first, chunk_items=chunk_items) == ChunkedIntArray(second)) == (
        first == second
    )


def test_a_value_beyond_64_bits_is_refused_and_nothing_is_added() -> None:
    sequence = ChunkedIntArray([1, 2], chunk_items=2)
    with pytest.raises(OverflowError):
        sequence.append(2**63)
    assert list(sequence) == [1, 2]
    assert len(sequence) == 2


@pytest.mark.parametrize("chunk_items", [0, -1])
def test_a_chunk_holds_at_least_one_value(chunk_items: int) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ChunkedIntArray(chunk_items=chunk_items)


@pytest.mark.parametrize("length", [-1, 4])
def test_a_prefix_lies_within_the_values(length: int) -> None:
    with pytest.raises(ValueError, match=f"a prefix of {length} values of 3"):
        ChunkedIntArray([1, 2, 3]).prefix(length)


def test_a_range_lies_within_the_values() -> None:
    with pytest.raises(IndexError, match="positions 2:4 of 3"):
        ChunkedIntArray([1, 2, 3]).values_between(2, 4)
    with pytest.raises(IndexError, match="positions 2:1 of 3"):
        ChunkedIntArray([1, 2, 3]).values_between(2, 1)


def test_bytes_that_are_not_whole_values_are_refused() -> None:
    with pytest.raises(ValueError, match="9 bytes is not a whole number"):
        ChunkedIntArray.from_bytes(b"\0" * 9)


def test_the_default_chunk_size_is_read_when_a_sequence_is_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(chunked_module, "DEFAULT_CHUNK_ITEMS", 2)
    assert ChunkedIntArray([1, 2, 3])._chunk_items == 2


def test_a_prefix_shares_its_full_chunks_and_copies_the_one_it_cuts() -> None:
    # What keeps an extension's cost to one chunk: the full chunks are the same
    # objects; the cut one is a copy, so appending to the prefix changes nothing else.
    values = list(range(10))
    sequence = ChunkedIntArray(values, chunk_items=4)
    prefix = sequence.prefix(6)
    assert prefix._chunks[0] is sequence._chunks[0]
    assert prefix._chunks[1] is not sequence._chunks[1]
    prefix.append(99)
    assert list(sequence) == values
    assert list(prefix) == [*values[:6], 99]
    at_a_boundary = sequence.prefix(8)
    assert len(at_a_boundary._chunks) == 2
    assert all(
        mine is theirs
        for mine, theirs in zip(at_a_boundary._chunks, sequence._chunks[:2], strict=True)
    )
    at_a_boundary.append(-1)
    assert list(sequence) == values


def test_an_extension_allocates_a_chunk_not_the_whole_sequence() -> None:
    sequence = ChunkedIntArray(range(200_000))
    tracemalloc.start()
    try:
        prefix = sequence.prefix(199_999)
        prefix.append(7)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # A flat copy is 1.6 MB; a chunk is 64 KiB (with its list of 25 chunks).
    assert peak < 100_000, peak
    assert len(prefix) == 200_000
