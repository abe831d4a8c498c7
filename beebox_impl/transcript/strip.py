"""The strip rule on bytes, fast, and in bounded memory over a line fed in chunks.

Proven equal to `beebox_spec.media.strip_inline_media` (the original's
`BASE64_PAYLOAD_RE` substitution over a decoded line), by Hypothesis properties in
`tests/impl/transcript/test_strip.py` on generated and adversarial lines, whole
and cut into chunks of every small size.

**Why bytes are enough.** The pattern is ASCII: `"`, the two keys, `:` and the
base64 alphabet. When a line is decoded from UTF-8 (invalid bytes → U+FFFD), every
ASCII byte becomes that same character and every other byte becomes part of a
non-ASCII character, so the ASCII characters of the text and their neighbours are
exactly the ASCII bytes of the line and theirs. A match on the text is a match on
the bytes at the same places, and replacing an ASCII span on either side and then
decoding gives the same text: the decoder's state is reset at the `"` that
bounds every payload.

**Why `find` is the regex.** ``"(data|base64)":"([0-9+/=A-Za-z]{1024,})"`` with
`re.sub` tries each position left to right and, after a match, continues just past
it. At a position holding a key, the greedy run takes every alphabet character
that follows; `"` is not in the alphabet, so backtracking to a shorter run can
never put a `"` after it. A match there exists exactly when the characters from
the run's start up to the next `"` are all alphabet and number at least 1,024: the
maximal run then ends at that quote. So: find the leftmost key (`find_quoted`:
`bytes.find` from quote to quote), find the next `"`, check the length and the
alphabet (`payloads.is_alphabet_run`: libbase64 for canonical base64, else
`translate` deleting the alphabet leaves nothing), and on
success continue after the closing quote, on failure one byte after the key's
start. Only a `"` can start a match, so nothing between is skipped. (A match's
closing quote is consumed: a key that starts on it is not a match, for the regex
or here.)

**Chunks.** `PayloadScanner` keeps that search alive across chunk boundaries while
holding a bounded amount: at most a key's length of bytes where a key could begin
(no key is found past a window's end), at most a key and 1,023 run bytes while a
run is too short to decide, and, once a run is 1,024 long, only its position — its
bytes are kept for the output only while the output could still fit the caller's
`keep_limit`. When a long run is broken by a byte that is neither alphabet nor
`"`, the search resumes at the break: no `"` lies between the key and the break,
and the key's own last quote cannot open another key (that would need a `"`
inside the run), so no match was skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final, NamedTuple

from beebox_impl.transcript.payloads import BASE64_ALPHABET, is_alphabet_run
from beebox_spec.media import MIN_PAYLOAD_CHARS, STRIPPED_MEDIA_MARKER
from beebox_spec.media import PAYLOAD_KEYS as SPEC_PAYLOAD_KEYS

__all__ = [
    "BASE64_ALPHABET",
    "MIN_PAYLOAD_CHARS",
    "PAYLOAD_KEYS",
    "PayloadScanner",
    "ScannedLine",
    "find_quoted",
    "scan_inline_media_chunks",
    "strip_inline_media_bytes",
    "strip_inline_media_chunks",
]

# `BASE64_PAYLOAD_RE`'s parts in bytes (`beebox_spec.media`'s, which build the
# pattern): each key as it opens its value. The shortest payload is the spec's own.
PAYLOAD_KEYS: Final = tuple(f'"{key}":"'.encode("ascii") for key in SPEC_PAYLOAD_KEYS)

# A key that may still be completing at a window's end is shorter than the longest key.
_KEY_PREFIX_BYTES: Final = max(len(key) for key in PAYLOAD_KEYS) - 1
_QUOTE: Final = b'"'
_MARKER: Final = STRIPPED_MEDIA_MARKER.encode("ascii")
# How far past a quote a key search looks before it looks for the next quote again.
_KEY_SEARCH_SPAN: Final = 4096


def _marker(_ordinal: int) -> bytes:
    return _MARKER


def find_quoted(window: bytes, needles: tuple[bytes, ...], start: int) -> tuple[int, int]:
    """The leftmost occurrence at or after `start` of any needle (each opens with `"`).

    Answers `(position, needle index)`, or `(-1, -1)`. `bytes.find` of a key over
    base64 is slow (the key's letters are base64 letters, so its skip table rarely
    skips); a key opens with a quote and base64 holds none, so the search jumps to
    the next quote (`memchr` speed) and looks for the keys only a span past it.
    """
    position = start
    while True:
        quote_at = window.find(_QUOTE, position)
        if quote_at == -1:
            return -1, -1
        # Needles starting in [quote_at, stop), wherever they end.
        stop = quote_at + _KEY_SEARCH_SPAN
        best, best_needle = -1, -1
        for which, needle in enumerate(needles):
            found = window.find(needle, quote_at, stop + len(needle) - 1)
            if found != -1 and (best == -1 or found < best):
                best, best_needle = found, which
        if best != -1:
            return best, best_needle
        if stop >= len(window):
            return -1, -1
        position = stop


class ScannedLine(NamedTuple):
    """What a scan found: the payload spans, and the line with them replaced.

    `payloads` are `(start, stop)` byte offsets from the start of what was fed, in
    order. `output` is the line with each payload replaced, or None when it grew
    past the scanner's `keep_limit` (its length is still `output_length`).
    """

    payloads: tuple[tuple[int, int], ...]
    output: bytes | None
    output_length: int


class _OpenRun:
    # A payload candidate already 1,024 alphabet bytes long, its closing quote not yet seen.
    __slots__ = ("held", "key", "run_length", "run_start")

    def __init__(self, key: bytes, run_start: int, run_length: int, held: bytearray | None) -> None:
        self.key = key
        self.run_start = run_start
        self.run_length = run_length
        self.held = held  # its bytes, while the output could still use them


class PayloadScanner:
    """Finds the strip rule's payloads in a line fed in chunks, holding little of it.

    `replacement(n)` is what payload n (counted from 0) becomes in the output: the
    marker for the history read, a slot token for media extraction. With a
    `keep_limit`, the output is given up (None) once it would exceed that many
    bytes; the scan itself goes on, so the payload spans are always complete.
    """

    def __init__(
        self,
        *,
        replacement: Callable[[int], bytes] = _marker,
        keep_limit: int | None = None,
    ) -> None:
        self._replacement = replacement
        self._keep_limit = keep_limit
        self._fed = 0
        self._carry = b""
        self._open: _OpenRun | None = None
        self._payloads: list[tuple[int, int]] = []
        self._output: bytearray | None = bytearray()
        self._output_length = 0

    def feed(self, chunk: bytes) -> int:
        """Scan the next bytes of the line.

        Answers how many bytes at the chunk's start were found to continue a run of
        base64 alphabet open before it (so are ASCII and hold no quote): a caller
        looking for other things in the line need not look there again.
        """
        chunk_start = self._fed
        self._fed += len(chunk)
        if self._open is not None:
            resume = self._continue_open_run(chunk, chunk_start)
            # The run goes on past this chunk: nothing more to look at in it.
            if resume is None:
                return len(chunk)
            keep_from, search_from = resume
            self._scan(chunk, chunk_start, keep_from, search_from, final=False)
            return keep_from
        window, window_start = chunk, chunk_start
        # Undecided bytes from the last chunk are scanned again with this one.
        if self._carry:
            window = self._carry + chunk
            window_start = chunk_start - len(self._carry)
            self._carry = b""
        self._scan(window, window_start, 0, 0, final=False)
        return 0

    def finish(self) -> ScannedLine:
        """The line has ended: decide what is still open and answer."""
        if self._open is not None:
            # A run the line ends inside never gets its closing quote.
            self._fail_open_run()
        if self._carry:
            window = self._carry
            self._carry = b""
            self._scan(window, self._fed - len(window), 0, 0, final=True)
        output = bytes(self._output) if self._output is not None else None
        return ScannedLine(tuple(self._payloads), output, self._output_length)

    # -- the search --------------------------------------------------------------

    def _scan(
        self, window: bytes, window_start: int, keep_from: int, search_from: int, *, final: bool
    ) -> None:
        # Bytes before `keep_from` are already in the output; none before
        # `search_from` can start a match.
        while True:
            key_at, which = find_quoted(window, PAYLOAD_KEYS, search_from)
            if key_at == -1:
                break
            run_at = key_at + len(PAYLOAD_KEYS[which])
            close_at = window.find(_QUOTE, run_at)
            if close_at != -1:
                if close_at - run_at >= MIN_PAYLOAD_CHARS and is_alphabet_run(
                    window, run_at, close_at
                ):
                    self._keep(window[keep_from:run_at])
                    self._payload(window_start + run_at, window_start + close_at)
                    # The closing quote is output, but consumed: no match starts on it.
                    keep_from, search_from = close_at, close_at + 1
                else:
                    search_from = key_at + 1
            elif final or not is_alphabet_run(window, run_at, len(window)):
                # No closing quote will come, or the run is already broken.
                search_from = key_at + 1
            else:
                # The run reaches the window's end: the next bytes decide it.
                self._keep(window[keep_from:key_at])
                run_length = len(window) - run_at
                if run_length >= MIN_PAYLOAD_CHARS:
                    key = window[key_at:run_at]
                    self._open = _OpenRun(key, window_start + run_at, 0, bytearray())
                    self._hold(window[run_at:])
                else:
                    self._carry = window[key_at:]
                return
        # No key from `search_from` on; only its last bytes could begin one.
        keep_to = len(window) if final else max(search_from, len(window) - _KEY_PREFIX_BYTES)
        self._keep(window[keep_from:keep_to])
        self._carry = window[keep_to:]

    def _continue_open_run(self, chunk: bytes, chunk_start: int) -> tuple[int, int] | None:
        open_run = self._open
        assert open_run is not None, "only called with a run open"
        close_at = chunk.find(_QUOTE)
        run_stop = len(chunk) if close_at == -1 else close_at
        if not is_alphabet_run(chunk, 0, run_stop):
            # Broken before any quote: not a payload. The chunk is searched from its
            # start, which skips nothing (no quote lies before the break).
            self._fail_open_run()
            return 0, 0
        if close_at == -1:
            self._hold(chunk)
            return None
        # Closed: a payload.
        self._open = None
        self._keep(open_run.key)
        self._payload(open_run.run_start, chunk_start + close_at)
        return close_at, close_at + 1

    def _hold(self, run_bytes: bytes) -> None:
        open_run = self._open
        assert open_run is not None, "only called with a run open"
        open_run.run_length += len(run_bytes)
        if open_run.held is None:
            return
        # If the run fails, its bytes join the output; past the limit there is none.
        would_be = self._output_length + len(open_run.key) + open_run.run_length
        if self._output is None or (self._keep_limit is not None and would_be > self._keep_limit):
            open_run.held = None
            return
        open_run.held += run_bytes

    def _fail_open_run(self) -> None:
        open_run = self._open
        assert open_run is not None, "only called with a run open"
        self._open = None
        self._keep(open_run.key)
        if open_run.held is not None:
            self._keep(bytes(open_run.held))
        else:
            self._output_length += open_run.run_length
            self._output = None

    # -- the output --------------------------------------------------------------

    def _keep(self, data: bytes) -> None:
        self._output_length += len(data)
        if self._output is None:
            return
        # Past the limit the output is abandoned; only its length is tracked.
        if self._keep_limit is not None and self._output_length > self._keep_limit:
            self._output = None
            return
        self._output += data

    def _payload(self, start: int, stop: int) -> None:
        self._payloads.append((start, stop))
        self._keep(self._replacement(len(self._payloads) - 1))


def scan_inline_media_chunks(chunks: Iterable[bytes]) -> ScannedLine:
    """Where the payloads of a line given as consecutive chunks are, and the line
    with each replaced by the marker (kept whole: no limit)."""
    scanner = PayloadScanner()
    for chunk in chunks:
        scanner.feed(chunk)
    return scanner.finish()


def strip_inline_media_chunks(chunks: Iterable[bytes]) -> bytes | None:
    """The strip of a line given as consecutive chunks, or None if it has no payload."""
    scanned = scan_inline_media_chunks(chunks)
    # No payload anywhere: there is nothing to strip, which callers must be told.
    if not scanned.payloads:
        return None
    assert scanned.output is not None, "an unlimited scan keeps its output"
    return scanned.output


def strip_inline_media_bytes(line: bytes) -> bytes | None:
    """`beebox_spec.media.strip_inline_media` on one line's UTF-8 bytes.

    Equal to ``strip_inline_media(line.decode("utf-8", "replace"))`` encoded back
    (see the module docstring for why bytes suffice); None when nothing matched.
    """
    return strip_inline_media_chunks((line,))
