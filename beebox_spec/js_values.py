"""Reading strings and JSON values the way the original's JavaScript does.

Spec sources: `docs/sources.md#facts-preamble` (the preamble: "JSON" is RFC 8259
JSON as `JSON.parse` reads it, and a line holding `NaN` or `Infinity` is unparsable),
`docs/sources.md#facts-1-1` (§1.1: `isOversizeLine` counts UTF-16 code units and
UTF-8 bytes), `docs/sources.md#facts-1-3` (§1.3: `transformContent` reads fields
with `String(x || "")`, `.length`, `.substring` and `JSON.stringify`),
`docs/sources.md#facts-3-3` (§3.3: `<chat-response>` text is trimmed),
`docs/sources.md#facts-4-1` (§4.1) and `docs/sources.md#facts-4-2` (§4.2: whitespace
is trimmed and collapsed), and ECMAScript itself for what those operations mean.

The original system is TypeScript. Wherever it turns a value into text, measures
text or cuts it, the answer a host gives is visible: on the wire, in a stored
title, in a hash over rendered text, in a skip decision. Hosts written in other
languages must agree with it, and with each other, byte for byte. Python's own
readings differ in small ways that matter (`str.strip()` and `str.isspace()`
know U+001C–U+001F and U+0085 but not U+FEFF; `len` counts code points, not
UTF-16 units; `str(1e16)` is `"1e+16"` and `json.dumps(1.0)` is `"1.0"`, where
JavaScript writes `10000000000000000` and `1`), so the spec never uses them where
the original used JavaScript's. This module is the one place those readings live:

- **`JSON.parse`** (`parse_json_text`): RFC 8259 JSON, nothing more. `NaN`,
  `Infinity` and `-Infinity` (which Python's `json` accepts) are refused; an
  integer literal too long for Python's `int()` reads as the double JavaScript
  makes of it; a value nested too deep to follow is unparsable, not a crash.
  Every refusal is one `UnparsableJson`. `parse_json_object_or_none` is the
  common reading of a JSON-lines record: the object, or None for anything that
  is not JSON or not an object.
- **Whitespace** (`JS_WHITESPACE`). What `String.prototype.trim`,
  `trimStart`, `trimEnd` remove and what a regular expression's `\\s` matches
  are the same set: ECMAScript's WhiteSpace (U+0009 tab, U+000B VT, U+000C FF,
  U+0020 space, U+00A0 NBSP, U+FEFF ZWNBSP/BOM, and every other `Zs` character:
  U+1680, U+2000–U+200A, U+202F, U+205F, U+3000) plus its LineTerminators
  (U+000A LF, U+000D CR, U+2028 LS, U+2029 PS). 25 characters.
  `js_trim`, `js_trim_start`, `js_trim_end` strip exactly those;
  `JS_SPACE_CLASS` is `\\s` as a Python character class and `JS_SPACE_CLASS_ITEMS`
  its members escaped, to splice into a larger class (as in `[^…]`).
- **Absence** (`MISSING`). JavaScript's `undefined`: a member that is not
  there. `JsValue` is a JSON value or `MISSING`.
- **Truthiness** (`js_truthy`): `undefined`, `null`, `false`, `0`, `NaN` and
  `""` are false; everything else, empty arrays and objects too, is true.
  `js_or` is `a || b || c`.
- **`String()`** (`js_string`, and `js_string_or_empty` for `String(x || "")`):
  numbers in ECMAScript's shortest round-tripping form, arrays joined by `,`
  (null elements empty), objects `[object Object]`.
- **`JSON.stringify`** (`js_json_stringify`), for a parsed JSON value: compact,
  non-finite numbers `null`, strings escaped as `QuoteJSONString` does (lone
  surrogates as `\\uXXXX`, U+2028/U+2029 and non-ASCII left as they are), and
  object members in JavaScript's property order (array-index keys first,
  ascending, then the rest as inserted).
- **Lengths and cuts**. `utf16_length` is `.length` (a character past U+FFFF
  counts 2). `utf16_prefix` is `.substring(0, n)`, except that a cut never splits
  a surrogate pair: the character is left out whole, so the result is always valid
  Unicode (ours, `docs/spec-decisions.md#utf16-cut-whole-characters`).
  `utf8_length` is `Buffer.byteLength(text, "utf8")` (a lone surrogate counts
  3, as Node counts it).

A module that deliberately measures otherwise says so where it does (chat
review counts code points, `beebox_spec.review`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Final, TypeAlias

from beebox_spec.entries import JsonObject, JsonValue
from beebox_spec.errors import InvariantError, Rejection

__all__ = [
    "JS_SPACE_CLASS",
    "JS_SPACE_CLASS_ITEMS",
    "JS_WHITESPACE",
    "MISSING",
    "JsValue",
    "UnparsableJson",
    "js_json_stringify",
    "js_or",
    "js_property_order",
    "js_string",
    "js_string_or_empty",
    "js_trim",
    "js_trim_end",
    "js_trim_start",
    "js_truthy",
    "parse_iso_timestamp",
    "parse_json_object_or_none",
    "parse_json_text",
    "to_iso_timestamp",
    "utf8_length",
    "utf16_length",
    "utf16_prefix",
]


# ---------------------------------------------------------------------------------
# JSON.parse
# ---------------------------------------------------------------------------------


class UnparsableJson(Rejection):
    """The text is not JSON as JavaScript's `JSON.parse` reads it."""


