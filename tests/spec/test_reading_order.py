"""The spec reads top to bottom: each module imports only the modules stated before it.

`beebox_spec/__init__.py` states the reading order, one numbered line a module
("3. `js_values` — …"). The import graph is read from the source with `ast`
(every import, at the top or inside a function), so a module that uses one stated
after it fails here, naming both.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "beebox_spec"

# "12. `transcript` — the guarded line reader, …"
ORDER_LINE = re.compile(r"^(\d+)\. `([\w.]+)` — \S", re.MULTILINE)
# A row of a document's table of the specification's modules: "| `review.journal` | …".
TABLE_ROW = re.compile(r"^\| `([\w.]+)` \|", re.MULTILINE)


def stated_order(docstring: str) -> list[str]:
    """The modules the docstring's numbered reading order names, checked to count 1, 2, 3, …."""
    lines = ORDER_LINE.findall(docstring)
    numbers = [int(number) for number, _ in lines]
    # A gap or a repeat would make "before" ambiguous.
    assert numbers == list(range(1, len(numbers) + 1)), f"the order is numbered {numbers}"
    names = [name for _, name in lines]
    assert len(set(names)) == len(names), "a module is stated twice"
    return names


def spec_modules(root: Path) -> dict[str, Path]:
    """Every module of the package at `root`, by its dotted name below it (`review.journal`)."""
    modules: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        # The package's own __init__ is where the order is stated, not a step of it.
        if parts:
            modules[".".join(parts)] = path
    return modules


def imported_modules(path: Path, name: str, modules: set[str]) -> set[str]:
    """The spec modules the module `name` (at `path`) imports, by dotted name."""
    found: set[str] = set()
    # A relative import counts from the package that holds the module.
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                base = parts[: len(parts) - (node.level - 1)]
                module = ".".join(["beebox_spec", *base, *([module] if module else [])])
            # `from beebox_spec.review import husk` imports the module `review.husk`.
            targets = [module, *(f"{module}.{alias.name}" for alias in node.names)]
        for target in targets:
            if not target.startswith("beebox_spec."):
                continue
            dotted = target.removeprefix("beebox_spec.")
            # A name imported from a module is that module; a submodule is itself.
            while dotted and dotted not in modules:
                dotted = dotted.rpartition(".")[0]
            if dotted:
                found.add(dotted)
    return found


def order_problems(order: list[str], modules: dict[str, Path]) -> list[str]:
    """What breaks the stated order: a module it misses or invents, or an import forward."""
    problems = [f"`{name}` is not in the reading order" for name in modules if name not in order]
    problems += [
        f"the reading order names `{name}`, no module" for name in order if name not in modules
    ]
    position = {name: index for index, name in enumerate(order)}
    for name, path in modules.items():
        if name not in position:
            continue
        needed = imported_modules(path, name, set(modules))
        # A submodule runs its package's __init__ first.
        if "." in name:
            needed.add(name.rpartition(".")[0])
        for other in sorted(needed - {name}):
            # An import of a module stated later (or never) reads forward.
            if position.get(other, len(order)) > position[name]:
                problems.append(f"`{name}` imports `{other}`, which the order puts after it")
    return problems


def the_stated_order() -> list[str]:
    init = SPEC / "__init__.py"
    return stated_order(ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or "")


def test_the_spec_modules_import_only_modules_before_them_in_the_stated_order() -> None:
    assert order_problems(the_stated_order(), spec_modules(SPEC)) == []


@pytest.mark.parametrize(
    ("document", "heading"),
    [
        (ROOT / "README.md", "### The specification"),
        (ROOT / "docs" / "spec-decisions.md", "## Modules and the sections they encode"),
    ],
    ids=["README.md", "spec-decisions.md"],
)
def test_the_docs_list_the_spec_modules_in_the_stated_order(document: Path, heading: str) -> None:
    section = document.read_text(encoding="utf-8").split(heading + "\n", 1)[1].split("\n#", 1)[0]
    # The entry points have no rules, so no row.
    listed = [name for name in the_stated_order() if name not in {"__main__", "phase_doc"}]
    assert TABLE_ROW.findall(section) == listed


@pytest.mark.parametrize(
    ("files", "order", "problem"),
    [
        (
            {"a.py": "from beebox_spec.b import x\n", "b.py": ""},
            ["a", "b"],
            "`a` imports `b`, which the order puts after it",
        ),
        (
            {"a.py": "def f():\n    import beebox_spec.b\n", "b.py": ""},
            ["a", "b"],
            "`a` imports `b`, which the order puts after it",
        ),
        (
            {"a.py": "from beebox_spec.p import q\n", "p/__init__.py": "", "p/q.py": ""},
            ["a", "p", "p.q"],
            "`a` imports `p`, which the order puts after it",
        ),
        (
            {"p/__init__.py": "", "p/q.py": "from .r import x\n", "p/r.py": ""},
            ["p", "p.q", "p.r"],
            "`p.q` imports `p.r`, which the order puts after it",
        ),
        (
            {"p/__init__.py": "", "p/q.py": ""},
            ["p.q", "p"],
            "`p.q` imports `p`, which the order puts after it",
        ),
        ({"a.py": "", "b.py": ""}, ["a"], "`b` is not in the reading order"),
        ({"a.py": ""}, ["a", "gone"], "the reading order names `gone`, no module"),
    ],
)
def test_a_module_out_of_order_is_caught(
    tmp_path: Path, files: dict[str, str], order: list[str], problem: str
) -> None:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    problems = order_problems(order, spec_modules(tmp_path))
    assert any(found.startswith(problem) for found in problems), problems


def test_a_gap_in_the_numbering_is_caught() -> None:
    with pytest.raises(AssertionError, match="numbered"):
        stated_order("1. `a` — one\n3. `b` — three\n")
