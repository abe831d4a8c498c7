"""Claude benchmark: the box on the real Claude Code CLI, beside the CLI alone.

Run: `python bench/claude.py [--quick] [--turns N] [--reps K] [--json FILE]` from the
repository root (or anywhere; it needs the ``claude`` extra). Every figure is
measured beside its baseline in the same run and printed in one table. It is a
report, not a test: it exits 0 when a target is missed and says MISSED. `--quick`
(2 warm-up and 10 timed turns, 2 cold starts) is the CI smoke configuration.

Everything runs offline. The CLI is the one claude-agent-sdk bundles, pointed at the
tests' Messages API double (`tests/agent/messages_api.py`), whose fallback answers
every request at once with one short text, in a private home each
(`tests/agent/claude_cli.py`'s `OfflineClaude`): one for the box's CLIs, one for
the baseline's, one for the in-process host's. A turn's time is thus the CLI's own
work plus whatever stands between it and a client, and no model time.

The baseline, "the CLI alone", is the bundled binary run directly with exactly the
command line and environment of the box's own CLI, read from ``/proc`` of that
running process (what claude-agent-sdk's ``SubprocessCLITransport`` builds:
``--output-format stream-json --verbose --system-prompt "" --input-format
stream-json``, and the SDK's variables), with its own home and an empty working
folder of its own. It speaks the SDK's wire protocol by hand: first the
``initialize`` control request, as ``ClaudeSDKClient.connect`` sends it, and its
answer; then per turn one line ``{"type": "user", "message": {"role": "user",
"content": text}, "parent_tool_use_id": null, "session_id": "default"}``. The
initialize is kept so that both CLIs run in the same mode; it costs the CLI's start
nothing measurable (the CLI answers it while it starts up anyway), and the run
checks that every time (the "without initialize" row).

What is measured:

1. Warm turn (the CLI already running). Box: ``bbx serve --engine claude`` in a
   process of its own; from just before ``POST /api/chat/send`` to the first
   ``message`` event on ``GET /api/events`` whose message is an assistant message
   with text. Baseline: from just before the user line is written to the CLI's
   stdin to its first ``assistant`` line with text. Both are warmed first (a few
   turns), then the timed turns alternate, box and CLI, which goes first switching
   each round, a short pause after each, so that the machine's noise hits both.
   p50 and p90 of each; the ratio of the p50s (target ≤ 1.2×) and the box's added
   time, box p50 − CLI p50 (target ≤ 5 ms).
2. Cold first send (the CLI spawned). Box: a fresh box, its ``bbx serve`` already
   listening and the event stream open; from the first send to its first
   assistant-text event, which includes the box starting its CLI. Baseline: the CLI
   alone from its spawn (initialize included) to its first assistant line. Each
   repetition does both, alternating which goes first; medians (target ≤ 1.2×).
   Beside it, the CLI alone without the initialize request.
3. Memory (information, no target). VmRSS (``/proc/<pid>/status``) of the warm
   ``bbx serve`` and of its CLI after the timed turns, beside the CLI alone's after
   the same turns; and an in-process host (this script, ``--thread-host``, in a
   process of its own) holding 1, then 4 `ChatThreadSession`s open at once on the
   real CLI, each after one turn: the host's RSS and each CLI's, total and per CLI,
   beside the host's RSS with the SDK imported and no session open.

Printed above the table, where the time goes: the medians of each step of a turn on
each side, from the send (the POST's answer, the CLI's ``system/init``, the CLI's
API request as the double received it, the first assistant text); the box's added
time split at the API request into the way in (send → the CLI's request) and the
way out (the answer → the assistant text on the stream); and how long importing
claude-agent-sdk takes in a fresh interpreter (the box imports it when it first
starts a CLI). Linux only (``/proc``).

The full run (5 warm-up and 100 timed turns, 10 cold starts) takes about a minute.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import http.client
import json
import os
import platform
import select
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias

REPO: Final = Path(__file__).resolve().parent.parent
# The API double and the CLI's private home are the tests' own (tests/agent).
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from report import print_table  # noqa: E402 - after sys.path

from beebox_impl.cli.box import parse_serving_line  # noqa: E402 - after sys.path
from tests.agent.claude_cli import (  # noqa: E402 - after sys.path
    OfflineClaude,
    claude_processes,
    cli_path,
    cli_version,
    kill,
)
from tests.agent.messages_api import MessagesApiDouble, Reply  # noqa: E402 - after sys.path

# Targets.
WARM_VS_CLI: Final = 1.2  # box warm-turn p50 at most this many CLI-alone p50s
WARM_ADDED_MS: Final = 5.0  # box p50 − CLI p50
COLD_VS_CLI: Final = 1.2  # box cold-first-send median at most this many CLI-alone medians

HOST_SESSIONS: Final = (1, 4)  # thread sessions the in-process host holds open at once
# Between turns: what a side may still do after its turn's end (the CLI writing its
# transcript, the box relaying the result) stays out of the other side's timed turn.
PAUSE_S: Final = 0.05
TIMEOUT_S: Final = 60.0  # any one wait (a line, an event, a process's exit)
ANSWER: Final = "hi"

Status: TypeAlias = Literal["ok", "MISSED", "ERROR", "info"]
Say: TypeAlias = Callable[[str], None]  # progress, to stderr


@dataclass(frozen=True)
class Config:
    """One benchmark configuration."""

    name: str
    warmup: int  # untimed turns on each side before the timed ones
    turns: int  # timed warm turns on each side
    reps: int  # cold starts on each side


FULL: Final = Config("full", warmup=5, turns=100, reps=10)
QUICK: Final = Config("quick", warmup=2, turns=10, reps=2)


# ---------------------------------------------------------------------------------
# Processes: lines with a deadline, RSS, cleanup
# ---------------------------------------------------------------------------------


class LineReader:
    """Whole lines from a pipe, each with a deadline (a hung process fails the read).

    On the raw descriptor, not a buffered file: ``select`` cannot see bytes a buffered
    reader already holds.
    """

    def __init__(self, fd: int, what: str) -> None:
        self._fd = fd
        self._what = what
        self._buffer = bytearray()

    def readline(self, timeout: float = TIMEOUT_S) -> bytes:
        deadline = time.monotonic() + timeout
        while (end := self._buffer.find(b"\n")) < 0:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._fd], [], [], left)[0]:
                raise TimeoutError(f"{self._what} wrote no line in {timeout:g} s")
            chunk = os.read(self._fd, 1 << 16)
            if not chunk:
                raise EOFError(f"{self._what} closed its output")
            self._buffer += chunk
        line = bytes(self._buffer[: end + 1])
        del self._buffer[: end + 1]
        return line


def rss_kib(pid: int | str = "self") -> int:
    """VmRSS of ``pid`` in KiB."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS in /proc/{pid}/status")


