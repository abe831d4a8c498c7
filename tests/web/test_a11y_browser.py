"""The page for people who do not see it or do not use a mouse (issue 37, point 4).

- axe-core (the ``axe.min.js`` that the test-only ``axe-playwright-python`` ships)
  runs on every screen state the page has, light and dark, desktop and phone: no
  serious or critical violation.
- A keyboard alone sends, stops a turn, loads earlier messages, opens a tool's
  details and answers a permission request; the focus stays where the person was
  after Stop and "Load earlier" (a disabled button used to drop it to the body).
- The live region says each new message of the box and each state of one's own
  message (Sent, Queued, Refused); the no-cookie notice is read out.
- On a phone the session list is a dialog that holds the focus.
- Photos say whose they are, when, and with which words; the composer's remove
  button is at least 24 × 24 px and its name holds its words; the busy pulse stops
  for reduced motion; the colours follow the system's dark setting.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pytest

from tests.web.conftest import ServedBox, answer_changed
from tests.web.markdown_history import write_markdown_history
from tests.web.test_browser import DESKTOP, PHONE, _expect, open_page, photo_png, reply, wait_idle
from tests.web.test_history_browser import open_long_conversation

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

# A held turn's stop reads Stopping… until the turn lets go (or, on a slow machine,
# Stopped already by the time the test looks).
STOPPING_OR_STOPPED = re.compile(r"^(Stopping…|Stopped · Send starts the agent again)$")

# What counts as failing: axe's two highest impacts.
BLOCKING = ("serious", "critical")

# A permission request as bootstrap and the events carry it (beebox_spec.permissions).
REQUEST = {
    "id": "perm-a11y-1",
    "toolName": "Bash",
    "toolUseId": "toolu_a11y",
    "title": "Claude wants to run touch made.txt",
    "input": {"command": "touch made.txt", "description": "Create made.txt"},
    "canAlwaysAllow": True,
}

# Collects every text the live regions say, in order.
LISTEN = """() => {
  window.bbxSaid = [];
  for (const id of ["announcer", "alert", "status"]) {
    const region = document.getElementById(id);
    new MutationObserver(() => {
      if (region.textContent) window.bbxSaid.push(region.textContent);
    }).observe(region, { childList: true, characterData: true, subtree: true });
  }
}"""


def axe_source() -> str:
    axe = pytest.importorskip("axe_playwright_python", reason="axe-playwright-python (test extra)")
    return (Path(axe.__file__).parent / "axe.min.js").read_text(encoding="utf-8")


def assert_accessible(page: Page, state: str) -> None:
    """axe-core on the page as it is: no serious or critical violation."""
    # Evaluated through the driver, not as a page script: the CSP stays as it is.
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.evaluate(axe_source())
    found: list[dict[str, Any]] = page.evaluate(
        "async () => (await axe.run(document, { resultTypes: ['violations'] })).violations"
    )
    blocking = [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]][:5]}
        for v in found
        if v["impact"] in BLOCKING
    ]
    assert blocking == [], f"{state}: {json.dumps(blocking, indent=1)}"


def with_permission(page: Page) -> None:
    """Bootstrap lists a pending permission request; an answer to it is taken."""

    def add(boot: dict[str, Any]) -> None:
        if boot.get("sessionId") and not any(
            request["id"] == REQUEST["id"] for request in boot["permissions"]
        ):
            boot["permissions"].append(REQUEST)

    page.route("**/api/chat/bootstrap*", lambda route: answer_changed(route, add))
    page.route(
        f"**/api/chat/permissions/{REQUEST['id']}",
        lambda route: route.fulfill(json={"ok": True, "id": REQUEST["id"], "decision": "allow"}),
    )


def tab_to(page: Page, selector: str, *, limit: int = 80) -> None:
    """Press Tab until the element ``selector`` names has the focus (keyboard only)."""
    target = page.locator(selector)
    for _ in range(limit):
        if target.evaluate("node => node === document.activeElement"):
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"Tab never reached {selector}")


def test_every_screen_state_has_no_serious_violation(
    browser: Browser, served_box: Callable[..., ServedBox], tmp_path: Path
) -> None:
    expect = _expect()
    served = served_box(gated=True)
    write_markdown_history(served.box, served.projects, 60)
    for scheme in ("light", "dark"):
        context = browser.new_context(viewport=DESKTOP, color_scheme=scheme)
        page = context.new_page()
        # Logged out: the notice and every control off.
        page.goto(served.base_url + "/")
        expect(page.locator("#login")).to_be_visible()
        assert_accessible(page, f"{scheme}: logged out")
        page.goto(served.login_url)
        expect(page.locator("#status")).not_to_have_text("Connecting…")
        if scheme == "light":
            assert_turn_states_accessible(page, served, tmp_path, scheme)
        assert_reply_states_accessible(page, served, scheme)
        context.close()
        assert_phone_accessible(browser, served, scheme)

    # Offline: the box is gone, the page says when it tries again.
    context, page, _ = open_page(browser, served)
    served.stop()
    expect(page.locator("#status")).to_contain_text("Offline")
    assert_accessible(page, "offline")
    context.close()


def assert_turn_states_accessible(page: Page, served: ServedBox, folder: Path, scheme: str) -> None:
    """An empty chat; a turn held open with a message queued behind it and a photo (in
    ``folder``) in the composer; stopping, then stopped. The photo is removed after."""
    expect = _expect()
    expect(page.locator("#empty")).to_be_visible()
    assert_accessible(page, f"{scheme}: empty")
    # A turn held open, a message queued behind it, a photo in the composer.
    page.locator("#composer-text").fill("Here is the **plan**:\n\n| a | b |\n|---|---|\n| 1 | 2 |")
    page.locator("#composer-text").press("Enter")
    expect(page.locator(".message.assistant")).to_have_count(1)
    page.locator("#composer-text").fill("tool: ls")
    page.locator("#composer-text").press("Enter")
    expect(page.locator(".badge", has_text="Queued")).to_be_visible()
    photo = folder / "p.png"
    photo.write_bytes(photo_png(64, 48))
    page.locator("#file-input").set_input_files(str(photo))
    expect(page.locator("#attachments img")).to_have_count(1)
    assert_accessible(page, f"{scheme}: working, queued, a photo to send")
    # Stopping, then stopped.
    page.locator("#stop").click()
    expect(page.locator("#status")).to_have_text(STOPPING_OR_STOPPED)
    assert_accessible(page, f"{scheme}: stopping (or stopped)")
    served.release(1)
    expect(page.locator("#status")).to_contain_text("Stopped")
    assert_accessible(page, f"{scheme}: stopped")
    served.release(2)
    served.release(3)
    page.locator("#attachments .remove").click()


def assert_reply_states_accessible(page: Page, served: ServedBox, scheme: str) -> None:
    """A reply with Markdown and an open tool call; a permission card waiting; an
    earlier session, with Load earlier and folded tools and thinking."""
    expect = _expect()
    # A reply with Markdown and a tool call opened.
    page.locator("#composer-text").fill("tool: echo")
    page.locator("#composer-text").press("Enter")
    expect(page.locator("details.tool").last).to_be_visible()
    page.locator("details.tool summary").last.click()
    wait_idle(served)
    assert_accessible(page, f"{scheme}: a reply and an open tool call")
    # A permission card waiting.
    with_permission(page)
    page.reload()
    expect(page.locator("#permissions .permission")).to_have_count(1)
    assert_accessible(page, f"{scheme}: a permission card")
    page.unroute("**/api/chat/bootstrap*")
    # An earlier session, with Load earlier and folded tools and thinking.
    open_long_conversation(page)
    expect(page.locator("#load-earlier")).to_be_visible()
    assert_accessible(page, f"{scheme}: an earlier session")


def assert_phone_accessible(
    browser: Browser, served: ServedBox, scheme: Literal["light", "dark"]
) -> None:
    """The phone: the chat, then the session list as a dialog over it."""
    expect = _expect()
    context = browser.new_context(viewport=PHONE, color_scheme=scheme)
    page = context.new_page()
    page.goto(served.login_url)
    expect(page.locator("#toggle-sessions")).to_be_visible()
    assert_accessible(page, f"{scheme}: phone")
    page.locator("#toggle-sessions").click()
    expect(page.locator("#sessions")).to_have_attribute("role", "dialog")
    assert_accessible(page, f"{scheme}: phone, sessions open")
    context.close()


def test_a_keyboard_alone_does_everything(
    browser: Browser, served_box: Callable[..., ServedBox]
) -> None:
    expect = _expect()
    served = served_box(gated=True)
    write_markdown_history(served.box, served.projects, 60)
    context, page, problems = open_page(browser, served)
    page.evaluate(LISTEN)

    # Send: the composer has the focus; Enter sends. The reply is read out.
    expect(page.locator("#composer-text")).to_be_focused()
    page.keyboard.type("Water the tomatoes")
    page.keyboard.press("Enter")
    expect(page.locator(".message.assistant", has_text="Water the tomatoes")).to_be_visible()

    # Stop mid-turn: the focus stays on Stop (it is unavailable now, not removed).
    tab_to(page, "#stop")
    page.keyboard.press("Enter")
    expect(page.locator("#status")).to_have_text(STOPPING_OR_STOPPED)
    expect(page.locator("#stop")).to_have_attribute("aria-disabled", "true")
    expect(page.locator("#stop")).to_be_focused()
    served.release(1)
    expect(page.locator("#status")).to_contain_text("Stopped")
    expect(page.locator("#stop")).to_be_focused()
    said = " | ".join(page.evaluate("window.bbxSaid"))
    assert 'Box: You said: "Water the tomatoes"' in said, said
    assert "Your message: Sent" in said, said

    # Load earlier, in an earlier session opened from the list.
    tab_to(page, "#session-list button >> nth=0")
    page.keyboard.press("Enter")
    expect(page.locator("#status")).to_contain_text("viewing an earlier session")
    tab_to(page, "#load-earlier")
    page.keyboard.press("Enter")
    expect(page.locator("#messages > li")).to_have_count(60)
    expect(page.locator("#load-earlier")).to_be_hidden()
    expect(page.locator("#log")).to_be_focused()

    # A tool's details: Tab to its summary, Enter opens it.
    tab_to(page, "details.tool >> nth=0 >> summary")
    page.keyboard.press("Enter")
    expect(page.locator("details.tool").first).to_have_attribute("open", "")
    expect(page.locator("details.tool").first.locator(".tool-result")).to_be_visible()

    # Back to the chat; a permission request waits: Tab to Allow, Enter answers it.
    with_permission(page)
    tab_to(page, "#notice button")
    page.keyboard.press("Enter")
    card = page.locator("#permissions .permission")
    expect(card).to_have_count(1)
    tab_to(page, "#permissions .permission button.allow")
    page.keyboard.press("Enter")
    expect(card).to_have_count(0)
    # The card went with the focus: the keyboard goes on in the composer.
    expect(page.locator("#composer-text")).to_be_focused()
    served.release(2)
    assert problems == []
    context.close()


def test_message_states_and_the_login_notice_are_read_out(
    browser: Browser, served_box: Callable[..., ServedBox]
) -> None:
    expect = _expect()
    served = served_box(gated=True)
    context, page, problems = open_page(browser, served)
    page.evaluate(LISTEN)
    page.locator("#composer-text").fill("First")
    page.locator("#composer-text").press("Enter")
    expect(page.locator(".message.assistant", has_text="First")).to_be_visible()
    page.locator("#composer-text").fill("Second")
    page.locator("#composer-text").press("Enter")
    expect(page.locator(".badge", has_text="Queued")).to_be_visible()
    page.route("**/api/chat/send", lambda route: route.fulfill(status=400, json={"error": "no"}))
    page.locator("#composer-text").fill("Third")
    page.locator("#composer-text").press("Enter")
    expect(page.locator(".badge", has_text="Refused")).to_be_visible()
    for words in ("Your message: Sent", "Your message: Queued", "Your message: Refused"):
        page.wait_for_function("words => window.bbxSaid.some((t) => t.includes(words))", arg=words)
    served.release(1)
    served.release(2)
    context.close()

    # Without the cookie the notice is said, not only shown.
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.goto(served.base_url + "/")
    expect(page.locator("#alert")).to_contain_text("This browser is not logged in to this box")
    expect(page.locator("#login-token")).to_be_focused()
    expect(page.locator("#login-token")).to_have_attribute("aria-describedby", "login-help")
    expect(page.locator("#composer-text")).to_be_disabled()
    # The one error the console shows is the refusal this test made.
    assert [problem for problem in problems if "(Bad Request)" not in problem] == []
    context.close()


def test_the_phone_session_list_is_a_dialog_that_holds_the_focus(
    browser: Browser, served_box: Callable[..., ServedBox]
) -> None:
    expect = _expect()
    served = served_box()
    write_markdown_history(served.box, served.projects, 20)
    context, page, problems = open_page(browser, served, PHONE)
    toggle = page.locator("#toggle-sessions")
    tab_to(page, "#toggle-sessions")
    page.keyboard.press("Enter")
    sessions = page.locator("#sessions")
    expect(sessions).to_have_attribute("role", "dialog")
    expect(sessions).to_have_attribute("aria-modal", "true")
    assert page.evaluate("document.getElementById('chat').inert") is True
    # Tab and Shift+Tab stay inside (they used to walk onto the chat hidden behind).
    for key in ["Tab"] * 6 + ["Shift+Tab"] * 6:
        page.keyboard.press(key)
        assert sessions.evaluate("node => node.contains(document.activeElement)"), key
    page.keyboard.press("Escape")
    expect(sessions).not_to_have_attribute("role", "dialog")
    expect(toggle).to_be_focused()
    assert page.evaluate("document.getElementById('chat').inert") is False
    # The Close button closes it too.
    page.keyboard.press("Enter")
    page.locator("#close-sessions").click()
    expect(toggle).to_be_focused()
    assert problems == []
    context.close()


def test_photos_buttons_motion_and_colours(
    browser: Browser, served_box: Callable[..., ServedBox], tmp_path: Path
) -> None:
    expect = _expect()
    served = served_box(gated=True)
    context, page, problems = open_page(browser, served)
    photo = tmp_path / "garden.png"
    photo.write_bytes(photo_png(64, 48))
    page.locator("#file-input").set_input_files(str(photo))
    remove = page.get_by_role("button", name="Remove photo 1")
    expect(remove).to_be_visible()
    box = remove.bounding_box()
    assert box is not None
    assert box["width"] >= 24, box
    assert box["height"] >= 24, box
    page.locator("#composer-text").fill("Here is the garden")
    page.locator("#composer-text").press("Enter")
    served.release(1)
    expect(reply(page, "Here is the garden")).to_be_visible()
    image = page.locator(".message.user img.photo")
    alt = re.compile(r"^Photo sent by You at .+, with the message “Here is the garden”$")
    expect(image).to_have_attribute("alt", alt)
    # The busy pulse moves, unless the person asked for less motion.
    page.locator("#composer-text").fill("And the beans")
    page.locator("#composer-text").press("Enter")
    pulse = "getComputedStyle(document.getElementById('status'), '::before').animationName"
    expect(page.locator("#status")).to_have_attribute("data-state", "busy")
    assert page.evaluate(pulse) == "pulse"
    context.close()
    context = browser.new_context(viewport=DESKTOP, reduced_motion="reduce", color_scheme="dark")
    page = context.new_page()
    page.goto(served.login_url)
    expect(page.locator("#status")).to_have_attribute("data-state", "busy")
    assert page.evaluate(pulse) == "none"
    # Dark: the system's setting, followed.
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(23, 22, 19)"
    served.release(2)
    assert problems == []
    context.close()
