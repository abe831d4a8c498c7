"""Tool calls a person can read (issue 37, point 3).

A tool call shows its name and main argument (a Bash command, a file path, a
pattern) on one line, folded: one click shows the full input and the result. A
failed call says Failed, one a person refused says Refused (the box's permission
record names the call), one not answered yet says so. Thinking is folded under a
"Thinking" label. Before issue 37 a call read "▶ Used Bash" with nothing of what it
ran, and thinking was set out in full.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tests.web.conftest import ServedBox, answer_changed
from tests.web.markdown_history import write_markdown_history
from tests.web.test_browser import _expect, open_page
from tests.web.test_history_browser import open_long_conversation

if TYPE_CHECKING:
    from playwright.sync_api import Browser


def test_an_echo_tool_turn_shows_the_call_folded_with_its_result(
    browser: Browser, served_box: Callable[..., ServedBox]
) -> None:
    expect = _expect()
    served = served_box()
    context, page, problems = open_page(browser, served)
    page.locator("#composer-text").fill("tool: ls -la")
    page.locator("#composer-text").press("Enter")
    call = page.locator("details.tool")
    expect(call).to_have_count(1)
    expect(call.locator("summary .tool-name")).to_have_text("Echo")
    expect(call.locator("summary .tool-arg")).to_contain_text("ls -la")
    # Folded: the input and result are one click away.
    expect(call.locator(".tool-result")).to_be_hidden()
    call.locator("summary").click()
    expect(call.locator(".tool-input")).to_contain_text('"text": "ls -la"')
    expect(call.locator(".tool-result")).to_have_text("ls -la")
    expect(call).to_have_attribute("data-outcome", "done")
    assert problems == []
    context.close()


def test_commands_outcomes_and_thinking_read_plainly(
    browser: Browser, served_box: Callable[..., ServedBox]
) -> None:
    expect = _expect()
    served = served_box()
    write_markdown_history(served.box, served.projects, 20)
    failed_id, refused_id = "toolu_000002", "toolu_000003"

    def failures(boot: dict[str, Any]) -> None:
        """The history as it reads after a failed call and a refused one."""
        for entry in boot["history"]["entries"]:
            for block in entry["content"]:
                if block.get("toolId") in (failed_id, refused_id):
                    block["isError"] = True
                    block["resultSummary"] = "exit code 1"
                if block.get("toolId") == "toolu_000003":
                    block["resultSummary"] = "The person using the box denied this tool call."

    record = {
        "pending": [],
        "decisions": [
            {
                "id": "p-1",
                "decision": "deny",
                "how": "answered",
                "request": {"toolUseId": refused_id},
            }
        ],
    }
    context, page, problems = open_page(browser, served)
    page.route("**/api/chat/bootstrap*", lambda route: answer_changed(route, failures))
    page.route("**/api/chat/permissions*", lambda route: route.fulfill(json=record))
    open_long_conversation(page)

    calls = page.locator("details.tool")
    expect(calls).to_have_count(4)
    first = calls.first
    expect(first.locator("summary")).to_have_text("Bash pytest -q tests/test_0.py")
    first.locator("summary").click()
    expect(first.locator(".tool-input")).to_have_text(
        'pytest -q tests/test_0.py\n\n{\n  "description": "Run"\n}'
    )
    expect(first.locator(".tool-label").nth(1)).to_have_text("Result")
    expect(first.locator(".tool-result")).to_have_text("0 passed")

    failed = page.locator("details.tool", has_text="tests/test_2.py")
    expect(failed).to_have_attribute("data-outcome", "error")
    expect(failed.locator(".tool-outcome")).to_have_text("Failed")
    refused = page.locator("details.tool", has_text="tests/test_3.py")
    expect(refused).to_have_attribute("data-outcome", "refused")
    expect(refused.locator(".tool-outcome")).to_have_text("Refused")
    refused.locator("summary").click()
    expect(refused.locator(".tool-label").nth(1)).to_have_text("Refused")

    thinking = page.locator("details.thinking").first
    expect(thinking.locator("summary")).to_have_text("Thinking")
    expect(thinking.locator(".block-text")).to_be_hidden()
    thinking.locator("summary").click()
    expect(thinking.locator(".block-text")).to_have_text("Run step 0.")
    assert problems == []
    context.close()