def mib(kib: float) -> str:
    return f"{kib / 1024:,.1f} MiB"


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """Ask ``process`` to end (SIGTERM), then kill it if it has not within the timeout."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(TIMEOUT_S / 2)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            stream.close()


def kill_leftover_clis(config: Path) -> int:
    """Kill any CLI still running on ``config`` (one of ours); how many there were."""
    left = claude_processes(config)
    for pid in left:
        kill(pid)
    return len(left)


def wait_for_no_cli(config: Path, timeout: float = TIMEOUT_S / 2) -> None:
    deadline = time.monotonic() + timeout
    while claude_processes(config):
        if time.monotonic() > deadline:
            raise RuntimeError(f"a CLI on {config} is still running after {timeout:g} s")
        time.sleep(0.02)


def assistant_text(message: Any) -> str:
    """The text of an assistant message (a CLI line or an adapted message); else ``""``."""
    if not isinstance(message, dict) or message.get("type") != "assistant":
        return ""
    content = message.get("message", {}).get("content")
    if not isinstance(content, list):
        return ""
    return "".join(
        str(block.get("text", ""))
        for block in content
        if isinstance(block, dict) and block.get("type") == "text"
    )


def is_init(message: Any) -> bool:
    return (
        isinstance(message, dict)
        and message.get("type") == "system"
        and message.get("subtype") == "init"
    )


@dataclass(frozen=True)
class TurnTiming:
    """Seconds from the send to: the POST's answer (box only), the CLI's API request
    (filled in by `Run`, from the double), the CLI's ``system/init`` (its first word
    on a turn), the first assistant text. ``origin``: the send's `time.perf_counter`."""

    origin: float
    answered: float | None
    init: float | None
    assistant: float
    api_request: float | None = None


