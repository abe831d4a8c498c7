"""A deterministic, realistic Claude Code transcript for benchmarks.

`generate_transcript(directory, entries=2000, photos=150, seed=0)` writes
`<directory>/<sessionId>.jsonl`: `entries` lines of compact JSON
(`separators=(",", ":")`, `ensure_ascii=False`, the way Claude Code writes them), of
which `photos` are user prompts carrying one pasted photo of about `photo_chars`
base64 characters (~1 MB by default). `scale` multiplies both counts. The same
arguments always write the same bytes.

What the lines look like (`docs/sources.md#format-2` (§2–§4)): turns
made of an optional `file-history-snapshot` (metadata, no uuid), a user prompt
(a string, or `[ide text, image, text]` blocks when it carries a photo), hook
`progress` lines, assistant lines one per content block (`thinking`, `text`,
`tool_use`, sharing `message.id` and `requestId` within one response), `bash` /
`agent` progress while a tool runs, the `tool_result` user line with its
`toolUseResult`, and a closing `system` `turn_duration`. Every chain line has
`uuid`, `parentUuid` (the previous chain line's uuid, null for the first),
`sessionId`, `timestamp`, `cwd`, `version`, `gitBranch`, `userType`,
`isSidechain`. Text is ASCII with some non-ASCII (`→`, accents) so byte and
character offsets differ, as in real files.

The file is streamed: one line is built, written and dropped at a time, and each
photo's bytes are drawn from the seeded generator when its line is written.

What the caller gets back (`GeneratedTranscript`) is what a benchmark needs to
check and aim its measurements: the photo lines (uuid, line number, byte offset,
length, SHA-256 of the decoded photo), which one is in the middle, and where each
line the history read turns into an entry starts (so the bytes a tail read must
cover are known).

Run it by hand: `python bench/generate_transcript.py OUT_DIR [--entries N]
[--photos P] [--scale S] [--seed K]`.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import random
import uuid as uuid_module
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias

__all__ = [
    "DEFAULT_ENTRIES",
    "DEFAULT_PHOTOS",
    "DEFAULT_PHOTO_CHARS",
    "GeneratedTranscript",
    "PhotoLine",
    "generate_transcript",
]

DEFAULT_ENTRIES: Final = 2000
DEFAULT_PHOTOS: Final = 150
# Base64 characters per photo: ~1 MB of line, ~750 KB of decoded JPEG.
DEFAULT_PHOTO_CHARS: Final = 1_000_000

_VERSION: Final = "2.1.39"
_MODEL: Final = "claude-opus-4-6"
_CWD: Final = "/home/USER/projects/beebox-worktrees/beebox-photos"
_BRANCH: Final = "beebox-photos"
_SLUG: Final = "radiant-floating-music"
_START: Final = datetime(2026, 2, 12, 16, 2, 23, 545000, tzinfo=UTC)

# The smallest turn: prompt, one assistant line, the closing turn_duration.
_MIN_TURN_LINES: Final = 3
# Average lines per turn when photos do not force more turns.
_MEAN_TURN_LINES: Final = 12

_WORDS: Final = (
    "the",
    "a",
    "transcript",
    "photo",
    "line",
    "index",
    "cache",
    "reader",
    "offset",
    "seek",
    "tail",
    "page",
    "entry",
    "session",
    "history",
    "strip",
    "payload",
    "base64",
    "uuid",
    "parent",
    "chain",
    "message",
    "content",
    "block",
    "image",
    "text",
    "assistant",
    "user",
    "tool",
    "result",
    "progress",
    "hook",
    "system",
    "bench",
    "file",
    "byte",
    "stream",
    "chunk",
    "memory",
    "bound",
    "fetch",
    "media",
    "reference",
    "mint",
    "scan",
    "backward",
    "forward",
    "newline",
    "json",
    "compact",
    "parse",
    "test",
    "spec",
    "design",
    "review",
    "queue",
    "durable",
    "journal",
    "claim",
    "send",
    "box",
    "engine",
    "run",
    "thread",
    "café",
    "naïve",
    "résumé",
    "→",
    "≥",
    "≤",
    "✓",
    "—",
    "über",
    "straße",
)

_TOOLS: Final = ("Bash", "Read", "Edit", "Grep", "Glob", "Write", "TodoWrite", "Task")

JsonDict: TypeAlias = dict[str, Any]
_LineKind: TypeAlias = Literal[
    "snapshot", "prompt", "hook", "thinking", "text", "tool_use", "bash", "agent", "result", "end"
]


@dataclass(frozen=True)
class PhotoLine:
    """One user prompt carrying a pasted photo."""

    uuid: str
    line_number: int  # 1-based, every line counts
    offset: int  # byte offset of the line's first byte
    length: int  # bytes, without the terminating newline
    sha256: str  # of the decoded photo bytes
    media_type: str


@dataclass(frozen=True)
class GeneratedTranscript:
    """The file written, and what a benchmark needs to know about it."""

    path: Path
    session_id: str
    seed: int
    scale: int
    line_count: int
    size_bytes: int
    photos: tuple[PhotoLine, ...]
    # Byte offset of each line the history read turns into an entry, in file order
    # (user prompts and assistant lines; tool_result turns, progress, system and
    # metadata lines give no entry). len() is the history's `total`.
    entry_offsets: tuple[int, ...]

    @property
    def photo_uuids(self) -> tuple[str, ...]:
        """The uuids of the photo lines, in file order."""
        return tuple(photo.uuid for photo in self.photos)

    @property
    def middle_photo(self) -> PhotoLine:
        """The photo line halfway through the photos (and so through the file)."""
        return self.photos[len(self.photos) // 2]

    @property
    def history_total(self) -> int:
        """How many entries the whole history read answers."""
        return len(self.entry_offsets)

    def tail_start_offset(self, tail: int) -> int:
        """Byte offset where the lines of the last `tail` entries begin."""
        if not self.entry_offsets:
            return self.size_bytes
        return self.entry_offsets[max(0, len(self.entry_offsets) - tail)]


def generate_transcript(
    directory: Path,
    *,
    entries: int = DEFAULT_ENTRIES,
    photos: int = DEFAULT_PHOTOS,
    photo_chars: int = DEFAULT_PHOTO_CHARS,
    scale: int = 1,
    seed: int = 0,
) -> GeneratedTranscript:
    """Write the transcript into `directory` and describe it.

    `entries` is the number of lines written (chain lines and the few metadata
    lines alike), `photos` how many user prompts carry a photo of about
    `photo_chars` base64 characters; `scale` multiplies both.
    """
    if scale < 1:
        raise ValueError(f"scale must be >= 1, got {scale}")
    line_total = entries * scale
    photo_total = photos * scale
    if photo_chars < 1368:
        # Below ~1 KiB of base64 the strip rule (1,024 characters) would not match.
        raise ValueError(f"photo_chars must be >= 1368, got {photo_chars}")
    directory.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    session_id = _uuid4(rng)
    turns = _plan_turns(rng, line_total, photo_total)
    writer = _Writer(rng, session_id, photo_chars)
    path = directory / f"{session_id}.jsonl"
    photo_lines: list[PhotoLine] = []
    entry_offsets: list[int] = []
    offset = 0
    line_number = 0
    with path.open("wb") as out:
        for kinds, has_photo in turns:
            for kind in kinds:
                record, photo_digest = writer.record(kind, has_photo)
                data = json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode()
                out.write(data)
                out.write(b"\n")
                line_number += 1
                if kind in ("prompt", "thinking", "text", "tool_use"):
                    entry_offsets.append(offset)
                if photo_digest is not None:
                    photo_lines.append(
                        PhotoLine(
                            uuid=str(record["uuid"]),
                            line_number=line_number,
                            offset=offset,
                            length=len(data),
                            sha256=photo_digest,
                            media_type="image/jpeg",
                        )
                    )
                offset += len(data) + 1
    return GeneratedTranscript(
        path=path,
        session_id=session_id,
        seed=seed,
        scale=scale,
        line_count=line_number,
        size_bytes=offset,
        photos=tuple(photo_lines),
        entry_offsets=tuple(entry_offsets),
    )


# ---------------------------------------------------------------------------------
# The plan: which lines, in which turns (small: a few kinds per line)
# ---------------------------------------------------------------------------------


def _plan_turns(
    rng: random.Random, line_total: int, photo_total: int
) -> list[tuple[list[_LineKind], bool]]:
    """Turns as (line kinds, carries a photo); their lengths sum to `line_total`."""
    turn_count = max(1, line_total // _MEAN_TURN_LINES, (photo_total * 5 + 3) // 4)
    if turn_count * _MIN_TURN_LINES > line_total or photo_total > turn_count:
        raise ValueError(
            f"{line_total} lines cannot hold {photo_total} photo turns "
            f"of at least {_MIN_TURN_LINES} lines"
        )
    lengths = [_MIN_TURN_LINES] * turn_count
    # The lines left over go to turns at random (a multinomial spread).
    for index in rng.choices(range(turn_count), k=line_total - turn_count * _MIN_TURN_LINES):
        lengths[index] += 1
    # Photos evenly over the turns, the first one a little way in.
    photo_turns = {(2 * k + 1) * turn_count // (2 * photo_total) for k in range(photo_total)}
    return [(_turn_kinds(rng, length), t in photo_turns) for t, length in enumerate(lengths)]


def _turn_kinds(rng: random.Random, length: int) -> list[_LineKind]:
    kinds: list[_LineKind] = []
    # The rewind snapshot precedes the prompt it belongs to.
    if length >= 6 and rng.random() < 0.4:
        kinds.append("snapshot")
    kinds.append("prompt")
    remaining = length - len(kinds) - 1  # the closing turn_duration is kept aside
    if remaining >= 3 and rng.random() < 0.5:
        kinds.append("hook")
        remaining -= 1
    if remaining >= 3 and rng.random() < 0.5:
        kinds.append("thinking")
        remaining -= 1
    while remaining > 0:
        # A tool call: the call, progress while it runs, its result.
        if remaining >= 3 and rng.random() < 0.7:
            progress = min(remaining - 3, rng.choice((0, 1, 2, 3, 5, 8)))
            kinds.append("tool_use")
            kinds.extend(rng.choice(("bash", "agent")) for _ in range(progress))
            kinds.append("result")
            remaining -= progress + 2
        else:
            kinds.append("text")
            remaining -= 1
    kinds.append("end")
    return kinds


# ---------------------------------------------------------------------------------
# The lines
# ---------------------------------------------------------------------------------


def _uuid4(rng: random.Random) -> str:
    return str(uuid_module.UUID(int=rng.getrandbits(128), version=4))


def _token(rng: random.Random, prefix: str, length: int = 24) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    return prefix + "".join(rng.choice(alphabet) for _ in range(length))


class _Writer:
    """Builds one record at a time, keeping the chain and the clock."""

    def __init__(self, rng: random.Random, session_id: str, photo_chars: int) -> None:
        self._rng = rng
        self._session_id = session_id
        self._photo_bytes = photo_chars * 3 // 4
        self._parent: str | None = None
        self._clock = _START
        self._message_id = ""
        self._request_id = ""
        self._tool_id = ""
        self._tool_name = "Bash"
        self._prompt_uuid = ""
        self._assistant_uuid = ""
        self._photo_number = 0

    # -- shared pieces ---------------------------------------------------------

    def _tick(self, low_ms: int, high_ms: int) -> str:
        self._clock += timedelta(milliseconds=self._rng.randint(low_ms, high_ms))
        return (
            self._clock.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self._clock.microsecond // 1000:03d}Z"
        )

    def _words(self, low: int, high: int) -> str:
        return " ".join(self._rng.choices(_WORDS, k=self._rng.randint(low, high)))

    def _chain(self, kind: str, *, slug: bool = True) -> JsonDict:
        """The common fields of a chain line, with a fresh uuid linked to the last."""
        record: JsonDict = {
            "parentUuid": self._parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": _CWD,
            "sessionId": self._session_id,
            "version": _VERSION,
            "gitBranch": _BRANCH,
        }
        if slug:
            record["slug"] = _SLUG
        record["type"] = kind
        return record

    def _finish(self, record: JsonDict, low_ms: int = 5, high_ms: int = 900) -> JsonDict:
        record["uuid"] = _uuid4(self._rng)
        record["timestamp"] = self._tick(low_ms, high_ms)
        self._parent = record["uuid"]
        return record

    def _usage(self) -> JsonDict:
        created = self._rng.randint(0, 20000)
        return {
            "input_tokens": self._rng.randint(1, 12),
            "cache_creation_input_tokens": created,
            "cache_read_input_tokens": self._rng.randint(10000, 180000),
            "cache_creation": {
                "ephemeral_5m_input_tokens": created,
                "ephemeral_1h_input_tokens": 0,
            },
            "output_tokens": self._rng.randint(1, 2400),
            "service_tier": "standard",
            "inference_geo": "global",
        }

    def _assistant(self, block: JsonDict, stop_reason: str | None) -> JsonDict:
        record = self._chain("assistant")
        del record["type"]  # assistant lines put `type` after `message`
        record["message"] = {
            "model": _MODEL,
            "id": self._message_id,
            "type": "message",
            "role": "assistant",
            "content": [block],
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": self._usage(),
        }
        record["requestId"] = self._request_id
        record["type"] = "assistant"
        finished = self._finish(record, 200, 9000)
        self._assistant_uuid = finished["uuid"]
        return finished

    def _new_response(self) -> None:
        self._message_id = _token(self._rng, "msg_01")
        self._request_id = _token(self._rng, "req_011C")

    # -- one record per kind ---------------------------------------------------

    def record(self, kind: _LineKind, has_photo: bool) -> tuple[JsonDict, str | None]:
        """The next record of `kind`, and the photo's SHA-256 when it carries one."""
        if kind == "prompt":
            return self._prompt(has_photo)
        builders = {
            "snapshot": self._snapshot,
            "hook": self._hook,
            "thinking": self._thinking,
            "text": self._text,
            "tool_use": self._tool_use,
            "bash": self._bash_progress,
            "agent": self._agent_progress,
            "result": self._tool_result,
            "end": self._turn_end,
        }
        return builders[kind](), None

    def _snapshot(self) -> JsonDict:
        message_id = _uuid4(self._rng)
        backups = {
            f"{_CWD}/beebox_impl/{self._rng.choice(_WORDS).strip('→≥≤✓—')}.py": {
                "backupFileName": f"{_token(self._rng, '', 16)}@v{version}",
                "version": version,
                "backupTime": self._tick(0, 3),
            }
            for version in range(1, self._rng.randint(1, 4))
        }
        return {
            "type": "file-history-snapshot",
            "messageId": message_id,
            "snapshot": {
                "messageId": message_id,
                "trackedFileBackups": backups,
                "timestamp": self._tick(0, 3),
            },
            "isSnapshotUpdate": False,
        }

    def _prompt(self, has_photo: bool) -> tuple[JsonDict, str | None]:
        record = self._chain("user", slug=False)
        digest: str | None = None
        prompt = self._words(4, 60)
        if has_photo:
            self._photo_number += 1
            # A JPEG header, then noise: random bytes do not compress, like a photo.
            photo = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + self._rng.randbytes(
                self._photo_bytes - 11
            )
            digest = hashlib.sha256(photo).hexdigest()
            record["message"] = {
                "role": "user",
                "content": [
                    {
                        "type": "text",
                        "text": f"<ide_opened_file>The user opened the file {_CWD}/docs/"
                        f"photo-{self._photo_number}.md in the IDE. This may or may not "
                        "be related to the current task.</ide_opened_file>",
                    },
                    {
                        "type": "image",
                        "source": {
                            "type": "base64",
                            "media_type": "image/jpeg",
                            "data": base64.b64encode(photo).decode("ascii"),
                        },
                    },
                    {"type": "text", "text": f"[Image #1] {prompt}"},
                ],
            }
            record["imagePasteIds"] = [1]
        else:
            record["message"] = {"role": "user", "content": prompt}
        finished = self._finish(record, 20_000, 600_000)
        finished["thinkingMetadata"] = {"maxThinkingTokens": 31999}
        finished["todos"] = []
        finished["permissionMode"] = "bypassPermissions"
        self._prompt_uuid = finished["uuid"]
        self._new_response()
        return finished, digest

    def _hook(self) -> JsonDict:
        record = self._chain("progress")
        tool_use_id = _uuid4(self._rng)
        record["data"] = {
            "type": "hook_progress",
            "hookEvent": "UserPromptSubmit",
            "hookName": "UserPromptSubmit:prompt",
            "command": "/home/USER/.claude/hooks/tmux-waiting.sh clear",
        }
        record["parentToolUseID"] = tool_use_id
        record["toolUseID"] = tool_use_id
        return self._finish(record, 1, 40)

    def _thinking(self) -> JsonDict:
        block = {
            "type": "thinking",
            "thinking": self._words(20, 200),
            "signature": _token(self._rng, "Eu", self._rng.randint(200, 600)),
        }
        return self._assistant(block, None)

    def _text(self) -> JsonDict:
        return self._assistant({"type": "text", "text": self._words(5, 250)}, "end_turn")

    def _tool_use(self) -> JsonDict:
        self._tool_name = self._rng.choice(_TOOLS)
        self._tool_id = _token(self._rng, "toolu_01")
        path = f"{_CWD}/beebox_impl/transcript/{self._rng.choice(('read', 'index', 'media'))}.py"
        inputs: dict[str, JsonDict] = {
            "Bash": {"command": "pytest -q tests/impl", "description": self._words(2, 8)},
            "Read": {"file_path": path},
            "Edit": {
                "file_path": path,
                "old_string": self._words(3, 30),
                "new_string": self._words(3, 30),
            },
            "Grep": {"pattern": "def read_history", "path": _CWD, "output_mode": "content"},
            "Glob": {"pattern": "**/*.py"},
            "Write": {"file_path": path, "content": self._words(50, 400)},
            "TodoWrite": {"todos": [{"content": self._words(3, 8), "status": "pending"}]},
            "Task": {"description": self._words(2, 5), "prompt": self._words(20, 120)},
        }
        block = {
            "type": "tool_use",
            "id": self._tool_id,
            "name": self._tool_name,
            "input": inputs[self._tool_name],
            "caller": {"type": "direct"},
        }
        return self._assistant(block, "tool_use")

    def _bash_progress(self) -> JsonDict:
        record = self._chain("progress")
        output = "\n".join(self._words(3, 14) for _ in range(self._rng.randint(1, 30)))
        record["data"] = {
            "type": "bash_progress",
            "output": output[-400:],
            "fullOutput": output,
            "elapsedTimeSeconds": self._rng.randint(1, 120),
            "totalLines": output.count("\n") + 1,
        }
        record["toolUseID"] = f"bash-progress-{self._rng.randint(0, 99)}"
        record["parentToolUseID"] = self._tool_id
        return self._finish(record, 500, 3000)

    def _agent_progress(self) -> JsonDict:
        # A sub-agent's message copied into the line, with a uuid of its own nested
        # inside (the line lookup must not take it for this line's uuid).
        record = self._chain("progress")
        record["data"] = {
            "message": {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [{"type": "text", "text": self._words(10, 120)}],
                },
                "uuid": _uuid4(self._rng),
                "timestamp": self._tick(0, 10),
            },
            "normalizedMessages": [],
            "type": "agent_progress",
            "prompt": self._words(5, 40),
            "agentId": _token(self._rng, "a", 6).lower(),
        }
        record["toolUseID"] = f"agent_msg_{_token(self._rng, '01', 20)}"
        record["parentToolUseID"] = self._tool_id
        return self._finish(record, 200, 4000)

    def _tool_result(self) -> JsonDict:
        record = self._chain("user")
        if self._tool_name == "Read":
            lines = [f"{n:>6}→{self._words(0, 14)}" for n in range(1, self._rng.randint(5, 400))]
            text = "\n".join(lines)
            structured: Any = {
                "type": "text",
                "file": {
                    "filePath": f"{_CWD}/beebox_impl/transcript/read.py",
                    "content": text,
                    "numLines": len(lines),
                    "startLine": 1,
                    "totalLines": len(lines),
                },
            }
        else:
            text = "\n".join(self._words(2, 16) for _ in range(self._rng.randint(1, 60)))
            structured = {
                "stdout": text,
                "stderr": "",
                "interrupted": False,
                "isImage": False,
                "noOutputExpected": False,
            }
        record["message"] = {
            "role": "user",
            "content": [
                {
                    "tool_use_id": self._tool_id,
                    "type": "tool_result",
                    "content": text,
                    "is_error": False,
                }
            ],
        }
        finished = self._finish(record, 100, 30_000)
        finished["toolUseResult"] = structured
        finished["sourceToolAssistantUUID"] = self._assistant_uuid
        return finished

    def _turn_end(self) -> JsonDict:
        record = self._chain("system")
        record["subtype"] = "turn_duration"
        record["durationMs"] = self._rng.randint(2_000, 400_000)
        finished = self._finish(record, 1, 60)
        finished["isMeta"] = False
        return finished


def main(argv: list[str] | None = None) -> int:
    """Write one transcript and print what was written."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("directory", type=Path)
    parser.add_argument("--entries", type=int, default=DEFAULT_ENTRIES)
    parser.add_argument("--photos", type=int, default=DEFAULT_PHOTOS)
    parser.add_argument("--photo-chars", type=int, default=DEFAULT_PHOTO_CHARS)
    parser.add_argument("--scale", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    made = generate_transcript(
        args.directory,
        entries=args.entries,
        photos=args.photos,
        photo_chars=args.photo_chars,
        scale=args.scale,
        seed=args.seed,
    )
    print(f"{made.path}: {made.line_count} lines, {made.size_bytes / 2**20:.1f} MiB")
    print(f"history entries: {made.history_total}, photos: {len(made.photos)}")
    if made.photos:
        print(f"middle photo: {made.middle_photo.uuid} (line {made.middle_photo.line_number})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
