"""`journal/*` and `review/*` conformance vectors pass through the implementation's target."""

from __future__ import annotations

from conformance.runner import PACKAGED_VECTORS, run_files
from conformance.targets import KNOWN_KINDS
from conformance.targets.impl_review import IMPL_REVIEW_HANDLERS


def test_the_review_vectors_pass_against_the_implementation() -> None:
    report = run_files(
        [PACKAGED_VECTORS / "journal", PACKAGED_VECTORS / "review"], IMPL_REVIEW_HANDLERS
    )

    assert report.failures is None
    assert report.passed > 90
    assert not report.skipped_kinds


def test_the_target_answers_every_journal_and_review_kind() -> None:
    wanted = {kind for kind in KNOWN_KINDS if kind.startswith(("journal/", "review/"))}
    assert set(IMPL_REVIEW_HANDLERS) == wanted
