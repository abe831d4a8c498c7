"""A ``claude`` stand-in that misbehaves on cue: it dies mid-turn, hangs at start, writes garbage.

Run as ``ClaudeEngine(cli_path=...)`` (through a two-line shell script). Each start
takes the next line of the plan file ``$FAULTY_CLAUDE_PLAN`` (``ok`` when the plan
is used up) and behaves as it says:

- ``ok`` — answers like `tests.impl.engine.fake_claude` (one reply and a result);
- ``die`` — on the first turn announces ``system/init`` and half a reply, waits
  until the file ``$FAULTY_CLAUDE_PLAN.die`` exists, then exits with status 1 (a
  crash mid-turn, at a moment the test chose);
- ``garbage`` — on the first turn announces ``system/init``, then writes 2 MiB
  that are not JSON and waits (the SDK gives up reading it);
- ``hang`` — never answers the ``initialize`` request (a start that hangs).

Every turn's text is appended, with the start's number, to ``$FAULTY_CLAUDE_PLAN.turns``.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any


def emit(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def next_mode(plan: Path) -> tuple[str, int]:
    lines = plan.read_text(encoding="utf-8").splitlines() if plan.exists() else []
    starts = plan.with_name(plan.name + ".starts")
    number = len(starts.read_text().splitlines()) + 1 if starts.exists() else 1
    mode = lines[number - 1].strip() if number <= len(lines) else "ok"
    with starts.open("a", encoding="utf-8") as out:
        out.write(f"{mode}\n")
    return mode, number


def main() -> int:
    plan = Path(os.environ["FAULTY_CLAUDE_PLAN"])
    mode, number = next_mode(plan)
    if mode == "hang":
        while True:
            time.sleep(3600)
    session = str(uuid.uuid4())
    announced = False
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
            continue
        if message.get("type") != "user":
            continue
        content = message["message"]["content"]
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        text = " ".join(block["text"] for block in blocks if block.get("type") == "text")
        with plan.with_name(plan.name + ".turns").open("a", encoding="utf-8") as out:
            out.write(json.dumps({"start": number, "text": text}) + "\n")
        if not announced:
            announced = True
            emit(
                {
                    "type": "system",
                    "subtype": "init",
                    "cwd": os.getcwd(),
                    "session_id": session,
                    "tools": [],
                    "model": "faulty",
                    "uuid": str(uuid.uuid4()),
                }
            )
        reply = {
            "type": "assistant",
            "message": {
                "model": "faulty",
                "id": "msg_faulty",
                "type": "message",
                "role": "assistant",
                "content": [{"type": "text", "text": f"echo: {text}"}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
            "parent_tool_use_id": None,
            "session_id": session,
            "uuid": str(uuid.uuid4()),
        }
        emit(reply)
        if mode == "die":
            die = plan.with_name(plan.name + ".die")
            while not die.exists():
                time.sleep(0.01)
            os._exit(1)
        if mode == "garbage":
            sys.stdout.write(("{not json at all " * 64 + "\n") * 2048)
            sys.stdout.flush()
            while True:
                time.sleep(3600)
        emit(
            {
                "type": "result",
                "subtype": "success",
                "is_error": False,
                "duration_ms": 1,
                "duration_api_ms": 1,
                "num_turns": 1,
                "result": f"echo: {text}",
                "session_id": session,
                "total_cost_usd": 0.0,
                "uuid": str(uuid.uuid4()),
            }
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
