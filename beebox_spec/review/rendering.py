"""Rendering: what the reviewer reads of a span, and how it is cut to size.

Spec sources, in `docs/sources.md` (a bare §N.M below is its anchor `facts-N-M`):
`docs/sources.md#facts-4-4` (§4.4: rendering and elision) and
`docs/sources.md#facts-4-7` (§4.7 step 7: what the reviewer is sent). Going further
than the original: `docs/design.md#design-5-leak-scan` (§5).

Entries render as role headers with trimmed text and one line per tool call, tool
results skipped, entries joined by a rule. The render is uncapped (the size gate
measures it, `beebox_spec.review.journal.span_size`); what a model receives is
elided to 40,000 characters, keeping `floor(max / 2)` characters at each end, and
redacted by the leak scan before and after the cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from beebox_spec.entries import SessionEntry
from beebox_spec.errors import InvariantError
from beebox_spec.js_values import js_trim
from beebox_spec.review.leak_scan import redact_credentials
from beebox_spec.review.snippets import strip_speech_wrappers

__all__ = [
    "MAX_RENDERED_CHARS",
    "RENDERED_ENTRY_SEPARATOR",
    "elide_middle",
    "render_entries",
    "reviewer_span_text",
]

# §4.4: the most characters of conversation a model is handed.
MAX_RENDERED_CHARS: Final = 40_000
# §4.4: what stands between two rendered entries.
RENDERED_ENTRY_SEPARATOR: Final = "\n\n---\n\n"


def _render_lines(entry: SessionEntry) -> list[str]:
    """One entry's lines: its role header, then one per visible text or tool call."""
    is_user = entry["type"] == "user"
    lines = [f"**{'User' if is_user else 'Agent'}** ({entry['timestamp']})"]
    for block in entry["content"]:
        kind = block.get("type")
        text = block.get("text", "")
        if kind == "text" and text:
            # The person's words lose their shells; either side is trimmed.
            shown = js_trim(strip_speech_wrappers(text)) if is_user else js_trim(text)
            # Text that trims to nothing adds no line.
            if shown:
                lines.append(shown)
        elif kind == "tool_use":
            tool = block.get("toolName", "")
            summary = block.get("inputSummary", "")
            lines.append(f"→ {tool}: {summary}" if summary else f"→ {tool}")
        # tool_result, thinking and image blocks add nothing.
    return lines


def render_entries(entries: Sequence[SessionEntry]) -> str:
    """Dialogue plus one-line tool summaries, uncapped (the original's `renderEntries`).

    Only `user` and `assistant` entries render, each as its lines joined by
    "\\n"; an entry whose lines are its header alone is dropped, however many
    newlines the header's timestamp holds
    (ours, `docs/spec-decisions.md#header-alone-by-lines`); entries are joined by
    "\\n\\n---\\n\\n".
    """
    rendered = [_render_lines(entry) for entry in entries if entry["type"] in ("user", "assistant")]
    # A header alone means nothing visible survived.
    return RENDERED_ENTRY_SEPARATOR.join("\n".join(lines) for lines in rendered if len(lines) > 1)


def elide_middle(text: str, max: int = MAX_RENDERED_CHARS) -> str:
    """Cut the middle out of a text longer than `max`, keeping both ends.

    A text of at most `max` characters is returned unchanged. Otherwise the
    first and the last `floor(max / 2)` characters are kept around the marker
    "\\n\\n… (<N> chars of conversation elided) …\\n\\n", N = length − max. With
    an odd `max` one more character is dropped than N says (as in the original).
    """
    # A negative bound has no meaning (JavaScript's slicing would clamp it).
    if max < 0:
        raise InvariantError(f"elision bound must not be negative, got {max}")
    # Short enough: nothing is elided.
    if len(text) <= max:
        return text
    half = max // 2
    omitted = len(text) - max
    return (
        text[:half]
        + f"\n\n… ({omitted} chars of conversation elided) …\n\n"
        + text[len(text) - half :]
    )


def reviewer_span_text(entries: Sequence[SessionEntry]) -> str:
    """The span text a reviewer receives: rendered, redacted, elided, redacted again.

    §4.7 step 7 sends `elideMiddle(renderEntries(entries), 40000)`. Credential
    shapes are redacted before the text leaves the machine
    (ours, `docs/spec-decisions.md#span-redacted`): once before eliding, so a key cut in half
    by the elision cannot slip through as a fragment, and once after, because
    cutting can expose a shape that a word boundary hid. The size gate still
    measures the render (`beebox_spec.review.journal.span_size`), not this text.
    """
    return redact_credentials(
        elide_middle(redact_credentials(render_entries(entries)), MAX_RENDERED_CHARS)
    )
