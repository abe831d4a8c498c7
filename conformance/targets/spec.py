"""The `spec` target: every vector kind answered by `beebox_spec`."""

from __future__ import annotations

from conformance.targets import HandlerTable
from conformance.targets.spec_lifecycle import HANDLERS as LIFECYCLE
from conformance.targets.spec_media import HANDLERS as MEDIA
from conformance.targets.spec_reconcile import HANDLERS as RECONCILE
from conformance.targets.spec_review import HANDLERS as REVIEW

__all__ = ["SPEC_HANDLERS"]

SPEC_HANDLERS: HandlerTable = {**LIFECYCLE, **MEDIA, **RECONCILE, **REVIEW}
