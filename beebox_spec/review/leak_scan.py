"""The leak scan: one table of credential shapes, and redaction with it.

Spec sources, in `docs/sources.md` (a bare §N.M below is its anchor `facts-N-M`):
`docs/sources.md#facts-4-10` (§4.10: the credential-shape leak scan). Going
further than the original: `docs/design.md#design-5-leak-scan` (§5).

Chat review rejects a generated field only for a credential shape, never for a
name, an email address or a place. The span text is redacted with the same table
before it leaves the machine, by `beebox_spec.review.rendering.reviewer_span_text`
(ours, `docs/spec-decisions.md#span-redacted`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from beebox_spec.js_values import JS_SPACE_CLASS_ITEMS

__all__ = [
    "CREDENTIAL_PATTERNS",
    "REDACTED_CREDENTIAL",
    "CredentialFinding",
    "CredentialPattern",
    "has_credential",
    "mask_data_uris",
    "redact_credentials",
    "scan_credentials",
]


@dataclass(frozen=True)
class CredentialPattern:
    """One credential shape: its name, its pattern, and whether `data:` URIs are masked first."""

    name: str
    pattern: re.Pattern[str]
    on_masked_text: bool


# §4.10: the one table of credential shapes, translated from JavaScript with
# ASCII `\w`, `\d` and `\b`; every pattern is applied to every match position
# (the original's `/g`). Only the catch-all runs on text whose `data:` URIs are
# masked, so an inlined image does not trip it.
CREDENTIAL_PATTERNS: Final[tuple[CredentialPattern, ...]] = (
    # Google API key: `AIza` and 35 URL-safe base64 characters (no leading \b).
    CredentialPattern("Google API key", re.compile(r"AIza[A-Za-z0-9_-]{35}"), False),
    # OpenAI-style secret key: `sk-` and a run of 20 or more (covers `sk-proj-…`).
    CredentialPattern("OpenAI API key", re.compile(r"\bsk-[A-Za-z0-9_-]{20,}", re.ASCII), False),
    # GitHub tokens: `gho_`, `ghp_`, `ghr_`, `ghs_`, `ghu_` and 20 or more alphanumerics.
    CredentialPattern("GitHub token", re.compile(r"\bgh[oprsu]_[0-9A-Za-z]{20,}", re.ASCII), False),
    # Slack bot/user token: `xoxb-` / `xoxp-` and 10 or more of alphanumerics and dashes.
    CredentialPattern("Slack token", re.compile(r"\bxox[bp]-[0-9A-Za-z-]{10,}", re.ASCII), False),
    # JWT: three base64url segments of 10 or more, the first starting `eyJ` (`{"`).
    CredentialPattern(
        "JWT",
        re.compile(r"\b(?:eyJ[A-Za-z0-9_-]{10,}\.){2}[A-Za-z0-9_-]{10,}", re.ASCII),
        False,
    ),
    # Catch-all: 40 or more base64/hex characters between word boundaries.
    CredentialPattern(
        "long base64/hex run", re.compile(r"\b[0-9+/A-Za-z]{40,}={0,2}\b", re.ASCII), True
    ),
)

# `data:` and everything up to whitespace, a quote, a parenthesis or an angle bracket.
_DATA_URI = re.compile(r"data:[^" + JS_SPACE_CLASS_ITEMS + r"\"'()<>]*")

# What a redacted credential reads as.
REDACTED_CREDENTIAL: Final = "[redacted credential]"


def mask_data_uris(text: str) -> str:
    """Replace every `data:` URI by as many dots, so offsets stay valid (a URI holds no newline)."""
    return _DATA_URI.sub(lambda match: "." * len(match.group()), text)


@dataclass(frozen=True)
class CredentialFinding:
    """One credential shape found: which pattern, where (`start`, `end`), and the matched text."""

    pattern: str
    start: int
    end: int
    text: str


def scan_credentials(text: str) -> list[CredentialFinding]:
    """Every credential shape in `text`, pattern by pattern in table order, left to right."""
    masked = mask_data_uris(text)
    findings: list[CredentialFinding] = []
    for row in CREDENTIAL_PATTERNS:
        scanned = masked if row.on_masked_text else text
        for match in row.pattern.finditer(scanned):
            start, end = match.span()
            findings.append(CredentialFinding(row.name, start, end, text[start:end]))
    return findings


def has_credential(text: str) -> bool:
    """True when any credential shape occurs in `text` (what rejects a generated field)."""
    return bool(scan_credentials(text))


def redact_credentials(text: str) -> str:
    """`text` with every credential shape replaced by `REDACTED_CREDENTIAL`.

    Overlapping or touching findings (a JWT segment is also a long run) are
    merged and replaced once. Replacing can expose a new shape — a key glued
    to the end of another (`…0sk-…` has no word boundary before `sk-`; after
    the first is redacted, `]sk-…` has one) — so the result is scanned again
    until no shape remains (ours, `docs/spec-decisions.md#redaction-repeats`).
    This ends: a finding never includes the marker's characters, so each round
    removes text that was there before.
    """
    while findings := scan_credentials(text):
        text = _replace_spans(text, [(finding.start, finding.end) for finding in findings])
    return text


def _replace_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """Replace the union of `spans` with one marker per merged stretch."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        # Overlapping or touching: one stretch.
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    pieces: list[str] = []
    position = 0
    for start, end in merged:
        pieces.extend([text[position:start], REDACTED_CREDENTIAL])
        position = end
    pieces.append(text[position:])
    return "".join(pieces)
