"""A reply of the real Claude Code on the page, streamed as it comes (issue 37).

``bbx serve --engine claude`` runs the CLI the ``claude`` extra bundles against the
Messages API double (`timed_double.TimedDouble`, which notes when each piece of text
leaves it), as `test_permissions_browser.py` does. The double streams a Markdown
reply in 20 pieces, half a second apart (ten seconds in all); each piece starts with
a marker word, and the page notes when each marker is first in the conversation.

- The first piece is on the page before the double has sent the third, so within a
  second of leaving it (the pieces are half a second apart), and long before the
  message is whole: the page shows text as it comes (before issue 37 it said
  "Working…" for the whole ten seconds).
- A reload mid-reply shows the text so far (bootstrap's ``liveText``).
- The finished message is shown once, not beside its streamed copy.
- It renders as Markdown (a table, a list, a code block), and its hostile lines stay
  inert.
- A ``Bash`` tool turn shows the command and its result; a call the person denied
  reads Refused.

They skip, saying why, where Chromium, Playwright or the claude extra is missing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.agent.claude_cli import OfflineClaude
from tests.agent.messages_api import Reply, Text, ToolUse
from tests.agent.test_serve_claude import serve_claude
from tests.web.test_browser import _expect
from tests.web.test_markdown_browser import HOSTILE, INSPECT, assert_inert
from tests.web.test_permissions_browser import ASK_WAIT_MS, _why_no_claude, card, opened, send
from tests.web.timed_double import Pieces, TimedDouble, marker

if TYPE_CHECKING:
    from playwright.sync_api import Browser

PIECES = 20
PIECE_DELAY_S = 0.5

# Where each marker is first on the page (the same clock as the double's).
RECORD = r"""() => {
  window.bbxSeen = {};
  const list = document.getElementById("messages");
  new MutationObserver(() => {
    for (const node of list.querySelectorAll(".message")) {
      for (const found of node.textContent.matchAll(/mk\d{4}z/g)) {
        if (found[0] in window.bbxSeen) continue;
        window.bbxSeen[found[0]] = performance.timeOrigin + performance.now();
      }
    }
  }).observe(list, { childList: true, subtree: true, characterData: true });
}"""

# The reply, piece by piece: a marker starts each piece that is a paragraph of its
# own (one inside a table or a code block would break it).
REPLY = [
    f"{marker(0, 0)} Here is the **plan**:\n\n",
    "- water the tomatoes\n",
    "- sow the beans\n\n",
    f"{marker(0, 3)} The beds:\n\n",
    "| bed | plant |\n",
    "|---|---|\n",
    "| north | peas |\n\n",
    f"{marker(0, 7)} And the script:\n\n",
    "```sh\n",
    "echo planted\n",
    "```\n\n",
    f"{marker(0, 11)} {HOSTILE[0]}\n\n",
    f"{HOSTILE[2]}\n\n",
    f"{HOSTILE[5]}\n\n",
    f"{marker(0, 14)} Almost ",
    "there, ",
    "just ",
    "a few ",
    "more words.\n\n",
    f"{marker(0, 19)} That is all.",
]


@pytest.fixture
def api() -> Iterator[TimedDouble]:
    reason = _why_no_claude()
    if reason is not None:
        pytest.skip(reason)
    double = TimedDouble()
    with double:
        yield double


@pytest.fixture
def claude(tmp_path: Path, api: TimedDouble) -> OfflineClaude:
    return OfflineClaude(tmp_path / "claude", api)


def test_a_streamed_markdown_reply_on_the_page(
    browser: Browser, tmp_path: Path, claude: OfflineClaude, api: TimedDouble, screenshot_dir: Path
) -> None:
    expect = _expect()
    assert len(REPLY) == PIECES
    api.script(Reply((Pieces.of(REPLY, PIECE_DELAY_S),)))
    with (
        serve_claude(tmp_path / "box", claude) as served,
        opened(browser, served) as (page, problems),
    ):
        page.evaluate(RECORD)
        send(page, "What is the plan for the garden?")
        live = page.locator('.message.live[data-live="streaming"]')
        expect(live).to_contain_text(marker(0, 0), timeout=ASK_WAIT_MS)
        # Long before the message is whole: at most a few of its 20 pieces are out.
        first_seen = page.evaluate(f"window.bbxSeen['{marker(0, 0)}']")
        third_sent = api.sent_at.get(marker(0, 2))
        assert third_sent is None or first_seen < third_sent * 1000, (first_seen, api.sent_at)
        assert marker(0, PIECES - 1) not in api.sent_at

        # A reload mid-reply: the text so far is there again, from bootstrap.
        expect(live).to_contain_text(marker(0, 7))
        page.reload()
        expect(live).to_contain_text(marker(0, 3))
        expect(page.locator("#status")).to_have_text("Working…")
        page.screenshot(path=str(screenshot_dir / "streaming.png"))

        # Whole: once, as Markdown, the hostile lines inert.
        expect(page.locator("#status")).to_have_text("Ready", timeout=ASK_WAIT_MS)
        whole = page.locator(".message.assistant", has_text=marker(0, PIECES - 1))
        expect(whole).to_have_count(1)
        expect(page.locator(".message.live")).to_have_count(0)
        expect(whole.locator("table").first.locator("td")).to_have_text(["north", "peas"])
        expect(whole.locator("ul > li")).to_have_count(2)
        expect(whole.locator(".code-block pre code")).to_have_text("echo planted")
        expect(whole.locator("strong")).to_have_text("plan")
        page.wait_for_timeout(300)
        assert_inert(whole.evaluate(INSPECT))
        page.screenshot(path=str(screenshot_dir / "markdown-reply.png"))
        assert problems == []


def test_a_bash_tool_turn_shows_the_command_and_its_result(
    browser: Browser, tmp_path: Path, claude: OfflineClaude, api: TimedDouble, screenshot_dir: Path
) -> None:
    expect = _expect()
    # Both write a file, so Claude Code's default mode asks about each.
    allowed = ToolUse(
        "Bash", {"command": "touch made.txt && echo hello-from-bash", "description": "Say hello"}
    )
    denied = ToolUse("Bash", {"command": "touch denied.txt", "description": "Create a file"})
    api.script(
        Reply((Text("Running it."), allowed)),
        Reply((Text("And one more."), denied)),
        Reply.text("Done: it said **hello**."),
    )
    with (
        serve_claude(tmp_path / "box", claude) as served,
        opened(browser, served) as (page, problems),
    ):
        send(page, "Say hello from bash")
        asking = card(page, "echo hello-from-bash")
        expect(asking).to_have_count(1, timeout=ASK_WAIT_MS)
        asking.get_by_role("button", name="Allow", exact=True).click()
        expect(card(page, "touch denied.txt")).to_have_count(1, timeout=ASK_WAIT_MS)
        card(page).get_by_role("button", name="Deny").click()
        expect(page.locator(".message.assistant", has_text="Done: it said")).to_be_visible(
            timeout=ASK_WAIT_MS
        )
        expect(page.locator("#status")).to_have_text("Ready")
        ran = page.locator("details.tool", has_text="echo hello-from-bash")
        expect(ran.locator("summary")).to_have_text("Bash touch made.txt && echo hello-from-bash")
        expect(ran).to_have_attribute("data-outcome", "done")
        ran.locator("summary").click()
        expect(ran.locator(".tool-result")).to_contain_text("hello-from-bash")
        refused = page.locator("details.tool", has_text="touch denied.txt")
        expect(refused).to_have_attribute("data-outcome", "refused")
        expect(refused.locator(".tool-outcome")).to_have_text("Refused")
        assert not (tmp_path / "box" / "denied.txt").exists()
        page.screenshot(path=str(screenshot_dir / "tool-turn.png"))
        assert problems == []
