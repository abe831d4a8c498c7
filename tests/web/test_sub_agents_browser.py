"""Sub-agent work grouped under the call that started it (issue 37, point 3).

A Task (or Agent) call starts a sub-agent. Claude Code 2.x writes the sub-agent's
turns to a transcript of its own, which the call's result names (`agentId`); up to
1.0.x it wrote them into the session's own transcript, marked `isSidechain`. Either
way the page shows the call with one fold under it, "Sub-agent: <description>",
closed: opened, it lists the sub-agent's turns (read then from
`/api/chat/history?agent=` for 2.x) and says how many steps they are. Before, the
2.x sub-agent's work was nowhere on the page, and the 1.0.x turns read as the
person's messages and the box's replies, mixed into the conversation.

The transcripts are written here in Claude Code's shape (the corpus's
`session-share` and `claude-code-viewer` sessions, MIT, are the models; see
shared/corpus/claude-transcripts/SOURCES.md), and opened from the session list,
read-only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from beebox_impl.transcript.location import project_dir
from tests.web.conftest import ServedBox
from tests.web.test_a11y_browser import assert_accessible, tab_to
from tests.web.test_browser import _expect, open_page

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page

SESSION_2X = "0ccf1a04-1b4c-43b6-8aa5-79e41db43a68"
SESSION_1X = "5c0375b4-57a5-4f26-b12d-d022ee4e51b7"
AGENT = "a9cad17"
PROMPT = "Write a poem about Thai green curry."
DESCRIPTION = "Poem about Thai green curry"


class _Transcript:
    """Lines of one transcript, in Claude Code's compact shape."""

    def __init__(self, session_id: str, box: Path, **envelope: Any) -> None:
        self.session_id = session_id
        self.box = box
        self.envelope = envelope
        self.lines: list[str] = []

    def add(self, kind: str, content: Any, *, sidechain: bool = False, **extra: Any) -> str:
        uuid = f"{self.session_id[:8]}-{len(self.lines):04d}-{'s' if sidechain else 'm'}"
        record = {
            "parentUuid": None,
            "isSidechain": sidechain,
            **self.envelope,
            "cwd": str(self.box),
            "sessionId": self.session_id,
            "type": kind,
            "message": {"role": kind, "content": content},
            "uuid": uuid,
            "timestamp": f"2026-08-01T09:{len(self.lines):02d}:00.000Z",
            **extra,
        }
        if kind == "assistant":
            record["message"]["model"] = "claude-sonnet-4-5"
        self.lines.append(json.dumps(record, separators=(",", ":")))
        return uuid

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(self.lines) + "\n", encoding="utf-8")


def _card(box: Path, session_id: str, title: str) -> None:
    # A husk card: the session is listed under Sessions and opens read-only.
    cards = box / "_content" / "chat" / "web"
    cards.mkdir(parents=True, exist_ok=True)
    (cards / f"2026-08-01_{session_id[:8]}.chat.card").write_text(
        f"---\nsession: {session_id}\ntitle: {title}\ncontains: A sub-agent.\n---\nNotes.\n",
        encoding="utf-8",
    )


def _task_call(tool_id: str) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": tool_id,
        "name": "Task",
        "input": {"description": DESCRIPTION, "prompt": PROMPT, "subagent_type": "general"},
    }


def write_2x_session(box: Path, projects: Path) -> str:
    """A session whose Task call names its sub-agent, and the sub-agent's own file;
    its title."""
    main = _Transcript(SESSION_2X, box)
    main.add("user", "Write me a curry poem, use a sub-agent.")
    main.add("assistant", [_task_call("toolu_task")])
    main.add(
        "user",
        [{"type": "tool_result", "tool_use_id": "toolu_task", "content": "Green and hot."}],
        toolUseResult={"status": "completed", "agentId": AGENT, "prompt": PROMPT},
    )
    main.add("assistant", [{"type": "text", "text": "Here is the poem: *Green and hot.*"}])
    transcript = project_dir(box, projects) / f"{SESSION_2X}.jsonl"
    main.write(transcript)
    agent = _Transcript(SESSION_2X, box, agentId=AGENT)
    agent.add("user", PROMPT, sidechain=True)
    search = {
        "type": "tool_use",
        "id": "toolu_ws",
        "name": "WebSearch",
        "input": {"query": "thai green curry adjectives"},
    }
    agent.add("assistant", [search], sidechain=True)
    agent.add(
        "user",
        [{"type": "tool_result", "tool_use_id": "toolu_ws", "content": "fragrant, creamy"}],
        sidechain=True,
    )
    agent.add("assistant", [{"type": "text", "text": "Green and hot."}], sidechain=True)
    agent.write(transcript.with_suffix("") / "subagents" / f"agent-{AGENT}.jsonl")
    _card(box, SESSION_2X, "A 2.x sub-agent")
    return "A 2.x sub-agent"