class TimedApiDouble(MessagesApiDouble):
    """The API double, noting when each messages request arrives: a turn's time splits
    there into the way in (send → the CLI's request) and the way out."""

    def __init__(self, fallback: Reply) -> None:
        super().__init__(fallback)
        self._arrivals: list[float] = []

    def _take(self, method: str, path: str, headers: dict[str, str], body: Any) -> Any:
        arrived = time.perf_counter()
        answer = super()._take(method, path, headers, body)
        if answer is not None:
            self._arrivals.append(arrived)
        return answer

    def timed(self, timing: TurnTiming) -> TurnTiming:
        """``timing`` with its API request: the first to arrive after its send."""
        after = [t for t in self._arrivals[-8:] if t >= timing.origin]
        if not after:
            return timing
        return dataclasses.replace(timing, api_request=min(after) - timing.origin)


# ---------------------------------------------------------------------------------
# The box: `bbx serve --engine claude` and a client of it
# ---------------------------------------------------------------------------------


class _Connection(http.client.HTTPConnection):
    """A client connection without Nagle's delay, as bench/box_http.py's."""

    def connect(self) -> None:
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class ServedBox:
    """A `bbx serve --engine claude` process, one keep-alive connection for sends and
    one event stream, subscribed before the first send."""

    def __init__(self, folder: Path, claude: OfflineClaude, log: Path) -> None:
        self.claude = claude
        self._log = log
        with log.open("wb") as errors:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "beebox_impl",
                    "serve",
                    "--box",
                    str(folder),
                    "--port",
                    "0",
                    "--engine",
                    "claude",
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=errors,
                env=claude.process_env(),
            )
        self._post: _Connection | None = None
        self._events: _Connection | None = None
        # The log is complete once the server has stopped: closed first, then read.
        with self.telling_why():
            try:
                assert self.process.stdout is not None
                line = LineReader(self.process.stdout.fileno(), "bbx serve").readline().decode()
                serving = parse_serving_line(line)
                if serving is None:
                    raise RuntimeError(f"bbx serve printed {line!r} first")
                url, self.token = serving
                host, _, port = url.removeprefix("http://").rpartition(":")
                self._post = _Connection(host, int(port), timeout=TIMEOUT_S)
                self._events = _Connection(host, int(port), timeout=TIMEOUT_S)
                self._events.request("GET", "/api/events", headers=self._auth())
                self._stream = self._events.getresponse()
                if self._stream.status != 200:
                    raise RuntimeError(f"GET /api/events answered {self._stream.status}")
                # Subscribed once the stream says so: no event of the first send is missed.
                while (line_read := self._stream.fp.readline()).rstrip(b"\n") != b": subscribed":
                    if not line_read:
                        raise EOFError("the event stream ended before it subscribed")
            except BaseException:
                self.close()
                raise

    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def _next_event(self) -> tuple[str, Any]:
        """The next event on the stream: its name and its data."""
        fields: dict[str, str] = {}
        while True:
            line = self._stream.fp.readline()
            if not line:
                raise EOFError("the event stream ended")
            text = line.decode().rstrip("\n")
            if text.startswith(("event: ", "data: ")):
                key, _, value = text.partition(": ")
                fields[key] = value
            elif text == "" and "event" in fields:
                return fields["event"], json.loads(fields.get("data", "null"))

    def turn(self, text: str) -> TurnTiming:
        """One send, timed to its first assistant text; returns once the turn is over."""
        assert self._post is not None
        body = json.dumps({"message": text, "messageId": str(uuid.uuid4())}).encode()
        headers = {**self._auth(), "Content-Type": "application/json"}
        started = time.perf_counter()
        self._post.request("POST", "/api/chat/send", body=body, headers=headers)
        response = self._post.getresponse()
        answer = response.read()
        answered = time.perf_counter() - started
        if response.status != 200 or b"turnId" not in answer:
            raise RuntimeError(f"the send answered {response.status} {answer!r} (not a turn)")
        init: float | None = None
        assistant: float | None = None
        while True:
            name, data = self._next_event()
            if name in ("start-failed", "turn-error", "close"):
                raise RuntimeError(f"the turn failed: {name} {data}")
            if name == "message":
                message = data.get("message") if isinstance(data, dict) else None
                if init is None and is_init(message):
                    init = time.perf_counter() - started
                if assistant is None and assistant_text(message):
                    assistant = time.perf_counter() - started
            # The last event of a turn: the chat is idle for the next send.
            if name == "turn-text":
                break
        if assistant is None:
            raise RuntimeError("the turn ended with no assistant text")
        return TurnTiming(started, answered, init, assistant)

    def cli_pids(self) -> list[int]:
        return claude_processes(self.claude.config)

    def close(self) -> None:
        """Close the connections and stop the server (SIGTERM: it closes its CLI)."""
        for connection in (self._post, self._events):
            if connection is not None:
                connection.close()
        stop_process(self.process)

    @contextlib.contextmanager
    def telling_why(self) -> Iterator[None]:
        """Any failure inside, with what `bbx serve` wrote to its stderr."""
        try:
            yield
        except Exception as error:
            try:
                said = self._log.read_text(errors="replace")[-600:]
            except OSError:
                said = "?"
            raise RuntimeError(f"{error}; bbx serve's stderr ends: {said!r}") from error


