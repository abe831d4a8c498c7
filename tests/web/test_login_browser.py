"""A browser without the box's cookie sees one notice saying how to get in (issue 34).

The page's scripts never see the token: the login URL ``bbx serve`` prints
(``/?token=…``) sets an HttpOnly cookie. A browser that opens ``/`` without it gets
``401`` from every ``/api`` route; the page must say so once, and how to log in,
instead of "Offline — reconnecting" beside a composer that cannot send. A wrong
token in the login URL is answered with a page, not the API's JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tests.web.conftest import ServedBox
from tests.web.test_browser import WAIT_MS, _expect, open_page, reply

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page

# Longer than the event stream's first reconnect delay (0.5 s, `api.js`): a page that
# were still listening would have said "Offline — reconnecting" by then.
SETTLE_MS = 1500
NOT_LOGGED_IN = "Not logged in"

# Every text the status line shows, from the first one on.
RECORD_STATUSES = """
window.statusesShown = [];
document.addEventListener("DOMContentLoaded", () => {
  const status = document.getElementById("status");
  const note = () => window.statusesShown.push(status.textContent);
  note();
  const changes = { childList: true, characterData: true, subtree: true };
  new MutationObserver(note).observe(status, changes);
});
"""


def shown_statuses(page: Page) -> list[str]:
    return list(page.evaluate("() => window.statusesShown"))


def open_without_cookie(
    browser: Browser, served: ServedBox
) -> tuple[BrowserContext, Page, list[str], list[str]]:
    """A fresh browser on ``/``: the page, the URLs it asked for and its console lines."""
    context = browser.new_context()
    page = context.new_page()
    page.add_init_script(RECORD_STATUSES)
    asked: list[str] = []
    console: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    page.on("console", lambda message: console.append(message.text))
    page.goto(served.base_url + "/")
    return context, page, asked, console


def test_without_the_cookie_the_page_says_how_to_get_in(
    browser: Browser, served_box: Callable[..., ServedBox]
) -> None:
    expect = _expect()
    served = served_box()
    context, page, asked, _ = open_without_cookie(browser, served)
    login = page.locator("#login")
    expect(login).to_be_visible()
    expect(login).to_contain_text("bbx serve")
    expect(login).to_contain_text(".beebox/token")
    expect(page.locator("#login-token")).to_be_focused()
    expect(page.locator("#status")).to_have_text(NOT_LOGGED_IN)
    # One notice: not the general one, not the empty conversation's invitation.
    expect(page.locator("#notice")).to_be_hidden()
    expect(page.locator("#empty")).to_be_hidden()
    # Nothing that cannot work is on offer.
    for control in ("#composer-text", "#send", "#file-input", "#stop", "#restart"):
        expect(page.locator(control)).to_be_disabled()
    page.wait_for_timeout(SETTLE_MS)
    statuses = shown_statuses(page)
    assert not [text for text in statuses if "Offline" in text], statuses
    assert statuses[-1] == NOT_LOGGED_IN
    # The page stopped asking: no event stream was opened, nothing retried.
    events = [url for url in asked if url.startswith(served.base_url + "/api/events")]
    assert events == []
    assert context.cookies() == []

    # The token typed into the notice logs the browser in, and leaves the address bar.
    page.locator("#login-token").fill(served.token)
    page.keyboard.press("Enter")
    expect(page.locator("#status")).to_have_text("Not running · Send starts the agent")
    assert page.url == served.base_url + "/"
    expect(login).to_be_hidden()
    expect(page.locator("#composer-text")).to_be_enabled()
    page.locator("#composer-text").fill("Logged in")
    page.keyboard.press("Enter")
    expect(reply(page, "Logged in")).to_be_visible()
    context.close()


def test_a_wrong_token_gets_a_page_that_says_so(
    browser: Browser, served_box: Callable[..., ServedBox]
) -> None:
    expect = _expect()
    served = served_box()
    context, page, _, console = open_without_cookie(browser, served)
    page.locator("#login-token").fill("not-the-token")
    with page.expect_navigation() as navigation:
        page.keyboard.press("Enter")
    refused = navigation.value
    assert refused is not None
    assert refused.status == 401
    assert refused.headers["content-type"] == "text/html; charset=utf-8"
    assert "frame-ancestors 'none'" in refused.headers["content-security-policy"]
    expect(page.get_by_role("heading", level=2)).to_have_text("That token is not this box's")
    expect(page.locator("body")).to_contain_text("bbx serve")
    assert context.cookies() == []
    # Back to the page, which offers the field again.
    page.get_by_role("link", name="Back to the chat page").click()
    expect(page.locator("#login")).to_be_visible(timeout=WAIT_MS)
    # Only the 401s of the page's first reads, and nothing from the policy.
    assert all("401" in line for line in console), console
    context.close()


def test_a_page_whose_cookie_goes_says_how_to_get_in(
    browser: Browser, served_box: Callable[..., ServedBox]
) -> None:
    expect = _expect()
    served = served_box()
    context, page, _ = open_page(browser, served)
    expect(page.locator("#composer-text")).to_be_enabled()
    # The cookie goes (cleared, or a box that now has another token), and the event
    # stream drops: its reconnection is refused, which an EventSource cannot tell
    # from a box that is down.
    context.clear_cookies()
    served.stop()
    served.start()
    expect(page.locator("#login")).to_be_visible()
    expect(page.locator("#status")).to_have_text(NOT_LOGGED_IN)
    expect(page.locator("#composer-text")).to_be_disabled()
    expect(page.locator("#notice")).to_be_hidden()
    context.close()
