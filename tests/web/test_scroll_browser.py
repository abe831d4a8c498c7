"""The conversation stays at the newest message while a photo near it loads (issue 34).

A photo is a lazy ``<img>`` whose bytes come from ``/api/session-media/<ref>``. The
page scrolls to the bottom once it has the history; a photo that arrives after that
grows from its placeholder, and the view must still end at the newest message,
unless the person has scrolled up. Each test holds the photo's request until the
page has scrolled (a photo that loads slowly), then lets it through.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from tests.web.conftest import ServedBox
from tests.web.test_browser import (
    DESKTOP,
    FRAMES,
    PHONE,
    STATE_READ_TWICE,
    WAIT_MS,
    _expect,
    photo_png,
    reply,
    wait_idle,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page, Route, ViewportSize

# The photo of the figures: 400 × 300 shows 300 px tall on a desktop, 237 on a phone.
PHOTO_WIDTH, PHOTO_HEIGHT = 400, 300
# How far from the bottom still counts as at the bottom (sub-pixel rounding).
AT_BOTTOM_PX = 1
# How far the person scrolls up, in pixels of mouse wheel.
SCROLL_UP_PX = 400

VIEWPORTS = [pytest.param(DESKTOP, id="desktop"), pytest.param(PHONE, id="phone")]

# Two animation frames: what a layout change makes the page do is done by then.
# How far the view is from the bottom of the conversation, in pixels.
SHORT_OF_BOTTOM = "() => { const log = document.getElementById('log');"
SHORT_OF_BOTTOM += " return log.scrollHeight - log.scrollTop - log.clientHeight; }"


def short_of_bottom(page: Page) -> float:
    """How far the view is from the bottom, once what the last layout change makes the
    page do (after the frame that follows it) is done."""
    page.evaluate(FRAMES)
    return float(page.evaluate(SHORT_OF_BOTTOM))


# The message at the top of the view, and where it is on the screen.
TOP_OF_VIEW = """() => {
  const top = document.getElementById('log').getBoundingClientRect().top;
  const message = [...document.querySelectorAll('#messages > li')]
    .find((item) => item.getBoundingClientRect().bottom > top);
  return [message.dataset.uuid, Math.round(message.getBoundingClientRect().top)];
}"""


def seed_conversation(served: ServedBox) -> None:
    """Enough tall messages to overflow the view, then the photo, then one exchange."""
    filler = "\n".join(["a line of an earlier message"] * 12)
    for number in range(6):
        served.api("POST", "/api/chat/send", {"message": f"earlier {number}\n{filler}"})
        wait_idle(served)
    photo = base64.b64encode(photo_png(PHOTO_WIDTH, PHOTO_HEIGHT)).decode("ascii")
    served.api(
        "POST",
        "/api/chat/send",
        {"message": "The new bed", "images": [{"mediaType": "image/png", "data": photo}]},
    )
    wait_idle(served)
    served.api("POST", "/api/chat/send", {"message": "Does it get enough sun?"})
    wait_idle(served)


class HeldPhotos:
    """Holds every photo request until `release`: a photo that loads slowly."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.held: list[Route] = []
        page.route("**/api/session-media/**", self._hold)

    def _hold(self, route: Route) -> None:
        self.held.append(route)

    def wait_for_one(self) -> None:
        # The route handler runs while Playwright waits, so wait in small steps.
        deadline = time.monotonic() + WAIT_MS / 1000
        while not self.held:
            assert time.monotonic() < deadline, "the page never asked for the photo"
            self.page.wait_for_timeout(50)

    def release(self) -> None:
        for route in self.held:
            route.continue_()
        self.held.clear()


def opened(page: Page, photos: HeldPhotos) -> None:
    """Until the page shows the conversation, listens to the box, has read the state
    again on connecting (its render would otherwise land after the test has
    scrolled), and asked for the photo."""
    reply(page, "Does it get enough sun?").wait_for(timeout=WAIT_MS)
    _expect()(page.locator("#status")).not_to_have_text("Connecting…")
    page.wait_for_function(STATE_READ_TWICE, timeout=WAIT_MS)
    page.evaluate(FRAMES)
    photos.wait_for_one()


def open_held(
    browser: Browser, served: ServedBox, viewport: ViewportSize
) -> tuple[BrowserContext, Page, HeldPhotos]:
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    photos = HeldPhotos(page)
    page.goto(served.login_url)
    opened(page, photos)
    return context, page, photos


def photo_loaded(page: Page) -> None:
    """Until the photo has loaded, and two frames later (layout and any scroll done)."""
    page.wait_for_function(
        "() => { const image = document.querySelector('img.photo');"
        " return image !== null && image.complete && image.naturalWidth > 0; }",
        timeout=WAIT_MS,
    )
    page.evaluate(FRAMES)


def photo_height(page: Page) -> float:
    return float(page.evaluate("() => document.querySelector('img.photo').offsetHeight"))


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_the_view_stays_at_the_newest_message_while_a_photo_loads(
    browser: Browser, served_box: Callable[..., ServedBox], viewport: ViewportSize
) -> None:
    served = served_box()
    seed_conversation(served)
    context, page, photos = open_held(browser, served, viewport)
    source = page.locator("img.photo").get_attribute("src", timeout=WAIT_MS)
    assert source is not None
    assert source.startswith("/api/session-media/"), "the photo comes by reference"
    assert short_of_bottom(page) <= AT_BOTTOM_PX, "the page scrolls to the bottom first"

    photos.release()
    photo_loaded(page)
    short = short_of_bottom(page)
    assert short <= AT_BOTTOM_PX, f"the photo pushed the newest message {short} px below the view"
    loaded_height = photo_height(page)
    assert loaded_height > PHOTO_HEIGHT / 2

    # A reload: this browser has seen the photo, so its place is kept before it loads.
    photos = HeldPhotos(page)
    page.reload()
    opened(page, photos)
    assert photo_height(page) == loaded_height, "the photo's size is reserved before it loads"
    assert short_of_bottom(page) <= AT_BOTTOM_PX
    photos.release()
    photo_loaded(page)
    assert photo_height(page) == loaded_height
    assert short_of_bottom(page) <= AT_BOTTOM_PX
    context.close()


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_a_photo_loading_leaves_the_view_where_the_person_scrolled(
    browser: Browser, served_box: Callable[..., ServedBox], viewport: ViewportSize
) -> None:
    served = served_box()
    seed_conversation(served)
    context, page, photos = open_held(browser, served, viewport)
    log = page.locator("#log")
    # The person scrolls up (as a wheel would, without its smooth animation).
    log.evaluate(f"log => log.scrollBy({{top: -{SCROLL_UP_PX}, behavior: 'instant'}})")
    page.evaluate(FRAMES)
    before = page.evaluate(TOP_OF_VIEW)

    photos.release()
    photo_loaded(page)
    # What they were reading has not moved (above the photo it stays; below it, the
    # browser's scroll anchoring keeps it), and the view was not taken to the bottom.
    assert page.evaluate(TOP_OF_VIEW) == before, "the view stays where the person put it"
    assert short_of_bottom(page) > SCROLL_UP_PX / 2
    context.close()
