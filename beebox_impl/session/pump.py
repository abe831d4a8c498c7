"""`pump_chat_run`: the one loop that reads a run's messages into a session.

Spec sources: `docs/sources.md#facts-3-5` (§3.5, `pumpChatRun({run, adapt,
onMessage, onError, onClose})`) and §3.6 (`adaptSdkMessage`);
`docs/sources.md#lifecycle-shared-code` ("Shared code": both sessions share this
skeleton and the one adapter).

For each raw message of the run's stream, in order: adapt it with the one
`beebox_spec.sdk_messages.adapt_sdk_message`; a message that adapts to nothing
(a type every session ignores) is skipped; anything else is handed to
``on_message``, and the next message is not read until it returns — a session
handles its run's messages one at a time. A handler with I/O to do returns an
awaitable, which the pump awaits before the next message; one without returns
None (most messages of a turn: no coroutine made and run for each). A message
the adapter does not recognise arrives as the ``unknown`` sentinel: it is logged
and counted here (SDK drift is visible, never silent) and still handed on.

Messages that are already waiting when one has been handled are handled next
without a scheduling round each (a stream that can tell: `take_ready`), at most
`MAX_READY_MESSAGES` before the pump waits on the stream again, which always
yields. A turn's ``assistant`` and ``result`` usually arrive together: handled in
one round, the turn ends a round sooner. Each message is still taken only once
the previous one's ``on_message`` has returned, from the stream as it is then: a
run closed meanwhile has dropped what it held, and nothing more is taken.

When the stream raises, ``on_error`` hears the error. When the stream ends — on
its own, after an error, or because the session closed the run — ``on_close``
runs, exactly once. Cancellation is different: a pump cancelled because its
session is shutting down returns without ``on_close``, since there is no session
left to react to the run's end.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

import anyio

from beebox_impl.engine.protocol import Run
from beebox_spec.entries import JsonObject
from beebox_spec.sdk_messages import AdaptedMessage, adapt_sdk_message

__all__ = ["MAX_READY_MESSAGES", "PumpCounters", "pump_chat_run"]

_log = logging.getLogger(__name__)

# Handled in one scheduling round at most: a run that says a lot at once still
# lets the loop's other tasks (requests, listeners) in between batches.
MAX_READY_MESSAGES: Final = 32


@runtime_checkable
class _ReadyMessages(Protocol):
    """A message stream that can hand over what is already waiting (`PullIterator`)."""

    def take_ready(self) -> JsonObject | None: ...


@dataclass
class PumpCounters:
    """What a session's pumps have read: adapted messages, ignored ones, unknown ones."""

    delivered: int = 0
    ignored: int = 0
    unknown: int = 0


async def pump_chat_run(
    run: Run,
    *,
    on_message: Callable[[AdaptedMessage], Awaitable[None] | None],
    on_close: Callable[[], Awaitable[None]],
    on_error: Callable[[Exception], Awaitable[None]] | None = None,
    counters: PumpCounters | None = None,
) -> None:
    """Read ``run``'s messages into ``on_message`` until its stream ends, then ``on_close``."""
    counts = counters if counters is not None else PumpCounters()
    stream = run.messages()
    take_ready = stream.take_ready if isinstance(stream, _ReadyMessages) else None
    try:
        while True:
            try:
                raw: JsonObject | None = await anext(stream)
            except StopAsyncIteration:
                break
            except Exception as error:
                # The stream broke; the run is over either way, so the close below still runs.
                _log.warning("a chat run's message stream failed: %r", error)
                if on_error is not None:
                    await on_error(error)
                break
            # This message, then those already waiting, up to a round's worth.
            handled = 0
            while raw is not None:
                message = adapt_sdk_message(raw)
                if message is None:
                    counts.ignored += 1
                else:
                    if message["type"] == "unknown":
                        counts.unknown += 1
                        _log.warning(
                            "unknown SDK message (%d so far): type=%r",
                            counts.unknown,
                            raw.get("type"),
                        )
                    counts.delivered += 1
                    # An error raised here is the session's own bug: it propagates.
                    pending = on_message(message)
                    if pending is not None:
                        await pending
                handled += 1
                if take_ready is None or handled == MAX_READY_MESSAGES:
                    break
                raw = take_ready()
    finally:
        # An async generator left open warns at collection; close it with the pump.
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            with anyio.CancelScope(shield=True):
                await aclose()
    await on_close()
