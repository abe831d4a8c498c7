"""Session benchmark: `ChatSession` turn overhead beside a bare send-and-await loop.

Run: `python bench/sessions.py [--quick] [--reps K]` from the repository root (or
anywhere). Every figure is measured on asyncio and on trio (`anyio.run` with
``backend=``), each beside its baseline measured in the same run, and printed in
one table. It is a report, not a test: it exits 0 when a target is missed and
says MISSED. `--quick` (500 turns, 10 senders × 10 messages, one repetition) is
the CI smoke configuration.

The engine is an *auto-answer* engine, defined here: a `ScriptedEngine` whose
runs answer every turn at once — each ``send`` queues one ``assistant`` message
and one ``result`` — so nothing drives the session but the benchmark's own
calls. Stores are the in-memory ones (`beebox_impl.store.memory`): the SQLite
store's fsync would dominate every figure and is measured elsewhere.

What is measured:

1. Sequential turns. Ours: ``await session.send(text)``, then read the session's
   events until the turn's `Done`, then the next send. Baseline ("bare loop"):
   the same engine, the run started once, then per turn ``await run.send(text)``
   and read raw messages until the ``result`` — no lifecycle, no events, no
   message adaptation. Best of K repetitions, after a short untimed warm-up.
2. Concurrent senders. S tasks each send M messages, each one `send` if the
   session accepts it, else queued (`send_or_enqueue`, as the HTTP route does); the clock stops
   when every text has reached the engine (the texts of the runs' turns, split on
   ``"\\n\\n"``). Baseline: the bare loop sending the same S × M texts, one turn
   each. The texts the engine got are then checked: none lost, none duplicated.
3. RSS growth. VmRSS (``/proc/self/status``, after `gc.collect`) after the timed
   turns of (1) minus before them, per 1,000 turns; the smallest over the
   repetitions. The auto-answer run keeps no record of its turns there, so any
   growth is the session's (or the loop's). RSS moves in pages and allocator
   arenas: a few KiB per 1,000 turns is noise, a leak shows as steady growth.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal, TypeAlias

import anyio
from anyio.lowlevel import checkpoint
from report import print_table

from beebox_impl.engine.messages import assistant_message, init_message, result_message
from beebox_impl.engine.protocol import StartOptions, TurnContent
from beebox_impl.engine.scripted import ScriptedEngine, ScriptedRun
from beebox_impl.session.chat import QUEUE_SEPARATOR, ChatSession
from beebox_impl.session.chat_events import Done
from beebox_impl.store.memory import InMemoryQueueStore, InMemorySessionIdStore

BACKENDS: Final = ("asyncio", "trio")
SESSION_ID: Final = "bench-session"
WARMUP_TURNS: Final = 200
QUEUE_TIMEOUT_S: Final = 120.0

# Targets.
SESSION_VS_BARE: Final = 3.0  # session time per turn at most this many bare-loop times
QUEUE_VS_BARE: Final = 3.0  # same, for the concurrent senders' messages
RSS_KIB_PER_1000: Final = 16.0  # "no growth": at most this (noise) per 1,000 turns

Status: TypeAlias = Literal["ok", "MISSED", "WRONG", "ERROR"]


@dataclass(frozen=True)
class Config:
    """One benchmark configuration."""

    name: str
    turns: int
    senders: int
    messages: int  # per sender
    reps: int


FULL: Final = Config("full", turns=10_000, senders=100, messages=100, reps=5)
QUICK: Final = Config("quick", turns=500, senders=10, messages=10, reps=1)


# ---------------------------------------------------------------------------------
# The auto-answer engine
# ---------------------------------------------------------------------------------


class AutoAnswerRun(ScriptedRun):
    """A `ScriptedRun` that answers each turn at once: one ``assistant``, one ``result``.

    It emits ``system/init`` when it starts. With ``keep_sent`` false it records no
    turn (only counts), so a long run's memory is the session's, not the engine's.
    """

    def __init__(self, options: StartOptions, engine: AutoAnswerEngine) -> None:
        super().__init__(options)
        self._engine = engine
        self._answers = 0
        self.emit_nowait(init_message(SESSION_ID))

    async def send(self, content: TurnContent) -> None:
        """Record (or count) the turn and queue its answer."""
        await checkpoint()
        if self.ended:
            raise anyio.ClosedResourceError
        if self._engine.keep_sent:
            self.sent.append(content)
        self._engine.turn_sent(content)
        self._answers += 1
        ordinal = self._answers
        self.emit_nowait(
            assistant_message(
                "ok",
                session_id=SESSION_ID,
                uuid=f"a-{ordinal}",
                message_id=f"msg-{ordinal}",
                model="auto",
                stop_reason="end_turn",
            )
        )
        self.emit_nowait(result_message(session_id=SESSION_ID, uuid=f"r-{ordinal}"))


class AutoAnswerEngine(ScriptedEngine):
    """A `ScriptedEngine` that accepts every start with an `AutoAnswerRun`.

    ``texts_sent`` counts the texts of every turn (split on the queue separator);
    `expect_texts` gives an event set once that count reaches a number.
    """

    def __init__(self, *, keep_sent: bool) -> None:
        super().__init__(start_mode="accept")
        self.keep_sent = keep_sent
        self.texts_sent = 0
        self._target: int | None = None
        self._reached: anyio.Event | None = None

    def _new_run(self, options: StartOptions) -> ScriptedRun:
        run = AutoAnswerRun(options, self)
        self.runs.append(run)
        return run

    def turn_sent(self, content: TurnContent) -> None:
        if isinstance(content, str):
            self.texts_sent += len(content.split(QUEUE_SEPARATOR))
        target, reached = self._target, self._reached
        if target is not None and reached is not None and self.texts_sent >= target:
            reached.set()

    def expect_texts(self, count: int) -> anyio.Event:
        self._target = count
        self._reached = anyio.Event()
        if self.texts_sent >= count:
            self._reached.set()
        return self._reached

    def sent_texts(self) -> list[str]:
        """Every text the runs got, in order (needs ``keep_sent``)."""
        texts: list[str] = []
        for run in self.runs:
            for content in run.sent:
                assert isinstance(content, str)
                texts.extend(content.split(QUEUE_SEPARATOR))
        return texts


def _options(box_root: Path) -> StartOptions:
    return StartOptions(cwd=box_root, resume_session_id=None, model=None)


# ---------------------------------------------------------------------------------
# Measurements (each one an async function run under anyio.run)
# ---------------------------------------------------------------------------------


def _rss_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


@dataclass
class Timed:
    """Seconds for one timed stretch, and the RSS growth over it."""

    seconds: float
    rss_kib: int


async def _bare_turns(box_root: Path, texts: list[str], warmup: int) -> Timed:
    engine = AutoAnswerEngine(keep_sent=False)
    run = await engine.start(_options(box_root))
    stream = run.messages()

    async def turn(text: str) -> None:
        await run.send(text)
        while True:
            raw = await anext(stream)
            if raw["type"] == "result":
                return

    for index in range(warmup):
        await turn(f"warm-up {index}")
    gc.collect()
    before = _rss_kib()
    started = time.perf_counter()
    for text in texts:
        await turn(text)
    seconds = time.perf_counter() - started
    gc.collect()
    growth = _rss_kib() - before
    await run.close()
    return Timed(seconds, growth)


async def _session_turns(box_root: Path, texts: list[str], warmup: int) -> Timed:
    engine = AutoAnswerEngine(keep_sent=False)
    async with ChatSession.open(
        engine=engine,
        box_root=box_root,
        queue_store=InMemoryQueueStore(),
        session_id_store=InMemorySessionIdStore(),
    ) as session:
        with session.subscribe() as events:

            async def turn(text: str) -> None:
                if not await session.send(text):
                    raise RuntimeError(f"the session refused a turn in {session.phase}")
                # As the SSE route listens: one wake-up per batch of waiting events.
                while True:
                    for event in await events.receive_batch():
                        if isinstance(event, Done):
                            return

            for index in range(warmup):
                await turn(f"warm-up {index}")
            gc.collect()
            before = _rss_kib()
            started = time.perf_counter()
            for text in texts:
                await turn(text)
            seconds = time.perf_counter() - started
            gc.collect()
            growth = _rss_kib() - before
    if engine.texts_sent != warmup + len(texts):
        raise RuntimeError(f"{engine.texts_sent} texts reached the engine")
    return Timed(seconds, growth)


@dataclass
class QueueOutcome:
    seconds: float
    lost: int
    duplicated: int
    turns: int  # turns the engine got for the texts


async def _session_queue(box_root: Path, senders: int, messages: int) -> QueueOutcome:
    engine = AutoAnswerEngine(keep_sent=True)
    expected = [f"s{sender}-m{index}" for sender in range(senders) for index in range(messages)]
    reached = engine.expect_texts(len(expected))
    async with ChatSession.open(
        engine=engine,
        box_root=box_root,
        queue_store=InMemoryQueueStore(),
        session_id_store=InMemorySessionIdStore(),
    ) as session:

        async def sender(number: int) -> None:
            for index in range(messages):
                text = f"s{number}-m{index}"
                # As the HTTP route does: a turn if the session takes it, else queued.
                await session.send_or_enqueue(text)

        gc.collect()
        started = time.perf_counter()
        with anyio.fail_after(QUEUE_TIMEOUT_S):
            async with anyio.create_task_group() as group:
                for number in range(senders):
                    group.start_soon(sender, number)
            await reached.wait()
        seconds = time.perf_counter() - started
    got = Counter(engine.sent_texts())
    want = Counter(expected)
    lost = sum((want - got).values())
    duplicated = sum((got - want).values())
    turns = sum(len(run.sent) for run in engine.runs)
    return QueueOutcome(seconds, lost, duplicated, turns)


async def _bare_queue(box_root: Path, senders: int, messages: int) -> float:
    texts = [f"s{sender}-m{index}" for sender in range(senders) for index in range(messages)]
    gc.collect()
    return (await _bare_turns(box_root, texts, 0)).seconds


@dataclass
class BackendFigures:
    """Everything measured on one backend (best / smallest over the repetitions)."""

    backend: str
    session_turns: list[Timed] = field(default_factory=list)
    bare_turns: list[Timed] = field(default_factory=list)
    session_queue: list[QueueOutcome] = field(default_factory=list)
    bare_queue: list[float] = field(default_factory=list)
    error: str | None = None


def measure_backend(backend: str, config: Config, box_root: Path) -> BackendFigures:
    figures = BackendFigures(backend)
    texts = [f"turn {index}" for index in range(config.turns)]
    warmup = min(WARMUP_TURNS, config.turns)

    def run(call: Callable[[], Awaitable[object]]) -> object:
        return anyio.run(call, backend=backend)

    try:
        for _rep in range(config.reps):
            # Interleaved, baseline first, so drift in the machine's load hits both.
            bare = run(lambda: _bare_turns(box_root, texts, warmup))
            assert isinstance(bare, Timed)
            figures.bare_turns.append(bare)
            ours = run(lambda: _session_turns(box_root, texts, warmup))
            assert isinstance(ours, Timed)
            figures.session_turns.append(ours)
            bare_q = run(lambda: _bare_queue(box_root, config.senders, config.messages))
            assert isinstance(bare_q, float)
            figures.bare_queue.append(bare_q)
            ours_q = run(lambda: _session_queue(box_root, config.senders, config.messages))
            assert isinstance(ours_q, QueueOutcome)
            figures.session_queue.append(ours_q)
    except Exception as error:  # a report, not a test: say what broke
        figures.error = f"{type(error).__name__}: {error}"
    return figures


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


def _rate(count: int, seconds: float) -> str:
    return f"{count / seconds:,.0f}/s"


def _per_1000(kib: int, turns: int) -> float:
    return kib * 1000 / turns


def build_rows(figures: BackendFigures, config: Config) -> list[Row]:
    name = figures.backend
    rows: list[Row] = []
    if figures.error is not None or not figures.session_turns or not figures.session_queue:
        why = figures.error or "nothing measured"
        return [Row(f"{name}: every measure", "—", "—", "—", why, "ERROR")]
    turns = config.turns
    ours = min(t.seconds for t in figures.session_turns)
    bare = min(t.seconds for t in figures.bare_turns)
    times = ours / bare
    rows.append(
        Row(
            f"{name}: sequential sends ({turns:,} turns)",
            f"{_rate(turns, ours)} ({ours / turns * 1e6:.1f} µs/turn)",
            f"bare loop {_rate(turns, bare)} ({bare / turns * 1e6:.1f} µs/turn)",
            f"{times:.2f}× bare time",
            f"≤ {SESSION_VS_BARE:.0f}× bare",
            "ok" if times <= SESSION_VS_BARE else "MISSED",
        )
    )
    count = config.senders * config.messages
    best_q = min(figures.session_queue, key=lambda q: q.seconds)
    bare_q = min(figures.bare_queue)
    times_q = best_q.seconds / bare_q
    rows.append(
        Row(
            f"{name}: {config.senders} concurrent senders × {config.messages}",
            f"{_rate(count, best_q.seconds)} msgs ({best_q.turns:,} turns)",
            f"bare loop {_rate(count, bare_q)} msgs ({count:,} turns)",
            f"{times_q:.2f}× bare time",
            f"≤ {QUEUE_VS_BARE:.0f}× bare",
            "ok" if times_q <= QUEUE_VS_BARE else "MISSED",
        )
    )
    lost = max(q.lost for q in figures.session_queue)
    duplicated = max(q.duplicated for q in figures.session_queue)
    rows.append(
        Row(
            f"{name}: concurrent senders, delivery",
            f"{lost} lost, {duplicated} duplicated",
            "—",
            "—",
            "0 lost, 0 duplicated",
            "ok" if lost == 0 and duplicated == 0 else "WRONG",
        )
    )
    rss_ours = min(t.rss_kib for t in figures.session_turns)
    rss_bare = min(t.rss_kib for t in figures.bare_turns)
    per_ours = _per_1000(rss_ours, turns)
    per_bare = _per_1000(rss_bare, turns)
    rows.append(
        Row(
            f"{name}: RSS growth over {turns:,} turns",
            f"{rss_ours:+,} KiB ({per_ours:+.1f} KiB/1k turns)",
            f"bare loop {rss_bare:+,} KiB ({per_bare:+.1f} KiB/1k turns)",
            f"{per_ours - per_bare:+.1f} KiB/1k vs bare",
            f"≤ {RSS_KIB_PER_1000:.0f} KiB/1k turns",
            "ok" if per_ours <= RSS_KIB_PER_1000 else "MISSED",
        )
    )
    return rows


def _load_average() -> str:
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "?"


def main(argv: list[str] | None = None) -> int:
    """Measure on both backends, print; exit 0 whatever the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small configuration for CI smoke")
    parser.add_argument("--reps", type=int, default=None, help="repetitions per measure")
    args = parser.parse_args(argv)
    config = QUICK if args.quick else FULL
    config = dataclasses.replace(config, reps=args.reps or config.reps)
    started = time.perf_counter()

    def say(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f} s] {message}", file=sys.stderr, flush=True)

    load_before = _load_average()
    print(
        f"beebox session benchmark ({config.name}): auto-answer scripted engine, in-memory "
        f"stores; {config.turns:,} sequential turns, {config.senders} senders × "
        f"{config.messages} messages; best of {config.reps} (interleaved with the baseline)"
    )
    print(
        f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs; "
        f"backends: {', '.join(BACKENDS)}"
    )
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="beebox-bench-") as tmp:
        for backend in BACKENDS:
            say(f"measuring on {backend} …")
            rows.extend(build_rows(measure_backend(backend, config, Path(tmp)), config))
    print(
        f"load average (1 min): {load_before} at the start, {_load_average()} at the end "
        "(other processes' load makes absolute figures noisy)"
    )
    print(
        "bare loop = start the run once, then per turn `await run.send(text)` and read raw "
        "messages until `result` (no lifecycle, events or message adaptation). RSS = VmRSS "
        "after gc.collect, after the timed turns minus before (smallest over repetitions)."
    )
    print()
    # Every row here has a target: none is a figure only.
    print_table(rows, unjudged=())
    say(f"done in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
