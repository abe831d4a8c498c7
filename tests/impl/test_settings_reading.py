"""The settings file read without ruamel answers what ruamel's reading answers.

`load_box_settings` first reads the file as plain YAML (`_plain_document`) and
leaves anything else to ruamel. The property: for every file, the answer (the
settings, or the refusal's whole message) is the one the ruamel reading alone
gives. Files are drawn from the keys and values people write, and from the
constructs where YAML reads a line otherwise than it looks (null and boolean
words, octal and underscored numbers, escapes, block lists, tabs, flow lists with
a comma inside a quote, repeated keys, a third level...).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from beebox_impl import settings as box_settings
from beebox_impl.settings import (
    SETTINGS_TEMPLATE,
    BoxSettings,
    InvalidBoxSettings,
    load_box_settings,
    settings_path,
)

TOP_KEYS = ("permissions", "history", "permission", "other", "true", "Null", "on", "x_1")
SECTION_KEYS = (
    "mode",
    "allow",
    "deny",
    "timeout_minutes",
    "photos",
    "modes",
    "yes",
    "N",
    "photo",
)
WORDS = (
    *("default", "acceptEdits", "plan", "bypassPermissions", "dontAsk", "auto"),
    *("refs", "original", "yolo", "Read", "x_1", "_x", "a1"),
    *("true", "False", "TRUE", "null", "Null", "NULL", "~", "yes", "No", "on", "OFF", "y", "n"),
)
NUMBERS = (
    *("0", "00", "010", "10", "1440", "1441", "2.5", "2.50", "0.0", "1.", ".5", "1e3"),
    *("1_0", "0x1f", "0o7", "-1", "+3", ".inf", ".NaN", "12345678901234567890"),
)
ODD_SCALARS = ("a#b", "a #b", "a b", "!!str 3", "*a", "|", ">", "@x", "`x`", "%x", "-")
QUOTE_CHARACTERS = " abc()*:,#[]{}'\"\\-é\t"


def quoted() -> st.SearchStrategy[str]:
    text = st.text(alphabet=QUOTE_CHARACTERS, max_size=8)
    return st.one_of(text.map(lambda t: f"'{t}'"), text.map(lambda t: f'"{t}"'))


def scalars() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(WORDS),
        st.sampled_from(NUMBERS),
        st.sampled_from(ODD_SCALARS),
        quoted(),
        st.text(alphabet="ab:# ", min_size=1, max_size=5),
    )


def flow_lists() -> st.SearchStrategy[str]:
    items = st.lists(st.one_of(st.sampled_from(WORDS), quoted(), st.sampled_from(NUMBERS)))
    gaps = st.sampled_from(["", " ", "  "])
    return st.builds(
        lambda listed, gap, ending: "[" + gap + f",{gap}".join(listed) + gap + ending,
        items,
        gaps,
        st.sampled_from(["]", ",]", "", "]]", "] x"]),
    )


def values() -> st.SearchStrategy[str]:
    """What follows a key's colon: nothing, a value, a comment, or something odd."""
    value = st.one_of(scalars(), flow_lists())
    comment = st.sampled_from(["", "  # why", " #", "# tight", "\t# tab"])
    return st.one_of(
        st.just(""),
        st.builds(lambda v, c: f" {v}{c}", value, comment),
        st.builds(lambda v: f"  {v}  ", value),
        st.builds(lambda v: v, value),  # no space after the colon
        comment.map(lambda c: f" {c}" if c else ""),
    )


def lines() -> st.SearchStrategy[str]:
    indents = st.sampled_from(["", " ", "  ", "  ", "   ", "    ", "\t", "  \t"])
    return st.one_of(
        st.builds(lambda k, v: f"{k}:{v}", st.sampled_from(TOP_KEYS), values()),
        st.builds(lambda i, k, v: f"{i}{k}:{v}", indents, st.sampled_from(SECTION_KEYS), values()),
        st.builds(lambda i, v: f"{i}- {v}", indents, scalars()),
        st.builds(lambda i: f"{i}# a comment", indents),
        st.sampled_from(
            ["", "   ", "---", "...", "%YAML 1.2", "key :x", "mode : plan", "# → naïve", "?"]
        ),
    )


def plain_files() -> st.SearchStrategy[str]:
    """Files in the shape `bbx init` writes, keys mostly the section's own, values as above."""
    own_keys = {
        "permissions": ("mode", "allow", "deny", "timeout_minutes"),
        "history": ("photos",),
    }

    def section(top: str) -> st.SearchStrategy[str]:
        names = st.one_of(
            st.sampled_from(own_keys.get(top, SECTION_KEYS)), st.sampled_from(SECTION_KEYS)
        )
        pairs = st.lists(st.tuples(names, values()), max_size=4)
        indents = st.sampled_from(["  ", "    ", " "])
        return st.builds(
            lambda listed, indent: f"{top}:\n" + "".join(f"{indent}{n}:{v}\n" for n, v in listed),
            pairs,
            indents,
        )

    return st.lists(st.sampled_from(TOP_KEYS[:3]).flatmap(section), max_size=3).map("".join)


