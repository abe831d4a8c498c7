"""The echo engine writes the lines the history reads in the shapes Claude Code writes them.

For each kind of line the history reads — a prompt, a prompt with photos, an answer,
a tool call, its result, the interrupt notice — the echo's line has the same keys,
in the same order, holding values of the same JSON types, as the line the real CLI
wrote in `tests/corpus/claude-code/<version>/session.jsonl` (recorded by
`tests.agent.record_corpus`). Values may differ (ids, times, the echo's version);
a tool's ``input`` and ``toolUseResult`` are the tool's own and compared only as
objects (the echo's tool, ``Echo``, runs nothing).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

from beebox_impl.engine import EchoEngine, StartOptions
from beebox_impl.engine.echo import ECHO_TOOL
from beebox_impl.engine.protocol import TurnContent
from beebox_spec.entries import JsonObject, JsonValue
from tests.agent.photos import noise_png

CORPUS = Path(__file__).resolve().parents[2] / "corpus" / "claude-code"


def _version(path: Path) -> tuple[int, ...]:
    return tuple(int(part) for part in path.parent.name.split(".") if part.isdigit())


# The newest recording is the CLI the claude extra bundles now.
CLI_SESSION = max(CORPUS.glob("*/session.jsonl"), key=_version)
OPAQUE_KEYS = ("input", "toolUseResult")

Shape = Any


def shape(value: object, key: str = "") -> Shape:
    """A JSON value's shape: its keys in order and their shapes; lists as the set of
    their items' shapes; scalars as their JSON type."""
    if key in OPAQUE_KEYS:
        return "object" if isinstance(value, dict) else type(value).__name__
    if isinstance(value, dict):
        return [(name, shape(item, name)) for name, item in value.items()]
    if isinstance(value, list):
        return sorted({json.dumps(shape(item)) for item in value})
    if value is None:
        return "null"
    return {bool: "boolean", int: "number", float: "number", str: "string"}[type(value)]


def content_of(line: JsonObject) -> list[JsonObject]:
    """The line's content blocks (none for a plain-string prompt)."""
    content = message_field(line, "content")
    return (
        [block for block in content if isinstance(block, dict)] if isinstance(content, list) else []
    )


def message_field(line: JsonObject, name: str) -> JsonValue:
    message = line.get("message")
    return message.get(name) if isinstance(message, dict) else None


def first_block_type(line: JsonObject) -> object:
    blocks = content_of(line)
    return blocks[0].get("type") if blocks else None


def is_prompt(line: JsonObject) -> bool:
    return (
        line.get("type") == "user"
        and line.get("rowSource") == "local"
        and isinstance(message_field(line, "content"), str)
    )


def is_photo_prompt(line: JsonObject) -> bool:
    return line.get("type") == "user" and any(b.get("type") == "image" for b in content_of(line))


def is_answer(line: JsonObject) -> bool:
    return (
        line.get("type") == "assistant"
        and first_block_type(line) == "text"
        and message_field(line, "model") != "<synthetic>"
    )


def is_tool_call(line: JsonObject) -> bool:
    return line.get("type") == "assistant" and first_block_type(line) == "tool_use"


def is_tool_result(line: JsonObject) -> bool:
    # The CLI's Bash result (the echo's tool answers in its shape), one that succeeded.
    record = line.get("toolUseResult")
    return (
        line.get("type") == "user"
        and first_block_type(line) == "tool_result"
        and isinstance(record, dict)
        and "stdout" in record
        and content_of(line)[0].get("is_error") is False
    )


def is_interrupt_notice(line: JsonObject) -> bool:
    return line.get("type") == "user" and line.get("rowSource") == "harness"


KINDS: dict[str, Callable[[JsonObject], bool]] = {
    "prompt": is_prompt,
    "prompt with photos": is_photo_prompt,
    "answer": is_answer,
    "tool call": is_tool_call,
    "tool result": is_tool_result,
    "interrupt notice": is_interrupt_notice,
}


def first_of(lines: list[JsonObject], kind: str) -> JsonObject:
    found = next((line for line in lines if KINDS[kind](line)), None)
    assert found is not None, f"no {kind} line"
    return found


def cli_lines() -> list[JsonObject]:
    return [json.loads(line) for line in CLI_SESSION.read_text(encoding="utf-8").splitlines()]


async def echo_lines(folder: Path) -> list[JsonObject]:
    """The echo's transcript of: a prompt, a photo prompt, a tool turn, an interrupt."""
    engine = EchoEngine(folder / "projects", lambda: datetime(2026, 3, 1, 12, 0))
    (folder / "box").mkdir()
    run = await engine.start(StartOptions(cwd=folder / "box"))
    stream = run.messages()
    photo = base64.b64encode(noise_png(16, 16, 1)).decode("ascii")
    image: JsonObject = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": photo},
    }
    turns: list[TurnContent] = ["hello", [{"type": "text", "text": "see"}, image], "tool: hi"]
    for content in turns:
        await run.send(content)
        while (await stream.__anext__())["type"] != "result":
            pass
    await run.send("stop me")
    await run.interrupt()
    while (await stream.__anext__())["type"] != "result":
        pass
    await run.close()
    text = run.transcript_path.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[JsonObject], list[JsonObject]]:
    echo = anyio.run(echo_lines, tmp_path_factory.mktemp("echo"))
    return echo, cli_lines()


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_echo_writes_each_kind_of_line_as_the_cli_does(
    kind: str, both: tuple[list[JsonObject], list[JsonObject]]
) -> None:
    echo, cli = both
    echo_line, cli_line = first_of(echo, kind), first_of(cli, kind)
    assert shape(echo_line) == shape(cli_line), f"{kind}: echo {echo_line} / cli {cli_line}"


def test_the_echo_tool_turn_chains_as_the_cli_does(
    both: tuple[list[JsonObject], list[JsonObject]],
) -> None:
    echo, _ = both
    call, result = first_of(echo, "tool call"), first_of(echo, "tool result")
    (use,) = content_of(call)
    (answer,) = content_of(result)
    assert use["name"] == ECHO_TOOL
    assert use["input"] == {"text": "hi"}
    assert answer["tool_use_id"] == use["id"]
    assert answer["content"] == "hi"
    # The result hangs under its call, and names it, as the CLI's do.
    assert result["parentUuid"] == call["uuid"]
    assert result["sourceToolAssistantUUID"] == call["uuid"]
    # Both belong to the prompt that asked for the tool.
    (prompt,) = [line for line in echo if message_field(line, "content") == "tool: hi"]
    assert call["parentUuid"] == prompt["uuid"]
    assert result["promptId"] == prompt["promptId"]


def test_shapes_tell_a_missing_key_and_a_changed_type() -> None:
    assert shape({"a": 1, "b": [{"x": "y"}]}) == shape({"a": 2, "b": [{"x": "z"}, {"x": "w"}]})
    assert shape({"a": 1}) != shape({"a": "1"})
    assert shape({"a": 1, "b": 2}) != shape({"b": 2, "a": 1})
    assert shape({"a": None}) != shape({"a": {}})
