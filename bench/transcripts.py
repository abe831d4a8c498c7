"""Transcript benchmark: history reads, the strip and photo fetches, beside baselines.

Run: `python bench/transcripts.py [--quick] [--reps K] [--allocator serve|default]
[--photos refs|original]`
from the repository root (or anywhere: it finds its own generator). It writes a
realistic transcript into a temporary directory (`bench/generate_transcript.py`:
2,000 lines, 150 pasted photos of ~1 MB, ~150 MB; then the same at 4x), measures
`beebox_impl.transcript` and, in the same run, the baselines each figure is judged
against, prints one table, and removes the directory. It is a report, not a test: it
exits 0 when a target is missed and says MISSED. `--quick` (200 lines, 15 photos, 3
repetitions) is the CI smoke configuration. Until `beebox_impl.transcript` imports,
only the baselines are measured.

How it measures:

- Every measured operation runs in a fresh child process (this script, re-run
  with a hidden `--child` argument), so one measurement's allocations, caches
  and imports cannot leak into another's figures. Each child first tunes glibc's
  malloc as `bbx serve` does (`beebox_impl.allocator`), ours and baselines alike:
  that is the process these reads run in. `--allocator default` leaves glibc's
  own settings (a host embedding the library untuned; the first read of a
  never-indexed file is then ~15% slower: its 256 KiB read buffers are faulted in
  afresh).
- Time: `time.perf_counter`, the best of K repetitions, in three states:
  "first read" = a fresh `TranscriptIndexCache` and no shelf for each
  repetition (the first read of this transcript ever: a history read builds the
  index, a photo fetch scans for its id without one); "new process" = a fresh
  cache for each repetition over an `IndexShelf` that an untimed first call
  filled (a box after a restart); "warm" = one untimed call first, then K timed
  calls on the same cache. For photo fetches the untimed call of those two states
  reads the history first (the box reads a chat before anyone asks for its photos,
  and keeps its index current after each turn): a fetch itself builds no index.
- Peak RSS growth: the child's high-water mark during the operation minus its RSS
  just before it (after imports and a `gc.collect`). The high-water mark is
  Linux's `VmHWM`, reset to the current RSS through `/proc/self/clear_refs`
  just before the operation. `getrusage(RUSAGE_SELF).ru_maxrss` is not used
  where `VmHWM` can be reset: a child started from another process inherits that
  process's high-water mark at exec (`signal->maxrss`), so "ru_maxrss after minus
  RSS before" would report the parent's size, not the operation's. Cold: over the
  first repetition, in a process that has done nothing else. Warm: over the K
  timed calls, after the one untimed call.
- Page cache: the file has just been written, so it is in the page cache; caches
  are not dropped. Every figure, ours and baselines alike, is a warm-page-cache
  figure: CPU and memory-copy cost, not disk.
- The first-read floor (an info row, not a target): the least an exact first
  read of a never-indexed file does with the standard library's JSON parser and
  libbase64, since `total` counts the lines that parse: read every byte once,
  check every photo's base64, `json.loads` every line with its photos cut out
  (cut untimed), summed. Its ratio to the naive reader bounds what the
  first-read rows can show (a faster validating parser would lower it).
- Every measured result is checked (entry counts, totals, minted references,
  the SHA-256 of a fetched photo, the strip against `beebox_spec.media`), so a
  fast wrong answer shows as WRONG, not as a win.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import functools
import gc
import hashlib
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

import pybase64
from generate_transcript import GeneratedTranscript, generate_transcript
from report import load_average, print_rows, print_summary

if TYPE_CHECKING:
    from beebox_impl.transcript import TranscriptIndexCache
    from beebox_spec.transcript import PhotoMode

TAIL: Final = 200
PAGE_OFFSET: Final = 0
PAGE_LIMIT: Final = 2000
CACHE_CAPACITY: Final = 64
# Photo lines the strip measurement holds in memory at once (~1 MB each).
STRIP_LINES: Final = 20
CHILD_TIMEOUT_S: Final = 240.0
# The warm fetch and its floor take milliseconds: more repetitions steady their best.
CHEAP_REPS: Final = 2
RESULT_MARK: Final = "BENCH-RESULT "

# Targets.
# The three states a read can find its index in: none anywhere (the first read of
# this transcript ever: it builds the index), shelved by an earlier process (a
# restart), or in this process's cache.
FIRST_READ: Final = "first read"
NEW_PROCESS: Final = "new process"
TAIL_VS_NAIVE: Final = 20.0  # tail read at least this many times faster than naive
RSS_LIMIT_MIB: Final = 16.0
PAGE_VS_SCAN: Final = 2.0  # full page read at most this many raw line scans
STRIP_GBPS: Final = 1.0  # 1 GB = 10**9 bytes
STRIP_VS_JSON: Final = 3.0
FETCH_VS_FLOOR: Final = 2.0
FETCH_VS_UUID_SCAN: Final = 10.0
COLD_FETCH_VS_SCAN: Final = 1.5

Status: TypeAlias = Literal["ok", "MISSED", "WRONG", "ERROR", "n/a", "info"]


@dataclass(frozen=True)
class Config:
    """One benchmark configuration."""

    name: str
    entries: int
    photos: int
    big_scale: int
    reps: int
    rounds: int  # every child run this many times, interleaved; best over all
    allocator: str = "serve"  # "serve": children tune malloc as `bbx serve` does
    photo_mode: str = "refs"  # the history's photo mode (`beebox_spec.transcript`, rule 2)


FULL: Final = Config("full", entries=2000, photos=150, big_scale=4, reps=5, rounds=2)
QUICK: Final = Config("quick", entries=200, photos=15, big_scale=4, reps=3, rounds=1)


# ---------------------------------------------------------------------------------
# What a child is asked to do, and what it answers
# ---------------------------------------------------------------------------------


@dataclass
class Job:
    """One measurement, run in a child process."""

    op: str
    path: str
    session_id: str
    reps: int
    mode: str = ""  # "cold" | "shelved" | "warm" for our operations
    photo_mode: str = "refs"  # the photo mode our reads use: "refs" (the box's) or "original"
    expected_total: int = 0
    expected_entries: int = 0
    expected_refs: list[str] = field(default_factory=list)  # the photo refs, in order
    photo_uuid: str = ""
    photo_offset: int = 0
    photo_length: int = 0
    photo_sha256: str = ""
    strip_offsets: list[int] = field(default_factory=list)


@dataclass
class Outcome:
    """A child's answer: seconds per repetition, peak RSS growth, the check."""

    times: list[float] = field(default_factory=list)
    rss_kib: int | None = None
    check: str = "ok"  # "ok", or what was wrong
    # "ok"; "wrong" (an answer failed its check); "error" (an exception, a crash, a
    # timeout); "absent" (the implementation is not there to measure).
    kind: str = "ok"
    extra: dict[str, float] = field(default_factory=dict)
    allocator: str = ""  # what the child's allocator settings were

    @property
    def best(self) -> float | None:
        """The best repetition, None when nothing was timed."""
        return min(self.times) if self.times else None

    @property
    def failed(self) -> bool:
        """The child could not measure, or measured a wrong answer."""
        return self.check != "ok" or not self.times


