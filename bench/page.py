"""Page benchmark: live text reaching the page, and paging back through a long history.

Run: ``python bench/page.py [--quick]`` from the repository root. It needs Debian's
``/usr/bin/chromium``, Playwright (the ``test`` extra) and, for the first part, the
``claude`` extra. A report, not a test: it prints figures and exits 0 when a target
is missed (it says MISSED). ``--quick`` (one reply of 10 pieces, a 400-entry
history) is the CI smoke configuration; the full run (5 replies of 20 pieces, 2,000
entries) takes about two minutes.

Everything runs offline on this machine, on loopback.

1. **A delta leaving the API double → its text on the page** (target ≤ 50 ms p50).
   ``bbx serve --engine claude`` runs the real Claude Code CLI against the tests'
   Messages API double (`tests/agent/messages_api.py`), scripted to stream replies
   whose every piece is one marker word (``mk0107z``), a piece every 100 ms. The
   double notes the wall-clock time each piece is written to the CLI; the page (the
   chat page in headless Chromium, opened with the login URL) notes when each marker
   is first in the conversation's DOM (a MutationObserver, ``performance.timeOrigin
   + performance.now()``, the same wall clock). **Baseline, in the same run:** a bare
   ``EventSource`` on ``/api/events`` in the same page notes when each marker first
   arrives in an event (``turn-delta`` or ``message``): the same pipeline up to the
   browser, without the page's handling and rendering. The page's own share is the
   difference (two streams, each on its own connection: it can read a little below
   zero). Where the box sends no ``turn-delta`` (a box without the server side
   of live text), markers arrive only with the whole message, and the figures say so.
2. **Paging back through a 2,000-entry Markdown history**: a transcript of Claude
   Code's shape (`tests/web/markdown_history.py`: prompts, thinking, Bash calls and
   their results, Markdown answers with a table, a list and a code block) opened from
   the session list, then "Load earlier" pressed until the start, 40 entries a press.
   For each press: the time from the click to the next frame after the list grew
   (the history read, the render, the layout), beside the entries already shown.
   **Baseline, in the same run:** the same history page read by ``fetch`` alone in the
   same page (read and parsed, nothing rendered). Targets: no long task over 50 ms
   while paging (Chromium's ``longtask`` entries are exactly those), and the cost of a
   press flat in the entries shown: the last presses' median within 1.5 × the first
   presses' median. Frame times (``requestAnimationFrame`` intervals) while paging are
   printed for information.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import platform
import re
import statistics
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

REPO: Final = Path(__file__).resolve().parent.parent
BENCH: Final = Path(__file__).resolve().parent
for folder in (REPO, BENCH):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from claude import Row, print_table  # noqa: E402 - bench/claude.py's table

from tests.web.conftest import CHROMIUM, CHROMIUM_ARGS, ServedBox, free_port  # noqa: E402
from tests.web.markdown_history import write_markdown_history  # noqa: E402

# The full and the quick configuration.
FULL_REPLIES, FULL_PIECES, FULL_ENTRIES = 5, 20, 2000
QUICK_REPLIES, QUICK_PIECES, QUICK_ENTRIES = 1, 10, 400
PIECE_DELAY_S: Final = 0.1
TARGET_DELTA_MS: Final = 50.0
TARGET_LONG_TASK_MS: Final = 50.0
TARGET_FLAT_RATIO: Final = 1.5
# How many presses at each end of the history the flatness compares.
ENDS: Final = 5
WAIT_S: Final = 120.0

# Installed in the page before the first send: when each marker is first in the
# conversation, and when it first arrives in an event on a bare EventSource.
RECORD_MARKERS = r"""() => {
  const now = () => performance.timeOrigin + performance.now();
  window.bbxSeen = {};
  window.bbxHeard = {};
  window.bbxDeltas = 0;
  const scan = (text, into) => {
    for (const found of text.matchAll(/mk\d{4}z/g)) if (!(found[0] in into)) into[found[0]] = now();
  };
  const list = document.getElementById("messages");
  new MutationObserver(() => {
    for (const node of list.querySelectorAll(".message")) scan(node.textContent, window.bbxSeen);
  }).observe(list, { childList: true, subtree: true, characterData: true });
  const source = new EventSource("/api/events");
  source.addEventListener("turn-delta", (event) => {
    window.bbxDeltas += 1;
    scan(event.data, window.bbxHeard);
  });
  source.addEventListener("message", (event) => scan(event.data, window.bbxHeard));
}"""

# Frame intervals and long tasks from now on.
RECORD_FRAMES = """() => {
  window.bbxFrames = [];
  window.bbxLongTasks = [];
  let last = performance.now();
  const frame = (at) => {
    window.bbxFrames.push(at - last);
    last = at;
    requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) window.bbxLongTasks.push(entry.duration);
  }).observe({ type: "longtask" });
}"""

# One press of Load earlier, timed to the frame after the list grew.
PRESS = """async () => {
  const list = document.getElementById("messages");
  const shown = list.children.length;
  const grown = new Promise((done) => {
    const watch = new MutationObserver(() => {
      if (list.children.length > shown) { watch.disconnect(); done(); }
    });
    watch.observe(list, { childList: true });
  });
  const start = performance.now();
  document.getElementById("load-earlier").click();
  await grown;
  await new Promise((done) => requestAnimationFrame(() => setTimeout(done, 0)));
  return { shown, ms: performance.now() - start, now: list.children.length };
}"""

# The same history page read by fetch alone: the baseline of one press.
FETCH_ONLY = """async ([session, offset]) => {
  const start = performance.now();
  const answer = await fetch(`/api/chat/history?session=${session}&offset=${offset}&limit=40`);
  await answer.json();
  return performance.now() - start;
}"""


@dataclass
class Figures:
    deltas: list[tuple[float, float, float]] = field(default_factory=list)
    turn_deltas: int = 0
    presses: list[tuple[int, float]] = field(default_factory=list)
    fetches: list[float] = field(default_factory=list)
    frames: list[float] = field(default_factory=list)
    long_tasks: list[float] = field(default_factory=list)
    entries: int = 0
    live_text_skipped: str | None = None


def _ms(value: float) -> str:
    return f"{value:,.1f} ms"


def _p(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright  # noqa: PLC0415

    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def why_no_live_text_run() -> str | None:
    if importlib.util.find_spec("claude_agent_sdk") is None:
        return "claude-agent-sdk is not installed (the claude extra)"
    return None


def measure_live_text(browser: Any, folder: Path, replies: int, pieces: int, out: Figures) -> None:
    """Part 1: each marker's time leaving the double, arriving in an event, on the page."""
    from tests.agent.claude_cli import OfflineClaude  # noqa: PLC0415
    from tests.agent.messages_api import Reply  # noqa: PLC0415
    from tests.agent.test_serve_claude import serve_claude  # noqa: PLC0415
    from tests.web.timed_double import TimedDouble, marker  # noqa: PLC0415

    with TimedDouble() as api:
        claude = OfflineClaude(folder / "claude", api)
        with serve_claude(folder / "box", claude) as served:
            client = served.client
            context = browser.new_context(viewport={"width": 1100, "height": 800})
            page = context.new_page()
            page.goto(f"http://{client.host}:{client.port}/?token={client.token}")
            page.locator("#status").filter(has_text=re.compile("Ready|Not running")).wait_for()
            page.evaluate(RECORD_MARKERS)
            for reply in range(replies):
                words = " ".join(marker(reply, piece) for piece in range(pieces))
                api.script(Reply.text(words, delay=PIECE_DELAY_S))
                page.locator("#composer-text").fill(f"Reply {reply}, please.")
                page.locator("#composer-text").press("Enter")
                last = marker(reply, pieces - 1)
                page.wait_for_function(
                    "marker => marker in window.bbxSeen && marker in window.bbxHeard",
                    arg=last,
                    timeout=WAIT_S * 1000,
                )
                page.locator("#status").filter(has_text="Ready").wait_for(timeout=WAIT_S * 1000)
            seen: dict[str, float] = page.evaluate("window.bbxSeen")
            heard: dict[str, float] = page.evaluate("window.bbxHeard")
            out.turn_deltas = page.evaluate("window.bbxDeltas")
            context.close()
    for word, sent in api.sent_at.items():
        if word in seen and word in heard:
            out.deltas.append((sent * 1000, heard[word], seen[word]))


