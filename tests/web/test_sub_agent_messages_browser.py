"""A sub-agent's live messages on the page (issue 37): never the box's reply.

A Task or Agent call's sub-agent says its work in the session's stream, each message
naming the call (`parent_tool_use_id`, `beebox_spec.sdk_messages`, "A sub-agent's
messages"); the box passes its complete ones on as ``message`` events. Before, the
page took every assistant ``message`` for the box's reply: a sub-agent's replaced the
text streaming, was shown as the reply and read out. Now it is none of these; the
open fold of its call reads the sub-agent's work again instead.

The first test drives the page with routed event streams, as
`test_live_text_browser.py` does; the second needs a stream that stays open (a routed
one ends, and every reconnection re-reads the history and the open folds anyway), so
it gives the page an `EventSource` the test speaks through.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tests.web.conftest import ServedBox, answer_changed
from tests.web.test_browser import _expect
from tests.web.test_live_text_browser import assistant, delta, open_busy_page, sse, streaming

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Route

# The Agent call whose sub-agent says the messages below, and the sub-agent.
CALL = "toolu_01AgentCall"
AGENT = "a1b2c3d"

# Everything the live region says, kept (it is emptied and refilled each time).
RECORD_ANNOUNCEMENTS = """
window.__said = [];
new MutationObserver(() => {
  const region = document.getElementById("announcer");
  if (region !== null && region.textContent !== "") window.__said.push(region.textContent);
}).observe(document, { subtree: true, childList: true, characterData: true });
"""

# An event stream that stays open: the page's one connection, spoken through
# `window.__say(name, data)`.
OPEN_STREAM = """
window.__sources = [];
window.EventSource = class extends EventTarget {
  constructor(url) {
    super();
    window.__sources.push(this);
    setTimeout(() => this.dispatchEvent(new Event("open")), 0);
  }
  close() {}
};
window.__say = (name, data) => {
  const event = new MessageEvent(name, { data: JSON.stringify(data) });
  window.__sources.at(-1).dispatchEvent(event);
};
"""


def sub_agents(uuid: str, text: str) -> tuple[str, dict[str, Any]]:
    """A ``message`` event: an assistant message of the sub-agent ``CALL`` started."""
    name, data = assistant(uuid, text)
    data["message"]["parent_tool_use_id"] = CALL
    return name, data


def test_a_sub_agents_message_is_not_the_reply_nor_read_out(
    browser: Browser, served_box: Callable[..., ServedBox]
) -> None:
    expect = _expect()
    served = served_box(gated=True)
    context, page, problems = open_busy_page(
        browser,
        served,
        [
            sse(
                delta("Let me look", first=True),
                sub_agents("sub-msg-1", "Found 3 files"),
                delta(" around."),
            ),
            sse(assistant("main-msg-1", "Let me look around. Done.")),
        ],
        script=RECORD_ANNOUNCEMENTS,
    )
    # The sub-agent's message came between two pieces: the text streaming is still the
    # main conversation's, whole, and the sub-agent's is shown nowhere.
    expect(streaming(page)).to_have_text("Let me look around.")
    expect(page.locator(".message", has_text="Found 3 files")).to_have_count(0)
    # The main conversation's message is the reply: shown once, and read out.
    finished = page.locator('.message.live[data-live="main-msg-1"]')
    expect(finished).to_have_text("Let me look around. Done.")
    expect(page.locator("#announcer")).to_have_text("Box: Let me look around. Done.")
    expect(page.locator(".message", has_text="Found 3 files")).to_have_count(0)
    said = page.evaluate("window.__said")
    assert not [words for words in said if "Found" in words], said
    assert problems == []
    context.close()


def test_a_sub_agents_message_has_its_calls_open_fold_read_its_work_again(
    browser: Browser, served_box: Callable[..., ServedBox]
) -> None:
    expect = _expect()
    served = served_box(gated=True)
    context, page, problems = open_busy_page(browser, served, [], script=OPEN_STREAM)

    def the_call(boot: dict[str, Any]) -> None:
        # The turn so far ends in an Agent call run in the background (Claude Code's
        # default): its result came at once and names its sub-agent, still at work.
        call = {
            "uuid": "main-call",
            "type": "assistant",
            "timestamp": "2026-08-01T09:00:00.000Z",
            "content": [
                {
                    "type": "tool_use",
                    "toolName": "Agent",
                    "toolId": CALL,
                    "input": {"description": "Find the tests", "prompt": "Find the tests"},
                    "resultSummary": "Async agent launched successfully.",
                    "agentId": AGENT,
                }
            ],
        }
        boot["history"]["entries"].append(call)
        boot["history"]["total"] += 1

    reads: list[str] = []

    def sub_agents_history(route: Route) -> None:
        # Each read finds one step more than the last: the sub-agent at work.
        reads.append(route.request.url)
        steps = [
            {
                "uuid": f"sub-{number}",
                "type": "assistant",
                "timestamp": "2026-08-01T09:00:00.000Z",
                "sidechain": True,
                "content": [{"type": "text", "text": f"Step {number}"}],
            }
            for number in range(1, len(reads) + 1)
        ]
        route.fulfill(
            status=200,
            content_type="application/json",
            body=json.dumps({"entries": steps, "total": len(steps)}),
        )

    page.route("**/api/chat/bootstrap*", lambda route: answer_changed(route, the_call))
    page.route(f"**/api/chat/history?*agent={AGENT}*", sub_agents_history)
    expect(page.locator(".message", has_text='You said: "Water the tomatoes"')).to_have_count(1)
    page.reload()
    fold = page.locator("details.subagent")
    expect(fold).to_have_count(1)
    fold.locator("summary").click()
    expect(fold.locator(".subagent-steps")).to_have_text(" · 1 step")
    # The sub-agent says something: the fold reads its work again, and the reply
    # area shows none of it.
    name, data = sub_agents("sub-msg-1", "Found 3 files")
    page.evaluate("([name, data]) => window.__say(name, data)", [name, data])
    expect(fold.locator(".subagent-steps")).to_have_text(" · 2 steps")
    expect(fold.locator(".subagent-log")).to_contain_text("Step 2")
    expect(page.locator(".message", has_text="Found 3 files")).to_have_count(0)
    assert all(f"agent={AGENT}" in url for url in reads)
    assert problems == []
    context.close()