# ---------------------------------------------------------------------------------
# Peak RSS, measured in the child
# ---------------------------------------------------------------------------------


def _proc_status_kib(key: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_high_water_mark() -> bool:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as clear:
            clear.write("5")
    except OSError:
        return False
    return True


def _ru_maxrss_kib() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # macOS reports bytes, Linux KiB.
    return peak // 1024 if sys.platform == "darwin" else peak


class PeakMeter:
    """Peak RSS growth over a stretch of code, in KiB."""

    def __init__(self) -> None:
        self._before = 0
        self._exact = False

    def start(self) -> None:
        """Collect garbage, reset the high-water mark, note the RSS now."""
        gc.collect()
        self._exact = _reset_high_water_mark()
        rss = _proc_status_kib("VmRSS")
        self._before = rss if rss is not None else _ru_maxrss_kib()

    def growth_kib(self) -> int:
        """The high-water mark since `start`, minus the RSS at `start`."""
        peak = _proc_status_kib("VmHWM") if self._exact else None
        if peak is None:
            peak = _ru_maxrss_kib()
        return max(0, peak - self._before)


# ---------------------------------------------------------------------------------
# Baselines (run in the child)
# ---------------------------------------------------------------------------------


def raw_line_scan(path: str) -> int:
    """The raw line scan: every line read, nothing done with it."""
    count = 0
    with open(path, "rb") as handle:
        for _line in handle:
            count += 1
    return count


def chunked_read(path: str) -> int:
    """The file read in 1 MiB chunks, no line splitting: the real I/O floor."""
    total = 0
    with open(path, "rb", buffering=0) as handle:
        while chunk := handle.read(1 << 20):
            total += len(chunk)
    return total


def naive_history(path: str, session_id: str, tail: int) -> dict[str, Any]:
    """The naive reader: parse every line, walk its content blocks, keep the tail."""
    entries: list[dict[str, Any]] = []
    with open(path, "rb") as handle:
        for line in handle:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not isinstance(record, dict) or record.get("type") not in ("user", "assistant"):
                continue
            message = record.get("message")
            if not isinstance(message, dict) or record.get("isMeta") is True:
                continue
            blocks = _naive_blocks(message.get("content"), f"{session_id}/{record.get('uuid')}")
            shown = [block for block in blocks if block["type"] in ("text", "image")]
            if record["type"] == "user" and not shown:
                continue
            if not blocks:
                continue
            entries.append(
                {
                    "uuid": record.get("uuid", ""),
                    "type": record["type"],
                    "timestamp": record.get("timestamp", ""),
                    "content": blocks,
                }
            )
    return {"sessionId": session_id, "entries": entries[-tail:], "total": len(entries)}


def _naive_blocks(content: Any, ref_prefix: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        return []
    blocks: list[dict[str, Any]] = []
    image_index = 0
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            blocks.append({"type": "text", "text": block.get("text", "")})
        elif kind == "image":
            blocks.append({"type": "image", "imageRef": f"{ref_prefix}/{image_index}"})
            image_index += 1
        elif kind == "tool_use":
            blocks.append({"type": "tool_use", "toolName": block.get("name", "")})
        elif kind == "tool_result":
            blocks.append({"type": "tool_result", "toolUseId": block.get("tool_use_id", "")})
        elif kind == "thinking":
            blocks.append({"type": "thinking", "text": block.get("thinking", "")})
    return blocks


def fetch_floor(path: str, offset: int, length: int) -> bytes:
    """The least a fetch can do: seek, read the one line, find its payload, decode it.

    The line is read by its known length in one `read` (an index knows where a line
    ends; `readline` on a 1 MB line is several times slower).
    """
    with open(path, "rb") as handle:
        handle.seek(offset)
        line = handle.read(length)
    start = line.find(b'"data":"') + len(b'"data":"')
    end = line.find(b'"', start)
    return base64.b64decode(line[start:end])


def first_read_floor_inputs(path: str) -> tuple[list[bytes], list[bytes]]:
    """What an exact first read must parse and check, set aside untimed.

    Every line with its photos' base64 cut out (what must be parsed: `total`
    counts the lines that parse), and those photos' base64 (what must be checked
    to be base64 before it may be cut out). Cut with the generator's own key only
    (`"data":"`), which is what its photo lines hold.
    """
    lines: list[bytes] = []
    payloads: list[bytes] = []
    key = b'"data":"'
    with open(path, "rb") as handle:
        for line in handle:
            kept: list[bytes] = []
            position = 0
            while (start := line.find(key, position)) != -1:
                start += len(key)
                end = line.index(b'"', start)
                if end - start >= 1024:
                    kept.append(line[position:start])
                    payloads.append(line[start:end])
                    position = end
                else:
                    kept.append(line[position:end])
                    position = end
            kept.append(line[position:])
            lines.append(b"".join(kept))
    return lines, payloads


def first_read_floor(path: str, lines: list[bytes], payloads: list[bytes]) -> int:
    """The least an exact first read does with `json` and libbase64: three steps summed.

    Read every byte of the file once (256 KiB blocks, no line splitting), check
    every photo's base64 with libbase64 (`pybase64`, the fastest check in reach),
    and `json.loads` every line with its photos cut out. Finding the lines, the
    photos, and building entries are left out: this is a floor, not a reader.
    """
    with open(path, "rb", buffering=0) as handle:
        while handle.read(256 * 1024):
            pass
    for payload in payloads:
        pybase64.b64decode(payload, validate=True)
    parsed = 0
    for line in lines:
        try:
            json.loads(line)
        except ValueError:
            continue
        parsed += 1
    return parsed


def uuid_scan(path: str, uuid: str) -> int:
    """The original's lookup: scan lines from the top until one holds the needle."""
    needle = f'"uuid":"{uuid}"'.encode()
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            if needle in line:
                return number
    return 0


def json_strip(line: bytes) -> bytes:
    """The strip done by parsing: json.loads, replace every image's data, json.dumps."""
    record = json.loads(line)
    _replace_payloads(record)
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode()


def _replace_payloads(value: Any) -> None:
    if isinstance(value, dict):
        source = value.get("source")
        if value.get("type") == "image" and isinstance(source, dict) and "data" in source:
            source["data"] = "bbxStrippedMedia"
        for item in value.values():
            _replace_payloads(item)
    elif isinstance(value, list):
        for item in value:
            _replace_payloads(item)


# ---------------------------------------------------------------------------------
# The child
# ---------------------------------------------------------------------------------


def _timed(call: Callable[[], object]) -> tuple[float, object]:
    started = time.perf_counter()
    result = call()
    return time.perf_counter() - started, result


def _run_reps(
    job: Job, call: Callable[[], object], check: Callable[[object], str], outcome: Outcome
) -> None:
    """K timed repetitions; RSS over the first; every answer checked."""
    meter = PeakMeter()
    for rep in range(job.reps):
        gc.collect()
        if rep == 0:
            meter.start()
        seconds, result = _timed(call)
        if rep == 0:
            outcome.rss_kib = meter.growth_kib()
        verdict = check(result)
        del result
        if verdict != "ok":
            outcome.check, outcome.kind = verdict, "wrong"
            return
        outcome.times.append(seconds)


def _child(job: Job) -> Outcome:
    outcome = Outcome()
    if job.op == "probe":
        import beebox_impl.transcript as impl  # noqa: PLC0415 - the point is to try it

        names = (
            "TranscriptIndexCache",
            "TailSlice",
            "PageSlice",
            "read_history",
            "fetch_media",
            "find_media_line",
            "strip_inline_media_bytes",
        )
        missing = [name for name in names if not hasattr(impl, name)]
        outcome.check = "ok" if not missing else "missing: " + ", ".join(missing)
        return outcome
    if job.op == "raw_scan":
        _run_reps(job, lambda: raw_line_scan(job.path), _expect_truthy, outcome)
    elif job.op == "chunked_read":
        _run_reps(job, lambda: chunked_read(job.path), _expect_truthy, outcome)
    elif job.op == "first_read_floor":
        lines, payloads = first_read_floor_inputs(job.path)
        _run_reps(job, lambda: first_read_floor(job.path, lines, payloads), _expect_truthy, outcome)
    elif job.op == "naive_tail":
        _run_reps(
            job, lambda: naive_history(job.path, job.session_id, TAIL), _history_check(job), outcome
        )
    elif job.op == "fetch_floor":
        _run_reps(
            job,
            lambda: fetch_floor(job.path, job.photo_offset, job.photo_length),
            _photo_check(job),
            outcome,
        )
    elif job.op == "uuid_scan":
        _run_reps(job, lambda: uuid_scan(job.path, job.photo_uuid), _expect_truthy, outcome)
    elif job.op == "strip":
        _child_strip(job, outcome)
    elif job.op in ("tail", "page", "fetch"):
        _child_ours(job, outcome)
    else:
        outcome.check, outcome.kind = f"unknown op {job.op!r}", "error"
    return outcome


def _expect_truthy(result: object) -> str:
    return "ok" if result else f"unexpected answer {result!r}"


def _history_check(job: Job) -> Callable[[object], str]:
    def check(result: object) -> str:
        if not isinstance(result, dict):
            return f"history is a {type(result).__name__}"
        entries = result.get("entries")
        if result.get("total") != job.expected_total:
            return f"total {result.get('total')!r}, expected {job.expected_total}"
        if not isinstance(entries, list) or len(entries) != job.expected_entries:
            got = len(entries) if isinstance(entries, list) else entries
            return f"{got!r} entries, expected {job.expected_entries}"
        refs = [
            block.get("imageRef")
            for entry in entries
            for block in entry.get("content", [])
            if isinstance(block, dict) and block.get("type") == "image"
        ]
        if refs != job.expected_refs:
            return f"photo references differ ({len(refs)}, expected {len(job.expected_refs)})"
        return "ok"

    return check


def _photo_check(job: Job) -> Callable[[object], str]:
    def check(result: object) -> str:
        data = getattr(result, "data", result)
        media_type = getattr(result, "media_type", "image/jpeg")
        if not isinstance(data, bytes):
            return f"no photo: {result!r}"[:200]
        if hashlib.sha256(data).hexdigest() != job.photo_sha256:
            return "photo bytes differ from the ones written"
        if media_type != "image/jpeg":
            return f"media type {media_type!r}"
        return "ok"

    return check


def _child_ours(job: Job, outcome: Outcome) -> None:
    from beebox_impl.transcript import TranscriptIndexCache  # noqa: PLC0415 - absent until it is built

    photos: PhotoMode = "refs" if job.photo_mode == "refs" else "original"
    read, check = _our_read(job)
    if job.mode in ("cold", "shelved"):
        _time_fresh_caches(job, read, check, outcome, photos)
        return
    # Warm: one untimed call fills the cache, then the timed ones reuse it.
    cache = TranscriptIndexCache(capacity=CACHE_CAPACITY, photos=photos)
    verdict = check(_index_then_read(job, read, cache))
    if verdict != "ok":
        outcome.check, outcome.kind = "first call: " + verdict, "wrong"
        return
    call = functools.partial(read, cache)
    meter = PeakMeter()
    meter.start()
    for _ in range(job.reps):
        seconds, result = _timed(call)
        verdict = check(result)
        del result
        if verdict != "ok":
            outcome.check, outcome.kind = verdict, "wrong"
            return
        outcome.times.append(seconds)
    outcome.rss_kib = meter.growth_kib()


OurRead: TypeAlias = "Callable[[TranscriptIndexCache], object]"


def _our_read(job: Job) -> tuple[OurRead, Callable[[object], str]]:
    """Our operation ``job.op`` on a given cache (a history tail or page, a photo
    fetch), and the check of its answer."""
    from beebox_impl.transcript import (  # noqa: PLC0415 - absent until it is built
        PageSlice,
        TailSlice,
        fetch_media,
        read_history,
    )
    from beebox_spec.media import MediaRef  # noqa: PLC0415

    path = Path(job.path)
    if job.op == "tail":

        def tail(cache: TranscriptIndexCache) -> object:
            return read_history(path, job.session_id, TailSlice(tail=TAIL), cache=cache)

        return tail, _history_check(job)
    if job.op == "page":
        page = PageSlice(offset=PAGE_OFFSET, limit=PAGE_LIMIT)

        def paged(cache: TranscriptIndexCache) -> object:
            return read_history(path, job.session_id, page, cache=cache)

        return paged, _history_check(job)
    ref: MediaRef = {"sessionId": job.session_id, "entryUuid": job.photo_uuid, "index": 0}

    def fetch(cache: TranscriptIndexCache) -> object:
        return fetch_media(path, ref, cache=cache)

    return fetch, _photo_check(job)


def _index_then_read(job: Job, read: OurRead, cache: TranscriptIndexCache) -> object:
    """``read`` on ``cache`` once the session's index is in it."""
    from beebox_impl.transcript import TailSlice, read_history  # noqa: PLC0415 - absent until it is built

    # A photo lookup builds no index (a history read does): in the box, a chat's
    # photos are asked for after its history was read, and its index is current.
    read_history(Path(job.path), job.session_id, TailSlice(tail=1), cache=cache)
    return read(cache)


def _time_fresh_caches(
    job: Job,
    read: OurRead,
    check: Callable[[object], str],
    outcome: Outcome,
    photos: PhotoMode,
) -> None:
    """A fresh cache for every repetition: each one builds whatever it needs (cold),
    or loads it from the shelf an earlier process left (shelved)."""
    from beebox_impl.transcript import IndexShelf, TranscriptIndexCache  # noqa: PLC0415 - absent until it is built

    shelf = None
    if job.mode == "shelved":
        shelf = IndexShelf(Path(tempfile.mkdtemp(prefix="bbx-bench-shelf-")))
        # Untimed: the earlier process, which built the index and shelved it.
        cache = TranscriptIndexCache(capacity=CACHE_CAPACITY, shelf=shelf, photos=photos)
        _index_then_read(job, read, cache)
    meter = PeakMeter()
    for rep in range(job.reps):
        call = functools.partial(
            read, TranscriptIndexCache(capacity=CACHE_CAPACITY, shelf=shelf, photos=photos)
        )
        gc.collect()
        if rep == 0:
            meter.start()
        seconds, result = _timed(call)
        if rep == 0:
            outcome.rss_kib = meter.growth_kib()
        verdict = check(result)
        del result
        if verdict != "ok":
            outcome.check, outcome.kind = verdict, "wrong"
            return
        outcome.times.append(seconds)
    if shelf is not None:
        shutil.rmtree(shelf.directory)


def _child_strip(job: Job, outcome: Outcome) -> None:
    from beebox_spec.media import strip_inline_media  # noqa: PLC0415

    lines: list[bytes] = []
    with open(job.path, "rb") as handle:
        for offset in job.strip_offsets:
            handle.seek(offset)
            lines.append(handle.readline().rstrip(b"\n"))
    total = sum(len(line) for line in lines)
    outcome.extra["bytes"] = float(total)

    def best_of(strip: Callable[[bytes], bytes | None]) -> float:
        times = []
        for _ in range(job.reps):
            started = time.perf_counter()
            for line in lines:
                strip(line)
            times.append(time.perf_counter() - started)
        return min(times)

    outcome.extra["json"] = best_of(json_strip)
    outcome.extra["spec_regex"] = best_of(
        lambda line: (strip_inline_media(line.decode("utf-8")) or "").encode("utf-8")
    )
    try:
        from beebox_impl.transcript import strip_inline_media_bytes  # noqa: PLC0415
    except ImportError:
        outcome.check, outcome.kind = "not importable", "absent"
        return
    try:
        for line in lines:
            expected = strip_inline_media(line.decode("utf-8"))
            got = strip_inline_media_bytes(line)
            if got is None or expected is None or got != expected.encode("utf-8"):
                outcome.check = "strip differs from beebox_spec.media.strip_inline_media"
                outcome.kind = "wrong"
                return
        outcome.times.append(best_of(strip_inline_media_bytes))
    except Exception as error:  # the baselines above still count
        outcome.check, outcome.kind = f"{type(error).__name__}: {error}"[:300], "error"


def _child_main(raw: str, allocator: str) -> int:
    job = Job(**json.loads(raw))
    settings = _tune_allocator_as_serve_does() if allocator == "serve" else "glibc's own settings"
    try:
        outcome = _child(job)
    except Exception as error:  # a report, not a crash: the parent prints it
        outcome = Outcome(check=f"{type(error).__name__}: {error}"[:300], kind="error")
    outcome.allocator = settings
    print(RESULT_MARK + json.dumps(asdict(outcome)), flush=True)
    return 0


# ---------------------------------------------------------------------------------
# The parent: run children, build the table
# ---------------------------------------------------------------------------------


def _tune_allocator_as_serve_does() -> str:
    # The process that serves these reads is `bbx serve`, which tunes glibc's
    # malloc before anything else; ours and the baselines are measured alike.
    # Answers what was set, for the report's header.
    try:
        from beebox_impl.allocator import tune_allocator_for_serving  # noqa: PLC0415
    except ImportError as error:
        return f"not tuned (beebox_impl.allocator does not import: {error})"
    tuning = tune_allocator_for_serving()
    done = [
        name
        for name, set_ in (
            ("mmap threshold", tuning.mmap_threshold),
            ("trim threshold", tuning.trim_threshold),
            ("arena cap", tuning.arena_max),
        )
        if set_
    ]
    if not done:
        return f"not tuned ({tuning.reason}; or MALLOC_* set in the environment)"
    kept = "" if len(done) == 3 else " (the rest left as the environment set them)"
    return f"tuned as `bbx serve` does: {', '.join(done)} set{kept}"


def run_child(job: Job, allocator: str) -> Outcome:
    """Run `job` in a fresh interpreter and read its answer."""
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        json.dumps(asdict(job)),
        "--allocator",
        allocator,
    ]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        return Outcome(check=f"timed out after {CHILD_TIMEOUT_S:.0f} s", kind="error")
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(RESULT_MARK):
            data = json.loads(line[len(RESULT_MARK) :])
            return Outcome(
                times=[float(t) for t in data["times"]],
                rss_kib=None if data["rss_kib"] is None else int(data["rss_kib"]),
                check=str(data["check"]),
                kind=str(data["kind"]),
                extra={str(k): float(v) for k, v in data["extra"].items()},
                allocator=str(data.get("allocator", "")),
            )
    tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
    return Outcome(check=f"child exited {done.returncode}: {tail[0]}"[:300], kind="error")


@dataclass
class Row:
    """One line of the table."""

    measure: str
    ours: str
    baseline: str
    ratio: str
    target: str
    status: Status


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    millis = seconds * 1e3
    if millis >= 100:
        return f"{millis:.0f} ms"
    if millis >= 10:
        return f"{millis:.1f} ms"
    return f"{millis:.2f} ms"


def _mib(kib: int | None) -> str:
    return "—" if kib is None else f"{kib / 1024:.1f} MiB"


def _problem(outcome: Outcome) -> Status | None:
    if outcome.kind == "absent":
        return "n/a"
    if outcome.kind == "error":
        return "ERROR"
    if outcome.failed:
        return "WRONG"
    return None


class Report:
    """The rows, and the failures to explain under the table."""

    def __init__(self, impl_ready: bool) -> None:
        self.impl_ready = impl_ready
        self.rows: list[Row] = []
        self.notes: dict[int, str] = {}  # one note per failed outcome

    def note(self, outcome: Outcome, label: str) -> None:
        """Explain a failed measurement under the table, once."""
        self.notes.setdefault(id(outcome), f"{label}: {outcome.check}")

    def ours_status(self, outcome: Outcome | None, measure: str) -> Status | None:
        if outcome is None:
            return "n/a"
        problem = _problem(outcome)
        if problem in ("ERROR", "WRONG"):
            self.note(outcome, measure)
        return problem

    def speedup(
        self,
        measure: str,
        ours: Outcome | None,
        base: Outcome,
        *,
        base_name: str,
        at_least: float,
        target: str,
    ) -> None:
        """A row whose target is "at least `at_least` times faster than the baseline"."""
        status = self.ours_status(ours, measure)
        base_problem = _problem(base)
        if base_problem is not None:
            self.note(base, f"{measure} (baseline {base_name})")
        ours_best = ours.best if ours is not None else None
        ratio = "—"
        if status is None and base_problem is None and ours_best and base.best:
            speed = base.best / ours_best
            ratio = f"{speed:.1f}× faster" if speed >= 1 else f"{1 / speed:.2f}× slower"
            status = "ok" if speed >= at_least else "MISSED"
        self.rows.append(
            Row(
                measure,
                _ms(ours_best),
                f"{base_name} {_ms(base.best)}",
                ratio,
                target,
                status or "ERROR",
            )
        )

    def at_most(
        self,
        measure: str,
        ours: Outcome | None,
        base: Outcome,
        *,
        base_name: str,
        limit: float,
        target: str,
    ) -> None:
        """A row whose target is "at most `limit` times the baseline's time"."""
        status = self.ours_status(ours, measure)
        base_problem = _problem(base)
        if base_problem is not None:
            self.note(base, f"{measure} (baseline {base_name})")
        ours_best = ours.best if ours is not None else None
        ratio = "—"
        if status is None and base_problem is None and ours_best and base.best:
            times = ours_best / base.best
            ratio = f"{times:.2f}× baseline"
            status = "ok" if times <= limit else "MISSED"
        self.rows.append(
            Row(
                measure,
                _ms(ours_best),
                f"{base_name} {_ms(base.best)}",
                ratio,
                target,
                status or "ERROR",
            )
        )

    def rss(self, measure: str, ours: Outcome | None, base: Outcome, base_name: str) -> None:
        """A peak-RSS-growth row: at most `RSS_LIMIT_MIB`, whatever the file size."""
        status = self.ours_status(ours, measure)
        ours_kib = ours.rss_kib if ours is not None else None
        if status is None and ours_kib is not None:
            status = "ok" if ours_kib <= RSS_LIMIT_MIB * 1024 else "MISSED"
        ratio = "—"
        if ours_kib is not None and base.rss_kib:
            ratio = f"{ours_kib / base.rss_kib:.2f}× baseline"
        self.rows.append(
            Row(
                measure,
                _mib(ours_kib),
                f"{base_name} {_mib(base.rss_kib)}",
                ratio,
                f"≤ {RSS_LIMIT_MIB:.0f} MiB",
                status or "ERROR",
            )
        )

    def add(self, row: Row) -> None:
        """A row built by hand."""
        self.rows.append(row)


@dataclass
class SizeRun:
    """Everything measured on one file."""

    made: GeneratedTranscript
    raw_scan: Outcome
    chunked: Outcome
    uuid_scan: Outcome
    floor: Outcome
    tail_cold: Outcome | None
    tail_shelved: Outcome | None
    tail_warm: Outcome | None
    fetch_cold: Outcome | None
    fetch_shelved: Outcome | None
    fetch_warm: Outcome | None
    naive: Outcome | None = None
    first_read_floor: Outcome | None = None
    page_cold: Outcome | None = None
    page_shelved: Outcome | None = None
    page_warm: Outcome | None = None
    strip: Outcome | None = None


def _photo_job(op: str, made: GeneratedTranscript, reps: int, mode: str = "") -> Job:
    photo = made.middle_photo
    return Job(
        op=op,
        path=str(made.path),
        session_id=made.session_id,
        reps=reps,
        mode=mode,
        photo_uuid=photo.uuid,
        photo_offset=photo.offset,
        photo_length=photo.length,
        photo_sha256=photo.sha256,
    )


def _history_job(op: str, made: GeneratedTranscript, reps: int, mode: str, *, tail: bool) -> Job:
    offsets = made.entry_offsets
    first = max(0, len(offsets) - TAIL) if tail else min(PAGE_OFFSET, len(offsets))
    last = len(offsets) if tail else min(PAGE_OFFSET + PAGE_LIMIT, len(offsets))
    # The photos on the lines of entries [first, last) are the references expected.
    start = offsets[first] if first < len(offsets) else made.size_bytes
    stop = offsets[last] if last < len(offsets) else made.size_bytes
    refs = [
        f"{made.session_id}/{photo.uuid}/0" for photo in made.photos if start <= photo.offset < stop
    ]
    return Job(
        op=op,
        path=str(made.path),
        session_id=made.session_id,
        reps=reps,
        mode=mode,
        expected_total=made.history_total,
        expected_entries=last - first,
        expected_refs=refs,
    )


def merge_outcomes(outcomes: list[Outcome]) -> Outcome:
    """Several children's runs of one measurement as one: all times, the largest RSS."""
    for outcome in outcomes:
        if outcome.failed:
            return outcome
    peaks = [outcome.rss_kib for outcome in outcomes if outcome.rss_kib is not None]
    extras: dict[str, float] = {}
    for outcome in outcomes:
        for key, value in outcome.extra.items():
            extras[key] = min(value, extras.get(key, value))  # best times (bytes: equal)
    return Outcome(
        times=[seconds for outcome in outcomes for seconds in outcome.times],
        rss_kib=max(peaks) if peaks else None,
        extra=extras,
    )


def measure_size(
    made: GeneratedTranscript,
    config: Config,
    impl_ready: bool,
    *,
    full_set: bool,
    say: Callable[[str], None],
) -> SizeRun:
    """Run every measurement that applies to this file, each in its own child.

    The children run in rounds, ours next to its baseline, so a spell of load on
    the machine lands on both sides of a ratio; each figure is the best over all
    its rounds.
    """
    reps = config.reps
    path, sid = str(made.path), made.session_id
    jobs: dict[str, Job] = {"raw_scan": Job("raw_scan", path, sid, reps)}
    if impl_ready:
        jobs["tail_cold"] = _history_job("tail", made, reps, "cold", tail=True)
    if full_set:
        jobs["naive"] = _history_job("naive_tail", made, reps, "", tail=True)
        jobs["first_read_floor"] = Job("first_read_floor", path, sid, reps)
    if impl_ready:
        jobs["tail_shelved"] = _history_job("tail", made, reps, "shelved", tail=True)
        jobs["tail_warm"] = _history_job("tail", made, reps, "warm", tail=True)
    jobs["floor"] = _photo_job("fetch_floor", made, reps * CHEAP_REPS)
    if impl_ready:
        jobs["fetch_warm"] = _photo_job("fetch", made, reps * CHEAP_REPS, "warm")
    jobs["uuid_scan"] = _photo_job("uuid_scan", made, reps)
    if impl_ready:
        jobs["fetch_cold"] = _photo_job("fetch", made, reps, "cold")
        jobs["fetch_shelved"] = _photo_job("fetch", made, reps * CHEAP_REPS, "shelved")
    jobs["chunked"] = Job("chunked_read", path, sid, reps)
    if full_set and impl_ready:
        jobs["page_cold"] = _history_job("page", made, reps, "cold", tail=False)
        jobs["page_shelved"] = _history_job("page", made, reps, "shelved", tail=False)
        jobs["page_warm"] = _history_job("page", made, reps, "warm", tail=False)
    if full_set:
        jobs["strip"] = Job("strip", path, sid, reps)
        jobs["strip"].strip_offsets = [photo.offset for photo in made.photos[:STRIP_LINES]]
    for job in jobs.values():
        job.photo_mode = config.photo_mode
    runs: dict[str, list[Outcome]] = {key: [] for key in jobs}
    for round_number in range(1, config.rounds + 1):
        for key, job in jobs.items():
            say(f"  {made.scale}× round {round_number}/{config.rounds}: {key} …")
            runs[key].append(run_child(job, config.allocator))
    merged = {key: merge_outcomes(outcomes) for key, outcomes in runs.items()}
    return SizeRun(
        made=made,
        raw_scan=merged["raw_scan"],
        chunked=merged["chunked"],
        uuid_scan=merged["uuid_scan"],
        floor=merged["floor"],
        tail_cold=merged.get("tail_cold"),
        tail_shelved=merged.get("tail_shelved"),
        tail_warm=merged.get("tail_warm"),
        fetch_cold=merged.get("fetch_cold"),
        fetch_shelved=merged.get("fetch_shelved"),
        fetch_warm=merged.get("fetch_warm"),
        naive=merged.get("naive"),
        first_read_floor=merged.get("first_read_floor"),
        page_cold=merged.get("page_cold"),
        page_shelved=merged.get("page_shelved"),
        page_warm=merged.get("page_warm"),
        strip=merged.get("strip"),
    )


def build_report(small: SizeRun, big: SizeRun, impl_ready: bool) -> Report:
    """The table rows, targets judged."""
    report = Report(impl_ready)
    x_big = f"{big.made.scale}×"
    assert small.naive is not None
    assert small.strip is not None
    # 1. Tail read.
    for mode, outcome in (
        (FIRST_READ, small.tail_cold),
        (NEW_PROCESS, small.tail_shelved),
        ("warm", small.tail_warm),
    ):
        report.speedup(
            f"tail-{TAIL} {mode} vs naive (1×)",
            outcome,
            small.naive,
            base_name="naive",
            at_least=TAIL_VS_NAIVE,
            target=f"≥ {TAIL_VS_NAIVE:.0f}× faster",
        )
        report.speedup(
            f"tail-{TAIL} {mode} vs raw scan (1×)",
            outcome,
            small.raw_scan,
            base_name="raw scan",
            at_least=1.0,
            target="faster",
        )
    for mode, outcome in (
        (FIRST_READ, big.tail_cold),
        (NEW_PROCESS, big.tail_shelved),
        ("warm", big.tail_warm),
    ):
        report.speedup(
            f"tail-{TAIL} {mode} vs raw scan ({x_big})",
            outcome,
            big.raw_scan,
            base_name="raw scan",
            at_least=1.0,
            target="faster",
        )
    _first_read_floor_row(report, small)
    for run, x, base, base_name in (
        (small, "1×", small.naive, "naive"),
        (big, x_big, big.raw_scan, "raw scan"),
    ):
        report.rss(f"tail-{TAIL} {FIRST_READ}, peak RSS ({x})", run.tail_cold, base, base_name)
        report.rss(f"tail-{TAIL} {NEW_PROCESS}, peak RSS ({x})", run.tail_shelved, base, base_name)
        report.rss(f"tail-{TAIL} warm, peak RSS ({x})", run.tail_warm, base, base_name)
    # 2. Full page read.
    for mode, outcome in (
        (FIRST_READ, small.page_cold),
        (NEW_PROCESS, small.page_shelved),
        ("warm", small.page_warm),
    ):
        report.at_most(
            f"page {PAGE_OFFSET}+{PAGE_LIMIT} {mode} (1×)",
            outcome,
            small.raw_scan,
            base_name="raw scan",
            limit=PAGE_VS_SCAN,
            target=f"≤ {PAGE_VS_SCAN:.0f}× raw scan",
        )
    # 3. Strip throughput.
    _strip_rows(report, small.strip)
    # 4. Media fetch.
    for mode, x, run in (
        ("warm", "1×", small),
        ("warm", x_big, big),
        (NEW_PROCESS, "1×", small),
        (NEW_PROCESS, x_big, big),
    ):
        report.at_most(
            f"fetch {mode} ({x})",
            run.fetch_warm if mode == "warm" else run.fetch_shelved,
            run.floor,
            base_name="floor",
            limit=FETCH_VS_FLOOR,
            target=f"≤ {FETCH_VS_FLOOR:.0f}× floor",
        )
    for run, x in ((small, "1×"), (big, x_big)):
        report.speedup(
            f"fetch warm vs uuid scan ({x})",
            run.fetch_warm,
            run.uuid_scan,
            base_name="uuid scan",
            at_least=FETCH_VS_UUID_SCAN,
            target=f"≥ {FETCH_VS_UUID_SCAN:.0f}× faster",
        )
    for run, x in ((small, "1×"), (big, x_big)):
        report.at_most(
            f"fetch {FIRST_READ} ({x})",
            run.fetch_cold,
            run.raw_scan,
            base_name="raw scan",
            limit=COLD_FETCH_VS_SCAN,
            target=f"≤ {COLD_FETCH_VS_SCAN}× raw scan",
        )
    return report


def _first_read_floor_row(report: Report, run: SizeRun) -> None:
    """How far below naive any exact first read can get: the bound on that row."""
    floor, naive = run.first_read_floor, run.naive
    assert floor is not None
    assert naive is not None
    problem = _problem(floor) or _problem(naive)
    ratio = "—"
    if problem is None and floor.best and naive.best:
        ratio = f"{naive.best / floor.best:.1f}× faster"
    else:
        report.note(floor, "first-read floor")
    report.add(
        Row(
            "first-read floor vs naive (1×): read + base64 check + parse, summed",
            _ms(floor.best),
            f"naive {_ms(naive.best)}",
            ratio,
            f"bounds the {FIRST_READ} rows",
            "info" if problem is None else "ERROR",
        )
    )


def _strip_rows(report: Report, strip: Outcome) -> None:
    size = strip.extra.get("bytes", 0.0)
    json_s = strip.extra.get("json")
    regex_s = strip.extra.get("spec_regex")

    def gbps(seconds: float | None) -> str:
        return "—" if not seconds else f"{size / seconds / 1e9:.2f} GB/s"

    problem = report.ours_status(strip, "strip") if report.impl_ready else "n/a"
    ours_s = strip.best
    status: Status = problem or "ERROR"
    if problem is None and ours_s:
        status = "ok" if size / ours_s / 1e9 >= STRIP_GBPS else "MISSED"
    report.add(
        Row(
            "strip 1 MB photo lines, throughput",
            gbps(ours_s),
            f"spec regex {gbps(regex_s)}",
            "—",
            f"≥ {STRIP_GBPS:.0f} GB/s",
            status,
        )
    )
    status = problem or "ERROR"
    ratio = "—"
    if problem is None and ours_s and json_s:
        speed = json_s / ours_s
        ratio = f"{speed:.1f}× faster" if speed >= 1 else f"{1 / speed:.2f}× slower"
        status = "ok" if speed >= STRIP_VS_JSON else "MISSED"
    report.add(
        Row(
            "strip vs json.loads+replace+dumps",
            gbps(ours_s),
            f"json {gbps(json_s)}",
            ratio,
            f"≥ {STRIP_VS_JSON:.0f}× faster",
            status,
        )
    )


def print_report(report: Report) -> None:
    """The table, the notes on what failed, then the summary line."""
    print_rows(report.rows)
    print()
    for note in report.notes.values():
        print(f"  ! {note}")
    if not report.impl_ready:
        print("SUMMARY: beebox_impl.transcript is not importable yet: baselines only.")
    else:
        print_summary(report.rows)


def _probe_impl(allocator: str) -> tuple[bool, str, str]:
    # Whether the implementation imports, and what a child's allocator settings are.
    outcome = run_child(Job("probe", "", "", 0), allocator)
    return outcome.check == "ok", outcome.check, outcome.allocator


def _describe(made: GeneratedTranscript, run: SizeRun) -> str:
    tail_bytes = made.size_bytes - made.tail_start_offset(TAIL)
    tail_photos = sum(1 for p in made.photos if p.offset >= made.tail_start_offset(TAIL))
    chunked = run.chunked.best
    return (
        f"{made.scale}×: {made.size_bytes / 1e6:.0f} MB, {made.line_count} lines, "
        f"{made.history_total} history entries, {len(made.photos)} photos; the last {TAIL} "
        f"entries span {tail_bytes / 1e6:.1f} MB ({tail_bytes / made.size_bytes:.0%}, "
        f"{tail_photos} photos); middle photo at line {made.middle_photo.line_number}; "
        f"1 MiB-chunk read of the file {_ms(chunked)}"
    )


def main(argv: list[str] | None = None) -> int:
    """Generate, measure, print; exit 0 whatever the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small configuration for CI smoke")
    parser.add_argument("--reps", type=int, default=None, help="repetitions per child")
    parser.add_argument("--rounds", type=int, default=None, help="rounds of children")
    parser.add_argument(
        "--allocator",
        choices=("serve", "default"),
        default="serve",
        help="serve: every child tunes glibc's malloc as `bbx serve` does (the default); "
        "default: glibc's own settings",
    )
    parser.add_argument(
        "--photos",
        choices=("refs", "original"),
        default="refs",
        help="the history's photo mode our reads use: refs (the box's default: every "
        "photo by reference, every line scanned for payloads) or original (only lines "
        "over 256 KiB stripped)",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        return _child_main(args.child, args.allocator)
    config = QUICK if args.quick else FULL
    config = dataclasses.replace(
        config,
        reps=args.reps or config.reps,
        rounds=args.rounds or config.rounds,
        allocator=args.allocator,
        photo_mode=args.photos,
    )
    reps = config.reps
    started = time.perf_counter()

    def say(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f} s]{message}", file=sys.stderr, flush=True)

    impl_ready, why, allocator_settings = _probe_impl(config.allocator)
    load_before = load_average()
    print(
        f"beebox transcript benchmark ({config.name}): each measure in a fresh child, "
        f"{config.rounds} round(s) of children, ours beside its baseline; best of "
        f"{reps * config.rounds} ({reps * CHEAP_REPS * config.rounds} for the warm fetch "
        "and its floor)"
    )
    print(
        f"python {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} CPUs; implementation: "
        + ("beebox_impl.transcript" if impl_ready else f"NOT AVAILABLE ({why})")
    )
    print(
        f"allocator, in every child (ours and baselines alike): {allocator_settings} "
        "(--allocator serve|default)"
    )
    print(f"photo mode of our reads: {config.photo_mode} (--photos refs|original)")
    with tempfile.TemporaryDirectory(prefix="beebox-bench-") as tmp:
        runs: list[SizeRun] = []
        for scale in (1, config.big_scale):
            say(f" generating {scale}× …")
            made = generate_transcript(
                Path(tmp), entries=config.entries, photos=config.photos, scale=scale
            )
            runs.append(measure_size(made, config, impl_ready, full_set=scale == 1, say=say))
            made.path.unlink()  # one file on disk (and in the page cache) at a time
    print(
        f"load average (1 min): {load_before} at the start, {load_average()} at the end, "
        f"on {os.cpu_count()} CPUs (other processes' load makes absolute figures noisy)"
    )
    print("files:")
    for run in runs:
        print("  " + _describe(run.made, run))
    print(
        "The file is in the page cache after generation (caches are not dropped): all "
        "figures, ours and baselines, are warm-page-cache figures."
    )
    print(
        "Peak RSS growth = VmHWM (reset via /proc/self/clear_refs) minus VmRSS before the "
        "operation, in a fresh child; raw scan = `for line in open(path, 'rb')`; floor = "
        "open + seek + read(line length) + bytes.find + base64.b64decode."
    )
    print()
    print_report(build_report(runs[0], runs[1], impl_ready))
    say(f" done in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
