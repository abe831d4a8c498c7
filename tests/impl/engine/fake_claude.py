"""A stand-in for the ``claude`` binary that speaks the SDK's stream-json protocol.

Run by `test_claude.py` as ``ClaudeEngine(cli_path=...)``: it answers the
``initialize`` and ``interrupt`` control requests, announces ``system/init`` on the
first turn, and answers each turn with one assistant message and a result. A turn
whose text is ``hold`` is not answered until an interrupt arrives, which ends it
with an ``error_during_execution`` result. Every start is logged (its arguments
and working directory) to the file named by ``FAKE_CLAUDE_LOG``;
``FAKE_CLAUDE_EXIT`` makes it refuse to start with that exit status.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Sequence
from typing import Any


def emit(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def result(session: str, subtype: str, text: str) -> dict[str, Any]:
    return {
        "type": "result",
        "subtype": subtype,
        "is_error": subtype != "success",
        "duration_ms": 1,
        "duration_api_ms": 1,
        "num_turns": 1,
        "result": text,
        "session_id": session,
        "total_cost_usd": 0.0,
        "uuid": str(uuid.uuid4()),
    }


def option_value(args: Sequence[object], name: str) -> str | None:
    """The value of the option ``name`` (``--model``) in ``args``, given as two
    arguments (``--model opus``, claude-agent-sdk up to 0.2.189) or as one
    (``--model=opus``, 0.2.190); None when it is not there."""
    for index, arg in enumerate(map(str, args)):
        if arg == name and index + 1 < len(args):
            return str(args[index + 1])
        if arg.startswith(f"{name}="):
            return arg.split("=", 1)[1]
    return None


def main() -> int:
    args = sys.argv[1:]
    log = os.environ.get("FAKE_CLAUDE_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"args": args, "cwd": os.getcwd()}) + "\n")
    refusal = os.environ.get("FAKE_CLAUDE_EXIT")
    if refusal:
        sys.stderr.write("fake claude: refusing to start\n")
        return int(refusal)
    resumed = [arg.split("=", 1)[1] for arg in args if arg.startswith("--resume=")]
    session = resumed[0] if resumed else str(uuid.uuid4())
    model = option_value(args, "--model") or "fake-model"
    announced = False
    holding = False
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("type") == "control_request":
            emit(
                {
                    "type": "control_response",
                    "response": {
                        "subtype": "success",
                        "request_id": message["request_id"],
                        "response": {},
                    },
                }
            )
            if message["request"].get("subtype") == "interrupt" and holding:
                holding = False
                emit(result(session, "error_during_execution", ""))
            continue
        if message.get("type") != "user":
            continue
        if not announced:
            announced = True
            emit(
                {
                    "type": "system",
                    "subtype": "init",
                    "cwd": os.getcwd(),
                    "session_id": session,
                    "tools": [],
                    "model": model,
                    "claude_code_version": "2.1.332",
                    "uuid": str(uuid.uuid4()),
                }
            )
        content = message["message"]["content"]
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        text = " ".join(block["text"] for block in blocks if block.get("type") == "text")
        images = sum(1 for block in blocks if block.get("type") == "image")
        if text == "hold":
            holding = True
            continue
        reply = f"echo: {text} ({images} images)"
        emit(
            {
                "type": "assistant",
                "message": {
                    "model": model,
                    "id": "msg_fake",
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "text", "text": reply}],
                    "stop_reason": "end_turn",
                    "stop_sequence": None,
                    "usage": {"input_tokens": 1, "output_tokens": 1},
                },
                "parent_tool_use_id": None,
                "session_id": session,
                "uuid": str(uuid.uuid4()),
            }
        )
        emit(result(session, "success", reply))
    return 0


if __name__ == "__main__":
    sys.exit(main())
