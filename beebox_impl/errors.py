"""The implementation's own branches of the error tree (`beebox_spec.errors` has its root).

Everything here is a `BeeboxError`: a host catches it all with one clause, and
`InvariantError` (a bug) stays outside. The branch a host is most likely to handle
on its own is a box's state:

- `NotABox`: the folder holds no box (and the caller asked not to make one).
- `BoxInUse`: another `Box`, in this process or another, holds the folder (one box
  folder is one open `Box` at a time); `holder` says who, when known.
- `BoxClosed`: a method of a `Box` called after its ``async with`` block ended.
- `SchemaTooNew`: the box's database was written by a newer beebox.

Rejections of outside input (`beebox_spec.errors.Rejection`) live beside the rule
that refuses them; `beebox_impl.errors` only gathers the names a host imports
(`beebox_impl` itself re-exports every public one).
"""

from __future__ import annotations

from beebox_spec.errors import BeeboxError

__all__ = ["BoxClosed", "BoxInUse", "BoxStateError", "NotABox", "SchemaTooNew", "WrongThread"]


class BoxStateError(BeeboxError):
    """The box, or its folder, is not in a state to do what was asked."""


class NotABox(BoxStateError):
    """The folder holds no box (or a damaged one: the message says what to do)."""


class BoxInUse(BoxStateError):
    """Another holder has the box's folder; ``holder`` says who, when it is known."""

    def __init__(self, message: str, holder: str | None = None) -> None:
        super().__init__(message)
        self.holder = holder


class BoxClosed(BoxStateError):
    """The box was closed: its ``async with Box.open(…)`` block has ended."""


class SchemaTooNew(BoxStateError):
    """The database was written by a newer beebox: its schema version is past ours."""


class WrongThread(BeeboxError, RuntimeError):
    """A blocking method called on the event loop's own thread, where it would stall
    every task of the box (the message names the awaitable to use instead)."""


def error_tree() -> str:
    """The public error classes (`beebox_impl.__all__`) as a tree under their roots,
    each rejection with its ``status_hint``: ``python -m beebox_impl.errors``."""
    import beebox_impl  # noqa: PLC0415 - the package's names, loaded on first use

    public = {
        value
        for name in beebox_impl.__all__
        if isinstance(value := getattr(beebox_impl, name), type)
        and issubclass(value, BaseException)
    }

    def parent(error: type[BaseException]) -> type[BaseException] | None:
        # The nearest public class it derives from (its first such base, in MRO order).
        return next((base for base in error.__mro__[1:] if base in public), None)

    children: dict[type[BaseException] | None, list[type[BaseException]]] = {}
    for error in public:
        children.setdefault(parent(error), []).append(error)
    lines: list[str] = []

    def draw(error: type[BaseException], prefix: str, last: bool, depth: int) -> None:
        hint = getattr(error, "status_hint", None)
        label = error.__name__ + (f" ({hint})" if isinstance(hint, int) else "")
        lines.append(label if depth == 0 else f"{prefix}{'└── ' if last else '├── '}{label}")
        below = sorted(children.get(error, []), key=lambda child: child.__name__)
        inner = "" if depth == 0 else prefix + ("    " if last else "│   ")
        for position, child in enumerate(below):
            draw(child, inner, position == len(below) - 1, depth + 1)

    for root in sorted(children.get(None, []), key=lambda root: root.__name__):
        draw(root, "", True, 0)
    return "\n".join(lines)


if __name__ == "__main__":
    print(error_tree())