def files() -> st.SearchStrategy[str]:
    joined = st.lists(lines(), max_size=8).map("\n".join)
    return st.one_of(
        plain_files(),
        joined,
        st.builds(lambda text, end: text + end, joined, st.sampled_from(["\n", "", "\r\n"])),
        st.builds(lambda a, b: a + b, plain_files(), joined),
        plain_files().map(lambda text: text.replace("\n", "\r\n")),
        plain_files().map(lambda text: "\ufeff" + text),
    )


def answer(box: Path) -> BoxSettings | str:
    try:
        return load_box_settings(box)
    except InvalidBoxSettings as refused:
        return f"refused: {refused}"


def ruamel_answer(box: Path) -> BoxSettings | str:
    """The answer of the ruamel reading alone, as every file was read before."""
    path = settings_path(box)
    try:
        text = path.read_text(encoding="utf-8")
        return box_settings._box_settings(path, box_settings._yaml_document(path, text))
    except InvalidBoxSettings as refused:
        return f"refused: {refused}"


def write(box: Path, text: str) -> None:
    path = settings_path(box)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("box")


@settings(max_examples=600, deadline=None)
@given(text=files())
# Where a word read as a string would be a valid setting: a rule in a list.
@example(text="permissions:\n  allow: [null]\n")
@example(text="permissions:\n  deny: [Read, true]\n")
@example(text="permissions:\n  deny: [Read, 'n']\n")
def test_the_plain_reading_answers_what_ruamel_answers(box: Path, text: str) -> None:
    write(box, text)
    assert answer(box) == ruamel_answer(box)


@pytest.mark.parametrize(
    "text",
    [
        SETTINGS_TEMPLATE,
        "history:\n  photos: original  # the original's\n",
        "permissions:\n    mode: plan\n    allow: ['Bash(git status:*)', \"Read\"]\n",
        "permissions:\n  timeout_minutes: 2.5\n  deny: []\n\n# mine\nhistory:\n",
        "# nothing yet\n",
    ],
)
def test_what_bbx_init_writes_and_people_edit_is_read_without_ruamel(text: str) -> None:
    assert box_settings._plain_document(text) is not box_settings._OUTSIDE_PLAIN_YAML


@pytest.mark.parametrize(
    "text",
    [
        "permissions:\n  deny:\n    - Bash(rm:*)\n",  # a block list
        "history:\n  photos: refs\n  photos: original\n",  # a repeated key
        "permissions:\n  mode: on\n",  # a boolean to YAML 1.1
        "permissions:\n  timeout_minutes: 010\n",
        'permissions:\n  allow: ["a\\tb"]\n',  # an escape
        "permissions:\n\tmode: plan\n",
    ],
)
def test_what_the_plain_reading_cannot_settle_is_ruamels(text: str) -> None:
    assert box_settings._plain_document(text) is box_settings._OUTSIDE_PLAIN_YAML


def test_a_refusal_of_a_plain_file_says_its_line(tmp_path: Path) -> None:
    write(tmp_path, "history:\n  photos: refs\n\npermissions:\n  mode: yolo\n")
    with pytest.raises(InvalidBoxSettings, match=r"settings\.yaml:5: permissions\.mode is 'yolo'"):
        load_box_settings(tmp_path)


@pytest.mark.parametrize("text", ["?\n mode:\n  mode:", "a: " + "[" * 5000])
def test_yaml_ruamel_cannot_build_is_refused(tmp_path: Path, text: str) -> None:
    # Not a TypeError or a RecursionError out of ruamel: `bbx` says it in one line.
    write(tmp_path, text)
    with pytest.raises(InvalidBoxSettings, match="not YAML beebox can read"):
        load_box_settings(tmp_path)


_LOADED_WITH = """
import json, sys
from pathlib import Path
from beebox_impl.settings import load_box_settings
print(json.dumps([repr(load_box_settings(Path(sys.argv[1]))), "ruamel" in sys.modules]))
"""


def test_the_template_is_read_without_importing_ruamel(tmp_path: Path) -> None:
    write(tmp_path, SETTINGS_TEMPLATE.replace("photos: refs", "photos: original"))
    done = subprocess.run(
        [sys.executable, "-c", _LOADED_WITH, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    read, imported_ruamel = json.loads(done.stdout)
    assert "photos='original'" in read
    assert imported_ruamel is False
