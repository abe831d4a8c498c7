"""How long a permission request may wait for an answer before it is denied.

A request still pending `DEFAULT_TIMEOUT` after its ask is denied (`permissions`
rule 3). Like the requests, the rule is new here
(ours, `docs/spec-decisions.md#permission-requests`): the original refused a
tool call that needed approval (`docs/design.md#design-5-permissions` (§5)). The
wait is a box setting (``permissions.timeout_minutes``); this is the wait when
the box's settings say nothing.

It has a module of its own, stated before `permissions`, so that reading a box's
settings (which every `bbx chat history` does) does not build the requests' rules.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

__all__ = ["DEFAULT_TIMEOUT"]

# How long a request may wait for an answer before it is denied (a box setting).
DEFAULT_TIMEOUT: Final = timedelta(minutes=10)