# ---------------------------------------------------------------------------------
# The baseline: the CLI alone
# ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CliCommand:
    """The box's CLI's command line and environment (read from ``/proc``)."""

    argv: list[str]
    env: dict[str, str]

    @classmethod
    def of_process(cls, pid: int) -> CliCommand:
        proc = Path(f"/proc/{pid}")
        # Each argument ends in a NUL; an empty one (``--system-prompt ""``) is kept.
        argv = [part.decode() for part in (proc / "cmdline").read_bytes().split(b"\0")[:-1]]
        env = {}
        for entry in (proc / "environ").read_bytes().split(b"\0"):
            name, equals, value = entry.decode(errors="replace").partition("=")
            if equals:
                env[name] = value
        return cls(argv, env)


class CliAlone:
    """The bundled CLI run directly: the box CLI's command line and environment, with
    its own home (``claude``) and working folder (``cwd``)."""

    def __init__(
        self, command: CliCommand, claude: OfflineClaude, cwd: Path, *, initialize: bool = True
    ) -> None:
        cwd.mkdir(parents=True, exist_ok=True)
        env = {**command.env, **claude.env, "PWD": str(cwd)}
        self.started = time.perf_counter()
        self.process = subprocess.Popen(
            command.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=cwd,
            env=env,
        )
        try:
            assert self.process.stdout is not None
            self._lines = LineReader(self.process.stdout.fileno(), "the CLI alone")
            if initialize:
                self._initialize()
        except BaseException:
            self.close()
            raise

    def _write(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def _read(self) -> Any:
        return json.loads(self._lines.readline())

    def _initialize(self) -> None:
        # As `ClaudeSDKClient.connect` does (`Query.initialize`): no hooks, no agents.
        request_id = f"req_1_{os.urandom(4).hex()}"
        request = {"subtype": "initialize", "hooks": None}
        self._write({"type": "control_request", "request_id": request_id, "request": request})
        while True:
            line = self._read()
            if line.get("type") == "control_response":
                if line.get("response", {}).get("subtype") != "success":
                    raise RuntimeError(f"the CLI refused initialize: {line}")
                return

    def turn(self, text: str, *, since: float | None = None) -> TurnTiming:
        """One user line, timed to the first assistant text (from ``since`` if given);
        returns once the turn's result is read."""
        started = time.perf_counter()
        origin = started if since is None else since
        self._write(
            {
                "type": "user",
                "message": {"role": "user", "content": text},
                "parent_tool_use_id": None,
                "session_id": "default",
            }
        )
        init: float | None = None
        assistant: float | None = None
        while True:
            line = self._read()
            if init is None and is_init(line):
                init = time.perf_counter() - origin
            if assistant is None and assistant_text(line):
                assistant = time.perf_counter() - origin
            if line.get("type") == "result":
                if line.get("is_error"):
                    raise RuntimeError(f"the CLI's turn failed: {line}")
                break
        if assistant is None:
            raise RuntimeError("the CLI's turn ended with no assistant text")
        return TurnTiming(origin, None, init, assistant)

    def close(self) -> None:
        # Its input closed, the CLI exits, as the SDK's disconnect lets it.
        if self.process.stdin is not None and not self.process.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.process.stdin.close()
        try:
            self.process.wait(TIMEOUT_S / 2)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


# ---------------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------------


@dataclass
class Figures:
    """Everything one run measured (seconds and KiB); an error per section, if any."""

    warm_box: list[TurnTiming] = field(default_factory=list)
    warm_cli: list[TurnTiming] = field(default_factory=list)
    serve_rss: int | None = None
    serve_cli_rss: list[int] = field(default_factory=list)
    cli_alone_rss: int | None = None
    cold_box: list[TurnTiming] = field(default_factory=list)
    cold_cli: list[TurnTiming] = field(default_factory=list)
    cold_cli_no_init: list[TurnTiming] = field(default_factory=list)
    sdk_import: float | None = None
    host: dict[str, Any] | None = None
    leftover_clis: int = 0
    errors: dict[str, str] = field(default_factory=dict)


class Run:
    """One benchmark run in a temporary folder: the API double, three homes."""

    def __init__(self, folder: Path, api: TimedApiDouble, config: Config) -> None:
        self.folder = folder
        self.api = api
        self.config = config
        self.box_claude = OfflineClaude(folder / "box-claude", api)
        self.cli_claude = OfflineClaude(folder / "cli-claude", api)
        self.host_claude = OfflineClaude(folder / "host-claude", api)
        self.figures = Figures()
        self.command: CliCommand | None = None
        self._serial = 0

    def _next(self, what: str) -> Path:
        self._serial += 1
        return self.folder / f"{what}-{self._serial}"

    def measure_warm(self, say: Say) -> None:
        config, figures = self.config, self.figures
        with contextlib.ExitStack() as stack:
            box = ServedBox(self._next("box"), self.box_claude, self._next("serve.log"))
            stack.callback(box.close)
            stack.enter_context(box.telling_why())
            say("warm: the box's first turn starts its CLI …")
            box.turn("warm-up 0")
            (pid,) = box.cli_pids()
            # The baseline runs exactly what the box runs.
            self.command = CliCommand.of_process(pid)
            cli = CliAlone(self.command, self.cli_claude, self._next("cli-cwd"))
            stack.callback(cli.close)
            cli.turn("warm-up 0")
            for index in range(1, config.warmup):
                box.turn(f"warm-up {index}")
                cli.turn(f"warm-up {index}")
            say(f"warm: {config.turns} turns each, alternating …")
            for index in range(config.turns):
                text = f"turn {index}"
                for side in (box, cli) if index % 2 == 0 else (cli, box):
                    timing = self.api.timed(side.turn(text))
                    (figures.warm_box if side is box else figures.warm_cli).append(timing)
                    time.sleep(PAUSE_S)
            figures.serve_rss = rss_kib(box.process.pid)
            figures.serve_cli_rss = [rss_kib(pid) for pid in box.cli_pids()]
            figures.cli_alone_rss = rss_kib(cli.process.pid)

    def measure_cold(self, say: Say) -> None:
        if self.command is None:
            raise RuntimeError("no command line of the box's CLI (the warm measure failed)")
        command, figures = self.command, self.figures
        for rep in range(self.config.reps):
            say(f"cold: start {rep + 1} of {self.config.reps} …")
            sides = ("box", "cli", "cli-no-init")
            for side in sides if rep % 2 == 0 else reversed(sides):
                if side == "box":
                    figures.cold_box.append(self.api.timed(self._cold_box()))
                else:
                    timing = self.api.timed(self._cold_cli(command, initialize=side == "cli"))
                    (figures.cold_cli if side == "cli" else figures.cold_cli_no_init).append(timing)

    def _cold_box(self) -> TurnTiming:
        box = ServedBox(self._next("box"), self.box_claude, self._next("serve.log"))
        try:
            with box.telling_why():
                if box.cli_pids():
                    raise RuntimeError("the box started its CLI before the first send")
                return box.turn("hello")
        finally:
            box.close()
            wait_for_no_cli(self.box_claude.config)

    def _cold_cli(self, command: CliCommand, *, initialize: bool) -> TurnTiming:
        cli = CliAlone(command, self.cli_claude, self._next("cli-cwd"), initialize=initialize)
        try:
            return cli.turn("hello", since=cli.started)
        finally:
            cli.close()

    def measure_sdk_import(self) -> None:
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                "import time; t = time.perf_counter(); import claude_agent_sdk; "
                "print(time.perf_counter() - t)",
            ],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=True,
        )
        self.figures.sdk_import = float(done.stdout.strip())

    def measure_host(self, say: Say) -> None:
        say(f"memory: an in-process host holding {' then '.join(map(str, HOST_SESSIONS))} …")
        done = subprocess.run(
            [sys.executable, __file__, "--thread-host", str(self.host_claude.root)],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S * 2,
            check=False,
            env=self.host_claude.process_env(),
        )
        if done.returncode != 0:
            raise RuntimeError(f"the host exited {done.returncode}: {done.stderr[-800:]}")
        self.figures.host = json.loads(done.stdout.strip().splitlines()[-1])

    def clean_up(self) -> None:
        for claude in (self.box_claude, self.cli_claude, self.host_claude):
            self.figures.leftover_clis += kill_leftover_clis(claude.config)


