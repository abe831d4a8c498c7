"""The page's `reconcile.js` answers every `reconcile/*` conformance vector as the spec does.

One rule in one place: `beebox_spec.reconcile` is the rule, `beebox_impl/web/reconcile.js`
is the page's only copy of it, and these vectors (expanded by the Python loader, so the
macros mean what they mean everywhere) are what proves the copy equal. Each vector file
goes to Node once (`reconcile_harness.mjs`); each case is then its own test.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from conformance.vectorfile import VectorCase, first_difference, load_vector_file

REPO = Path(__file__).resolve().parents[2]
VECTORS = REPO / "conformance" / "vectors" / "reconcile"
RECONCILE_JS = REPO / "beebox_impl" / "web" / "reconcile.js"
HARNESS = Path(__file__).with_name("reconcile_harness.mjs")
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed: cannot run the JS")

VECTOR_FILES = sorted(VECTORS.glob("*.json"))


def _cases() -> list[tuple[Path, VectorCase]]:
    return [(path, case) for path in VECTOR_FILES for case in load_vector_file(path).cases]


@cache
def _answers(path: Path) -> tuple[Any, ...]:
    """What reconcile.js answers for each case of one vector file, in order."""
    assert NODE is not None
    vectors = load_vector_file(path)
    request = {
        "module": RECONCILE_JS.as_uri(),
        "kind": vectors.kind,
        "inputs": [case.input for case in vectors.cases],
    }
    finished = subprocess.run(
        [NODE, str(HARNESS)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    answers = json.loads(finished.stdout)
    assert isinstance(answers, list)
    assert len(answers) == len(vectors.cases)
    return tuple(answers)


def test_the_vectors_are_there() -> None:
    # Both kinds are covered: an empty glob must not pass as "every vector agrees".
    kinds = {load_vector_file(path).kind for path in VECTOR_FILES}
    assert kinds == {"reconcile/pending", "reconcile/merge-accepted"}


@pytest.mark.parametrize(
    ("path", "case"), _cases(), ids=lambda value: value.name if hasattr(value, "name") else ""
)
def test_reconcile_js_matches_the_vector(path: Path, case: VectorCase) -> None:
    index = next(
        i for i, known in enumerate(load_vector_file(path).cases) if known.name == case.name
    )
    got = _answers(path)[index]
    difference = first_difference(case.expect, got)
    assert difference is None, f"{path.name}: {case.name}: differs at {difference}: {got!r}"
