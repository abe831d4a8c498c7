"""`TrioWakeup`: the mailbox's wake-up on trio (`beebox_impl.engine.mailbox`).

A module of its own so that only a box running on trio imports trio: it is not a
dependency of the box.
"""

from __future__ import annotations

import trio

__all__ = ["TrioWakeup"]


class TrioWakeup:
    """A one-shot wake-up for one waiting task: it parks, and `set` reschedules it.

    What `trio.Event` comes down to for a single waiter, without its parking lot:
    a session's turn waits on two of these (its pump, and each listener), and the
    lot was about 2% of a turn's instructions on trio (`bench/sessions.py`'s loop,
    counted by callgrind). A cancelled waiter unparks itself; a later `set` finds
    no one to wake. Setting twice is harmless.
    """

    __slots__ = ("_waiter",)

    def __init__(self) -> None:
        self._waiter: trio.lowlevel.Task | None = None

    async def wait(self) -> None:
        self._waiter = trio.lowlevel.current_task()
        await trio.lowlevel.wait_task_rescheduled(self._abort)

    def _abort(self, _raise_cancel: object) -> trio.lowlevel.Abort:
        self._waiter = None
        return trio.lowlevel.Abort.SUCCEEDED

    def set(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None:
            trio.lowlevel.reschedule(waiter)
