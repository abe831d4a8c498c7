"""Chat review: which sessions qualify, what the reviewer reads, and what it may write.

Spec sources: `docs/sources.md#review` (the chat review page, all of it); each
module cites the sections of the facts (§4) it encodes.

The nightly pass reads chat sessions that have grown since it last looked and
writes a title, a one-sentence `contains` and a running account onto each
session's husk card. Its rules are in this package, one topic a module, in the
reading order `beebox_spec` states (each imports only the modules before it).

Three conventions hold throughout, because the original is JavaScript:

- *Lengths* are counted in Unicode code points (Python `len`). The original
  counts UTF-16 code units; the two differ only for characters outside the
  Basic Multilingual Plane (most emoji), where cutting by code units could
  split a character in two. **(ours, `docs/spec-decisions.md#review-code-points`)**
- *Whitespace* is JavaScript's: the set `\\s` and `trim()` use there
  (`beebox_spec.js_values`), which is not Python's `str.isspace()` (Python
  adds U+001C–U+001F and U+0085 and lacks U+FEFF).
- *Patterns* are ASCII-only where JavaScript's are: `\\w` is `[A-Za-z0-9_]`,
  `\\d` is `[0-9]`, and a word boundary `\\b` sees only those as word
  characters (`re.ASCII`, or the class spelled out).
"""