def measure(config: Config, say: Say) -> Figures:
    api = TimedApiDouble(fallback=Reply.text(ANSWER))
    with tempfile.TemporaryDirectory(prefix="beebox-bench-claude-") as tmp, api:
        run = Run(Path(tmp), api, config)
        try:
            sections: list[tuple[str, Callable[[], None]]] = [
                ("warm", lambda: run.measure_warm(say)),
                ("cold", lambda: run.measure_cold(say)),
                ("sdk import", run.measure_sdk_import),
                ("host", lambda: run.measure_host(say)),
            ]
            for name, section in sections:
                try:
                    section()
                except Exception as error:  # a report, not a test: say what broke
                    run.figures.errors[name] = f"{type(error).__name__}: {error}"
        finally:
            run.clean_up()
        return run.figures


# ---------------------------------------------------------------------------------
# The in-process host (`--thread-host ROOT`, in a process of its own)
# ---------------------------------------------------------------------------------


def thread_host(root: Path) -> dict[str, Any]:
    """Open 1, then 4 thread sessions at once on the real CLI, one turn each; RSS.

    Runs in its own process, with the `OfflineClaude` environment of ``root``.
    """
    import anyio  # noqa: PLC0415 - the parent process does not need them

    from beebox_impl.engine.claude import ClaudeEngine, load_sdk  # noqa: PLC0415
    from beebox_impl.session.thread import ChatThreadSession  # noqa: PLC0415

    config = Path(os.environ["CLAUDE_CONFIG_DIR"])
    box_root = root / "host-box"
    box_root.mkdir(parents=True, exist_ok=True)
    engine = ClaudeEngine(cli_path=cli_path())

    async def hold(count: int) -> dict[str, Any]:
        async with contextlib.AsyncExitStack() as stack:
            sessions = [
                await stack.enter_async_context(
                    ChatThreadSession.open(engine=engine, box_root=box_root)
                )
                for _ in range(count)
            ]
            outcomes: list[str] = []

            async def one_turn(session: ChatThreadSession) -> None:
                outcomes.append((await session.send("hello")).outcome)

            with anyio.fail_after(TIMEOUT_S):
                async with anyio.create_task_group() as turns:
                    for session in sessions:
                        turns.start_soon(one_turn, session)
            if outcomes != ["done"] * count:
                raise RuntimeError(f"the host's turns ended {outcomes}")
            gc.collect()
            clis = {pid: rss_kib(pid) for pid in claude_processes(config)}
            if len(clis) != count:
                raise RuntimeError(f"{len(clis)} CLIs for {count} sessions")
            figures = {"sessions": count, "host": rss_kib(), "clis": sorted(clis.values())}
        await anyio.to_thread.run_sync(wait_for_no_cli, config)
        return figures

    async def main() -> dict[str, Any]:
        gc.collect()
        without_sdk = rss_kib()
        # Imported before the baseline: the sessions' cost is theirs alone.
        load_sdk()
        gc.collect()
        idle = rss_kib()
        held = [await hold(count) for count in HOST_SESSIONS]
        return {"without_sdk": without_sdk, "idle": idle, "held": held}

    try:
        return anyio.run(main)
    finally:
        kill_leftover_clis(config)


