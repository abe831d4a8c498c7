"""beebox_spec imports the standard library and itself, nothing else (`docs/design.md#design-2`)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import beebox_spec

SPEC_ROOT = Path(beebox_spec.__file__).parent
# No I/O, clocks, threads or async in the spec, even from the standard library.
FORBIDDEN_STDLIB = {
    "asyncio", "threading", "multiprocessing", "subprocess", "socket", "os", "shutil",
    "sqlite3", "time", "io", "pathlib", "tempfile", "random", "uuid",
}  # fmt: skip


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            # Relative imports are banned by ruff; a level > 0 would still be the package itself.
            roots.add(
                node.module.split(".")[0] if node.module and node.level == 0 else "beebox_spec"
            )
    return roots


def spec_modules() -> list[Path]:
    modules = sorted(SPEC_ROOT.rglob("*.py"))
    assert len(modules) >= 10, "expected every spec module to be found"
    return modules


def test_spec_imports_only_the_standard_library() -> None:
    for module in spec_modules():
        for root in imported_roots(module):
            assert root == "beebox_spec" or root in sys.stdlib_module_names, (
                f"{module.name} imports {root}, which is not the standard library"
            )


def test_spec_does_no_io_threads_or_async() -> None:
    for module in spec_modules():
        used = imported_roots(module) & FORBIDDEN_STDLIB
        assert not used, f"{module.name} imports {sorted(used)}"
        tree = ast.parse(module.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            assert not isinstance(node, ast.AsyncFunctionDef | ast.Await), (
                f"{module.name} is async at line {node.lineno}"
            )
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in {"open", "input", "print"}, (
                    f"{module.name} does I/O at line {node.lineno}"
                )


def test_the_check_sees_a_third_party_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import anyio\nfrom hypothesis import given\nfrom beebox_spec import x\n")
    assert imported_roots(sample) == {"anyio", "hypothesis", "beebox_spec"}