def measure_paging(browser: Any, folder: Path, entries: int, out: Figures) -> None:
    """Part 2: every press of Load earlier over the whole history, and its baseline."""
    served = ServedBox(folder / "echo-box", folder / "echo-projects", free_port()).start()
    try:
        session = write_markdown_history(served.box, served.projects, entries)
        total = served.api("GET", f"/api/chat/history?session={session}&offset=0&limit=1")["total"]
        context = browser.new_context(viewport={"width": 1100, "height": 800})
        page = context.new_page()
        page.goto(served.login_url)
        page.locator("#session-list button", has_text="A long conversation").click()
        page.locator("#status").filter(has_text="viewing an earlier session").wait_for()
        page.locator("#messages > li").nth(39).wait_for()
        page.evaluate(RECORD_FRAMES)
        while page.locator("#load-earlier").is_visible():
            press = page.evaluate(PRESS)
            out.presses.append((int(press["shown"]), float(press["ms"])))
            offset = max(0, total - press["now"])
            out.fetches.append(float(page.evaluate(FETCH_ONLY, [session, offset])))
        out.entries = page.locator("#messages > li").count()
        out.frames = page.evaluate("window.bbxFrames")
        out.long_tasks = page.evaluate("window.bbxLongTasks")
        context.close()
    finally:
        served.stop()


