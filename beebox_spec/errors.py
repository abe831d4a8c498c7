"""The two kinds of failure the specification distinguishes.

Spec sources: `chat-session-lifecycle.md` ("throws an `InvariantError` on an illegal
move (a caller bug over internal state — not a degradable condition)") and
`original-facts.md` §1.4 (every malformed media reference is one rejection).

- A **rejection** is an expected answer to bad input from outside the box: a
  malformed media reference, a send to a busy thread. Callers handle it; the HTTP
  adapter turns it into a 4xx. Every rejection is a `SpecRejection`.
- An **invariant failure** is a bug in the caller: an illegal lifecycle move over
  the box's own internal state. It is never degraded into a status code; it is
  raised as `InvariantError` so the bug is seen.

Both derive from `BeeboxError`, so a host can catch everything the library raises
on purpose with one clause.
"""

from __future__ import annotations

__all__ = [
    "BeeboxError",
    "InvariantError",
    "SpecRejection",
]


class BeeboxError(Exception):
    """Base class of every error beebox raises on purpose."""


class SpecRejection(BeeboxError):
    """Expected rejection of input from outside the box (bad reference, busy session)."""


class InvariantError(BeeboxError):
    """A caller broke an invariant of internal state (for example an illegal phase move)."""
