"""Reading strings and JSON values as JavaScript does (`beebox_spec.js_values`).

The tests that run `node` check the readings against JavaScript itself; they
skip where node is not installed, and the tests without node pin the same facts
from ECMAScript's text.
"""

from __future__ import annotations

import decimal
import json
import math
import random
import re
import shutil
import struct
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from beebox_spec.entries import JsonValue
from beebox_spec.js_values import (  # the quoting's two paths and the digits are checked directly
    JS_SPACE_CLASS,
    JS_SPACE_CLASS_ITEMS,
    JS_WHITESPACE,
    MISSING,
    JsValue,
    UnparsableJson,
    _js_quote,
    _js_quote_each,
    _shortest_digits,
    js_json_stringify,
    js_or,
    js_string,
    js_string_or_empty,
    js_trim,
    js_trim_end,
    js_trim_start,
    js_truthy,
    parse_json_object_or_none,
    parse_json_text,
    utf8_length,
    utf16_length,
    utf16_prefix,
)

needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")


def run_node(script: str, data: object) -> object:
    """Run `script` under node with `data` as JSON on stdin; its stdout, read as JSON."""
    done = subprocess.run(
        ["node", "-e", script], input=json.dumps(data), capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


# ---------------------------------------------------------------------------------
# Reading JSON as JSON.parse does
# ---------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", '{"a":-Infinity}', "", "{", "// c", "[1,]"])
def test_non_json_is_unparsable(text: str) -> None:
    with pytest.raises(UnparsableJson):
        parse_json_text(text)
    assert parse_json_object_or_none(text) is None


def test_a_deeply_nested_line_is_unparsable_not_a_crash() -> None:
    with pytest.raises(UnparsableJson):
        parse_json_text("[" * 200_000 + "]" * 200_000)


def test_a_huge_integer_reads_as_javascript_would() -> None:
    assert parse_json_text("1" * 5000) == float("inf")


def test_only_objects_are_records() -> None:
    assert parse_json_object_or_none("[1]") is None
    assert parse_json_object_or_none('"x"') is None
    assert parse_json_object_or_none(' {"a":1}\r') == {"a": 1}


@needs_node
def test_what_parses_agrees_with_node() -> None:
    texts = ["{}", " {}\r\n", "\ufeff{}", "\u00a01", "\f1", "01", "1.", ".5", "-0", "1e400"]
    texts += ["NaN", "-Infinity", "[1,]", "{'a':1}", '"\t"', '"\\ud800"', '{"a":1,"a":2}', "[]]"]
    script = (
        "const t=JSON.parse(require('fs').readFileSync(0,'utf8'));"
        "console.log(JSON.stringify(t.map(s=>{try{JSON.parse(s);return true}"
        "catch(e){return false}})))"
    )
    found = run_node(script, texts)
    assert isinstance(found, list)
    for text, parses in zip(texts, found, strict=True):
        try:
            parse_json_text(text)
        except UnparsableJson:
            assert not parses, text
        else:
            assert parses, text


# ---------------------------------------------------------------------------------
# Whitespace
# ---------------------------------------------------------------------------------

# ECMAScript WhiteSpace + LineTerminator, spelled as the standard lists them.
ECMASCRIPT_WHITESPACE = (
    {chr(c) for c in range(0x09, 0x0E)}  # TAB, LF, VT, FF, CR
    | {" ", "\u00a0", "\u1680"}
    | {chr(c) for c in range(0x2000, 0x200B)}
    | {"\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\ufeff"}
)
BMP = [chr(c) for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF]


def test_whitespace_is_ecmascript_whitespace_and_line_terminators() -> None:
    assert len(JS_WHITESPACE) == len(set(JS_WHITESPACE)) == 25
    assert set(JS_WHITESPACE) == ECMASCRIPT_WHITESPACE


def test_whitespace_is_not_pythons() -> None:
    python_space = {char for char in BMP if char.isspace()}
    # Python adds U+001C–U+001F and U+0085 and lacks U+FEFF.
    assert python_space - set(JS_WHITESPACE) == {"\x1c", "\x1d", "\x1e", "\x1f", "\x85"}
    assert set(JS_WHITESPACE) - python_space == {"\ufeff"}


def test_js_trim_is_javascript_trim() -> None:
    # U+FEFF is trimmed by JavaScript but is not whitespace to Python; U+0085 and
    # U+001C are whitespace to Python but not to JavaScript.
    assert js_trim("\ufeff\u2028 a \u3000\r\n") == "a"
    assert js_trim("\u0085a\u001c") == "\u0085a\u001c"


def test_trim_start_and_trim_end_trim_one_side() -> None:
    assert js_trim_start("\ufeff\u2028 a \u3000\r\n") == "a \u3000\r\n"
    assert js_trim_end("\ufeff\u2028 a \u3000\r\n") == "\ufeff\u2028 a"
    assert js_trim_start("\u0085a") == "\u0085a"
    assert js_trim_end("a\u001c") == "a\u001c"


@given(st.text(alphabet=st.sampled_from([*JS_WHITESPACE, "a", "\x85", "\x1c", "😀"])))
def test_trim_is_trim_start_of_trim_end(text: str) -> None:
    trimmed = js_trim(text)
    assert trimmed == js_trim_start(js_trim_end(text)) == js_trim_end(js_trim_start(text))
    assert trimmed == "" or (trimmed[0] not in JS_WHITESPACE and trimmed[-1] not in JS_WHITESPACE)
    assert trimmed in text


def test_space_class_matches_exactly_the_whitespace() -> None:
    space = re.compile(JS_SPACE_CLASS)
    assert {char for char in BMP if space.fullmatch(char)} == set(JS_WHITESPACE)
    # The escaped members splice into a larger class, here JavaScript's `\S`.
    not_space = re.compile(f"[^{JS_SPACE_CLASS_ITEMS}]")
    assert {char for char in BMP if not not_space.fullmatch(char)} == set(JS_WHITESPACE)


@needs_node
def test_whitespace_agrees_with_node() -> None:
    """`\\s`, `trim`, `trimStart` and `trimEnd` in node remove exactly `JS_WHITESPACE`."""
    script = (
        "const out={s:[],trim:[],start:[],end:[]};"
        "for(let c=0;c<0x10000;c++){if(c>=0xd800&&c<=0xdfff)continue;"
        "const x=String.fromCharCode(c);"
        "if(/^\\s$/.test(x))out.s.push(c);"
        "if(('a'+x).trim()==='a'&&(x+'a').trim()==='a')out.trim.push(c);"
        "if((x+'a'+x).trimStart()==='a'+x)out.start.push(c);"
        "if((x+'a'+x).trimEnd()===x+'a')out.end.push(c);}"
        "console.log(JSON.stringify(out))"
    )
    found = run_node(script, None)
    assert isinstance(found, dict)
    expected = sorted(ord(char) for char in JS_WHITESPACE)
    assert found == {"s": expected, "trim": expected, "start": expected, "end": expected}


# ---------------------------------------------------------------------------------
# Absence, truthiness, String()
# ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "truthy"),
    [
        (MISSING, False),
        (None, False),
        (False, False),
        (0, False),
        (0.0, False),
        (-0.0, False),
        (float("nan"), False),
        ("", False),
        (True, True),
        (1, True),
        (-0.5, True),
        (" ", True),
        ("0", True),
        ("false", True),
        ([], True),
        ({}, True),
    ],
)
def test_truthiness(value: JsValue, truthy: bool) -> None:
    assert js_truthy(value) is truthy