# ---------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    measure: str
    ours: str
    baseline: str
    ratio: str
    target: str
    status: Status


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms"


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _median(samples: list[float | None]) -> float | None:
    present = [sample for sample in samples if sample is not None]
    return statistics.median(present) if present else None


def _error_row(measure: str, why: str) -> Row:
    return Row(measure, "—", "—", "—", why, "ERROR")


def warm_rows(figures: Figures) -> list[Row]:
    if "warm" in figures.errors or not figures.warm_box or not figures.warm_cli:
        why = figures.errors.get("warm", "nothing measured")
        return [_error_row("warm turn: every measure", why)]
    box = [t.assistant for t in figures.warm_box]
    cli = [t.assistant for t in figures.warm_cli]
    box_50, cli_50 = _percentile(box, 0.5), _percentile(cli, 0.5)
    box_90, cli_90 = _percentile(box, 0.9), _percentile(cli, 0.9)
    ratio = box_50 / cli_50
    added_ms = (box_50 - cli_50) * 1000
    turns = f"{len(box)} turns each"
    return [
        Row(
            f"warm turn p50, send → first assistant text ({turns})",
            f"box {_ms(box_50)}",
            f"CLI alone {_ms(cli_50)}",
            f"{ratio:.2f}× CLI",
            f"≤ {WARM_VS_CLI:g}× CLI",
            "ok" if ratio <= WARM_VS_CLI else "MISSED",
        ),
        Row(
            "warm turn, the box's added time (p50 − p50)",
            f"{added_ms:+,.1f} ms",
            f"CLI alone {_ms(cli_50)}",
            "—",
            f"≤ {WARM_ADDED_MS:g} ms",
            "ok" if added_ms <= WARM_ADDED_MS else "MISSED",
        ),
        Row(
            "warm turn p90",
            f"box {_ms(box_90)}",
            f"CLI alone {_ms(cli_90)}",
            f"{box_90 / cli_90:.2f}× CLI",
            "—",
            "info",
        ),
    ]


