"""Permission cards in headless Chromium, asked by the real Claude Code (issue 33).

Each test serves a box with ``bbx serve --engine claude`` (the CLI the ``claude``
extra bundles, in its ``default`` permission mode) against the Messages API double,
scripted to answer with ``tool_use`` blocks. The CLI really asks, the box turns
the ask into a permission request, and a person answers it on the page: Allow and
the tool really runs (a file appears in the box), Deny and the model's next request
carries the person's reason. A stand-in for the CLI would neither ask nor run the
tool. They skip, saying why, where Chromium, Playwright or the claude extra is missing.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.agent.claude_cli import OfflineClaude, cli_path
from tests.agent.messages_api import MessagesApiDouble, Recorded, Reply, Text, ToolUse
from tests.agent.test_serve_claude import Served, serve_claude
from tests.web.test_browser import DESKTOP, PHONE, WAIT_MS
from tests.web.test_stop_browser import STOPPED

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Expect, Locator, Page, Route, ViewportSize

# The CLI starts, reads its settings and asks within a few seconds; a slow CI
# machine gets room.
ASK_WAIT_MS = 60_000


def _why_no_claude() -> str | None:
    if importlib.util.find_spec("claude_agent_sdk") is None:
        return (
            "claude-agent-sdk is not installed (the claude extra: pip install -e '.[test,claude]')"
        )
    try:
        cli_path()
    except AssertionError as error:
        return str(error)
    return None


@pytest.fixture
def api() -> Iterator[MessagesApiDouble]:
    """The Messages API double the CLI talks to."""
    reason = _why_no_claude()
    if reason is not None:
        pytest.skip(reason)
    with MessagesApiDouble() as double:
        yield double


@pytest.fixture
def claude(tmp_path: Path, api: MessagesApiDouble) -> OfflineClaude:
    """A private home for the real CLI, talking to ``api``."""
    return OfflineClaude(tmp_path / "claude", api)


def _expect() -> Expect:
    # Imported when a test runs: without playwright the module still loads, and skips.
    from playwright.sync_api import expect  # noqa: PLC0415

    expect.set_options(timeout=WAIT_MS)
    return expect


def login_url(served: Served) -> str:
    return f"http://{served.client.host}:{served.client.port}/?token={served.client.token}"


@contextlib.contextmanager
def opened(
    browser: Browser, served: Served, viewport: ViewportSize = DESKTOP, *, events: bool = True
) -> Iterator[tuple[Page, list[str]]]:
    """A fresh logged-in page, closed at the end (before the serve is stopped).

    Yields the page and the console and page errors it reported. ``events=False``
    refuses the page its event stream: it knows only what bootstrap tells it.
    """
    context = browser.new_context(viewport=viewport)
    try:
        page = context.new_page()
        problems: list[str] = []
        page.on(
            "console",
            lambda message: problems.append(message.text) if message.type == "error" else None,
        )
        page.on("pageerror", lambda error: problems.append(str(error)))
        if not events:
            page.route("**/api/events", lambda route: route.abort())
        page.goto(login_url(served))
        _expect()(page.locator("#status")).not_to_have_text("Connecting…")
        yield page, problems
    finally:
        context.close()


def touch(name: str) -> ToolUse:
    """A Bash call Claude Code asks about in its default mode (it writes a file)."""
    return ToolUse("Bash", {"command": f"touch {name}", "description": f"Create {name}"})


def send(page: Page, text: str) -> None:
    composer = page.locator("#composer-text")
    composer.fill(text)
    composer.press("Enter")


def card(page: Page, has_text: str = "") -> Locator:
    cards = page.locator("#permissions .permission")
    return cards.filter(has_text=has_text) if has_text else cards


def answer_of_the_box(page: Page, text: str) -> Locator:
    """The assistant's text once it is in the transcript (not the live copy)."""
    return page.locator(".message.assistant:not(.live)", has_text=text)


def pending_ids(served: Served) -> list[str]:
    boot = served.client.request("GET", "/api/chat/bootstrap?tail=1").json()
    return [request["id"] for request in boot["permissions"]]


def tool_results(api: MessagesApiDouble) -> dict[str, dict[str, Any]]:
    """The tool results the CLI sent the model, by tool use id (the last request
    carries the whole conversation)."""
    requests: list[Recorded] = api.message_requests
    return {result["tool_use_id"]: result for result in requests[-1].tool_results()}