def test_or_is_the_first_truthy_operand_else_the_last() -> None:
    assert js_or("", "b", "c") == "b"
    assert js_or(MISSING, 0, None) is None
    assert js_or([], "b") == []
    assert js_or(MISSING) is MISSING


def test_string_of_absence_and_string_or_empty() -> None:
    assert js_string(MISSING) == "undefined"
    assert js_string_or_empty(MISSING) == ""
    assert js_string_or_empty(None) == ""
    assert js_string_or_empty(0) == ""
    assert js_string_or_empty(False) == ""
    assert js_string_or_empty(1.0) == "1"
    assert js_string_or_empty([None]) == ""
    assert js_string_or_empty({"a": 1}) == "[object Object]"


@needs_node
def test_js_values_readings_agree_with_node() -> None:
    """`js_string` and `js_json_stringify` are JavaScript's String() and JSON.stringify."""
    texts = [
        "1.0", "1e21", "1e-7", "123.456", "1e16", "5e-324", "-0", "0.1", "12345678901234567890",
        "-1.5e-10", "0.000001", "1.7976931348623157e308", "1e400", "[1,[2,3],null,\"a\",{},true]",
        '{"b":1,"2":1,"a":1,"1":1,"4294967294":1,"4294967295":1,"01":1,"-1":1}',
        '"\\u2028\\u0000\\u007f\\ud800x\\"\\\\\\b\\f\\n\\r\\t/é😀"', "[[],[[]],[null,null]]",
    ]  # fmt: skip
    script = (
        "const t=JSON.parse(require('fs').readFileSync(0,'utf8'));"
        "console.log(JSON.stringify(t.map(s=>{const v=JSON.parse(s);"
        "return [String(v), JSON.stringify(v)]})))"
    )
    done = subprocess.run(
        ["node", "-e", script], input=json.dumps(texts), capture_output=True, text=True, check=True
    )
    for text, (as_string, as_json) in zip(texts, json.loads(done.stdout), strict=True):
        value = parse_json_text(text)
        assert (js_string(value), js_json_stringify(value)) == (as_string, as_json), text