def write_1x_session(box: Path, projects: Path) -> str:
    """A session whose sub-agent's turns sit in its own transcript (Claude Code 1.0.x);
    its title."""
    main = _Transcript(SESSION_1X, box)
    main.add("user", "Write me a curry poem, use a sub-agent.")
    main.add("assistant", [_task_call("toolu_task")])
    main.add("user", PROMPT, sidechain=True)
    main.add("assistant", [{"type": "text", "text": "Searching for adjectives."}], sidechain=True)
    main.add("assistant", [{"type": "text", "text": "Green and hot."}], sidechain=True)
    main.add(
        "user",
        [{"type": "tool_result", "tool_use_id": "toolu_task", "content": "Green and hot."}],
        toolUseResult={"totalDurationMs": 900, "totalToolUseCount": 0},
    )
    main.add("assistant", [{"type": "text", "text": "Here is the poem: *Green and hot.*"}])
    main.write(project_dir(box, projects) / f"{SESSION_1X}.jsonl")
    _card(box, SESSION_1X, "A 1.0.x sub-agent")
    return "A 1.0.x sub-agent"


def open_written(
    browser: Browser, served: ServedBox, write: Callable[[Path, Path], str]
) -> tuple[BrowserContext, Page, list[str], list[str]]:
    """Write a session, open the page on it: the context, the page, its errors, and
    every address it asks for from then on."""
    title = write(served.box, served.projects)
    context, page, problems = open_page(browser, served)
    reads: list[str] = []
    page.on("request", lambda request: reads.append(request.url))
    open_session(page, title)
    return context, page, problems, reads


def open_session(page: Page, title: str) -> None:
    page.locator("#session-list button", has_text=title).click()
    _expect()(page.locator("#status")).to_contain_text("viewing an earlier session")


def assert_grouped(page: Page, *, steps: int, replies: list[str]) -> None:
    """The Task call, its fold under it, and the sub-agent's turns only in the fold."""
    expect = _expect()
    call = page.locator("#messages > li details.tool", has_text="Task")
    expect(call.locator(".tool-arg")).to_have_text(DESCRIPTION)
    fold = page.locator("#messages > li details.subagent")
    expect(fold).to_have_count(1)
    expect(fold.locator("summary .subagent-label")).to_have_text(f"Sub-agent: {DESCRIPTION}")
    # Under the call: in the same message, right after it.
    assert call.evaluate("node => node.nextElementSibling.matches('details.subagent')")
    # The conversation's own messages: the person, the call, the answer; none of the
    # sub-agent's.
    expect(page.locator("#messages > li.message")).to_have_count(3)
    expect(page.locator("#messages > li.message.sidechain")).to_have_count(0)
    expect(fold.locator(".subagent-steps")).to_have_text(f" · {steps} steps")
    turns = fold.locator(".subagent-log > li.message.sidechain")
    expect(turns).to_have_count(steps)
    # Named for what it is: the task the sub-agent was given, not the person's words.
    expect(turns.first).to_have_attribute("aria-label", re.compile(r"^Sub-agent's task, "))
    expect(turns.last).to_have_attribute("aria-label", re.compile(r"^Sub-agent, "))
    for reply in replies:
        expect(fold.locator(".subagent-log")).to_contain_text(reply)


def test_a_2x_task_call_folds_its_sub_agents_transcript_read_when_opened(
    browser: Browser, served_box: Callable[..., ServedBox]
) -> None:
    expect = _expect()
    context, page, problems, reads = open_written(browser, served_box(), write_2x_session)
    fold = page.locator("#messages > li details.subagent")
    expect(fold).to_have_count(1)
    # Closed, and nothing read of the sub-agent until it is opened.
    expect(fold).not_to_have_attribute("open", "")
    expect(fold.locator(".subagent-steps")).to_have_text("")
    assert not [url for url in reads if "agent=" in url]
    assert_accessible(page, "a sub-agent's fold, closed")
    # Opened with the keyboard alone.
    tab_to(page, "#messages details.subagent > summary")
    page.keyboard.press("Enter")
    # The prompt, the search call (its result on it) and the answer: three entries.
    assert_grouped(page, steps=3, replies=["Green and hot."])
    assert [url for url in reads if f"agent={AGENT}" in url and f"session={SESSION_2X}" in url]
    search = fold.locator(".subagent-log details.tool", has_text="WebSearch")
    expect(search.locator(".tool-arg")).to_have_text("thai green curry adjectives")
    assert_accessible(page, "a sub-agent's fold, open")
    # After a reload, the same.
    page.reload()
    expect(page.locator("#status")).not_to_have_text("Connecting…")
    open_session(page, "A 2.x sub-agent")
    page.locator("#messages details.subagent > summary").click()
    assert_grouped(page, steps=3, replies=["Green and hot."])
    assert problems == []
    context.close()


def test_1x_sidechain_turns_are_folded_under_their_call_not_mixed_into_the_conversation(
    browser: Browser, served_box: Callable[..., ServedBox]
) -> None:
    expect = _expect()
    context, page, problems, reads = open_written(browser, served_box(), write_1x_session)
    fold = page.locator("#messages > li details.subagent")
    # The turns are in the history already: the count shows before it is opened.
    expect(fold.locator(".subagent-steps")).to_have_text(" · 3 steps")
    expect(fold.locator(".subagent-log")).to_be_hidden()
    fold.locator("summary").click()
    assert_grouped(page, steps=3, replies=["Searching for adjectives.", "Green and hot."])
    assert not [url for url in reads if "agent=" in url]
    assert_accessible(page, "an inline sub-agent's fold, open")
    assert problems == []
    context.close()
