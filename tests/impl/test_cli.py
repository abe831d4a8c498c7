"""`bbx chat history` and `bbx chat media` for people at a terminal; every command's help,
and how every command says what went wrong."""

from __future__ import annotations

import argparse
import base64
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from beebox_impl.box import init_box
from beebox_impl.cli import build_parser, help_formatter
from beebox_impl.cli import main as bbx
from beebox_impl.cli import transcripts as cli_transcripts
from beebox_impl.transcript.location import PROJECTS_DIR_ENV, box_projects_root, transcript_path

SESSION = "7f0c3e52-2a51-4d4b-9b0e-0d8f6f1c2a10"
PHOTO = os.urandom(300_000)  # big enough that its line is over 256 KiB and gets stripped


def compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def write_chat(path: Path) -> None:
    """Write a transcript at ``path``: a caption and a photo (``u-1``), then a reply."""
    path.parent.mkdir(parents=True)
    photo = {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": "image/png",
            "data": base64.b64encode(PHOTO).decode(),
        },
    }
    lines = [
        {"type": "user", "uuid": "u-1", "parentUuid": None, "sessionId": SESSION,
         "timestamp": "2026-12-01T10:00:00.000Z",
         "message": {"role": "user", "content": [{"type": "text", "text": "look at this"}, photo]}},
        {"type": "assistant", "uuid": "a-1", "parentUuid": "u-1", "sessionId": SESSION,
         "timestamp": "2026-12-01T10:00:05.000Z",
         "message": {"role": "assistant", "content": [{"type": "text", "text": "a fine photo"}]}},
    ]  # fmt: skip
    path.write_text("".join(compact(line) + "\n" for line in lines), encoding="utf-8")


