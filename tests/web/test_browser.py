"""The chat page in headless Chromium against a real served box (issue 8).

Each test drives the page as a person would — the keyboard, the file picker, a
reload — against a box served by a child process (`box_server.py`) on the offline
echo engine, and checks what the page shows and what it fetched. They skip, with
the reason, where Chromium or Playwright is missing (see ``conftest.py``).
"""

from __future__ import annotations

import random
import struct
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.web.conftest import ServedBox

if TYPE_CHECKING:
    from playwright.sync_api import (
        Browser,
        BrowserContext,
        Expect,
        Locator,
        Page,
        Route,
        ViewportSize,
    )

# Long enough for a cold page and a slow CI machine; every wait ends as soon as it can.
WAIT_MS = 20_000
DESKTOP: ViewportSize = {"width": 1100, "height": 760}
# Two animation frames: what a layout change makes the page do is done after them.
FRAMES = "() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))"
# The page has had the box's state twice: its first read, and the one it makes on
# connecting to the event stream (whose render lands whenever its answer does).
STATE_READ_TWICE = """() => performance.getEntriesByType("resource")
  .filter((entry) => entry.name.includes("/api/chat/bootstrap") && entry.responseEnd > 0)
  .length >= 2"""
PHONE: ViewportSize = {"width": 390, "height": 780}


def _expect() -> Expect:
    # Imported when a test runs: without playwright the module still loads, and skips.
    from playwright.sync_api import expect  # noqa: PLC0415

    expect.set_options(timeout=WAIT_MS)
    return expect


def open_page(
    browser: Browser, served: ServedBox, viewport: ViewportSize = DESKTOP
) -> tuple[BrowserContext, Page, list[str]]:
    """A fresh browser context logged in through the URL ``bbx serve`` prints.

    Returns the page and a list that collects every console error and page error
    (a Content-Security-Policy violation is reported as a console error).
    """
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    problems: list[str] = []
    page.on(
        "console",
        lambda message: problems.append(message.text) if message.type == "error" else None,
    )
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.goto(served.login_url)
    _expect()(page.locator("#status")).not_to_have_text("Connecting…")
    return context, page, problems


def wait_idle(served: ServedBox) -> None:
    """Until the chat has a session, no turn in flight and nothing queued."""
    deadline = time.monotonic() + WAIT_MS / 1000
    while time.monotonic() < deadline:
        status = served.api("GET", "/api/chat/bootstrap?tail=1")
        if status["sessionId"] and not status["status"]["busy"] and not status["status"]["queued"]:
            return
        time.sleep(0.05)
    raise AssertionError("the chat did not become idle")


def reply(page: Page, text: str) -> Locator:
    """The box's answer to ``text`` once it is in the transcript (not the live copy)."""
    return page.locator(".message.assistant:not(.live)", has_text=f'You said: "{text}')


def user_messages(page: Page, text: str) -> Locator:
    return page.locator(".message.user", has_text=text)


def photo_png(width: int = 480, height: int = 360) -> bytes:
    """A real PNG of a grainy gradient, big enough that the transcript line holding it
    is over the strip's 256 KiB mark (so the history read serves it by reference)."""
    noise = random.Random(8)
    rows = bytearray()
    for y in range(height):
        rows.append(0)  # filter: none
        for x in range(width):
            rows += bytes(
                (
                    (x * 200 // width + noise.randrange(48)) & 0xFF,
                    (y * 160 // height + 40 + noise.randrange(48)) & 0xFF,
                    (150 + noise.randrange(48)) & 0xFF,
                )
            )

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(bytes(rows), 9))
        + chunk(b"IEND", b"")
    )


def write_husk(box: Path, session8: str, title: str, contains: str) -> None:
    cards = box / "_content" / "chat" / "web"
    cards.mkdir(parents=True, exist_ok=True)
    (cards / f"2026-08-01_{session8}.chat.card").write_text(
        f"---\nsession: {session8}-0000-4000-8000-000000000000\n"
        f"title: {title}\ncontains: {contains}\n---\nNotes.\n",
        encoding="utf-8",
    )


