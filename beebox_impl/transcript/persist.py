"""Transcript indexes kept on disk, so a new process opens a long chat at warm cost.

An index (`beebox_impl.transcript.index`) costs one pass over its transcript to
build; kept only in memory, every restart of a box pays that pass again for each
chat opened. `IndexShelf` keeps each index in a file of its own under a folder of
the box (`.beebox/cache/transcript-index/`), written after every build or
extension and read when the in-memory cache misses.

**A shelved index is a hint, never an authority.** It is used only when the
transcript still has the identity it records (path, device, inode, size, mtime),
or is that file grown longer with the bytes before its last complete line
unchanged (then it is extended, as an in-memory one would be); every read
through it verifies what it finds, as for any index. A file that is unreadable,
cut short, of another format or of another version of the rules (`RULES_VERSION`,
bumped whenever what a line contributes changes) is ignored and the index
rebuilt: losing the shelf costs time, never an answer.

**Format.** ``BBXIDX`` and a format byte; the length of a JSON header (identity,
counts, the few oversize lines' details, the open tool calls and the links of a
last line without its newline); the header; the eleven integer arrays
(little-endian int64) whose lengths the header gives: four a line (offsets,
lengths, entry lines, uuid keys), the four of the stripped (photo) lines
(`StrippedLines.arrays`) and the three of the tool result links
(`ToolResultLinks.arrays`); a BLAKE2b digest of all that (a damaged file is caught
before use: a wrong offset that still lands on an entry would pass verification).
No pickle: the folder is data, and reading it runs no code. The arrays are
written and read as bytes, never as a Python object a value: a chat shelved every
turn or two would otherwise make tens of thousands of short-lived objects each
time, as many more as the chat grows (format 1 kept the stripped lines in the
JSON header, and Python's arenas grew with every peak; `docs/reliability.md`).

Files are written to a temporary name in the same folder and renamed into place
(two writers race harmlessly: each file is whole, the later wins). They are not
fsynced: a shelf lost in a crash is rebuilt.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

from beebox_impl.blake2 import blake2b
from beebox_impl.files import FileIdentity
from beebox_impl.logs import debug, logger
from beebox_impl.transcript.chunked import ChunkedIntArray
from beebox_impl.transcript.index import (
    OpaqueLine,
    StrippedLines,
    ToolResultLinks,
    TranscriptIndex,
)
from beebox_spec.errors import BeeboxError
from beebox_spec.transcript import PHOTO_MODES

__all__ = ["RULES_VERSION", "IndexShelf"]


_MAGIC: Final = b"BBXIDX\x03"
# Bump when what a line contributes to an index changes (entry rules, uuid keys).
# 2: tool results ride on their calls (the spec's transcript rule 5).
# 3: an index records the photo mode its lines were read in (rule 2).
# 4: a task notification is plumbing, not an entry (rules 3 and 4).
RULES_VERSION: Final = 4
_LINE_ARRAYS: Final = ("line_offsets", "line_lengths", "entry_lines", "line_uuid_keys")
# And the stripped lines' four, and the tool result links' three.
_ARRAY_COUNT: Final = len(_LINE_ARRAYS) + 4 + 3
_DIGEST_BYTES: Final = 16
# A header larger than this is not one of ours.
_MAX_HEADER_BYTES: Final = 64 * 1024 * 1024


# What `IndexShelf.save` names its temporary files (`tempfile.mkstemp`'s random part).
_TEMPORARY: Final = re.compile(r"\.[a-z0-9_]+\.idx\.tmp")


class _Malformed(BeeboxError):
    """A shelved file that is not a well-formed index of ours."""


class IndexShelf:
    """A folder of shelved transcript indexes, one file per transcript path.

    What the shelf could not do (remove or write an index: the next process reads
    the transcript again, nothing more) is said to `warn`, by default as a warning
    on this module's logger. `bbx chat history` says it as a `bbx:` line of its own,
    without loading `logging` for it (`beebox_impl.logs`).
    """

    def __init__(self, directory: Path, *, warn: Callable[[str], None] | None = None) -> None:
        self.directory = directory
        self._warn = _log_warning if warn is None else warn

    @classmethod
    def in_box_state(
        cls, state_directory: Path, *, warn: Callable[[str], None] | None = None
    ) -> IndexShelf:
        """The shelf of a box, in its state folder (`.beebox`)."""
        return cls(state_directory / "cache" / "transcript-index", warn=warn)

    def _file_for(self, path_text: str) -> Path:
        digest = blake2b(path_text.encode("utf-8", "surrogateescape"), digest_size=16)
        return self.directory / f"{digest.hexdigest()}.idx"

    def load(self, path: Path) -> TranscriptIndex | None:
        """The index shelved for `path`, or None when there is none usable.

        The caller still compares its identity with the file's (it may be stale).
        """
        path_text = os.fspath(path)
        shelved = self._file_for(path_text)
        try:
            data = shelved.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as error:
            debug(__name__, "shelved index %s unreadable (%s): ignored", shelved, error)
            return None
        try:
            index = _decode(data)
        except _Malformed as error:
            debug(__name__, "shelved index %s ignored: %s", shelved, error)
            return None
        # A digest collision, or a file copied from elsewhere.
        if index.path != path_text:
            return None
        return index

    def forget(self, path: Path) -> None:
        """Remove what is shelved for `path` (found stale); failures are logged."""
        try:
            self._file_for(os.fspath(path)).unlink(missing_ok=True)
        except OSError as error:
            self._warn(f"could not remove the shelved index of {path}: {error}")

    def remove_leftovers(self) -> int:
        """Remove the temporary files of saves that never finished (a killed process).

        Run when a box opens. A save in flight in another process at that moment
        loses its write, which costs that process's next read a pass, nothing more.
        """
        removed = 0
        try:
            leftovers = [p for p in self.directory.iterdir() if _TEMPORARY.fullmatch(p.name)]
        except OSError:
            return 0
        for leftover in leftovers:
            try:
                leftover.unlink()
                removed += 1
            except OSError as error:
                debug(__name__, "could not remove %s: %s", leftover, error)
        return removed

    def save(self, index: TranscriptIndex) -> None:
        """Shelve `index` (replacing any earlier one for its path); failures are logged."""
        target = self._file_for(index.path)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            import tempfile  # noqa: PLC0415 - only a save needs it; a read imports this module

            descriptor, temporary = tempfile.mkstemp(
                dir=self.directory, prefix=".", suffix=".idx.tmp"
            )
            try:
                with os.fdopen(descriptor, "wb") as file:
                    file.writelines(_encode(index))
                os.replace(temporary, target)
            except BaseException:
                os.unlink(temporary)
                raise
        except OSError as error:
            # A cache that cannot be written costs the next process a pass, nothing more.
            self._warn(f"could not shelve the index of {index.path}: {error}")


def _log_warning(message: str) -> None:
    logger(__name__).warning("%s", message)


def _arrays(index: TranscriptIndex) -> list[ChunkedIntArray]:
    lines: list[ChunkedIntArray] = [getattr(index, name) for name in _LINE_ARRAYS]
    return [*lines, *index.stripped_lines.arrays(), *index.result_links.arrays()]


def _encode(index: TranscriptIndex) -> Iterator[bytes]:
    # In parts, the digest last: the file is written a part at a time, the arrays
    # a chunk at a time, never joined (a buffer that grew with the chat, made every
    # shelving, would leave holes of every size in the heap).
    arrays = _arrays(index)
    header = {
        "rules": RULES_VERSION,
        "photos": index.photos,
        "identity": [index.path, *index.identity.as_json()],
        "arrays": [len(values) for values in arrays],
        "opaque": [
            [
                line.line_index,
                line.too_large,
                None if line.uuid_values is None else sorted(line.uuid_values),
            ]
            for line in index.opaque_lines
        ],
        "counts": [
            index.unparsable_lines,
            index.committed_lines,
            index.committed_end,
            index.committed_entries,
            index.committed_opaque,
            index.committed_unparsable,
            index.scanned_from,
        ],
        "fingerprint": index.fingerprint.hex(),
        "openCalls": index.open_calls,
        "tailResultLinks": [list(link) for link in index.tail_result_links],
    }
    header_bytes = json.dumps(header, separators=(",", ":")).encode("utf-8", "surrogateescape")
    digest = _new_digest()
    heading = (_MAGIC, len(header_bytes).to_bytes(8, "little"), header_bytes)
    for part in itertools.chain(heading, *(values.byte_chunks() for values in arrays)):
        digest.update(part)
        yield part
    yield digest.digest()


def _new_digest() -> blake2b:
    # What guards a shelved file's bytes, written last in it.
    return blake2b(digest_size=_DIGEST_BYTES)


def _decode(stored: bytes) -> TranscriptIndex:
    if not stored.startswith(_MAGIC) or len(stored) < len(_MAGIC) + 8 + _DIGEST_BYTES:
        raise _Malformed("not a shelved index of this format")
    # Views, not copies: a long chat's shelf is megabytes.
    data, digest = memoryview(stored)[:-_DIGEST_BYTES], stored[-_DIGEST_BYTES:]
    expected = _new_digest()
    expected.update(data)
    if expected.digest() != digest:
        raise _Malformed("damaged (digest differs)")
    at = len(_MAGIC)
    header_length = int.from_bytes(data[at : at + 8], "little")
    at += 8
    if header_length > min(_MAX_HEADER_BYTES, len(data) - at):
        raise _Malformed("header cut short")
    try:
        header = json.loads(bytes(data[at : at + header_length]).decode("utf-8", "surrogateescape"))
        at += header_length
        if header["rules"] != RULES_VERSION:
            raise _Malformed(f"rules version {header['rules']}, not {RULES_VERSION}")
        photos = header["photos"]
        if photos not in PHOTO_MODES:
            raise _Malformed(f"photo mode {photos!r}")
        path_text, device, inode, size, mtime_ns = header["identity"]
        identity = FileIdentity(device, inode, size, mtime_ns)
        counts = [int(count) for count in header["arrays"]]
        if len(counts) != _ARRAY_COUNT:
            raise _Malformed(f"{len(counts)} arrays, not {_ARRAY_COUNT}")
        arrays: list[ChunkedIntArray] = []
        for count in counts:
            stop = at + 8 * count
            if not at <= stop <= len(data):
                raise _Malformed(f"array {len(arrays) + 1} cut short")
            arrays.append(ChunkedIntArray.from_bytes(data[at:stop]))
            at = stop
        if at != len(data):
            raise _Malformed("trailing bytes")
        line_offsets, line_lengths, entry_lines, line_uuid_keys, *rest = arrays
        stripped = StrippedLines.from_arrays(*rest[:4])
        result_links = ToolResultLinks.from_arrays(*rest[4:])
        open_calls = {str(tool_id): int(entry) for tool_id, entry in header["openCalls"].items()}
        tail_result_links = tuple(
            (int(entry), int(line), int(result))
            for entry, line, result in header["tailResultLinks"]
        )
        opaque = tuple(
            OpaqueLine(
                int(line),
                bool(too_large),
                None if values_list is None else frozenset(str(v) for v in values_list),
            )
            for line, too_large, values_list in header["opaque"]
        )
        (
            unparsable,
            committed_lines,
            committed_end,
            committed_entries,
            committed_opaque,
            committed_unparsable,
            scanned_from,
        ) = (int(count) for count in header["counts"])
        fingerprint = bytes.fromhex(header["fingerprint"])
    except (AttributeError, KeyError, TypeError, ValueError) as error:
        raise _Malformed(f"header unreadable: {error}") from error
    line_count = len(line_offsets)
    stripped_line_numbers = stripped.arrays()[0]
    # Shapes a build would give; anything else was not written by one. (The
    # stripped lines ascend, `from_arrays` checked: their ends bound them.)
    consistent = (
        len(line_lengths) == line_count
        and len(line_uuid_keys) == line_count
        and committed_lines <= line_count
        and committed_entries <= len(entry_lines)
        and committed_opaque <= len(opaque)
        and all(0 <= line < line_count for line in entry_lines)
        and (
            not stripped_line_numbers
            or 0 <= stripped_line_numbers[0] <= stripped_line_numbers[-1] < line_count
        )
        and committed_end <= identity.size
        and all(
            0 <= entry < len(entry_lines) and 0 <= line < line_count
            for entry, line, _ in (*result_links, *tail_result_links)
        )
        and all(0 <= entry < len(entry_lines) for entry in open_calls.values())
    )
    if not consistent:
        raise _Malformed("inconsistent counts")
    return TranscriptIndex(
        identity=identity,
        path=str(path_text),
        line_offsets=line_offsets,
        line_lengths=line_lengths,
        entry_lines=entry_lines,
        line_uuid_keys=line_uuid_keys,
        stripped_lines=stripped,
        opaque_lines=opaque,
        unparsable_lines=unparsable,
        committed_lines=committed_lines,
        committed_end=committed_end,
        committed_entries=committed_entries,
        committed_opaque=committed_opaque,
        committed_unparsable=committed_unparsable,
        fingerprint=fingerprint,
        scanned_from=scanned_from,
        photos=photos,
        result_links=result_links,
        open_calls=open_calls,
        tail_result_links=tail_result_links,
    )
