"""What beebox raises on purpose, and the one kind of failure that is a bug.

Spec sources: `docs/sources.md#lifecycle-phases` ("Phases": `nextLifecycle` throws
an `InvariantError` on an illegal move, a caller bug over internal state, not a
condition to degrade around) and `docs/sources.md#facts-1-4` (§1.4: every malformed
media reference is one rejection).

- Everything beebox raises on purpose derives from `BeeboxError`, so a host catches
  all of it with one clause (`beebox_impl.errors` adds the implementation's own
  branches: a box's state, an engine that would not start, a settings file).
- A **rejection** (`Rejection`) is the expected answer to bad input from outside
  the box: a malformed media reference, a send to a busy thread, a request body
  that is not an answer. Callers handle it. Each carries `status_hint`, the HTTP
  status an adapter should answer with it (h11's `error_status_hint`, for the same
  reason: the rule that refuses the input knows what kind of refusal it is, so the
  adapter converts every rejection in one place instead of deciding per route).
  Only the status is a hint; the message is for logs and for the person.
- A caller's argument outside its range (a capacity of 0, a negative timeout) is an
  `InvalidArgument`: raised on purpose, and a `ValueError` too, as Python's own
  functions raise.
- An **invariant failure** (`InvariantError`) is a bug: an illegal lifecycle move
  over the box's own internal state. It is deliberately *not* a `BeeboxError`: a
  host's ``except BeeboxError`` that turns errors into answers must not turn a bug
  into a status code and carry on. It propagates, and the bug is seen.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "BeeboxError",
    "InvalidArgument",
    "InvariantError",
    "Rejection",
]


class BeeboxError(Exception):
    """Base class of every error beebox raises on purpose."""


class Rejection(BeeboxError):
    """Input from outside the box refused; `status_hint` is the HTTP status for it, and
    `public_message` what may be said to whoever sent the input."""

    # The status an HTTP adapter answers this rejection with (a subclass says which).
    status_hint: ClassVar[int] = 400

    @property
    def public_message(self) -> str:
        """The refusal as said to the sender: the message, unless the subclass keeps
        its details for logs (a prober learns nothing from them)."""
        return str(self)


class InvalidArgument(BeeboxError, ValueError):
    """A caller's argument outside what the function accepts (a host's mistake)."""


class InvariantError(Exception):
    """A bug: an invariant of internal state was broken (for example an illegal phase
    move). Not a `BeeboxError`, on purpose: nothing should catch it as an answer."""
