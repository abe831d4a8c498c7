"""Reading conformance vector files: the file shape, the macros, and JSON equality.

The format is `docs/conformance.md`'s: a file is ``{"kind", "description", "cases":
[{"name", "input", "expect"}]}``; three macros keep big payloads out of the files
and are expanded anywhere inside a case's ``input`` before it runs:

- ``{"$repeat": "QUJD", "times": 100000}`` — the string repeated;
- ``{"$concat": ["a", {"$repeat": "b", "times": 3}]}`` — strings joined;
- ``{"$json": VALUE}`` — VALUE serialised compactly, as Claude Code writes a
  transcript line (``separators=(",", ":")``, ``ensure_ascii=False``).

A macro is an object whose only keys are the macro's own; any other object is data.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "VectorCase",
    "VectorFile",
    "VectorFileError",
    "expand_macros",
    "first_difference",
    "json_equal",
    "load_vector_file",
]


class VectorFileError(Exception):
    """A vector file that cannot be read as the format says."""


@dataclass(frozen=True)
class VectorCase:
    """One case: its name, its input (macros expanded) and the expected value."""

    name: str
    input: Any
    expect: Any


@dataclass(frozen=True)
class VectorFile:
    """One vector file: its kind, what it pins down, and its cases."""

    path: Path
    kind: str
    description: str
    cases: tuple[VectorCase, ...]


def expand_macros(value: Any) -> Any:
    """Expand ``$repeat``, ``$concat`` and ``$json`` anywhere inside ``value``."""
    if isinstance(value, list):
        return [expand_macros(item) for item in value]
    if not isinstance(value, dict):
        return value
    keys = set(value)
    if keys == {"$repeat", "times"}:
        text, times = value["$repeat"], value["times"]
        if not isinstance(text, str) or not isinstance(times, int) or isinstance(times, bool):
            raise VectorFileError(f"$repeat needs a string and an integer times, got {value!r}")
        if times < 0:
            raise VectorFileError(f"$repeat times must not be negative, got {times}")
        return text * times
    if keys == {"$concat"}:
        parts = value["$concat"]
        if not isinstance(parts, list):
            raise VectorFileError(f"$concat needs a list, got {parts!r}")
        expanded = [expand_macros(part) for part in parts]
        if not all(isinstance(part, str) for part in expanded):
            raise VectorFileError("$concat parts must all be (or expand to) strings")
        return "".join(expanded)
    if keys == {"$json"}:
        return json.dumps(expand_macros(value["$json"]), separators=(",", ":"), ensure_ascii=False)
    return {key: expand_macros(item) for key, item in value.items()}


def _reject_constant(name: str) -> Any:
    raise VectorFileError(f"{name} is not JSON")


def load_vector_file(path: Path) -> VectorFile:
    """Read and check one vector file; raise `VectorFileError` saying what is wrong."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"), parse_constant=_reject_constant)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise VectorFileError(f"cannot read: {error}") from error
    if not isinstance(raw, dict):
        raise VectorFileError("a vector file must be a JSON object")
    kind, description, cases = raw.get("kind"), raw.get("description", ""), raw.get("cases")
    if not isinstance(kind, str) or not kind:
        raise VectorFileError('"kind" must be a non-empty string')
    if not isinstance(description, str):
        raise VectorFileError('"description" must be a string')
    if not isinstance(cases, list):
        raise VectorFileError('"cases" must be a list')
    loaded: list[VectorCase] = []
    seen: set[str] = set()
    for number, case in enumerate(cases, start=1):
        if not isinstance(case, dict) or "input" not in case or "expect" not in case:
            raise VectorFileError(f"case {number} must be an object with input and expect")
        name = case.get("name")
        if not isinstance(name, str) or not name:
            raise VectorFileError(f"case {number} needs a non-empty name")
        if name in seen:
            raise VectorFileError(f"two cases are named {name!r}")
        seen.add(name)
        loaded.append(VectorCase(name, expand_macros(case["input"]), case["expect"]))
    return VectorFile(path, kind, description, tuple(loaded))


def json_equal(left: Any, right: Any) -> bool:
    """Exact JSON equality: ``true`` is not ``1``, key order does not matter."""
    return first_difference(left, right) is None


def first_difference(expected: Any, got: Any, where: str = "$") -> str | None:
    """The path of the first place where two JSON values differ, or ``None``."""
    if isinstance(expected, bool) or isinstance(got, bool):
        return None if type(expected) is type(got) and expected == got else where
    if isinstance(expected, int | float) and isinstance(got, int | float):
        same = expected == got or (
            isinstance(expected, float)
            and isinstance(got, float)
            and math.isnan(expected)
            and math.isnan(got)
        )
        return None if same else where
    if isinstance(expected, list) and isinstance(got, list):
        for index, (left, right) in enumerate(zip(expected, got, strict=False)):
            difference = first_difference(left, right, f"{where}[{index}]")
            if difference is not None:
                return difference
        return (
            None if len(expected) == len(got) else f"{where} (length {len(expected)} vs {len(got)})"
        )
    if isinstance(expected, dict) and isinstance(got, dict):
        for key in sorted(set(expected) | set(got)):
            if key not in expected or key not in got:
                return f"{where}.{key} ({'missing' if key not in got else 'unexpected'})"
            difference = first_difference(expected[key], got[key], f"{where}.{key}")
            if difference is not None:
                return difference
        return None
    return None if type(expected) is type(got) and expected == got else where