def test_send_a_message_and_see_the_reply(
    browser: Browser, served_box: Callable[..., ServedBox], tmp_path: Path, screenshot_dir: Path
) -> None:
    expect = _expect()
    write_husk(tmp_path / "box", "5e55a0c1", "Planning the garden", "Which beans to sow in May.")
    served = served_box()
    context, page, problems = open_page(browser, served)

    # The page: strict CSP, no sniffing, no referrer; the token only in an HttpOnly cookie.
    landing = page.request.get(served.base_url + "/")
    policy = landing.headers["content-security-policy"]
    for directive in ("default-src 'self'", "script-src 'self'", "frame-ancestors 'none'"):
        assert directive in policy
    assert "unsafe-inline" not in policy
    assert landing.headers["x-content-type-options"] == "nosniff"
    assert landing.headers["referrer-policy"] == "no-referrer"
    [cookie] = context.cookies()
    assert cookie["name"] == f"bbx_token_{served.port}"
    assert cookie["httpOnly"] is True
    assert page.evaluate("document.cookie") == ""
    assert page.url == served.base_url + "/"

    # The session list shows the husk's title and what it contains.
    expect(page.locator("#session-list")).to_contain_text("Planning the garden")
    expect(page.locator("#session-list")).to_contain_text("Which beans to sow in May.")

    # Keyboard only: the composer has the focus; Enter sends.
    expect(page.locator("#composer-text")).to_be_focused()
    page.keyboard.type("Hello, box! What is on the list today?")
    page.keyboard.press("Enter")
    expect(reply(page, "Hello, box! What is on the list today?")).to_be_visible()
    # The optimistic copy was retired by the transcript's echo: shown once, not pending.
    expect(user_messages(page, "What is on the list today?")).to_have_count(1)
    expect(page.locator(".message.pending")).to_have_count(0)
    expect(page.locator("#status")).to_have_text("Ready")
    page.screenshot(path=str(screenshot_dir / "chat.png"))
    assert problems == []
    context.close()


def test_photos_are_fetched_only_when_scrolled_into_view(
    browser: Browser, served_box: Callable[..., ServedBox], tmp_path: Path, screenshot_dir: Path
) -> None:
    expect = _expect()
    served = served_box()
    context, page, problems = open_page(browser, served)
    photo = tmp_path / "garden.png"
    photo.write_bytes(photo_png())

    # Attach with the file picker; the composer shows a preview before sending.
    page.locator("#file-input").set_input_files(str(photo))
    expect(page.locator("#attachments img")).to_have_count(1)
    page.locator("#composer-text").fill("Here is the garden")
    page.locator("#send").click()
    expect(reply(page, "Here is the garden")).to_contain_text("and sent 1 image (image/png")
    # Once in the transcript the photo comes back by reference, from the box.
    expect(page.locator('img.photo[src^="/api/session-media/"]')).to_have_count(1)
    wait_idle(served)

    # Enough tall messages after it that the photo is pages above, and beyond the
    # first history page the page reads after a reload.
    filler = "\n".join(["a line of a long message"] * 120)
    for number in range(21):
        served.api("POST", "/api/chat/send", {"message": f"filler {number}\n{filler}"})
        wait_idle(served)

    fetched: list[str] = []

    def count_media(route: Route) -> None:
        fetched.append(route.request.url)
        route.continue_()

    # Routing also turns the HTTP cache off: every fetch of a photo is counted.
    page.route("**/api/session-media/**", count_media)
    page.reload()
    expect(reply(page, "filler 20")).to_be_visible()
    page.wait_for_timeout(1000)
    assert fetched == [], "no photo is fetched before it is scrolled back to"

    # Scroll back: load the earlier page (keyboard), the photo's <img> exists but is
    # still far above the view, so it is not fetched yet.
    page.locator("#load-earlier").focus()
    page.keyboard.press("Enter")
    image = page.locator("img.photo")
    expect(image).to_have_count(1)
    expect(image).to_have_attribute("loading", "lazy")
    page.wait_for_timeout(1000)
    assert fetched == [], "a lazy photo far above the view is not fetched"

    image.scroll_into_view_if_needed()
    expect(image).to_have_js_property("complete", True)
    assert image.evaluate("element => element.naturalWidth") == 480
    page.wait_for_timeout(300)
    assert len(fetched) == 1, fetched
    assert fetched[0].startswith(served.base_url + "/api/session-media/")
    page.screenshot(path=str(screenshot_dir / "photo.png"))
    assert problems == []
    context.close()


