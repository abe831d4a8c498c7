"""What the conformance runner can run vectors against.

A target maps each vector `kind` to a handler: a function from the case's `input`
(JSON, macros already expanded) to the value compared with the case's `expect`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

__all__ = ["Handler", "HandlerTable"]

# Vector inputs are untyped JSON by nature; each handler narrows what it reads.
Handler: TypeAlias = Callable[[Any], Any]
HandlerTable: TypeAlias = Mapping[str, Handler]
