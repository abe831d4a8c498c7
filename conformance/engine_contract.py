"""The engine contract (`beebox_impl.engine.protocol`) as clauses any engine is put through.

Vectors cannot pin an engine down: what a run says is the engine's own (a model's
answer, an echo). What every engine must do is the protocol's, and a session
relies on each point:

- ``start(options)`` returns an open run (``closed`` false) — or, when the
  engine cannot start, raises `EngineStartError`, the one error a session hears
  as a start failure;
- ``start``, ``send``, ``interrupt`` and ``close`` are checkpoints (async means
  it checkpoints): inside a cancelled scope each is cancelled, so a session's
  cancel scopes hold;
- ``messages()`` is an async iterator of raw SDK message objects (JSON objects
  with a string ``type``) that ends once the run is closed;
- ``interrupt()`` stops the turn in flight, not the run: the run stays open and
  takes the next turn;
- ``close()`` is idempotent, the message stream ends soon after it, and then
  ``closed`` is true;
- ``send`` after ``close`` raises `anyio.ClosedResourceError`, as every engine's
  ``send`` documents: a turn never vanishes silently.

Each clause runs on a fresh engine (``make_engine``) in a fresh box folder, and
must finish within ``timeout_seconds``: a start, send or stream end that never
comes is reported as the step it hung in, not waited for. Every run a clause
opened is closed afterwards, whatever the clause found.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import anyio

from beebox_impl.engine.protocol import Engine, EngineStartError, Run, StartOptions
from conformance.protocols import EngineFactory
from conformance.runner import CaseFailure, RunReport

__all__ = [
    "CONTRACT_SOURCE",
    "DEFAULT_TIMEOUT_SECONDS",
    "ENGINE_CONTRACT",
    "ContractBroken",
    "run_engine_contract",
]

# Where the contract is written; failure lines name it as the runner names a vector file.
CONTRACT_SOURCE: Final = Path("beebox_impl/engine/protocol.py")

# Long enough for a real engine's process to start and stop; a test engine needs none of it.
DEFAULT_TIMEOUT_SECONDS: Final = 10.0

_RUN_MEMBERS: Final = ("messages", "send", "interrupt", "close")


class ContractBroken(Exception):
    """What an engine did instead of what a clause requires."""


@dataclass
class _Trial:
    """One clause's engine maker, box folder, runs, and the step it is on."""

    make_engine: EngineFactory
    box_root: Path
    doing: str = "making the engine"
    runs: list[Run] = field(default_factory=list)

    def engine(self, *, start_fails: bool = False) -> Engine:
        self.doing = "making the engine"
        return self.make_engine(self.box_root, start_fails=start_fails)

    def options(self) -> StartOptions:
        return StartOptions(cwd=self.box_root)

    async def open_run(self) -> Run:
        engine = self.engine()
        self.doing = "starting a run"
        run = await engine.start(self.options())
        self.runs.append(run)
        return run

    async def close_all(self) -> None:
        for run in self.runs:
            # Clean-up, not a finding: a close that fails was (or will be) reported by its clause.
            with contextlib.suppress(Exception):
                await run.close()


async def _expect_checkpoint(call: Callable[[], Awaitable[object]], what: str) -> None:
    with anyio.CancelScope() as scope:
        scope.cancel()
        await call()
    if not scope.cancelled_caught:
        raise ContractBroken(
            f"{what} returned inside a cancelled scope: it never checkpoints, so a "
            "caller's cancellation (a stop, a timeout) cannot reach it"
        )


async def _drain(stream: AsyncIterator[object], received: list[object]) -> None:
    async for message in stream:
        received.append(message)


