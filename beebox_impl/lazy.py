"""Names a package offers, imported from their modules only when first asked for.

PEP 562's module ``__getattr__``: a package can list its public names (`__all__`,
and the imports type checkers read under `TYPE_CHECKING`) without importing what
they live in, so a command that needs one submodule does not pay for the others
(`bbx chat history` does not import the box, its server or its engines).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    package: str, namespace: dict[str, Any], homes: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` for ``homes`` (name → its module):
    a name is imported on first use and kept in ``namespace`` (the package's globals),
    so the next lookup does not come here."""

    def getattr_(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *homes})

    return getattr_, dir_
