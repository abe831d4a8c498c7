"""beebox conformance: language-neutral vectors, public checks, and a runner for any target.

`python -m conformance [PATHS...] --target spec` runs the vector files (by default
the ones packaged in `conformance/vectors`) against a target and prints
``N passed, N failed``. The ``check_*`` functions (`conformance.checks`) run the
same vectors against a host's own implementation from its test suite, and raise
`ConformanceFailure` listing every failing case. `docs/conformance.md` explains
the vector format and how a host runs them.
"""

from conformance.checks import (
    ConformanceFailure,
    check_chat_session,
    check_content_transform,
    check_engine,
    check_journal,
    check_lifecycle,
    check_media_refs,
    check_reconcile,
    check_review_rules,
    check_thread_session,
    check_transcript_reader,
)

__all__ = [
    "ConformanceFailure",
    "check_chat_session",
    "check_content_transform",
    "check_engine",
    "check_journal",
    "check_lifecycle",
    "check_media_refs",
    "check_reconcile",
    "check_review_rules",
    "check_thread_session",
    "check_transcript_reader",
]
