"""Live text on the page (issue 37, point 1), fed the events of the live-text contract.

The box streams a reply as ``turn-delta`` events (``{"text": piece}``) on
``/api/events``; the finished assistant message then comes whole as the ``message``
event and replaces the pieces (shown once, not twice); ``done`` drops what never
became a message. Bootstrap's ``liveText`` is the text streamed so far, so a page
opened or reloaded mid-turn shows it. These tests drive the page with exactly those
events and fields, served by Playwright in place of the box's stream or beside its
bootstrap answer, against a served box whose turn is held open (so the chat is
busy, as it is while a reply streams). The same behaviour against the real Claude
Code CLI is `test_claude_reply_browser.py`.

Before issue 37 the page knew no ``turn-delta`` event and no ``liveText``: it showed
nothing until the whole message came.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from tests.web.conftest import ServedBox, answer_changed, fulfill_unless_abandoned
from tests.web.test_browser import DESKTOP, FRAMES, STATE_READ_TWICE, WAIT_MS, _expect

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page, Route


def sse(*events: tuple[str, dict[str, Any]]) -> str:
    """A Server-Sent Events body of ``(name, data)`` events."""
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)


def delta(text: str, *, first: bool = False) -> tuple[str, dict[str, Any]]:
    return ("turn-delta", {"text": text, "first": first})


def assistant(uuid: str, text: str) -> tuple[str, dict[str, Any]]:
    message = {
        "type": "assistant",
        "uuid": uuid,
        "message": {"content": [{"type": "text", "text": text}]},
    }
    return ("message", {"message": message})


def scripted_stream(context: BrowserContext, bodies: list[str]) -> None:
    """Answer the page's event stream with ``bodies``, one a connection (the page
    reconnects after each ends); then with an empty body, again and again."""
    remaining: Iterator[str] = iter(bodies)

    def answer(route: Route) -> None:
        # A reload can abandon a stream in flight, even after the test unroutes it
        # (a fresh-clone CI run met it): see `abandoned_by_the_page`.
        fulfill_unless_abandoned(
            route,
            status=200,
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"},
            body=next(remaining, ""),
        )

    context.route("**/api/events", answer)


def open_page(
    browser: Browser, served: ServedBox, bodies: list[str] | None, *, script: str | None = None
) -> tuple[BrowserContext, Page, list[str]]:
    """A logged-in page whose stream is ``bodies`` (None: the page's own, or the one
    ``script`` gives it), running ``script`` first when given."""
    context = browser.new_context(viewport=DESKTOP)
    if script is not None:
        context.add_init_script(script)
    if bodies is not None:
        scripted_stream(context, bodies)
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.goto(served.login_url)
    return context, page, problems


def open_busy_page(
    browser: Browser, served: ServedBox, bodies: list[str], *, script: str | None = None
) -> tuple[BrowserContext, Page, list[str]]:
    """A turn held open, then `open_page`."""
    served.api("POST", "/api/chat/send", {"message": "Water the tomatoes"})
    return open_page(browser, served, bodies, script=script)


def streaming(page: Page) -> Any:
    return page.locator('.message.live[data-live="streaming"]')


def test_pieces_show_as_they_come_and_the_finished_message_replaces_them(
    browser: Browser, served_box: Callable[..., ServedBox]
) -> None:
    expect = _expect()
    served = served_box(gated=True)
    context, page, problems = open_busy_page(
        browser,
        served,
        [
            sse(delta("Hello **wor"), delta("ld**, and | a table?")),
            sse(assistant("live-msg-1", "Hello **world**, and more. All done.")),
            sse(delta("A second message, cut short")),
            sse(("done", {"subtype": "success"})),
        ],
    )
    # The pieces, joined and rendered as Markdown as they come.
    expect(streaming(page)).to_contain_text("Hello world, and | a table?")
    expect(streaming(page).locator("strong")).to_have_text("world")
    # The finished message replaces them: shown once, and read out.
    finished = page.locator('.message.live[data-live="live-msg-1"]')
    expect(finished).to_have_text("Hello world, and more. All done.")
    expect(page.locator(".message", has_text="Hello world")).to_have_count(1)
    expect(page.locator("#announcer")).to_have_text("Box: Hello world, and more. All done.")
    # More pieces start a new streaming text beside it; `done` takes them away.
    expect(streaming(page)).to_have_text("A second message, cut short")
    expect(streaming(page)).to_have_count(0, timeout=WAIT_MS)
    expect(finished).to_have_count(1)
    assert problems == []
    context.close()


def test_a_retried_attempts_text_goes_when_the_retry_streams(
    browser: Browser, served_box: Callable[..., ServedBox]
) -> None:
    # The API cut the first attempt mid-text and the CLI asked again: the retry's
    # first piece comes marked `first`, and the page shows it alone, not after the
    # cut attempt's ("Hel" then "Hello" must not read "HelHello").
    expect = _expect()
    served = served_box(gated=True)
    context, page, problems = open_busy_page(
        browser,
        served,
        [
            sse(delta("The first attempt, cu", first=True)),
            sse(delta("The answer", first=True), delta(" again, whole.")),
        ],
    )
    expect(streaming(page)).to_have_text("The answer again, whole.")
    expect(page.locator(".message", has_text="first attempt")).to_have_count(0)
    assert problems == []
    context.close()


def test_a_page_opened_mid_turn_shows_the_text_so_far_once(
    browser: Browser, served_box: Callable[..., ServedBox]
) -> None:
    """Bootstrap's ``liveText`` is shown; a finished message it begins with, already in
    the transcript, is not shown a second time; pieces streamed after it add to it."""
    expect = _expect()
    served = served_box(gated=True)
    reads: list[str | None] = []

    def live_text(boot: dict[str, Any]) -> None:
        if boot["status"]["busy"]:
            # The turn's held answer is in the transcript already; the text
            # streamed so far goes on past it.
            said = [e for e in boot["history"]["entries"] if e["type"] == "assistant"][-1]
            boot["liveText"] = said["content"][0]["text"] + "\n\nAnd now the **beans**"

    def with_live_text(route: Route) -> None:
        boot = answer_changed(route, live_text)
        if boot is not None:
            reads.append(boot.get("liveText"))

    context, page, problems = open_busy_page(browser, served, [])
    page.route("**/api/chat/bootstrap*", with_live_text)
    page.reload()
    expect(streaming(page)).to_have_text("And now the beans")
    expect(streaming(page).locator("strong")).to_have_text("beans")
    said = page.locator(".message", has_text='You said: "Water the tomatoes"')
    expect(said).to_have_count(1)
    assert any(text is not None for text in reads)

    # A piece streamed after it goes on from it (the stream's next connection).
    def one_more_piece(route: Route) -> None:
        # The piece's expectation below is what holds the page to showing it.
        fulfill_unless_abandoned(
            route,
            status=200,
            headers={"Content-Type": "text/event-stream"},
            body=sse(delta(", then the peas")),
        )

    page.route("**/api/events", one_more_piece, times=1)
    expect(streaming(page)).to_have_text("And now the beans, then the peas")
    expect(said).to_have_count(1)
    # A reload shows the text so far again, from bootstrap alone.
    page.reload()
    expect(streaming(page)).to_have_text("And now the beans")
    expect(said).to_have_count(1)

    # The turn ends: the live text is gone, the transcript's reply stays, once.
    page.unroute("**/api/chat/bootstrap*")
    context.unroute("**/api/events")
    served.release(1)
    page.reload()
    expect(page.locator("#status")).to_have_text("Ready")
    expect(page.locator(".message.live")).to_have_count(0)
    expect(said).to_have_count(1)
    assert problems == []
    context.close()


def test_text_the_agent_writes_unasked_shows_it_working(
    browser: Browser, served_box: Callable[..., ServedBox]
) -> None:
    # A turn Claude Code starts itself (a background sub-agent finished: chat_session
    # rule 12) has no `chat-turn`: on an open stream of an idle page, its first piece
    # says the agent is working.
    from tests.web.test_sub_agent_messages_browser import OPEN_STREAM  # noqa: PLC0415

    expect = _expect()
    context, page, problems = open_page(browser, served_box(), None, script=OPEN_STREAM)
    expect(page.locator("#status")).to_contain_text("Send starts the agent")
    # The state read again on the stream's opening is in (an idle box's answer would
    # otherwise land after the piece and take it away, as it should for a box that
    # is not busy), and rendered.
    page.wait_for_function(STATE_READ_TWICE, timeout=WAIT_MS)
    page.evaluate(FRAMES)
    page.evaluate(
        "([name, data]) => window.__say(name, data)",
        list(delta("The helper found three", first=True)),
    )
    expect(streaming(page)).to_have_text("The helper found three")
    expect(page.locator("#status")).to_contain_text("Working…")
    assert problems == []
    context.close()
