"""The agent's Markdown on the page, and hostile Markdown kept inert (issue 37, point 2).

The echo engine answers ``You said: "<the message>"``, so what a test sends comes
back as the assistant's text, through the transcript and the history read, and the
page renders it as it renders any reply: as Markdown. A person's own message stays
plain text. Before issue 37 every reply was plain text: the page showed the
asterisks, pipes and backticks.

The hostile cases are checked twice: end to end through a reply, and straight
through the page's renderer (``markdown.js``) with a longer list of payloads. Each
payload would set ``window.bbxPwned`` if it ran; the tests assert that it never is,
that the rendered nodes hold no script, image, frame or event-handler attribute,
and that every link is http, https or mailto and opens in a new tab with
``rel="noopener noreferrer"``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.web.conftest import ServedBox
from tests.web.test_browser import _expect, open_page

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page

MARKDOWN = """Plan for **today**:

- water the *tomatoes*
- sow the `beans`

| bed | plant | rows |
|---|:---:|---:|
| north | peas | 3 |

```python
print("hello")
```

See [the guide](https://example.com/guide)."""

# Each would set window.bbxPwned if it ran as markup or as a URL.
HOSTILE = [
    "<script>window.bbxPwned = 'script'</script>",
    "<img src=x onerror=\"window.bbxPwned = 'img'\">",
    "[click me](javascript:window.bbxPwned='link')",
    "[entity](javascript&#58;window.bbxPwned='entity')",
    "<a href=\"javascript:window.bbxPwned='a'\">raw link</a>",
    "| a | b |\n|---|---|\n| <img src=y onerror=\"window.bbxPwned='cell'\"> | <b>bold?</b> |",
    "![pic](javascript:window.bbxPwned='image')",
    "<iframe src=\"javascript:window.bbxPwned='frame'\"></iframe>",
    "<svg onload=\"window.bbxPwned='svg'\"></svg>",
    "[data](data:text/html,<script>window.bbxPwned='data'</script>)",
    "<details open ontoggle=\"window.bbxPwned='toggle'\">x</details>",
    "`<script>window.bbxPwned='code'</script>`",
]

# What the rendered nodes must not hold, checked in the page.
INSPECT = """(root) => {
  const all = [...root.querySelectorAll("*")];
  return {
    forbidden: all.map((node) => node.tagName.toUpperCase()).filter((tag) => ["SCRIPT", "IMG",
      "IFRAME", "SVG", "OBJECT", "EMBED", "STYLE", "DETAILS", "FORM", "INPUT"].includes(tag)),
    handlers: all.flatMap((node) => [...node.attributes].map((a) => a.name))
      .filter((name) => name.startsWith("on") || name === "style" || name === "src"),
    links: [...root.querySelectorAll("a")].map((a) => ({
      href: a.getAttribute("href"), target: a.target, rel: a.rel })),
    pwned: window.bbxPwned ?? null,
  };
}"""


def assert_inert(found: dict[str, Any]) -> None:
    assert found["pwned"] is None, found
    assert found["forbidden"] == [], found
    assert found["handlers"] == [], found
    for link in found["links"]:
        assert link["href"].startswith(("http://", "https://", "mailto:")), link
        assert link["target"] == "_blank", link
        assert link["rel"] == "noopener noreferrer", link


def send(page: Page, text: str) -> None:
    page.locator("#composer-text").fill(text)
    page.locator("#send").click()


def answer(page: Page, has_text: str) -> Locator:
    return page.locator(".message.assistant:not(.live)", has_text=has_text)


def test_a_reply_renders_its_table_list_code_and_link(
    browser: Browser, served_box: Callable[..., ServedBox], screenshot_dir: Path
) -> None:
    expect = _expect()
    served = served_box()
    context, page, problems = open_page(browser, served)
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    send(page, MARKDOWN)
    message = answer(page, "Plan for")
    expect(message).to_be_visible()
    markdown = message.locator(".markdown")
    expect(markdown.locator("strong")).to_have_text("today")
    expect(markdown.locator("ul > li")).to_have_count(2)
    expect(markdown.locator("ul > li em")).to_have_text("tomatoes")
    expect(markdown.locator("table th")).to_have_text(["bed", "plant", "rows"])
    expect(markdown.locator("table td")).to_have_text(["north", "peas", "3"])
    expect(markdown.locator("table td.align-right")).to_have_text("3")
    code = markdown.locator(".code-block")
    expect(code.locator("pre code")).to_have_text('print("hello")')
    expect(code.locator(".code-language")).to_have_text("python")
    link = markdown.locator("a", has_text="the guide")
    expect(link).to_have_attribute("href", "https://example.com/guide")
    expect(link).to_have_attribute("target", "_blank")
    expect(link).to_have_attribute("rel", "noopener noreferrer")
    # No asterisks, pipes or fences left over.
    assert "**" not in markdown.inner_text()
    assert "```" not in markdown.inner_text()

    # The copy button puts the code (not the fence, not the language) on the clipboard.
    code.get_by_role("button", name="Copy python code").click()
    expect(code.locator("button.copy")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == 'print("hello")'
    expect(page.locator("#announcer")).to_have_text("Code copied")

    # The person's own message stays exactly as typed.
    mine = page.locator(".message.user", has_text="Plan for")
    expect(mine.locator(".block-text")).to_have_text(MARKDOWN)
    expect(mine.locator("strong, table, a")).to_have_count(0)
    page.screenshot(path=str(screenshot_dir / "markdown.png"))
    assert problems == []
    context.close()


def test_hostile_markdown_in_a_reply_stays_inert(
    browser: Browser, served_box: Callable[..., ServedBox]
) -> None:
    expect = _expect()
    served = served_box()
    context, page, problems = open_page(browser, served)
    text = "\n\n".join(HOSTILE)
    send(page, text)
    message = answer(page, "raw link")
    expect(message).to_be_visible()
    # Give an onerror, a toggle or a load the time to fire, had it been made.
    page.wait_for_timeout(500)
    assert_inert(message.evaluate(INSPECT))
    # The raw HTML reads as the text it is, in the table cell too.
    expect(message).to_contain_text("<script>window.bbxPwned = 'script'</script>")
    expect(message.locator("td").first).to_contain_text("<img src=y onerror=")
    expect(message.locator("td").nth(1)).to_have_text("<b>bold?</b>")
    # A refused link is its text, not a link; clicking it does nothing.
    unlinked = message.locator(".md-unlinked", has_text="click me")
    expect(unlinked).to_have_count(1)
    unlinked.click()
    page.wait_for_timeout(200)
    assert page.evaluate("window.bbxPwned ?? null") is None
    assert page.url == served.base_url + "/"
    # Nothing was refused by the CSP either: nothing tried to run.
    assert problems == []
    context.close()


def test_the_renderer_builds_no_markup_from_any_payload(
    browser: Browser, served_box: Callable[..., ServedBox]
) -> None:
    served = served_box()
    context, page, problems = open_page(browser, served)
    for payload in [*HOSTILE, "\n\n".join(HOSTILE), f"> {HOSTILE[1]}\n\n- {HOSTILE[2]}"]:
        page.evaluate(
            """async (payload) => {
                const { markdownNode } = await import("/static/markdown.js");
                const holder = document.createElement("div");
                holder.id = "probe";
                holder.append(markdownNode(payload));
                document.body.append(holder);
                await new Promise((done) => setTimeout(done, 100));
            }""",
            payload,
        )
        probe = page.locator("#probe")
        assert_inert(probe.evaluate(INSPECT))
        probe.evaluate("node => node.remove()")
    # Links that are allowed stay links, with the new-tab and no-referrer attributes.
    links = page.evaluate(
        """async () => {
            const { markdownNode } = await import("/static/markdown.js");
            const text = "[a](https://a.example) <b@c.example> www.d.example [e](/api/x)";
            const node = markdownNode(text);
            return [...node.querySelectorAll("a")].map((a) => a.href);
        }"""
    )
    assert links == ["https://a.example/", "mailto:b@c.example", "http://www.d.example/"]
    assert problems == []
    context.close()
