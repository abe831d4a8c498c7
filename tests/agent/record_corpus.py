"""Record the test corpus of Claude Code's own transcripts: ``python -m tests.agent.record_corpus``.

Drives the real CLI (the one the ``claude`` extra bundles) through the box, offline,
against the Messages API double, and keeps what it wrote under
``tests/corpus/claude-code/<CLI version>/`` (or the folder given):

- ``session.jsonl`` — one session as the box drives it: a text turn, a turn with
  two photos (each line over the strip's 256 KiB mark: the photo turn and the
  CLI's ``api-request-blob`` copy of it), a turn of tools (Write, Bash, Read, and
  a Bash that fails), a turn with a thinking block, two messages queued mid-turn
  and drained as one turn, an interrupted turn, a turn the API failed (529 past
  the retries), then the box closed and opened again: the CLI resumes the
  session in a new process for one more turn;
- ``stream.ndjson`` — every line the CLI printed on stdout for a short session
  driven directly over ``--input-format stream-json``: the raw messages the
  engine's SDK parses (text, photo, tool, thinking and failed turns);
- ``stream-partial.ndjson`` — the same with ``--include-partial-messages``, as
  the engine runs it: the ``stream_event`` messages of a text turn and of a turn
  of thinking, text and a tool call, around their complete messages;
- ``README.md`` — the CLI and SDK versions, and how the files were made.

The CLI's own prompt text (the system prompt, skill and agent listings it copies
into ``attachment``, ``api-request-shape`` and ``api-request-blob`` lines) is not
ours to publish: every string over 300 characters in those lines, other than a
photo's base64, is replaced by ``[Claude Code's prompt text: N characters]``.
Everything else is byte for byte what the CLI wrote. Paths name the folder the
recording ran in (``/tmp/bbx-corpus/box``).
"""

from __future__ import annotations

import argparse
import base64
import importlib.metadata
import json
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from beebox_impl.services import SendRequest
from beebox_impl.store.acceptance import Attachment
from tests.agent.box_support import claude_box
from tests.agent.claude_cli import OfflineClaude, cli_path, cli_version
from tests.agent.messages_api import Fail, MessagesApiDouble, Reply, Text, Thinking, ToolUse
from tests.agent.photos import noise_png

REPO = Path(__file__).resolve().parents[2]
RECORDING_ROOT = Path("/tmp/bbx-corpus")
TOOLS = ["Bash", "Read", "Write"]
# Longer strings than this in the prompt-carrying lines are the CLI's prompt text.
PROMPT_TEXT_CHARS = 300
PROMPT_LINE_TYPES = ("attachment", "api-request-shape", "api-request-blob")
BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")


def redact(value: Any) -> Any:
    """``value`` with every long string that is not base64 replaced by a note."""
    if isinstance(value, dict):
        return {key: redact(item) for key, item in value.items()}
    if isinstance(value, list):
        return [redact(item) for item in value]
    if isinstance(value, str) and len(value) > PROMPT_TEXT_CHARS and not BASE64.fullmatch(value):
        return f"[Claude Code's prompt text: {len(value)} characters]"
    return value


def redact_line(line: str) -> str:
    record = json.loads(line)
    if record.get("type") not in PROMPT_LINE_TYPES:
        return line
    return json.dumps(redact(record), separators=(",", ":"), ensure_ascii=False)


async def record_session(claude: OfflineClaude, api: MessagesApiDouble, box: Path) -> Path:
    """Drive one session through the box; the transcript the CLI wrote."""
    photos = [noise_png(256, 200, seed) for seed in (1, 2)]
    note = box / "note.txt"
    hold_queue, hold_interrupt = threading.Event(), threading.Event()
    api.script(
        Reply.text("Hello! What shall we look at?"),
        Reply((Thinking("Two noisy squares."), Text("Two photos of noise, it seems."))),
        Reply(
            (
                Text("Let me write it down."),
                ToolUse("Write", {"file_path": str(note), "content": "a note\n"}),
            )
        ),
        Reply((ToolUse("Bash", {"command": "cat note.txt", "description": "Show the note"}),)),
        Reply((ToolUse("Read", {"file_path": str(note)}),)),
        Reply(
            (ToolUse("Bash", {"command": "ls missing-file", "description": "List a missing file"}),)
        ),
        Reply.text("The note is written; the missing file is missing."),
        Reply((Text("A long answer, streamed slowly", hold=hold_queue),)),
        Reply.text("Both queued messages arrived together."),
        Reply((Text("This answer is interrupted half way", hold=hold_interrupt),)),
        Fail(529, "Overloaded"),
        Fail(529, "Overloaded"),
        Fail(529, "Overloaded"),
        Reply.text("Back in a new process, same session."),
    )
    async with claude_box(box, claude, allowed_tools=TOOLS) as (chat, log):
        await chat.send(SendRequest("hello there", message_id="c-1"))
        await log.wait_for_name("turn-text", count=1)
        images = tuple(Attachment("image/png", photo) for photo in photos)
        await chat.send(SendRequest("look at these two", message_id="c-2", images=images))
        await log.wait_for_name("turn-text", count=2)
        await chat.send(
            SendRequest(
                "write a note, show it, read it, then list a missing file", message_id="c-3"
            )
        )
        await log.wait_for_name("turn-text", count=3)
        await chat.send(SendRequest("tell me something long", message_id="c-4"))
        await anyio.to_thread.run_sync(api.wait_for_messages, 8)
        await chat.send(SendRequest("first while you talk", message_id="c-5"))
        await chat.send(SendRequest("second while you talk", message_id="c-6"))
        hold_queue.set()
        await log.wait_for_name("turn-text", count=5)
        await chat.send(SendRequest("this one gets interrupted", message_id="c-7"))
        await anyio.to_thread.run_sync(api.wait_for_messages, 10)
        await chat._session.interrupt()
        await log.wait_for_name("done", count=6)
        hold_interrupt.set()
        await chat.send(SendRequest("this one meets an overloaded API", message_id="c-8"))
        await log.wait_for_name("turn-error")
        await log.wait_for_name("done", count=7)
    async with claude_box(box, claude, allowed_tools=TOOLS) as (chat, log):
        await chat.send(SendRequest("are you still there?", message_id="c-9"))
        await log.wait_for_name("turn-text")
    (transcript,) = claude.transcripts()
    return transcript


