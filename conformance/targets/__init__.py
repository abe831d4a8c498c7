"""What the conformance runner can run vectors against.

A target maps each vector `kind` to a handler: a function from the case's `input`
(JSON, macros already expanded) to the value compared with the case's `expect`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

__all__ = ["KNOWN_KINDS", "Handler", "HandlerTable"]

# Vector inputs are untyped JSON by nature; each handler narrows what it reads.
Handler: TypeAlias = Callable[[Any], Any]
HandlerTable: TypeAlias = Mapping[str, Handler]

# Every kind of the table in `docs/conformance.md`. A file of another kind fails the run;
# a known kind that a target does not answer (yet) is reported as skipped for that target.
KNOWN_KINDS: frozenset[str] = frozenset(
    {
        "lifecycle/transition",
        "lifecycle/flags",
        "media-ref/parse",
        "media-ref/encode",
        "transcript/read-lines",
        "transcript/entries",
        "content/transform",
        "media/find-line",
        "media/extract",
        "reconcile/pending",
        "reconcile/merge-accepted",
        "journal/prefix-hash",
        "journal/resolve-span",
        "review/elide-middle",
        "review/title-owner",
        "review/leak-scan",
        "session/scenario",
        "http/exchange",
    }
)