def rows(figures: Figures) -> list[Row]:
    table: list[Row] = []
    if figures.deltas:
        to_page = [seen - sent for sent, _, seen in figures.deltas]
        to_event = [heard - sent for sent, heard, _ in figures.deltas]
        page_share = [seen - heard for _, heard, seen in figures.deltas]
        p50, base = statistics.median(to_page), statistics.median(to_event)
        table.append(
            Row(
                "delta leaving the API double → text on the page p50",
                _ms(p50),
                _ms(base),
                f"{p50 / base:.2f}×" if base > 0 else "—",
                f"≤ {TARGET_DELTA_MS:.0f} ms",
                "ok" if p50 <= TARGET_DELTA_MS else "MISSED",
            )
        )
        table.append(
            Row(
                "… p90",
                _ms(_p(to_page, 0.9)),
                _ms(_p(to_event, 0.9)),
                "—",
                "(info)",
                "info",
            )
        )
        table.append(
            Row(
                "… the page's own share (event arrived → text on page) p50",
                _ms(statistics.median(page_share)),
                "—",
                "—",
                "(info)",
                "info",
            )
        )
    if figures.presses:
        cost = [ms for _, ms in figures.presses]
        first = statistics.median(cost[:ENDS])
        last = statistics.median(cost[-ENDS:])
        longest = max(figures.long_tasks, default=0.0)
        table.append(
            Row(
                f"one Load earlier p50 ({len(cost)} presses to {figures.entries} entries)",
                _ms(statistics.median(cost)),
                _ms(statistics.median(figures.fetches)),
                f"{statistics.median(cost) / statistics.median(figures.fetches):.2f}×",
                "(info: baseline = the same page read by fetch alone)",
                "info",
            )
        )
        table.append(
            Row(
                f"Load earlier with {figures.presses[-ENDS][0]}+ shown vs ≤ "
                f"{figures.presses[ENDS - 1][0]} shown (median of {ENDS})",
                _ms(last),
                _ms(first),
                f"{last / first:.2f}×",
                f"≤ {TARGET_FLAT_RATIO}× (flat)",
                "ok" if last <= TARGET_FLAT_RATIO * first else "MISSED",
            )
        )
        table.append(
            Row(
                "longest long task while paging",
                _ms(longest),
                "—",
                "—",
                f"none over {TARGET_LONG_TASK_MS:.0f} ms ({len(figures.long_tasks)} seen)",
                "ok" if not figures.long_tasks else "MISSED",
            )
        )
        frames = figures.frames
        table.append(
            Row(
                "frame time while paging p50 / p99 / max",
                f"{_p(frames, 0.5):.1f} / {_p(frames, 0.99):.1f} / {max(frames):.1f} ms",
                "—",
                "—",
                "(info)",
                "info",
            )
        )
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small configuration for CI smoke")
    args = parser.parse_args(argv)
    replies, pieces, entries = (
        (QUICK_REPLIES, QUICK_PIECES, QUICK_ENTRIES)
        if args.quick
        else (FULL_REPLIES, FULL_PIECES, FULL_ENTRIES)
    )
    print(f"# page benchmark: {platform.platform()}, {os.cpu_count()} cpus")
    figures = Figures()
    with tempfile.TemporaryDirectory(prefix="bbx-page-bench-") as folder, chromium() as browser:
        skipped = why_no_live_text_run()
        if skipped is None:
            measure_live_text(browser, Path(folder), replies, pieces, figures)
        else:
            figures.live_text_skipped = skipped
        measure_paging(browser, Path(folder), entries, figures)
    if figures.live_text_skipped:
        print(f"# live text not measured: {figures.live_text_skipped}")
    else:
        print(
            f"# live text: {len(figures.deltas)} pieces in {replies} replies, one every "
            f"{PIECE_DELAY_S * 1000:.0f} ms; turn-delta events seen: {figures.turn_deltas}"
            + ("" if figures.turn_deltas else " (the box streams no text: whole messages only)")
        )
    print(f"# paging: {len(figures.presses)} presses of Load earlier, 40 entries each")
    print_table(rows(figures))
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