def record_stream(claude: OfflineClaude, api: MessagesApiDouble, cwd: Path) -> list[str]:
    """Every stdout line of the CLI driven directly over stream-json input."""
    photo = base64.b64encode(noise_png(64, 48, 3)).decode("ascii")
    note = cwd / "stream-note.txt"
    api.script(
        Reply.text("Hi from the stream."),
        Reply((Thinking("A small photo."), Text("A small photo of noise."))),
        Reply((ToolUse("Write", {"file_path": str(note), "content": "x\n"}),)),
        Reply.text("Written."),
        Fail(401, "invalid x-api-key"),
    )
    turns: list[Any] = [
        "hi",
        [
            {"type": "text", "text": "what is this?"},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": photo},
            },
        ],
        "write a file",
        "and now a key the API refuses",
    ]
    return drive_cli(claude, cwd, turns)


def record_partial_stream(claude: OfflineClaude, api: MessagesApiDouble, cwd: Path) -> list[str]:
    """Every stdout line of the CLI asked for partial messages, as the engine asks."""
    note = cwd / "partial-note.txt"
    api.script(
        Reply.text("Hi from the stream, in words."),
        Reply(
            (
                Thinking("A note."),
                Text("Let me write."),
                ToolUse("Write", {"file_path": str(note), "content": "x\n"}),
            )
        ),
        Reply.text("Written."),
    )
    return drive_cli(claude, cwd, ["hi", "write a file"], "--include-partial-messages")


def drive_cli(claude: OfflineClaude, cwd: Path, turns: list[Any], *options: str) -> list[str]:
    """Every stdout line of the CLI given ``turns`` one at a time over stream-json input."""
    command = [
        str(cli_path()),
        "--output-format",
        "stream-json",
        "--verbose",
        "--input-format",
        "stream-json",
        "--allowedTools",
        "Write",
        *options,
    ]
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=claude.process_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    printed: list[str] = []
    try:
        for content in turns:
            message = {
                "type": "user",
                "message": {"role": "user", "content": content},
                "parent_tool_use_id": None,
            }
            process.stdin.write(json.dumps(message) + "\n")
            process.stdin.flush()
            for line in process.stdout:
                printed.append(line.rstrip("\n"))
                if json.loads(line).get("type") == "result":
                    break
        process.stdin.close()
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    return printed


def write_readme(out: Path, session: Path, stream_lines: int, partial_lines: int) -> None:
    sdk = importlib.metadata.version("claude-agent-sdk")
    out.joinpath("README.md").write_text(
        f"""# Claude Code {cli_version().split()[0]}: transcripts written by the real CLI

Made by `python -m tests.agent.record_corpus` (see its docstring for every turn):
the CLI bundled with claude-agent-sdk {sdk} (`claude --version`: {cli_version()}),
run offline through the box against the tests' Messages API double
(`tests/agent/messages_api.py`), in `{RECORDING_ROOT}/box`.

- `session.jsonl` ({session.stat().st_size:,} bytes): one session, as the box drives it.
- `stream.ndjson` ({stream_lines} lines): the CLI's stdout over stream-json input.
- `stream-partial.ndjson` ({partial_lines} lines): the same with `--include-partial-messages`.

The CLI's own prompt text in `attachment`, `api-request-shape` and
`api-request-blob` lines is replaced by `[Claude Code's prompt text: N characters]`;
the rest is byte for byte what the CLI wrote. The model's side of every turn is
the double's scripted answers, written for these tests: this folder holds no
third party's conversation.
""",
        encoding="utf-8",
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "out", nargs="?", type=Path, help="default: tests/corpus/claude-code/<version>"
    )
    args = parser.parse_args()
    out: Path = args.out or REPO / "tests" / "corpus" / "claude-code" / cli_version().split()[0]
    shutil.rmtree(RECORDING_ROOT, ignore_errors=True)
    box = RECORDING_ROOT / "box"
    box.mkdir(parents=True)
    with MessagesApiDouble() as api:
        claude = OfflineClaude(RECORDING_ROOT / "claude", api)
        transcript = anyio.run(record_session, claude, api, box)
        stream = record_stream(claude, api, box)
        partial = record_partial_stream(claude, api, box)
    out.mkdir(parents=True, exist_ok=True)
    session_lines = transcript.read_text(encoding="utf-8").splitlines()
    (out / "session.jsonl").write_text(
        "".join(redact_line(line) + "\n" for line in session_lines), encoding="utf-8"
    )
    for name, lines in (("stream.ndjson", stream), ("stream-partial.ndjson", partial)):
        (out / name).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    write_readme(out, out / "session.jsonl", len(stream), len(partial))
    total = sum(path.stat().st_size for path in out.iterdir())
    print(f"wrote {out} ({total:,} bytes)")
    shutil.rmtree(RECORDING_ROOT, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
