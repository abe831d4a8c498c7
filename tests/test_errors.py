"""The error tree: everything raised on purpose is a `BeeboxError`, and a bug is not.

A host catches everything beebox raises on purpose with one ``except BeeboxError``
(`beebox_spec.errors`), and never catches a bug that way: `InvariantError` stays
outside. This walks every ``raise`` in `beebox_impl` and `beebox_spec`, resolves
what it raises, and holds it to that — with the few exceptions a Python protocol
requires, each listed with why.
"""

from __future__ import annotations

import argparse
import ast
import importlib
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from beebox_spec.errors import BeeboxError, InvariantError, Rejection

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("beebox_impl", "beebox_spec")

# Raised because a protocol beebox implements says so, not as beebox's own answer.
PROTOCOL_EXCEPTIONS: dict[type[BaseException], str] = {
    StopAsyncIteration: "an async iterator's end (the iteration protocol)",
    anyio.ClosedResourceError: "anyio's object stream protocol (the engines' mailboxes)",
    anyio.EndOfStream: "anyio's object stream protocol (the engines' mailboxes)",
    anyio.WouldBlock: "anyio's object stream protocol (the engines' mailboxes)",
    argparse.ArgumentTypeError: "argparse's refusal of an option's value (printed as usage)",
    TimeoutError: "the HTTP handler's own socket deadline, caught by the handler",
    ConnectionError: "the HTTP handler's own dropped connection, caught by the handler",
    AssertionError: "beebox_impl.testing's failed expectation (a test helper)",
}
# Built-in exceptions a module raises as the protocol of the type it implements.
PROTOCOL_IN_MODULE: dict[tuple[str, type[BaseException]], str] = {
    ("beebox_impl.transcript.chunked", IndexError): "ChunkedIntArray is a Sequence",
    ("beebox_impl.transcript.chunked", ValueError): "Sequence.index of a missing value",
    ("beebox_impl.lazy", AttributeError): "a module __getattr__ of a name it has not (PEP 562)",
}
# Raises of a value caught or made just before (a re-raise keeps the caught error's type).
RERAISES = {"error", "failure", "refusal", "self.error", "sole", "type(error)"}


@dataclass(frozen=True)
class Raise:
    module: str
    line: int
    expression: str
    raised: object


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def every_raise() -> list[Raise]:
    found: list[Raise] = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = module_name(path)
            if name.endswith("__main__"):
                continue
            module = importlib.import_module(name)
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.Raise) or node.exc is None:
                    continue
                target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                expression = ast.unparse(target)
                if expression in RERAISES:
                    continue
                if isinstance(target, ast.Name | ast.Attribute) and expression != "where.error":
                    raised = eval(expression, vars(module))
                else:
                    raised = expression
                found.append(Raise(name, node.lineno, expression, raised))
    return found


RAISES = every_raise()


def test_the_walk_finds_the_raises() -> None:
    assert len(RAISES) > 150
    assert any(found.raised is InvariantError for found in RAISES)


@pytest.mark.parametrize("found", RAISES, ids=lambda found: f"{found.module}:{found.line}")
def test_everything_raised_on_purpose_is_a_beebox_error(found: Raise) -> None:
    if found.expression == "where.error":
        # `settings._Where.error` builds the settings file's refusal.
        return
    raised = found.raised
    assert isinstance(raised, type), f"{found.expression} is not a class"
    assert issubclass(raised, BaseException)
    if issubclass(raised, BeeboxError | InvariantError):
        return
    allowed = PROTOCOL_EXCEPTIONS.get(raised) or PROTOCOL_IN_MODULE.get((found.module, raised))
    assert allowed, (
        f"{found.module}:{found.line} raises {raised.__name__}, not a BeeboxError "
        "(or an InvariantError, for a bug)"
    )


def test_a_bug_is_not_caught_as_an_answer() -> None:
    assert not issubclass(InvariantError, BeeboxError)


def public_error_classes() -> list[type[BaseException]]:
    import beebox_impl  # noqa: PLC0415 - the public namespace, read lazily

    return [
        value
        for name in beebox_impl.__all__
        if isinstance(value := getattr(beebox_impl, name), type)
        and issubclass(value, BaseException)
    ]


def test_every_rejection_hints_a_client_error_status() -> None:
    rejections = [error for error in public_error_classes() if issubclass(error, Rejection)]
    assert rejections
    for rejection in rejections:
        assert 400 <= rejection.status_hint < 500, rejection
