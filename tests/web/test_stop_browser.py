"""After Stop the page says what is true: stopped, and what Send does next (issue 34).

Stop closes the chat's run and clears its queue (`POST /api/chat/stop`; the box
answers with its status, then sends ``close`` ``{code: 0}``). Nothing runs then, so
Stop and Restart are disabled; the status must say the chat is stopped and that a
message starts the agent again, and a message the stop took out of the queue must
not read as sent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tests.web.conftest import ServedBox
from tests.web.test_browser import _expect, open_page, reply, user_messages

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

STOPPED = "Stopped · Send starts the agent again"
DROPPED = "Not sent: Stop cleared the queue"


def send(page: Page, text: str) -> None:
    composer = page.locator("#composer-text")
    composer.fill(text)
    composer.press("Enter")


def test_after_stop_the_status_says_stopped_and_what_send_does(
    browser: Browser, served_box: Callable[..., ServedBox]
) -> None:
    expect = _expect()
    served = served_box()
    context, page, problems = open_page(browser, served)
    send(page, "Plant the peas")
    expect(reply(page, "Plant the peas")).to_be_visible()
    # The run stays open after its turn: ready, and there is something to stop.
    expect(page.locator("#status")).to_have_text("Ready")
    expect(page.locator("#stop")).to_be_enabled()
    expect(page.locator("#restart")).to_be_enabled()

    page.locator("#stop").click()
    expect(page.locator("#status")).to_have_text(STOPPED)
    # Nothing runs: nothing to stop or restart, and the composer still takes a message.
    expect(page.locator("#stop")).to_be_disabled()
    expect(page.locator("#restart")).to_be_disabled()
    expect(page.locator("#composer-text")).to_be_enabled()
    expect(page.locator("#send")).to_be_enabled()
    status = served.api("GET", "/api/chat/bootstrap?tail=1")["status"]
    assert (status["phase"], status["running"]) == ("idle", False)

    # What the status promised: Send starts the agent again, in the same conversation.
    send(page, "And the beans")
    expect(reply(page, "And the beans")).to_be_visible()
    expect(reply(page, "Plant the peas")).to_be_visible()
    expect(page.locator("#status")).to_have_text("Ready")
    expect(page.locator("#stop")).to_be_enabled()
    assert problems == []
    context.close()


def test_a_message_the_stop_took_out_of_the_queue_does_not_read_as_sent(
    browser: Browser, served_box: Callable[..., ServedBox]
) -> None:
    expect = _expect()
    served = served_box(gated=True)
    context, page, problems = open_page(browser, served)
    send(page, "Water the tomatoes")
    expect(page.locator(".message.assistant", has_text="Water the tomatoes")).to_be_visible()
    send(page, "Then the beans")
    beans = user_messages(page, "Then the beans")
    expect(beans.locator(".badge")).to_have_text("Queued")

    # The held turn does not end at once: the chat is stopping, not working.
    page.locator("#stop").click()
    expect(page.locator("#status")).to_have_text("Stopping…")
    expect(page.locator("#stop")).to_be_disabled()
    expect(page.locator("#restart")).to_be_disabled()
    served.release(1)
    expect(page.locator("#status")).to_have_text(STOPPED)
    expect(beans.locator(".badge")).to_have_text(DROPPED)
    # Not vacuous: the box's queue is empty and the transcript never got the message.
    bootstrap = served.api("GET", "/api/chat/bootstrap?tail=40")
    assert bootstrap["status"]["queued"] == 0
    assert "Then the beans" not in str(bootstrap["history"]["entries"])

    # A new message starts a new run; the dropped one still says it was not sent.
    served.release(2)
    send(page, "Just the tomatoes")
    expect(reply(page, "Just the tomatoes")).to_be_visible()
    expect(page.locator("#status")).to_have_text("Ready")
    expect(beans).to_have_count(1)
    expect(beans.locator(".badge")).to_have_text(DROPPED)
    page.reload()
    expect(beans.locator(".badge")).to_have_text(DROPPED)
    assert problems == []
    context.close()