def parse_json_text(text: str) -> JsonValue:
    """Parse `text` as RFC 8259 JSON, the way `JSON.parse` would, or raise.

    `NaN`, `Infinity` and `-Infinity` are not JSON. An integer literal too long for
    Python's `int()` reads as the float JavaScript would make of it. A value nested
    deeper than the interpreter can follow is treated as unparsable.
    """
    try:
        value: JsonValue = _JSON_PARSE.decode(text)
    except UnparsableJson:
        raise  # NaN or Infinity, refused by `_reject_non_json_constant`
    except (ValueError, RecursionError) as error:
        # JSONDecodeError is a ValueError.
        raise UnparsableJson(str(error)) from None
    return value


def parse_json_object_or_none(text: str) -> JsonObject | None:
    """The text as a JSON object, or None when it is not JSON or not an object."""
    try:
        value = parse_json_text(text)
    except UnparsableJson:
        return None
    # Only an object is a record; arrays, strings and numbers are not.
    if not isinstance(value, dict):
        return None
    return value


def _reject_non_json_constant(name: str) -> JsonValue:
    # Python's json reads NaN, Infinity and -Infinity; JSON.parse does not.
    raise UnparsableJson(f"{name} is not JSON")


def _parse_json_integer(digits: str) -> int | float:
    try:
        return int(digits)
    except ValueError:
        # Past Python's digit limit for int(); JavaScript reads every number as a
        # double, and so do we here.
        return float(digits)


# Made once: `json.loads` with options builds a decoder on every call (a tenth of
# a transcript line's parse). Like `json.loads`'s own default decoder, it is shared.
_JSON_PARSE: Final = json.JSONDecoder(
    parse_constant=_reject_non_json_constant, parse_int=_parse_json_integer
)


# ---------------------------------------------------------------------------------
# Absence
# ---------------------------------------------------------------------------------


class _Missing(Enum):
    MISSING = "undefined"


# JavaScript's `undefined`: what reading an absent member gives.
MISSING: Final = _Missing.MISSING

JsValue: TypeAlias = "JsonValue | _Missing"


# ---------------------------------------------------------------------------------
# Whitespace: `trim()` and `\s`
# ---------------------------------------------------------------------------------