def result_text(result: dict[str, Any]) -> str:
    content = result.get("content")
    if isinstance(content, str):
        return content
    return " ".join(str(block.get("text", "")) for block in content or [])


def fits_the_width(page: Page) -> bool:
    return bool(
        page.evaluate(
            "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
        )
    )


def test_a_person_clicks_allow_and_the_tool_runs(
    browser: Browser,
    tmp_path: Path,
    claude: OfflineClaude,
    api: MessagesApiDouble,
    screenshot_dir: Path,
) -> None:
    expect = _expect()
    box = tmp_path / "box"
    made = box / "made.txt"
    touch_made = touch("made.txt")
    api.script(
        Reply((Text("I'll create it with touch."), touch_made)),
        Reply.text("done: made.txt is in the box"),
    )
    with serve_claude(box, claude) as served, opened(browser, served) as (page, problems):
        send(page, "Please make an empty file called made.txt")
        asking = card(page)
        expect(asking).to_have_count(1, timeout=ASK_WAIT_MS)
        [request] = served.client.request("GET", "/api/chat/permissions").json()["pending"]
        # What the CLI asked, as the person sees it: its own sentence, the tool, the command.
        assert request["toolName"] == "Bash"
        assert request["toolUseId"] == touch_made.id
        assert request["canAlwaysAllow"] is True
        # This CLI gives no prompt sentence for Bash: the card is headed by its name.
        heading = request.get("title") or request.get("displayName") or "Bash"
        expect(asking.locator(".permission-title")).to_have_text(heading)
        expect(asking).to_contain_text("Bash")
        expect(asking.locator(".permission-about")).to_have_text("Create made.txt")
        expect(asking.locator(".permission-input")).to_have_text("touch made.txt")
        expect(asking.get_by_role("button", name="Allow", exact=True)).to_be_visible()
        expect(asking.get_by_role("button", name="Always allow")).to_be_visible()
        expect(asking.get_by_role("button", name="Deny")).to_be_visible()
        expect(page.locator("#status")).to_have_text("Waiting for your approval")
        assert not made.exists()
        page.screenshot(path=str(screenshot_dir / "permission.png"))

        # The first answer is held on its way, then refused: the buttons wait while it
        # is in flight, and the refusal is shown on the card, never dropped.
        held: list[Route] = []

        def hold(route: Route) -> None:
            held.append(route)

        page.route("**/api/chat/permissions/**", hold)
        asking.get_by_role("button", name="Allow", exact=True).click()
        for button in asking.get_by_role("button").all():
            expect(button).to_be_disabled()
        for _ in range(WAIT_MS // 20):
            if held:
                break
            page.wait_for_timeout(20)
        assert held, "the answer was never posted"
        held[0].fulfill(
            status=503,
            content_type="application/json",
            body='{"error": "The box is busy; try again"}',
        )
        expect(asking.locator(".permission-error")).to_have_text(
            "The box did not take the answer: The box is busy; try again"
        )
        expect(asking.get_by_role("button", name="Allow", exact=True)).to_be_enabled()
        assert pending_ids(served) == [request["id"]]
        page.unroute("**/api/chat/permissions/**")

        asking.get_by_role("button", name="Allow", exact=True).click()
        expect(card(page)).to_have_count(0)
        expect(answer_of_the_box(page, "done: made.txt is in the box")).to_be_visible(
            timeout=ASK_WAIT_MS
        )
        expect(page.locator("#status")).to_have_text("Ready")
        assert made.exists()
        result = tool_results(api)[touch_made.id]
        assert result.get("is_error") is not True
        decisions = served.client.request("GET", "/api/chat/permissions").json()["decisions"]
        assert [(d["decision"], d["answeredBy"]) for d in decisions] == [("allow", "page")]
        # The only errors are the refused answer's, which the test made.
        assert [problem for problem in problems if "503" not in problem] == []


def test_a_reload_shows_the_card_again_and_deny_ends_the_turn(
    browser: Browser, tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble
) -> None:
    expect = _expect()
    box = tmp_path / "box"
    touch_never = touch("never.txt")
    api.script(Reply((touch_never,)), Reply.text("Understood, no file."))
    with serve_claude(box, claude) as served, opened(browser, served, PHONE) as (page, problems):
        send(page, "Make never.txt, please")
        expect(card(page)).to_have_count(1, timeout=ASK_WAIT_MS)
        [asked] = pending_ids(served)
        page.reload()
        # The reloaded page reads the request back from bootstrap, once.
        asking = card(page)
        expect(asking).to_have_count(1)
        expect(asking).to_have_attribute("data-id", asked)
        expect(asking.locator(".permission-input")).to_have_text("touch never.txt")
        assert fits_the_width(page), "the card overflows a 390 px screen"

        # A second page whose event stream never connects: it has the card from
        # bootstrap only, and will learn that it ended from its answer (409).
        with opened(browser, served, events=False) as (deaf, _):
            late = card(deaf)
            expect(late).to_have_count(1)

            # Keyboard only: the reason, then Enter denies with it.
            reason = asking.get_by_label("Reason for denying")
            reason.focus()
            page.keyboard.type("not in this folder, please")
            page.keyboard.press("Enter")
            expect(card(page)).to_have_count(0)
            # Focus goes back to the composer, not lost with the card.
            expect(page.locator("#composer-text")).to_be_focused()
            expect(answer_of_the_box(page, "Understood, no file.")).to_be_visible(
                timeout=ASK_WAIT_MS
            )

            late.get_by_role("button", name="Allow", exact=True).click()
            expect(card(deaf)).to_have_count(0)

        assert not (box / "never.txt").exists()
        result = tool_results(api)[touch_never.id]
        assert result["is_error"] is True
        assert "not in this folder, please" in result_text(result)
        expect(page.locator("#status")).to_have_text("Ready")
        assert problems == []


def test_two_parallel_requests_each_get_a_card(
    browser: Browser, tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble
) -> None:
    expect = _expect()
    # Reads outside the box's folder are asked about, and in parallel.
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "first.txt").write_text("first secret\n")
    (outside / "second.txt").write_text("second words\n")
    read_first = ToolUse("Read", {"file_path": str(outside / "first.txt")})
    read_second = ToolUse("Read", {"file_path": str(outside / "second.txt")})
    api.script(Reply((read_first, read_second)), Reply.text("I read one of them."))
    with (
        serve_claude(tmp_path / "box", claude) as served,
        opened(browser, served) as (page, problems),
    ):
        send(page, "Read both files")
        expect(card(page)).to_have_count(2, timeout=ASK_WAIT_MS)
        first = card(page, "first.txt")
        second = card(page, "second.txt")
        expect(first.locator(".permission-input")).to_have_text(str(outside / "first.txt"))
        expect(second.locator(".permission-input")).to_have_text(str(outside / "second.txt"))
        expect(page.locator("#status")).to_have_text("Waiting for your approval (2)")

        # Answered in reverse order, from the keyboard.
        second.get_by_role("button", name="Allow", exact=True).focus()
        page.keyboard.press("Enter")
        expect(card(page)).to_have_count(1)
        # The focus moves on to the card still waiting.
        expect(first.get_by_role("button", name="Allow", exact=True)).to_be_focused()
        assert len(pending_ids(served)) == 1
        first.get_by_role("button", name="Deny").focus()
        page.keyboard.press("Space")
        expect(card(page)).to_have_count(0)
        expect(answer_of_the_box(page, "I read one of them.")).to_be_visible(timeout=ASK_WAIT_MS)
        results = tool_results(api)
        assert "second words" in result_text(results[read_second.id])
        assert results[read_first.id]["is_error"] is True
        assert "first secret" not in result_text(results[read_first.id])
        assert problems == []


def test_stop_while_asking_takes_the_card_away(
    browser: Browser, tmp_path: Path, claude: OfflineClaude, api: MessagesApiDouble
) -> None:
    expect = _expect()
    box = tmp_path / "box"
    api.script(Reply((touch("stopped.txt"),)))
    with serve_claude(box, claude) as served, opened(browser, served) as (page, problems):
        send(page, "Make stopped.txt")
        expect(card(page)).to_have_count(1, timeout=ASK_WAIT_MS)
        page.locator("#stop").click()
        expect(card(page)).to_have_count(0)
        expect(page.locator("#status")).to_have_text(STOPPED)
        decisions = served.client.request("GET", "/api/chat/permissions").json()["decisions"]
        assert [(d["how"], d["decision"]) for d in decisions] == [("stopped", "deny")]
        assert problems == []
    assert not (box / "stopped.txt").exists()