@pytest.fixture
def box(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A box folder whose session transcript holds a caption and a photo, then a reply."""
    root = tmp_path / "projects"
    monkeypatch.setenv(PROJECTS_DIR_ENV, str(root))
    box = tmp_path / "box"
    box.mkdir()
    write_chat(transcript_path(box, SESSION, root))
    return box


def test_history_prints_the_entries_with_a_photo_reference(
    box: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bbx(["chat", "history", SESSION, "--box", str(box)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"session {SESSION}: 2 entries, showing 2\n")
    assert "look at this" in out
    assert f"[photo: bbx chat media {SESSION}/u-1/0 -o FILE]" in out
    assert "a fine photo" in out


def test_history_json_and_tail(box: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert bbx(["chat", "history", SESSION, "--box", str(box), "--tail", "1", "--json"]) == 0
    history = json.loads(capsys.readouterr().out)
    assert history["total"] == 2
    assert [entry["uuid"] for entry in history["entries"]] == ["a-1"]


def test_history_in_an_initialised_box_shelves_its_index(
    box: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Outside a box's state folder nothing is written; inside one, the index is kept.
    assert bbx(["chat", "history", SESSION, "--box", str(box)]) == 0
    assert not (box / ".beebox").exists()
    unshelved = capsys.readouterr().out
    (box / ".beebox").mkdir()
    assert bbx(["chat", "history", SESSION, "--box", str(box)]) == 0
    shelved = list((box / ".beebox" / "cache" / "transcript-index").iterdir())
    assert [path.suffix for path in shelved] == [".idx"]
    # Read through the shelved index, the answer is the same.
    assert bbx(["chat", "history", SESSION, "--box", str(box)]) == 0
    assert capsys.readouterr().out == unshelved * 2


def test_media_writes_the_photo(
    box: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "photo.png"
    assert bbx(["chat", "media", f"{SESSION}/u-1/0", "-o", str(out), "--box", str(box)]) == 0
    assert out.read_bytes() == PHOTO
    assert f"wrote {len(PHOTO)} bytes (image/png)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["chat", "media", "../../etc/passwd/0", "-o", "x"], 2, "malformed media reference"),
        (["chat", "media", f"{SESSION}/u-1/1", "-o", "x"], 1, "no-such-image"),
        (["chat", "media", f"{SESSION}/nope/0", "-o", "x"], 1, "not-found"),
        (["chat", "history", "no-such-session"], 1, "no transcript for session"),
        (["chat", "history", "../escape"], 2, "not a session id"),
        (["chat", "history", SESSION, "--tail", "0"], 2, ""),
    ],
)
def test_bad_requests_get_a_clear_error(
    box: Path, capsys: pytest.CaptureFixture[str], argv: list[str], code: int, message: str
) -> None:
    assert bbx([*argv, "--box", str(box)]) == code
    assert message in capsys.readouterr().err


def _parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ("bbx",)
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every parser of the tree under ``parser``, by its command line."""
    yield " ".join(path), parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


def test_every_option_and_positional_of_every_command_has_help() -> None:
    parsers = dict(_parsers(build_parser()))
    missing = []
    for command, parser in parsers.items():
        for action in parser._actions:
            if not action.help:
                missing.append(f"{command} {'/'.join(action.option_strings) or action.dest}")
            if isinstance(action, argparse._SubParsersAction):
                helped = {choice.dest for choice in action._choices_actions if choice.help}
                missing.extend(f"{command} {name}" for name in action.choices if name not in helped)
    assert missing == []
    # The walk reached the leaves.
    assert {"bbx init", "bbx serve", "bbx chat sessions", "bbx chat review run"} <= set(parsers)


@pytest.mark.parametrize(
    "argv",
    [
        ["phases", "--markdown"],
        ["chat", "history", SESSION, "--page", "0", "10", "--json"],
        ["chat", "media", f"{SESSION}/u-1/0", "-o", "-"],
        ["chat", "sessions", "--limit", "3"],
        ["chat", "send", "hello", "--image", "a.png", "--url", "http://127.0.0.1:1"],
        ["chat", "review", "run", "--dry-run", "--now"],
        ["serve", "--port", "0", "--engine", "claude", "--permission-mode", "plan"],
        ["init", "somewhere"],
    ],
)
def test_the_parser_bbx_runs_with_reads_as_the_whole_tree(argv: list[str]) -> None:
    # `main` adds a command's options only when it is named: the same meaning.
    assert build_parser(complete=False).parse_args(argv) == build_parser().parse_args(argv)


def test_every_commands_help_is_the_same_when_its_options_wait(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for command, parser in _parsers(build_parser()):
        with pytest.raises(SystemExit):
            build_parser(complete=False).parse_args([*command.split()[1:], "--help"])
        assert capsys.readouterr().out == parser.format_help(), command


def test_media_finds_a_photo_of_a_sub_agents_work(
    box: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Its history names the session (`bbx chat history` of a sub-agent, the page's
    # fold); its line is in the sub-agent's own transcript.
    session_transcript = transcript_path(box, SESSION, tmp_path / "projects")
    sub_agent = session_transcript.with_suffix("") / "subagents" / "agent-a7.jsonl"
    sub_agent.parent.mkdir(parents=True)
    write_chat(tmp_path / "sub" / "chat.jsonl")
    sub_agent.write_text(
        (tmp_path / "sub" / "chat.jsonl").read_text().replace('"u-1"', '"s-1"'), "utf-8"
    )
    out = tmp_path / "from-the-sub-agent.png"
    assert bbx(["chat", "media", f"{SESSION}/s-1/0", "-o", str(out), "--box", str(box)]) == 0
    assert out.read_bytes() == PHOTO
    assert bbx(["chat", "media", f"{SESSION}/s-2/0", "-o", str(out), "--box", str(box)]) == 1
    assert "no photo at" in capsys.readouterr().err


def test_media_to_a_file_it_cannot_write_is_an_error(
    box: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "no-such-folder" / "photo.png"
    assert bbx(["chat", "media", f"{SESSION}/u-1/0", "-o", str(out), "--box", str(box)]) == 1
    assert capsys.readouterr().err == (f"bbx: cannot write {out}: No such file or directory\n")


def test_the_boxs_logged_warnings_are_said_as_bbx(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = init_box(tmp_path / "box").root
    state = root / ".beebox" / "chat-review" / "state.json"
    state.write_text("not json")
    assert bbx(["chat", "review", "status", "--box", str(root)]) == 0
    captured = capsys.readouterr()
    assert captured.out == "0 chat sessions ready to review\n"
    assert captured.err == f"bbx: chat review state {state} is invalid-json: starting fresh\n"
    # Only while the command runs: the host's logging is as it was.
    assert logging.getLogger("beebox_impl").handlers == []


def test_a_read_whose_index_cannot_be_shelved_says_so_as_bbx(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A read says it itself, not through logging (which it does not load: issue 38).
    monkeypatch.delenv(PROJECTS_DIR_ENV, raising=False)
    root = init_box(tmp_path / "box").root
    transcript = transcript_path(root, SESSION, box_projects_root(root))
    write_chat(transcript)
    blocked = root / ".beebox" / "cache" / "transcript-index"
    blocked.parent.mkdir(parents=True, exist_ok=True)
    blocked.write_text("a file where the shelf's folder should be")
    assert bbx(["chat", "history", SESSION, "--json", "--box", str(root)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["total"] == 2
    assert captured.err.startswith(f"bbx: could not shelve the index of {transcript}: ")
    assert captured.err.count("\n") == 1


def test_an_interrupted_command_says_so_without_a_traceback(
    box: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_transcripts, "read_history", interrupted)
    assert bbx(["chat", "history", SESSION, "--box", str(box)]) == 130
    assert capsys.readouterr().err == "bbx: interrupted\n"


def test_output_its_reader_stops_reading_ends_without_a_traceback(tmp_path: Path) -> None:
    projects, box = tmp_path / "projects", tmp_path / "box"
    box.mkdir()
    path = transcript_path(box, SESSION, projects)
    path.parent.mkdir(parents=True)
    lines = [
        {"type": "user", "uuid": f"u-{n}", "parentUuid": None, "sessionId": SESSION,
         "timestamp": "2026-12-01T10:00:00.000Z",
         "message": {"role": "user", "content": [{"type": "text", "text": "words " * 40}]}}
        for n in range(3000)
    ]  # fmt: skip
    path.write_text("".join(compact(line) + "\n" for line in lines), encoding="utf-8")
    # Far more than a pipe holds: the command is still writing when the reader goes.
    reader = subprocess.Popen(
        [sys.executable, "-m", "beebox_impl", "chat", "history", SESSION, "--tail", "3000",
         "--box", str(box)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, PROJECTS_DIR_ENV: str(projects)},
    )  # fmt: skip
    assert reader.stdout is not None
    assert reader.stderr is not None
    assert reader.stdout.readline().startswith(f"session {SESSION}: 3000 entries".encode())
    reader.stdout.close()
    errors = reader.stderr.read().decode()
    reader.stderr.close()
    assert (reader.wait(timeout=60), errors) == (1, "")


@pytest.mark.parametrize(("columns", "widest"), [("60", 58), ("120", 118), ("junk", 78)])
def test_help_is_as_wide_as_the_terminal_says(
    columns: str, widest: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As `shutil.get_terminal_size` reads it: COLUMNS, else the terminal (none here:
    # pytest captures stdout), else 80; argparse keeps two columns free.
    monkeypatch.setenv("COLUMNS", columns)
    monkeypatch.setattr(os, "get_terminal_size", _no_terminal)
    text = build_parser(complete=True).format_help()
    assert max(len(line) for line in text.splitlines()) <= widest
    assert help_formatter("bbx")._width == widest


def _no_terminal(_descriptor: int) -> os.terminal_size:
    raise OSError("not a terminal")