# ECMAScript WhiteSpace (tab, VT, FF, space, NBSP, the other Zs characters, ZWNBSP)
# and LineTerminator (LF, CR, LS, PS): what `trim()` removes and `\s` matches.
JS_WHITESPACE: Final = (
    "\t\n\v\f\r \u00a0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
# The members of `\s`, escaped for use inside a Python character class.
JS_SPACE_CLASS_ITEMS: Final = "".join(re.escape(char) for char in JS_WHITESPACE)
# JavaScript's `\s` as a Python character class (Python's own `\s` is another set).
JS_SPACE_CLASS: Final = f"[{JS_SPACE_CLASS_ITEMS}]"


def js_trim(text: str) -> str:
    """`text.trim()`: JavaScript whitespace removed from both ends."""
    return text.strip(JS_WHITESPACE)


def js_trim_start(text: str) -> str:
    """`text.trimStart()`: JavaScript whitespace removed from the start."""
    return text.lstrip(JS_WHITESPACE)


def js_trim_end(text: str) -> str:
    """`text.trimEnd()`: JavaScript whitespace removed from the end."""
    return text.rstrip(JS_WHITESPACE)


# ---------------------------------------------------------------------------------
# Truthiness and String()
# ---------------------------------------------------------------------------------


def js_truthy(value: JsValue) -> bool:
    """JavaScript truthiness: undefined, null, false, 0, NaN and "" are false."""
    if value is MISSING or value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value != 0 and not math.isnan(value)
    if isinstance(value, str):
        return value != ""
    # Arrays and objects, even empty ones, are true.
    return True


def js_or(*values: JsValue) -> JsValue:
    """JavaScript's `a || b || c`: the first truthy operand, else the last."""
    for value in values[:-1]:
        # The first truthy operand ends the chain.
        if js_truthy(value):
            return value
    return values[-1]


def js_string(value: JsValue) -> str:
    """JavaScript's `String(value)` for a JSON value (undefined reads "undefined")."""
    if value is MISSING:
        return "undefined"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _js_number_string(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        # Array.prototype.join: null elements read as empty, nested arrays join too.
        return ",".join("" if item is None else js_string(item) for item in value)
    return "[object Object]"


def js_string_or_empty(value: JsValue) -> str:
    """JavaScript's `String(value || "")`: undefined, null, false, 0 and "" read ""."""
    return js_string(value) if js_truthy(value) else ""


def _js_double(value: int | float) -> float:
    # Every JavaScript number is a double; an integer beyond its range is infinite.
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _js_number_string(value: int | float) -> str:
    # ECMAScript Number::toString(10) over the shortest round-tripping digits.
    number = _js_double(value)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    if number == 0:
        return "0"
    if number < 0:
        return "-" + _js_number_string(-number)
    digits, scale = _shortest_digits(number)
    k = len(digits)
    n = k + scale  # number = 0.digits × 10**n
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * -n + digits
    exponent = n - 1
    mantissa = digits[0] + ("." + digits[1:] if k > 1 else "")
    return f"{mantissa}e{'+' if exponent >= 0 else '-'}{abs(exponent)}"


def _shortest_digits(number: float) -> tuple[str, int]:
    # The fewest significant digits that read back as `number` (positive, finite),
    # and the scale with number = digits × 10**scale. `repr` writes exactly those
    # digits (Python's float repr is the shortest that round-trips); only their point
    # moves here.
    significand, _, written_exponent = repr(number).partition("e")
    whole, _, fraction = significand.partition(".")
    significant = (whole + fraction).lstrip("0")
    digits = significant.rstrip("0")
    scale = int(written_exponent or "0") - len(fraction) + len(significant) - len(digits)
    return digits, scale


# ---------------------------------------------------------------------------------
# JSON.stringify
# ---------------------------------------------------------------------------------

# The largest array index; string keys up to it that read as canonical integers are
# listed first, in ascending order, by `JSON.stringify` (OrdinaryOwnPropertyKeys).
_MAX_ARRAY_INDEX: Final = 2**32 - 2
_CANONICAL_INTEGER_RE: Final = re.compile(r"0|[1-9][0-9]*")

_SURROGATE_RE: Final = re.compile("[\ud800-\udfff]")
_encode_basestring: Final = json.encoder.encode_basestring
_JS_ESCAPES: Final = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


def js_json_stringify(value: JsonValue, indent: int = 0) -> str:
    """`JSON.stringify(value, null, indent)` as JavaScript writes it for a parsed JSON value.

    With ``indent`` 0 the output is compact. Otherwise (the gap is ``indent``
    spaces, at most 10) a non-empty array or object puts each member on a line of
    its own one gap deeper, ``"key": value`` with one space, and its closing
    bracket on a line of its own; ``[]`` and ``{}`` stay as they are.
    """
    return _stringify(value, " " * min(indent, 10), "")


def _stringify(value: JsonValue, gap: str, indentation: str) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        number = _js_double(value)
        # Non-finite numbers serialise as null.
        return _js_number_string(number) if math.isfinite(number) else "null"
    if isinstance(value, str):
        return _js_quote(value)
    inner = indentation + gap
    if isinstance(value, list):
        items = [_stringify(item, gap, inner) for item in value]
        return _js_bracket("[", items, "]", gap, indentation)
    members = [
        _js_quote(key) + (": " if gap else ":") + _stringify(value[key], gap, inner)
        for key in js_property_order(value)
    ]
    return _js_bracket("{", members, "}", gap, indentation)


def _js_bracket(opening: str, parts: list[str], closing: str, gap: str, indentation: str) -> str:
    # SerializeJSONArray / SerializeJSONObject: empty stays `[]`/`{}`; a gap puts parts on lines.
    if not parts:
        return opening + closing
    if not gap:
        return opening + ",".join(parts) + closing
    inner = indentation + gap
    separator = ",\n" + inner
    return f"{opening}\n{inner}{separator.join(parts)}\n{indentation}{closing}"


def _js_quote(text: str) -> str:
    # QuoteJSONString: the short escapes, other controls and lone surrogates as \uXXXX.
    # Python's encoder (`encode_basestring`, what `json.dumps(text, ensure_ascii=False)`
    # quotes a string with) writes exactly those escapes (the same short forms,
    # lower-case \u00XX for the other controls, nothing else escaped) except that it
    # leaves a lone surrogate raw: without one, its answer is JavaScript's.
    if _SURROGATE_RE.search(text) is None:
        return _encode_basestring(text)
    return _js_quote_each(text)


def _js_quote_each(text: str) -> str:
    # QuoteJSONString as the specification writes it, one code unit at a time.
    out = ['"']
    for character in text:
        if character in _JS_ESCAPES:
            out.append(_JS_ESCAPES[character])
        elif character < " " or "\ud800" <= character <= "\udfff":
            out.append(f"\\u{ord(character):04x}")
        else:
            out.append(character)
    out.append('"')
    return "".join(out)


def js_property_order(obj: Mapping[str, object]) -> list[str]:
    """The order JavaScript enumerates an object's keys in (`OrdinaryOwnPropertyKeys`):
    array-index keys first in ascending numeric order, then the rest as inserted."""
    indices = sorted((key for key in obj if _is_array_index(key)), key=int)
    if not indices:
        return list(obj)
    return indices + [key for key in obj if not _is_array_index(key)]


def _is_array_index(key: str) -> bool:
    # A canonical decimal integer below 2**32 - 1 (so it starts with a digit).
    return (
        key[:1].isdigit()
        and _CANONICAL_INTEGER_RE.fullmatch(key) is not None
        and int(key) <= _MAX_ARRAY_INDEX
    )


# ---------------------------------------------------------------------------------
# Lengths and cuts
# ---------------------------------------------------------------------------------


def utf8_length(text: str) -> int:
    """The text's length in UTF-8 bytes; a lone surrogate counts 3, as in Node."""
    return len(text.encode("utf-8", "surrogatepass"))


def utf16_length(text: str) -> int:
    """JavaScript's `.length`: UTF-16 code units (a character past U+FFFF counts 2)."""
    # Two bytes a unit; "surrogatepass" lets a lone surrogate count its one unit.
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def utf16_prefix(text: str, units: int) -> str:
    """`.substring(0, units)`, except that a character the cut would split is left out.

    JavaScript would keep the first half of a surrogate pair; a lone surrogate is
    not Unicode text, so the spec leaves the character out whole
    (ours, `docs/spec-decisions.md#utf16-cut-whole-characters`).
    """
    head = text[:units]
    # Without a character past U+FFFF every character is one unit: nothing is split.
    if utf16_length(head) == len(head):
        return head
    taken = 0
    for position, character in enumerate(text):
        width = 2 if ord(character) > 0xFFFF else 1
        # The next character does not fit whole: the prefix ends before it.
        if taken + width > units:
            return text[:position]
        taken += width
    return text


# ---------------------------------------------------------------------------
# Dates: `Date.prototype.toISOString`, and a strict reading of what it writes
# ---------------------------------------------------------------------------


def to_iso_timestamp(now: datetime) -> str:
    """`now` as JavaScript's `toISOString()` writes it: UTC, milliseconds, "Z"."""
    # A naive time has no instant: a caller bug.
    if now.tzinfo is None:
        raise InvariantError("an ISO timestamp needs a timezone-aware time")
    # `isoformat`, not `strftime`: glibc's "%Y" writes the year 999 as "999", not "0999".
    return now.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="milliseconds") + "Z"


# What Claude Code and JavaScript's `Date.prototype.toISOString` write
# (`2026-08-01T12:00:00.000Z`), plus the other spellings of the same format:
# any number of fraction digits (or none) and a numeric UTC offset.
_ISO_TIMESTAMP = re.compile(
    r"(?P<year>[0-9]{4})-(?P<month>[0-9]{2})-(?P<day>[0-9]{2})"
    r"T(?P<hour>[0-9]{2}):(?P<minute>[0-9]{2}):(?P<second>[0-9]{2})"
    r"(?:\.(?P<fraction>[0-9]+))?"
    r"(?:(?P<utc>Z)|(?P<sign>[+-])(?P<offset_hour>[0-9]{2}):(?P<offset_minute>[0-9]{2}))"
)


def parse_iso_timestamp(text: str) -> datetime | None:
    """The instant an ISO-8601 timestamp names, in UTC to the millisecond; None if unreadable.

    Reads `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`. The fraction is cut to
    milliseconds, as JavaScript's `Date.parse` does. A timestamp is unreadable
    when it names no zone, names a day the calendar does not have, or is not in
    this format at all (ours, `docs/spec-decisions.md#strict-timestamps`).
    """
    match = _ISO_TIMESTAMP.fullmatch(text)
    # The whole string must be one timestamp in the format above.
    if match is None:
        return None
    fraction = match["fraction"] or ""
    milliseconds = int((fraction + "000")[:3])
    try:
        # The date and the time of day must exist (no month 13, no 24:00, no 61st second).
        local = datetime(
            int(match["year"]),
            int(match["month"]),
            int(match["day"]),
            int(match["hour"]),
            int(match["minute"]),
            int(match["second"]),
            milliseconds * 1000,
            tzinfo=UTC,
        )
    except ValueError:
        return None
    if match["utc"] is not None:
        return local
    offset_hours = int(match["offset_hour"])
    offset_minutes = int(match["offset_minute"])
    # A UTC offset is at most 23:59.
    if offset_hours > 23 or offset_minutes > 59:
        return None
    offset = timedelta(hours=offset_hours, minutes=offset_minutes)
    try:
        # The instant must fall within the years 1 to 9999.
        return local - offset if match["sign"] == "+" else local + offset
    except OverflowError:
        return None