def test_a_message_sent_while_busy_is_queued_then_answered(
    browser: Browser, served_box: Callable[..., ServedBox], screenshot_dir: Path
) -> None:
    expect = _expect()
    served = served_box(gated=True)
    context, page, problems = open_page(browser, served)
    composer = page.locator("#composer-text")

    composer.fill("First: water the tomatoes")
    composer.press("Enter")
    # The turn's answer shows while the turn is still held open.
    answer = page.locator(".message.assistant", has_text='You said: "First: water the tomatoes"')
    expect(answer).to_be_visible()
    expect(page.locator("#status")).to_have_text("Working…")

    composer.fill("Second: and the beans")
    composer.press("Enter")
    second = user_messages(page, "Second: and the beans")
    expect(second.locator(".badge")).to_have_text("Queued")
    expect(page.locator("#status")).to_contain_text("1 queued")
    page.screenshot(path=str(screenshot_dir / "busy-queued.png"))

    served.release(1)
    served.release(2)
    expect(reply(page, "Second: and the beans")).to_be_visible()
    expect(reply(page, "First: water the tomatoes")).to_be_visible()
    expect(second).to_have_count(1)
    expect(page.locator(".message.pending")).to_have_count(0)
    expect(page.locator(".message.live")).to_have_count(0)
    expect(page.locator("#status")).to_have_text("Ready")
    assert problems == []
    context.close()


def test_a_send_cut_by_a_crash_reconciles_after_restart_without_a_duplicate(
    browser: Browser, served_box: Callable[..., ServedBox], screenshot_dir: Path
) -> None:
    expect = _expect()
    served = served_box(gated=True)
    served.release(1)
    context, page, problems = open_page(browser, served)
    composer = page.locator("#composer-text")
    composer.fill("Good morning")
    composer.press("Enter")
    expect(reply(page, "Good morning")).to_be_visible()

    # Turn 2 is held: the box recorded the message and the engine wrote it to the
    # transcript, but the turn is not done when the server dies.
    composer.fill("Remember the milk")
    composer.press("Enter")
    milk = user_messages(page, "Remember the milk")
    expect(page.locator(".message.assistant", has_text="Remember the milk")).to_be_visible()
    expect(milk.locator(".badge")).to_have_count(0)
    served.kill()
    expect(page.locator("#status")).to_contain_text("Offline — reconnecting")
    page.screenshot(path=str(screenshot_dir / "offline.png"))

    served.start(gated=False)
    # Not a vacuous check: the box still lists the message as accepted (pending), and
    # the transcript holds it once; the page must join the two into one.
    bootstrap = served.api("GET", "/api/chat/bootstrap")
    pending_texts = [entry["content"][0]["text"] for entry in bootstrap["pending"]]
    assert "Remember the milk" in pending_texts
    durable = [
        entry
        for entry in bootstrap["history"]["entries"]
        if entry["type"] == "user" and "Remember the milk" in str(entry["content"])
    ]
    assert len(durable) == 1

    # The same tab (its own copy of the send survives the reload) ...
    page.reload()
    expect(reply(page, "Remember the milk")).to_be_visible()
    expect(milk).to_have_count(1)
    expect(page.locator(".message.pending")).to_have_count(0)
    # The box started afresh and its turn had ended: no run until the next message.
    expect(page.locator("#status")).to_have_text("Not running · Send starts the agent")
    context.close()

    # ... and a fresh browser on a phone, which has only the box's record.
    phone, small, phone_problems = open_page(browser, served, PHONE)
    expect(reply(small, "Remember the milk")).to_be_visible()
    expect(user_messages(small, "Remember the milk")).to_have_count(1)
    expect(user_messages(small, "Good morning")).to_have_count(1)
    expect(small.locator(".message.pending")).to_have_count(0)
    small.screenshot(path=str(screenshot_dir / "phone.png"))
    assert phone_problems == []
    # The page's own errors while the box was down are network errors, nothing else.
    assert all("Failed to load resource" in problem or "net::" in problem for problem in problems)
    phone.close()


@pytest.mark.parametrize("path", ["/static/app.js", "/static/reconcile.js", "/static/style.css"])
def test_the_page_files_carry_the_page_headers(
    browser: Browser, served_box: Callable[..., ServedBox], path: str
) -> None:
    served = served_box()
    context = browser.new_context()
    answer = context.request.get(served.base_url + path)
    assert answer.status == 200
    assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
    assert answer.headers["x-content-type-options"] == "nosniff"
    missing = context.request.get(served.base_url + "/static/../box.py")
    assert missing.status == 404
    context.close()
