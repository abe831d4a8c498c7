"""Permission benchmark: the approval round trip, from the box's side, on the real CLI.

Run: `python bench/permissions.py [--quick] [--asks N] [--json FILE]` from the
repository root (it needs the ``claude`` extra). A report, not a test: it exits 0
when the target is missed and says MISSED. `--quick` (12 asks) is the CI smoke
configuration; the full run (60 asks) takes about half a minute.

Everything runs offline on this machine. The box runs in this process, served over
HTTP on 127.0.0.1 (`serve_box`), on `ClaudeEngine` with the CLI that
claude-agent-sdk bundles, pointed at the tests' Messages API double
(`tests/agent/messages_api.py`) in a private home (`tests/agent/claude_cli.py`).
The double answers one send with N ``Bash`` calls in a row (``touch f<i>.txt``,
each of which Claude Code's ``default`` mode asks about), then a text. The page is
a process of its own (this script with ``--page``), as a browser is: it reads
``GET /api/events`` and answers each ``permission-request`` at once with ``POST
/api/chat/permissions/<id>`` ``{"decision": "allow"}``.

What is measured, all on ``time.monotonic`` (one clock for every process here):

1. **The approval round trip** (target ≤ 20 ms p50): from claude-agent-sdk handing
   the CLI's prompt to the box (the run's ``ask_permission`` called from the SDK's
   ``can_use_tool`` callback) to the answer handed back to the SDK (that coroutine
   returning; the SDK writes the control response to the CLI's stdin at once). It
   holds the event leaving the box and everything after it, and a little before it
   (the request made and published); the CLI's own time — deciding to ask, and
   what it does with the answer — lies outside it. Split into the event's way to
   the page (ask → the page's read of it), the page's POST (sent → answered, as
   the page saw it), and the rest.
2. **Baseline, in the same run:** the same page's HTTP round trip to the same
   server for a request the handler answers without the box's loop (``POST
   /api/chat/permissions/<id>`` with a malformed body: 400), one after each
   answer, so the machine's noise hits both: what loopback HTTP alone costs here.
3. **The CLI's own time between asks** (information): from one answer handed back
   to the next request's event: the CLI running the tool, asking the double, and
   deciding to ask again.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import http.client
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

REPO: Final = Path(__file__).resolve().parent.parent
BENCH: Final = Path(__file__).resolve().parent
for folder in (REPO, BENCH):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import anyio  # noqa: E402 - after sys.path
from claude import Row, print_table  # noqa: E402 - bench/claude.py's table

from beebox_impl.box import Box  # noqa: E402 - after sys.path
from beebox_impl.engine.protocol import Run, StartOptions  # noqa: E402
from beebox_impl.http.server import serve_box  # noqa: E402
from beebox_impl.services import SendRequest  # noqa: E402
from beebox_spec.permissions import PermissionReply, PermissionRequest  # noqa: E402
from tests.agent.claude_cli import OfflineClaude, claude_processes, kill  # noqa: E402
from tests.agent.messages_api import MessagesApiDouble, Reply, ToolUse  # noqa: E402

ROUND_TRIP_TARGET_MS: Final = 20.0
FULL_ASKS: Final = 60
QUICK_ASKS: Final = 12
TIMEOUT_S: Final = 120.0


# --- The page: a process of its own ------------------------------------------------


def page(host: str, port: int, token: str) -> int:
    """Answer every permission request at once; print one JSON line per answer, then
    one per baseline request; stop at the turn's ``turn-text``."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    posts = http.client.HTTPConnection(host, port, timeout=TIMEOUT_S)
    stream = http.client.HTTPConnection(host, port, timeout=TIMEOUT_S)
    stream.request("GET", "/api/events", headers={"Authorization": f"Bearer {token}"})
    events = stream.getresponse()
    print(json.dumps({"subscribed": time.monotonic()}), flush=True)
    fields: dict[str, str] = {}
    while line := events.fp.readline():
        text = line.decode("utf-8").rstrip("\n")
        if text and not text.startswith(":"):
            name, _, value = text.partition(": ")
            fields[name] = value
            continue
        if text or "event" not in fields:
            continue
        event, data, fields = fields["event"], fields.get("data", ""), {}
        if event == "turn-text":
            break
        if event != "permission-request":
            continue
        received = time.monotonic()
        request_id = json.loads(data)["request"]["id"]
        posts.request(
            "POST", f"/api/chat/permissions/{request_id}", b'{"decision":"allow"}', headers
        )
        answer = posts.getresponse()
        answer.read()
        answered = time.monotonic()
        # The baseline: the same connection, a request the handler answers itself.
        posts.request("POST", "/api/chat/permissions/baseline", b'{"decision":1}', headers)
        baseline = posts.getresponse()
        baseline.read()
        print(
            json.dumps(
                {
                    "id": request_id,
                    "status": answer.status,
                    "received": received,
                    "answered": answered,
                    "baselineStatus": baseline.status,
                    "baseline": time.monotonic() - answered,
                }
            ),
            flush=True,
        )
    stream.close()
    posts.close()
    return 0


# --- The box, instrumented ------------------------------------------------------------


@dataclass
class Stamps:
    """When the SDK handed each request to the box, and when its answer went back."""

    asked: dict[str, float] = field(default_factory=dict)
    returned: dict[str, float] = field(default_factory=dict)