def _sole(error: Exception) -> Exception:
    # A task group wraps what its body raised; one error is reported as itself.
    while isinstance(error, ExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def _not_sdk_messages(received: list[object]) -> list[object]:
    return [m for m in received if not (isinstance(m, dict) and isinstance(m.get("type"), str))]


# --- The clauses -----------------------------------------------------------------------


async def _start_returns_an_open_run(trial: _Trial) -> None:
    run = await trial.open_run()
    missing = [name for name in _RUN_MEMBERS if not callable(getattr(run, name, None))]
    if missing:
        raise ContractBroken(f"the run has no {', '.join(missing)}")
    if run.closed is not False:
        raise ContractBroken(f"a new run reads closed={run.closed!r}, not False")


async def _start_is_a_checkpoint(trial: _Trial) -> None:
    engine = trial.engine()
    trial.doing = "starting a run in a cancelled scope"

    async def start() -> None:
        trial.runs.append(await engine.start(trial.options()))

    await _expect_checkpoint(start, "start()")


async def _a_failed_start_raises(trial: _Trial) -> None:
    engine = trial.engine(start_fails=True)
    trial.doing = "starting a run on an engine made to fail"
    try:
        run = await engine.start(trial.options())
    except EngineStartError:
        return
    except Exception as error:
        raise ContractBroken(
            f"start() raised {type(error).__name__}: {error}, not EngineStartError"
        ) from error
    trial.runs.append(run)
    raise ContractBroken("start() on an engine made to fail returned a run")


async def _messages_end_when_the_run_closes(trial: _Trial) -> None:
    run = await trial.open_run()
    trial.doing = "calling messages()"
    stream = run.messages()
    if not isinstance(stream, AsyncIterator):
        raise ContractBroken(f"messages() returned {type(stream).__name__}, not an async iterator")
    received: list[object] = []
    stream_ended = anyio.Event()
    stream_error: Exception | None = None

    async def read() -> None:
        nonlocal stream_error
        try:
            await _drain(stream, received)
        except Exception as error:  # reported below, as this clause's finding
            stream_error = error
        stream_ended.set()

    async with anyio.create_task_group() as task_group:
        task_group.start_soon(read)
        trial.doing = "sending a turn while the stream is read"
        await run.send("conformance check: a turn")
        trial.doing = "closing the run while the stream is read"
        await run.close()
        # The clause's deadline bounds this wait; a stream that never ends is reported as such.
        trial.doing = "waiting for the message stream to end after close()"
        await stream_ended.wait()
    if stream_error is not None:
        raise ContractBroken(
            f"the message stream raised {type(stream_error).__name__}: {stream_error} "
            "instead of ending"
        )
    strangers = _not_sdk_messages(received)
    if strangers:
        raise ContractBroken(f"messages() gave {strangers[0]!r}: not an SDK message object")
    if run.closed is not True:
        raise ContractBroken("closed is not True once the message stream has ended")


async def _send_is_a_checkpoint(trial: _Trial) -> None:
    run = await trial.open_run()
    trial.doing = "sending a turn in a cancelled scope"
    await _expect_checkpoint(lambda: run.send("conformance check: a cancelled turn"), "send()")


async def _interrupt_keeps_the_run_open(trial: _Trial) -> None:
    run = await trial.open_run()
    trial.doing = "sending a turn"
    await run.send("conformance check: a turn to interrupt")
    trial.doing = "interrupting in a cancelled scope"
    await _expect_checkpoint(run.interrupt, "interrupt()")
    trial.doing = "interrupting the turn in flight"
    await run.interrupt()
    if run.closed:
        raise ContractBroken(
            "the run closed on interrupt(): an interrupt ends the turn, not the run"
        )
    trial.doing = "sending a turn after the interrupt"
    try:
        await run.send("conformance check: the turn after an interrupt")
    except Exception as error:
        raise ContractBroken(
            f"send() after interrupt() raised {type(error).__name__}: {error}; "
            "the run must stay open"
        ) from error


async def _close_is_a_checkpoint(trial: _Trial) -> None:
    run = await trial.open_run()
    trial.doing = "closing the run in a cancelled scope"
    await _expect_checkpoint(run.close, "close()")


async def _close_is_idempotent(trial: _Trial) -> None:
    run = await trial.open_run()
    trial.doing = "sending a turn"
    await run.send("conformance check: a turn the close cuts short")
    trial.doing = "closing the run"
    await run.close()
    trial.doing = "closing the run a second time"
    try:
        await run.close()
    except Exception as error:
        raise ContractBroken(
            f"a second close() raised {type(error).__name__}: {error}; close must be idempotent"
        ) from error
    # The stream ends "soon after" close: read it to its end, then `closed` must say so.
    trial.doing = "reading the closed run's message stream to its end"
    await _drain(run.messages(), [])
    if run.closed is not True:
        raise ContractBroken("closed is not True after close() and the end of the stream")


async def _send_after_close_raises(trial: _Trial) -> None:
    run = await trial.open_run()
    trial.doing = "closing the run"
    await run.close()
    trial.doing = "sending a turn on the closed run"
    try:
        await run.send("conformance check: a turn too late")
    except anyio.ClosedResourceError:
        return
    except Exception as error:
        raise ContractBroken(
            f"send() after close() raised {type(error).__name__}: {error}, "
            "not anyio.ClosedResourceError"
        ) from error
    raise ContractBroken("send() after close() returned: the turn went nowhere, silently")


_Clause = Callable[[_Trial], Awaitable[None]]

ENGINE_CONTRACT: Final[tuple[tuple[str, _Clause], ...]] = (
    ("start returns an open run", _start_returns_an_open_run),
    ("start is a checkpoint", _start_is_a_checkpoint),
    ("a start that fails raises EngineStartError", _a_failed_start_raises),
    (
        "messages() is an async iterator that ends when the run closes",
        _messages_end_when_the_run_closes,
    ),
    ("send is a checkpoint", _send_is_a_checkpoint),
    ("interrupt is a checkpoint and keeps the run open", _interrupt_keeps_the_run_open),
    ("close is a checkpoint", _close_is_a_checkpoint),
    ("close is idempotent and sets closed", _close_is_idempotent),
    ("send after close raises anyio.ClosedResourceError", _send_after_close_raises),
)
"""Every clause, by the name its failure line gives it."""


async def _run_clause(make_engine: EngineFactory, clause: _Clause, timeout: float) -> str | None:
    """What the clause found wrong, or None."""
    with tempfile.TemporaryDirectory(prefix="bbx-engine-contract-") as folder:
        box_root = Path(folder) / "box"
        box_root.mkdir()
        trial = _Trial(make_engine, box_root)
        try:
            with anyio.move_on_after(timeout) as deadline:
                await clause(trial)
            if deadline.cancelled_caught:
                return f"hung for {timeout} s while {trial.doing}"
        except Exception as error:  # an engine's crash is its clause's failure, not the check's
            found = _sole(error)
            if isinstance(found, ContractBroken):
                return str(found)
            return f"raised {type(found).__name__} while {trial.doing}: {found}"
        finally:
            with anyio.move_on_after(timeout, shield=True):
                await trial.close_all()
    return None


async def run_engine_contract(
    make_engine: EngineFactory, *, timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
) -> RunReport:
    """Put engines from ``make_engine`` through every clause; one case a clause."""
    report = RunReport()
    for name, clause in ENGINE_CONTRACT:
        finding = await _run_clause(make_engine, clause, timeout_seconds)
        report.record(None if finding is None else CaseFailure(CONTRACT_SOURCE, name, finding))
    return report