@needs_node
def test_numbers_print_as_javascript_prints_them() -> None:
    """`js_string` of a double is Number::toString, over doubles drawn from every binade."""
    draw = random.Random(20261206)
    doubles = (
        struct.unpack("<d", draw.getrandbits(64).to_bytes(8, "little"))[0] for _ in range(4000)
    )
    numbers = [number for number in doubles if math.isfinite(number)]
    # JSON carries each double exactly: Python writes its shortest round-tripping digits.
    printed = run_node(
        "const t=JSON.parse(require('fs').readFileSync(0,'utf8'));"
        "console.log(JSON.stringify(t.map(String)))",
        numbers,
    )
    assert [js_string(number) for number in numbers] == printed


@given(st.floats(min_value=0.0, exclude_min=True, allow_infinity=False))
def test_a_doubles_shortest_digits_are_its_decimal_in_normal_form(number: float) -> None:
    # The digits Number::toString places: `decimal`'s reading of them, as an oracle.
    normal = decimal.Decimal(repr(number)).normalize().as_tuple()
    assert _shortest_digits(number) == ("".join(map(str, normal.digits)), normal.exponent)


@needs_node
def test_truthiness_and_string_or_empty_agree_with_node() -> None:
    texts = ["0", "-0", "0.0", "1", '""', '" "', '"0"', "null", "false", "true", "[]", "[0]"]
    texts += ["{}", '{"a":[]}', "[null]", "[[null],[]]", "1e21", "5e-324", "-1.5"]
    script = (
        "const t=JSON.parse(require('fs').readFileSync(0,'utf8'));"
        "console.log(JSON.stringify(t.map(s=>{const v=JSON.parse(s);"
        "return [!!v, String(v || '')]})))"
    )
    found = run_node(script, texts)
    assert isinstance(found, list)
    for text, (truthy, as_string) in zip(texts, found, strict=True):
        value: JsonValue = parse_json_text(text)
        assert (js_truthy(value), js_string_or_empty(value)) == (truthy, as_string), text


# ---------------------------------------------------------------------------------
# Lengths and cuts
# ---------------------------------------------------------------------------------


def test_lengths() -> None:
    assert utf16_length("") == 0
    assert utf16_length("héllo") == 5
    assert utf16_length("a😀") == 3
    assert utf8_length("héllo") == 6
    assert utf8_length("a😀") == 5
    # A lone surrogate (JSON can carry one) counts 3 bytes, as Node writes U+FFFD.
    assert utf8_length("\ud800") == 3


def test_cuts_never_split_a_character() -> None:
    assert utf16_prefix("a😀", 2) == "a"
    assert utf16_prefix("a😀", 3) == "a😀"
    assert utf16_prefix("héllo", 0) == ""


@given(st.text(), st.integers(min_value=0, max_value=40))
def test_a_cut_is_the_longest_whole_prefix_that_fits(text: str, units: int) -> None:
    cut = utf16_prefix(text, units)
    assert text.startswith(cut)
    assert utf16_length(cut) <= units
    # One more character would not fit (or there is none).
    assert cut == text or utf16_length(text[: len(cut) + 1]) > units


@given(st.text(st.characters() | st.characters(categories=["Cs"])))
def test_quoting_through_pythons_encoder_is_quoting_each_unit(text: str) -> None:
    # The fast path (Python's encoder, for text without a lone surrogate) must
    # write what QuoteJSONString writes unit by unit, for every text.
    assert _js_quote(text) == _js_quote_each(text)


@given(st.text(st.characters() | st.characters(categories=["Cs"])))
def test_utf16_length_counts_two_units_past_the_bmp_and_one_otherwise(text: str) -> None:
    # Lone surrogates included: JSON strings can carry them, and each is one unit.
    assert utf16_length(text) == sum(2 if ord(character) > 0xFFFF else 1 for character in text)


@needs_node
def test_lengths_agree_with_node() -> None:
    texts = ["", "héllo", "a😀", "日本語", "\u2028", "\ud800", "x\udc00y", "😀😀"]
    script = (
        "const t=JSON.parse(require('fs').readFileSync(0,'utf8'));"
        "console.log(JSON.stringify(t.map(s=>[s.length, Buffer.byteLength(s, 'utf8')])))"
    )
    found = run_node(script, texts)
    assert found == [[utf16_length(text), utf8_length(text)] for text in texts]


def test_json_stringify_with_an_indent_lays_out_like_javascript() -> None:
    value: JsonValue = {"b": [1, {}, []], "1": {"x": None}, "a": {}}
    assert js_json_stringify(value, indent=2) == (
        '{\n  "1": {\n    "x": null\n  },\n  "b": [\n    1,\n    {},\n    []\n  ],\n  "a": {}\n}'
    )
    assert js_json_stringify(value) == '{"1":{"x":null},"b":[1,{},[]],"a":{}}'
    assert js_json_stringify([], indent=4) == "[]"