class StampedEngine:
    """The engine, with each run's asks stamped as their answers go back to the SDK."""

    def __init__(self, inner: Any, stamps: Stamps) -> None:
        self._inner = inner
        self._stamps = stamps

    async def prepare(self) -> None:
        await self._inner.prepare()

    async def start(self, options: StartOptions) -> Run:
        ask = options.ask_permission
        assert ask is not None
        stamps = self._stamps

        async def stamped(request: PermissionRequest) -> PermissionReply | None:
            stamps.asked[request["id"]] = time.monotonic()
            reply = await ask(request)
            stamps.returned[request["id"]] = time.monotonic()
            return reply

        run: Run = await self._inner.start(dataclasses.replace(options, ask_permission=stamped))
        return run


@dataclass(frozen=True)
class Sample:
    round_trip: float
    to_page: float
    post: float
    baseline: float


@dataclass
class Figures:
    samples: list[Sample] = field(default_factory=list)
    between_asks: list[float] = field(default_factory=list)
    refused: int = 0
    leftover_clis: int = 0


async def run_box(root: Path, asks: int) -> Figures:
    with MessagesApiDouble() as api:
        claude = OfflineClaude(root / "claude", api)
        api.script(
            *(
                Reply((ToolUse("Bash", {"command": f"touch f{i}.txt", "description": "x"}),))
                for i in range(asks)
            ),
            Reply.text("done"),
        )
        stamps = Stamps()
        engine = StampedEngine(claude.engine(), stamps)
        await engine.prepare()
        box_dir = root / "box"
        async with (
            Box.open(box_dir, engine=engine, projects_root=claude.projects) as box,
            serve_box(box, port=0) as served,
        ):
            figures = await drive_page(box, served.host, served.port, box.token, stamps)
        figures.leftover_clis = len(claude_processes(claude.config))
        for pid in claude_processes(claude.config):
            kill(pid)
        return figures


async def drive_page(box: Box, host: str, port: int, token: str, stamps: Stamps) -> Figures:
    command = [sys.executable, __file__, "--page", host, str(port), token]
    figures = Figures()
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as process:
        assert process.stdout is not None
        lines: Iterator[str] = iter(process.stdout.readline, "")
        await anyio.to_thread.run_sync(next, lines)  # subscribed
        await box.send(SendRequest("touch them all", message_id="bench-1"))
        answers = await anyio.to_thread.run_sync(list, lines)
        process.wait(TIMEOUT_S)
    previous_return: float | None = None
    for line in answers:
        seen = json.loads(line)
        request_id = seen["id"]
        if seen["status"] != 200 or seen["baselineStatus"] != 400:
            figures.refused += 1
            continue
        published = stamps.asked[request_id]
        returned = stamps.returned[request_id]
        figures.samples.append(
            Sample(
                round_trip=returned - published,
                to_page=seen["received"] - published,
                post=seen["answered"] - seen["received"],
                baseline=seen["baseline"],
            )
        )
        if previous_return is not None:
            figures.between_asks.append(published - previous_return)
        previous_return = returned
    return figures


# --- The report ---------------------------------------------------------------------------


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.2f} ms"


def _p(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def rows(figures: Figures) -> list[Row]:
    if not figures.samples:
        return [Row("approval round trip p50", "—", "—", "—", "no answers", "ERROR")]
    trips = [sample.round_trip for sample in figures.samples]
    baseline = [sample.baseline for sample in figures.samples]
    p50, base50 = statistics.median(trips), statistics.median(baseline)
    met = p50 * 1000 <= ROUND_TRIP_TARGET_MS and figures.refused == 0
    return [
        Row(
            "approval round trip p50",
            _ms(p50),
            _ms(base50),
            f"{p50 / base50:.1f}x" if base50 else "—",
            f"≤ {ROUND_TRIP_TARGET_MS:g} ms",
            "ok" if met else "MISSED",
        ),
        Row(
            "approval round trip p90",
            _ms(_p(trips, 0.9)),
            _ms(_p(baseline, 0.9)),
            "—",
            "(info)",
            "info",
        ),
        Row(
            "the event's way to the page p50",
            _ms(statistics.median(s.to_page for s in figures.samples)),
            "—",
            "—",
            "(info)",
            "info",
        ),
        Row(
            "the page's POST, sent to its answer read, p50",
            _ms(statistics.median(s.post for s in figures.samples)),
            _ms(base50),
            "—",
            "(info)",
            "info",
        ),
        Row(
            "the CLI's own time between asks p50",
            _ms(statistics.median(figures.between_asks)) if figures.between_asks else "—",
            "—",
            "—",
            "(info)",
            "info",
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small configuration for CI smoke")
    parser.add_argument("--asks", type=int, default=None, help="permission requests to time")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE", help="figures as JSON")
    parser.add_argument("--page", nargs=3, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.page is not None:
        host, port, token = args.page
        return page(host, int(port), token)
    asks = args.asks or (QUICK_ASKS if args.quick else FULL_ASKS)
    if asks < 2:
        parser.error("--asks takes a count of at least 2")
    print(f"# permissions benchmark: {asks} asks, {platform.platform()}, {os.cpu_count()} cpus")
    with tempfile.TemporaryDirectory(prefix="bbx-permissions-bench-") as folder:
        figures = anyio.run(run_box, Path(folder), asks)
    table = rows(figures)
    print(
        f"# {len(figures.samples)} answered, {figures.refused} refused;"
        " round trip = the SDK hands the prompt to the box → the answer goes back to it"
    )
    print_table(table)
    if figures.leftover_clis:
        print(f"*** {figures.leftover_clis} CLI process(es) outlived their owner: killed")
    if args.json is not None:
        report = {
            "asks": asks,
            "figures": dataclasses.asdict(figures),
            "rows": [dataclasses.asdict(row) for row in table],
        }
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
