"""A long conversation with Markdown, tool calls and thinking, written as Claude Code would.

`write_markdown_history(box, projects, entries)` writes a transcript of ``entries``
history entries into the box's project folder (`beebox_impl.transcript.location`) and
a husk card naming it, so the page lists it under Sessions and opens it read-only:
the history the page reads is the real reader's, from a file of Claude Code's shape,
and no send is involved (the box's record of accepted sends stays empty). The page's
paging tests and `bench/page.py` use it.

Each turn is five entries: a prompt; thinking; a Bash tool call (its result on the
following tool_result line, which is not an entry of its own); a Markdown answer
(heading, list, table, fenced code, a link) and a short closing text. The same
arguments write the same bytes.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from beebox_impl.transcript.location import project_dir

# Entries one turn adds to the history.
ENTRIES_PER_TURN = 5

MARKDOWN_ANSWER = """### Step {n}: what changed

The build **passed** after the fix in `src/app_{n}.py`; see [the log](https://example.com/builds/{n}).

- the parser reads *nested* lists
- the cache keeps {n} entries
- ~~the old flag~~ is gone

| file | lines | status |
|---|---:|:---:|
| `app_{n}.py` | {lines} | ok |
| `test_{n}.py` | {tests} | ok |

```python
def step_{n}(items):
    return [item * {n} for item in items if item]
```
"""


def write_markdown_history(
    box: Path, projects: Path, entries: int, *, title: str = "A long conversation"
) -> str:
    """Write about ``entries`` entries (whole turns) and a husk card; the session id."""
    session_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"beebox-markdown-history-{entries}"))
    folder = project_dir(box, projects)
    folder.mkdir(parents=True, exist_ok=True)
    clock = datetime(2026, 8, 1, 9, 0, tzinfo=UTC)
    parent: str | None = None
    counter = 0

    def line(kind: str, message: dict[str, Any]) -> str:
        nonlocal parent, counter, clock
        counter += 1
        clock += timedelta(seconds=7)
        record_uuid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{session_id}/{counter}"))
        record = {
            "parentUuid": parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": str(box),
            "sessionId": session_id,
            "version": "2.1.332",
            "type": kind,
            "message": message,
            "uuid": record_uuid,
            "timestamp": clock.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
        }
        parent = record_uuid
        return json.dumps(record, separators=(",", ":"), ensure_ascii=False)

    def assistant(block: dict[str, Any]) -> dict[str, Any]:
        return {"role": "assistant", "model": "claude-sonnet-4-5", "content": [block]}

    lines: list[str] = []
    for n in range(max(1, entries // ENTRIES_PER_TURN)):
        tool_id = f"toolu_{n:06d}"
        lines += [
            line("user", {"role": "user", "content": f"Step {n}: run the tests and tell me."}),
            line("assistant", assistant({"type": "thinking", "thinking": f"Run step {n}."})),
            line(
                "assistant",
                assistant(
                    {
                        "type": "tool_use",
                        "id": tool_id,
                        "name": "Bash",
                        "input": {"command": f"pytest -q tests/test_{n}.py", "description": "Run"},
                    }
                ),
            ),
            line(
                "user",
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": tool_id, "content": f"{n} passed"}
                    ],
                },
            ),
            line(
                "assistant",
                assistant(
                    {
                        "type": "text",
                        "text": MARKDOWN_ANSWER.format(n=n, lines=40 + n, tests=10 + n % 7),
                    }
                ),
            ),
            line("assistant", assistant({"type": "text", "text": f"Done with step **{n}**."})),
        ]
    (folder / f"{session_id}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    cards = box / "_content" / "chat" / "web"
    cards.mkdir(parents=True, exist_ok=True)
    (cards / f"2026-08-01_{session_id[:8]}.chat.card").write_text(
        f"---\nsession: {session_id}\ntitle: {title}\ncontains: Markdown answers.\n---\nNotes.\n",
        encoding="utf-8",
    )
    return session_id