def cold_rows(figures: Figures) -> list[Row]:
    if "cold" in figures.errors or not figures.cold_box or not figures.cold_cli:
        why = figures.errors.get("cold", "nothing measured")
        return [_error_row("cold first send: every measure", why)]
    box = statistics.median(t.assistant for t in figures.cold_box)
    cli = statistics.median(t.assistant for t in figures.cold_cli)
    ratio = box / cli
    rows = [
        Row(
            f"cold first send → first assistant text (median of {len(figures.cold_box)})",
            f"box {_ms(box)}",
            f"CLI alone {_ms(cli)}",
            f"{ratio:.2f}× CLI",
            f"≤ {COLD_VS_CLI:g}× CLI",
            "ok" if ratio <= COLD_VS_CLI else "MISSED",
        )
    ]
    if figures.cold_cli_no_init:
        bare = statistics.median(t.assistant for t in figures.cold_cli_no_init)
        rows.append(
            Row(
                "cold, the CLI alone without the initialize request",
                "—",
                f"{_ms(bare)} (with it: {_ms(cli)})",
                f"{bare / cli:.2f}× with it",
                "—",
                "info",
            )
        )
    return rows


def memory_rows(figures: Figures, config: Config) -> list[Row]:
    rows: list[Row] = []
    if figures.serve_rss is not None and figures.cli_alone_rss is not None:
        clis = sum(figures.serve_cli_rss)
        total = figures.serve_rss + clis
        rows.append(
            Row(
                f"RSS, bbx serve + its CLI after {config.warmup + config.turns} turns",
                f"serve {mib(figures.serve_rss)} + CLI {mib(clis)} = {mib(total)}",
                f"CLI alone {mib(figures.cli_alone_rss)}",
                f"{total / figures.cli_alone_rss:.2f}× CLI alone",
                "—",
                "info",
            )
        )
    elif "warm" not in figures.errors:
        rows.append(_error_row("RSS, bbx serve + its CLI", "nothing measured"))
    host = figures.host
    if host is None:
        why = figures.errors.get("host", "nothing measured")
        rows.append(_error_row("RSS, in-process host with thread sessions", why))
        return rows
    idle, sdk = int(host["idle"]), int(host["idle"]) - int(host["without_sdk"])
    for held in host["held"]:
        count, host_kib, clis_kib = int(held["sessions"]), int(held["host"]), held["clis"]
        clis = sum(int(kib) for kib in clis_kib)
        rows.append(
            Row(
                f"RSS, in-process host, {count} thread session(s) open",
                f"host {mib(host_kib)} + {count} CLI {mib(clis)} = {mib(host_kib + clis)}"
                f" ({mib(clis / count)}/CLI)",
                f"host with none open {mib(idle)} (the SDK's import: {mib(sdk)})",
                f"host {mib((host_kib - idle) / count)}/session",
                "—",
                "info",
            )
        )
    return rows


def _steps(timings: list[TurnTiming], *, box: bool) -> str:
    """The medians of a side's steps, from the send."""

    def median(step: str) -> str:
        found = _median([getattr(timing, step) for timing in timings])
        return "?" if found is None else _ms(found)

    answered = f"POST answered {median('answered')}, " if box else ""
    return (
        f"{answered}system/init {median('init')}, API request {median('api_request')},"
        f" assistant text {median('assistant')}"
    )


