"""Paging back through a long conversation stays cheap (issue 37, point 5).

"Load earlier messages" used to rebuild the whole list (every entry shown was taken
out of the page and put back) and read bootstrap twice beside its history read.
Now one press reads one history page, builds only that page's entries and inserts
them before the first one shown; the nodes already there are neither moved nor
rebuilt, and the focus stays on the button (or, once nothing earlier is left, goes
to the conversation rather than to the page's body).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tests.web.conftest import ServedBox
from tests.web.markdown_history import write_markdown_history
from tests.web.test_browser import _expect, open_page

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Request

# Entries the page reads at a time (app.js PAGE_SIZE).
PAGE_SIZE = 40

# Counts what a "Load earlier" does to the list: nodes added and removed (a node
# moved counts as both), and whether the first node shown before is the same node
# after it.
WATCH_LIST = """() => {
  const list = document.getElementById("messages");
  window.bbxFirstShown = list.firstElementChild;
  window.bbxMutations = { added: 0, removed: 0 };
  window.bbxObserver?.disconnect();
  window.bbxObserver = new MutationObserver((records) => {
    for (const record of records) {
      window.bbxMutations.added += record.addedNodes.length;
      window.bbxMutations.removed += record.removedNodes.length;
    }
  });
  window.bbxObserver.observe(list, { childList: true });
}"""


def open_long_conversation(page: Page) -> None:
    """Open the written conversation from the session list (read-only: no sends, so
    nothing pending besides what the history holds)."""
    page.locator("#session-list button", has_text="A long conversation").click()
    _expect()(page.locator("#status")).to_contain_text("viewing an earlier session")


def load_earlier_once(page: Page) -> tuple[dict[str, int], list[str]]:
    """Press Load earlier with the keyboard; the list's mutations and the API reads."""
    reads: list[str] = []

    def count(request: Request) -> None:
        if "/api/chat/" in request.url:
            reads.append(request.url.split("/api/chat/", 1)[1].split("?", 1)[0])

    before = page.locator("#messages > li").count()
    page.evaluate(WATCH_LIST)
    page.on("request", count)
    page.locator("#load-earlier").focus()
    page.keyboard.press("Enter")
    _expect()(page.locator("#messages > li")).not_to_have_count(before)
    page.wait_for_timeout(500)
    page.remove_listener("request", count)
    mutations: dict[str, int] = page.evaluate("window.bbxMutations")
    return mutations, reads


def test_load_earlier_inserts_only_the_new_page_and_reads_once(
    browser: Browser, served_box: Callable[..., ServedBox]
) -> None:
    expect = _expect()
    served = served_box()
    write_markdown_history(served.box, served.projects, 90)
    context, page, problems = open_page(browser, served)
    open_long_conversation(page)
    expect(page.locator("#messages > li")).to_have_count(PAGE_SIZE)

    mutations, reads = load_earlier_once(page)
    # 90 entries: the second page holds the 40 before the tail.
    expect(page.locator("#messages > li")).to_have_count(2 * PAGE_SIZE)
    assert mutations == {"added": PAGE_SIZE, "removed": 0}, mutations
    assert page.evaluate("window.bbxFirstShown.isConnected") is True
    assert reads == ["history"], reads
    # The button keeps the focus (it was a disabled button that dropped it).
    expect(page.locator("#load-earlier")).to_be_focused()

    # The last page: 10 entries; nothing earlier is left, the button goes and the
    # focus is in the conversation, not on the page's body.
    mutations, reads = load_earlier_once(page)
    expect(page.locator("#messages > li")).to_have_count(90)
    assert mutations == {"added": 10, "removed": 0}, mutations
    assert reads == ["history"], reads
    expect(page.locator("#load-earlier")).to_be_hidden()
    expect(page.locator("#log")).to_be_focused()
    expect(page.locator("#announcer")).to_have_text("10 earlier messages loaded")
    assert problems == []
    context.close()
