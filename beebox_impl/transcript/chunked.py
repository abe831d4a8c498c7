"""An append-only sequence of 64-bit integers kept in fixed-size chunks.

A transcript index (`beebox_impl.transcript.index`) is a snapshot: a chat that
grows by a turn gets a new index that extends the old one. With flat arrays, each
extension copied every array whole: a cost, in time and in allocations, that grew
with the chat (3.4 MB traced to extend a 100,000-line chat's index by a line; 68
KB here). It was suspected of the 30-minute soaks' RSS rise and was not its cause
(docs/reliability.md), but an extension should not cost the whole chat.

Here the values sit in chunks of `chunk_items` each. A full chunk is never changed
again, so a prefix (`prefix`) shares the full chunks below its cut and copies only
the chunk the cut falls in: an extension allocates at most one chunk, of a size
that recurs, whatever the chat's length. Reads stay at C speed within a chunk
(`index`, `bisect_left` search the chunks' own arrays).

Not thread-safe for writers; a sequence no longer appended to may be read from
any number of threads, and its prefixes appended to, since neither changes a
chunk it shares.
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from typing import Final

from beebox_spec.errors import InvalidArgument

__all__ = ["DEFAULT_CHUNK_ITEMS", "ChunkedIntArray"]

# 8,192 values: 64 KiB a full chunk. Extending an index copies at most this much
# an array; searching a long chat's 50,000 lines walks 7 chunks.
DEFAULT_CHUNK_ITEMS: Final = 8192

_TYPECODE: Final = "q"


class ChunkedIntArray:
    """Signed 64-bit integers, appended at the end, read by position or search.

    Equal to another holding the same values in the same order (whatever their
    chunk sizes); not hashable, as it may still grow.
    """

    __slots__ = ("_chunk_items", "_chunks", "_length")

    def __init__(self, values: Iterable[int] = (), *, chunk_items: int | None = None) -> None:
        # Read when called, so a test can make every index's chunks small.
        if chunk_items is None:
            chunk_items = DEFAULT_CHUNK_ITEMS
        # A chunk must hold a value for appends to make progress.
        if chunk_items < 1:
            raise InvalidArgument(f"chunk_items must be at least 1, got {chunk_items}")
        self._chunk_items = chunk_items
        self._chunks: list[array[int]] = []
        self._length = 0
        self.extend(values)

    @classmethod
    def from_bytes(
        cls, data: bytes | memoryview, *, chunk_items: int | None = None
    ) -> ChunkedIntArray:
        """The values `tobytes` wrote (little-endian 64-bit, on every machine)."""
        if len(data) % 8:
            raise InvalidArgument(f"{len(data)} bytes is not a whole number of 64-bit values")
        values: array[int] = array(_TYPECODE)
        values.frombytes(data)
        if sys.byteorder != "little":
            values.byteswap()
        sequence = cls(chunk_items=chunk_items)
        size = sequence._chunk_items
        for start in range(0, len(values), size):
            sequence._chunks.append(values[start : start + size])
        sequence._length = len(values)
        return sequence

    def tobytes(self) -> bytes:
        """Every value as little-endian 64-bit, in order."""
        return b"".join(self.byte_chunks())

    def byte_chunks(self) -> Iterator[bytes]:
        """`tobytes`, a chunk at a time: buffers of one size however long the values."""
        for chunk in self._chunks:
            if sys.byteorder == "little":
                yield chunk.tobytes()
            else:
                swapped = array(_TYPECODE, chunk)
                swapped.byteswap()
                yield swapped.tobytes()

    def append(self, value: int) -> None:
        """Add `value` at the end (OverflowError beyond 64 bits, nothing added)."""
        if not self._chunks or len(self._chunks[-1]) == self._chunk_items:
            chunk: array[int] = array(_TYPECODE, (value,))
            self._chunks.append(chunk)
        else:
            self._chunks[-1].append(value)
        self._length += 1

    def extend(self, values: Iterable[int]) -> None:
        """`append` each of `values` in turn."""
        for value in values:
            self.append(value)

    def prefix(self, length: int) -> ChunkedIntArray:
        """A new sequence of the first `length` values, sharing the full chunks.

        Appending to either leaves the other as it was: the shared chunks are full,
        so neither appends to them.
        """
        if not 0 <= length <= self._length:
            raise InvalidArgument(f"a prefix of {length} values of {self._length}")
        whole, rest = divmod(length, self._chunk_items)
        copy = ChunkedIntArray(chunk_items=self._chunk_items)
        copy._chunks = self._chunks[:whole]
        if rest:
            copy._chunks.append(self._chunks[whole][:rest])
        copy._length = length
        return copy

    def index(self, value: int) -> int:
        """The position of the first `value`; ValueError when there is none."""
        for number, chunk in enumerate(self._chunks):
            try:
                return number * self._chunk_items + chunk.index(value)
            except ValueError:
                continue
        raise ValueError(f"{value} is not in the sequence")

    def bisect_left(self, value: int) -> int:
        """Where `value` would go in these values (ascending): `bisect.bisect_left`."""
        chunks = self._chunks
        # The first chunk whose last value is not below `value` holds the place.
        low, high = 0, len(chunks)
        while low < high:
            middle = (low + high) // 2
            if chunks[middle][-1] < value:
                low = middle + 1
            else:
                high = middle
        if low == len(chunks):
            return self._length
        return low * self._chunk_items + bisect_left(chunks[low], value)

    def values_between(self, start: int, stop: int) -> list[int]:
        """The values at positions `start` up to `stop` (0 ≤ start ≤ stop ≤ len)."""
        if not 0 <= start <= stop <= self._length:
            raise IndexError(f"positions {start}:{stop} of {self._length} values")
        values: list[int] = []
        while start < stop:
            number, offset = divmod(start, self._chunk_items)
            taken = self._chunks[number][offset : offset + stop - start]
            values.extend(taken)
            start += len(taken)
        return values

    def __getitem__(self, position: int) -> int:
        # On every history read's path, once an entry: plain operators, no divmod.
        at = position + self._length if position < 0 else position
        if not 0 <= at < self._length:
            raise IndexError(f"position {position} of {self._length} values")
        chunk_items = self._chunk_items
        return self._chunks[at // chunk_items][at % chunk_items]

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[int]:
        for chunk in self._chunks:
            yield from chunk

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ChunkedIntArray):
            return NotImplemented
        return self._length == other._length and self.tobytes() == other.tobytes()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ChunkedIntArray({list(self)!r}, chunk_items={self._chunk_items})"