def _split(box: list[TurnTiming], cli: list[TurnTiming]) -> str | None:
    """The box's added time (medians) on the way in (send → the CLI's API request) and
    on the way out (API request → assistant text)."""
    box_in = _median([t.api_request for t in box])
    cli_in = _median([t.api_request for t in cli])
    if box_in is None or cli_in is None:
        return None
    box_out = statistics.median(t.assistant - (t.api_request or 0) for t in box)
    cli_out = statistics.median(t.assistant - (t.api_request or 0) for t in cli)
    return (
        f"in (send → API request) {(box_in - cli_in) * 1000:+,.1f} ms,"
        f" out (API request → assistant text) {(box_out - cli_out) * 1000:+,.1f} ms"
    )


def notes(figures: Figures) -> list[str]:
    """Where the time goes: the medians of a turn's steps, on each side."""
    lines: list[str] = []
    for what, box, cli in (
        ("warm turn", figures.warm_box, figures.warm_cli),
        ("cold first send", figures.cold_box, figures.cold_cli),
    ):
        if not box or not cli:
            continue
        since = " (from its spawn)" if what.startswith("cold") else ""
        lines.append(
            f"{what} medians from the send: box — {_steps(box, box=True)};"
            f" CLI alone{since} — {_steps(cli, box=False)}"
        )
        split = _split(box, cli)
        if split is not None:
            lines.append(f"{what}, the box's added time: {split}")
    if figures.sdk_import is not None:
        lines.append(
            f"import claude_agent_sdk in a fresh interpreter: {_ms(figures.sdk_import)}"
            " (the box imports it when it first starts a CLI)"
        )
    if figures.leftover_clis:
        lines.append(f"*** {figures.leftover_clis} CLI process(es) outlived their owner: killed")
    return lines


def _load_average() -> str:
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "?"


def _as_json(config: Config, figures: Figures, rows: list[Row]) -> dict[str, Any]:
    return {
        "config": dataclasses.asdict(config),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "figures": dataclasses.asdict(figures),
        "rows": [dataclasses.asdict(row) for row in rows],
    }


def main(argv: list[str] | None = None) -> int:
    """Measure, print; exit 0 whatever the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small configuration for CI smoke")
    parser.add_argument("--turns", type=int, default=None, help="timed warm turns on each side")
    parser.add_argument("--reps", type=int, default=None, help="cold starts on each side")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE", help="figures as JSON")
    parser.add_argument("--thread-host", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for name in ("turns", "reps"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name} takes a count of at least 1")
    if args.thread_host is not None:
        print(json.dumps(thread_host(args.thread_host)))
        return 0
    config = QUICK if args.quick else FULL
    config = dataclasses.replace(
        config, turns=args.turns or config.turns, reps=args.reps or config.reps
    )
    started = time.perf_counter()

    def say(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f} s] {message}", file=sys.stderr, flush=True)

    load_before = _load_average()
    print(
        f"beebox Claude benchmark ({config.name}): bbx serve --engine claude and thread"
        f" sessions on the real CLI, offline against the Messages API double; {config.warmup}"
        f" warm-up + {config.turns} timed warm turns each side (alternating), {config.reps}"
        " cold starts each side"
    )
    print(
        f"{platform.platform()}, {platform.machine()}, {os.cpu_count()} CPUs;"
        f" python {platform.python_version()}; claude {cli_version()};"
        f" claude-agent-sdk {version('claude-agent-sdk')}"
    )
    figures = measure(config, say)
    rows = [
        *warm_rows(figures),
        *cold_rows(figures),
        *memory_rows(figures, config),
    ]
    print(
        f"load average (1 min): {load_before} at the start, {_load_average()} at the end "
        "(other processes' load makes absolute figures noisy)"
    )
    print(
        "CLI alone = the bundled binary run directly with the box's CLI's command line and"
        " environment, its own home and folder, fed the SDK's stream-json lines (initialize,"
        " then one user line a turn). RSS = VmRSS. The API double answers every request"
        f" at once with {ANSWER!r}."
    )
    for line in notes(figures):
        print(f"(info) {line}")
    print()
    print_table(rows)
    if args.json is not None:
        args.json.write_text(json.dumps(_as_json(config, figures, rows), indent=2) + "\n")
    say(f"done in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
