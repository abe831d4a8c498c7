"""A sub-agent of the real Claude Code, grouped under its call on the page (issue 37).

``bbx serve --engine claude`` runs the CLI the ``claude`` extra bundles against the
Messages API double. The main agent calls Claude Code 2.1.332's ``Agent`` tool (the
tool list of its requests offers ``Agent``, not ``Task``) in the foreground
(``run_in_background: false``); the sub-agent's own request, told from the main
agent's by the prompt it was given (`MessagesApiDouble.script_for`), gets a text
reply; then the main agent answers. The CLI writes the sub-agent's turns to
``<session>/subagents/agent-<id>.jsonl`` and names it in the call's result.

The page shows the call with "Sub-agent: <description>" folded under it, already
while the sub-agent runs (the double holds its reply half-way): the box's `task`
event names the sub-agent of the running call, and the fold, opened, reads the
sub-agent's transcript so far (its task). Once the turn is over the fold shows its
reply too; the conversation itself never shows the sub-agent's words, neither while
the turn runs nor after it, nor after a reload. Before, the sub-agent's work was
nowhere on the page.

It skips, saying why, where Chromium, Playwright or the claude extra is missing.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

from tests.agent.claude_cli import OfflineClaude
from tests.agent.messages_api import MessagesApiDouble, Recorded, Reply, Text, ToolUse
from tests.agent.test_serve_claude import serve_claude
from tests.web import test_permissions_browser
from tests.web.test_browser import _expect
from tests.web.test_permissions_browser import ASK_WAIT_MS, opened, send

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

SUB_PROMPT = "Count the adjectives people use for green curry."
SUB_REPLY = "SUBAGENT-SAYS: fragrant, creamy and hot."
MAIN_REPLY = "MAIN-SAYS: the helper found three adjectives."
DESCRIPTION = "Count curry adjectives"

# Whether the sub-agent's words were ever shown as a message of the conversation: in a
# message's own text, not in its call's folded result or the sub-agent's fold.
WATCH = r"""() => {
  window.bbxMixed = [];
  const list = document.getElementById("messages");
  const look = () => {
    for (const node of list.querySelectorAll(".message")) {
      if (node.closest(".subagent")) continue;
      const own = [...node.childNodes].filter((child) => !child.matches?.(".subagent, .tool"));
      if (own.some((child) => child.textContent.includes("SUBAGENT-SAYS"))) {
        window.bbxMixed.push(node.outerHTML.slice(0, 300));
      }
    }
  };
  new MutationObserver(look).observe(list, { childList: true, subtree: true, characterData: true });
}"""


# The permission tests' fixture: the double, or a skip where the CLI is missing.
api = test_permissions_browser.api


def is_sub_agents(request: Recorded) -> bool:
    """The sub-agent's request: its prompt is its user message (the main agent's
    requests carry it only inside the call)."""
    return any(SUB_PROMPT in text for text in request.user_texts())


def assert_grouped(page: Page) -> None:
    expect = _expect()
    call = page.locator("#messages > li details.tool", has_text="Agent")
    expect(call.locator(".tool-name")).to_have_text("Agent")
    expect(call.locator(".tool-arg")).to_have_text(DESCRIPTION)
    fold = page.locator("#messages > li details.subagent")
    expect(fold).to_have_count(1)
    assert call.evaluate("node => node.nextElementSibling.matches('details.subagent')")
    expect(fold.locator(".subagent-label")).to_have_text(f"Sub-agent: {DESCRIPTION}")
    expect(page.locator("#messages > li.message", has_text=MAIN_REPLY)).to_have_count(1)
    if fold.get_attribute("open") is None:
        fold.locator("summary").click()
    # Its task and its reply: two steps, the reply in the fold alone.
    expect(fold.locator(".subagent-log")).to_contain_text(SUB_REPLY)
    expect(fold.locator(".subagent-steps")).to_have_text(" · 2 steps")
    expect(fold.locator(".subagent-log > li.sidechain.user")).to_contain_text(SUB_PROMPT)
    outside = page.locator("#messages > li.message:not(:has(.tool))", has_text="SUBAGENT")
    expect(outside).to_have_count(0)


def test_a_sub_agents_work_is_grouped_under_its_agent_call(
    browser: Browser, tmp_path: Path, api: MessagesApiDouble
) -> None:
    expect = _expect()
    held = threading.Event()
    api.script_for(is_sub_agents, Reply((Text(SUB_REPLY, pieces=6, hold=held),)))
    call = ToolUse(
        "Agent",
        {
            "description": DESCRIPTION,
            "prompt": SUB_PROMPT,
            "subagent_type": "general-purpose",
            "run_in_background": False,
        },
    )
    api.script(Reply((Text("Asking a helper."), call)), Reply.text(MAIN_REPLY))
    claude = OfflineClaude(tmp_path / "claude", api)
    with (
        serve_claude(tmp_path / "box", claude) as served,
        opened(browser, served) as (page, problems),
    ):
        page.evaluate(WATCH)
        send(page, "Use a helper to count the curry adjectives.")
        # Mid-turn, the sub-agent half-way through its reply: its fold is under the call.
        fold = page.locator("#messages > li details.subagent")
        expect(fold).to_have_count(1, timeout=ASK_WAIT_MS)
        expect(page.locator("#status")).to_have_text("Working…")
        fold.locator("summary").click()
        expect(fold.locator(".subagent-log > li.sidechain.user")).to_contain_text(
            SUB_PROMPT, timeout=ASK_WAIT_MS
        )
        held.set()
        expect(page.locator("#messages > li.message", has_text=MAIN_REPLY)).to_have_count(
            1, timeout=ASK_WAIT_MS
        )
        expect(page.locator("#status")).to_have_text("Ready", timeout=ASK_WAIT_MS)
        # The double saw the main agent, its sub-agent, then the main agent again.
        subs = [is_sub_agents(request) for request in api.message_requests]
        assert subs.count(True) == 1, subs
        assert api.pending == 0
        assert_grouped(page)
        # Never, not even while the turn ran, in the conversation itself.
        assert page.evaluate("window.bbxMixed") == []
        page.reload()
        expect(page.locator("#status")).to_have_text("Ready")
        assert_grouped(page)
        assert problems == []
