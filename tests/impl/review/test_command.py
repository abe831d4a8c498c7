"""`bbx chat review status|run` (§4.8): output lines, exit codes, the lock, stderr only,
and our departures: ``--now``, the deferred line that names it, ``bbx:`` errors."""

from __future__ import annotations

import argparse
import io
from datetime import timedelta
from pathlib import Path

import pytest

from beebox_impl.box import init_box
from beebox_impl.review.command import add_review_commands, run_review_command
from beebox_impl.review.lock import REVIEW_LOCK_GROUP, hold_lock_group
from beebox_impl.review.origin import ORIGIN_ENV
from beebox_impl.review.reviewers import extractive
from beebox_impl.transcript.location import PROJECTS_DIR_ENV, box_projects_root
from tests.impl.review.boxes import ELSEWHERE, ReviewBox, conversation, fixed_output

# What a stand-in reviewer answers, whatever the span.
KEENE = fixed_output("Road trip to Keene", "Planning four days in Keene.", [])


@pytest.fixture
def box(tmp_path: Path) -> ReviewBox:
    made = ReviewBox.create(tmp_path)
    init_box(made.root)
    return made


def bbx_review(
    box: ReviewBox, *argv: str, folder: Path | None = None, told_where: bool = True
) -> tuple[int, str, str]:
    """Parse `bbx chat review …` as cli.py will, run it, answer (code, stdout, stderr);
    ``told_where``: the box's transcripts are where `BBX_CLAUDE_PROJECTS_DIR` says."""
    parser = argparse.ArgumentParser(prog="bbx")
    commands = parser.add_subparsers(dest="command", required=True)
    chat = commands.add_parser("chat")
    add_review_commands(chat.add_subparsers(dest="chat_command", required=True))
    args = parser.parse_args(["chat", "review", *argv, "--box", str(folder or box.root)])
    out, err = io.StringIO(), io.StringIO()
    told = {PROJECTS_DIR_ENV: str(box.projects)} if told_where else {}
    code = run_review_command(
        args,
        environ={**told, ORIGIN_ENV: box.origin.id},
        stdout=out,
        stderr=err,
        clock=lambda: box.now,
    )
    return code, out.getvalue(), err.getvalue()


def test_status_counts_ready_sessions_and_skips(box: ReviewBox) -> None:
    box.add_session(conversation(4))
    box.add_session(conversation(4), age=timedelta(minutes=5))
    box.add_session(conversation(1))
    box.add_session(conversation(4), origin=ELSEWHERE)
    gone = box.add_session(conversation(4))
    gone.transcript.unlink()

    code, out, err = bbx_review(box, "status")

    assert code == 0
    assert out == (
        "1 chat session ready to review\n"
        "  1 deferred: active in the last 30 minutes; --now reviews them anyway\n"
        "  too few user turns: 1\n"
        "  husks whose transcript is gone: 1\n"
        "  1 session originated on another machine (not reviewed here)\n"
    )
    assert ELSEWHERE.id not in out
    assert err == ""


def test_status_check_exits_1_when_nothing_is_ready(box: ReviewBox) -> None:
    assert bbx_review(box, "status", "--check")[:2] == (1, "0 chat sessions ready to review\n")
    box.add_session(conversation(4))
    assert bbx_review(box, "status", "--check")[0] == 0


def test_dry_run_lists_the_plan_and_calls_no_model(box: ReviewBox) -> None:
    older = box.add_session(conversation(4), age=timedelta(hours=5))
    box.add_session(conversation(4), age=timedelta(hours=3))

    code, out, _ = bbx_review(box, "run", "--dry-run", "--max-sessions", "1")

    lines = out.splitlines()
    assert code == 0
    assert lines[0] == "would review 1 of 2 qualified session(s)"
    assert lines[1].startswith(f"  {older.session_id}  ")
    assert lines[1].endswith(f" new chars (no-journal)  {older.husk}")
    assert lines[2] == "  (+1 beyond the per-run cap)"
    assert box.field(older, "review-span") is None


@pytest.mark.parametrize("value", ["0", "-1", "2.5", "x", ""])
def test_a_bad_max_sessions_is_refused(box: ReviewBox, value: str) -> None:
    code, out, err = bbx_review(box, "run", "--max-sessions", value)

    assert (code, out) == (1, "")
    assert err == f'bbx: --max-sessions must be a positive integer, got "{value}"\n'


def test_run_prints_one_summary_line(box: ReviewBox) -> None:
    box.add_session(conversation(4), age=timedelta(hours=5))
    box.add_session(conversation(4), age=timedelta(hours=4))
    box.add_session(conversation(4), age=timedelta(minutes=5))

    code, out, err = bbx_review(box, "run", "--max-sessions", "1")

    assert code == 0
    assert out == (
        "reviewed 1 session(s), 1 still active (--now reviews them anyway), 1 read from the top,"
        " 1 deferred to the next run\n"
    )
    assert err == ""


def test_run_reports_leak_scan_drops(box: ReviewBox, monkeypatch: pytest.MonkeyPatch) -> None:
    session = box.add_session(conversation(4))
    key = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1"
    original = extractive.ExtractiveReviewer.review
    monkeypatch.setattr(
        extractive.ExtractiveReviewer,
        "review",
        lambda self, args: {**original(self, args), "title": f"Token {key}"},
    )

    code, out, _ = bbx_review(box, "run")

    assert code == 0
    assert out.splitlines()[1] == f"  leak scan dropped {session.session_id}:title"


def test_a_second_run_is_refused_while_the_lock_is_held(box: ReviewBox) -> None:
    box.add_session(conversation(4))
    with hold_lock_group(box.root, REVIEW_LOCK_GROUP, "chat-review"):
        code, out, err = bbx_review(box, "run")

    assert (code, out) == (1, "")
    assert err.startswith(
        "bbx: another chat review is already running — lock group retro is held by"
    )
    assert "chat-review pid" in err


def test_an_unknown_reviewer_is_an_error(box: ReviewBox) -> None:
    code, _, err = bbx_review(box, "run", "--reviewer", "nope")
    assert code == 1
    assert "unknown reviewer 'nope'" in err


def test_progress_goes_to_a_terminal_only(box: ReviewBox) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    box.add_session(conversation(4))
    parser = argparse.ArgumentParser()
    add_review_commands(parser.add_subparsers(dest="chat_command"))
    args = parser.parse_args(["review", "run", "--box", str(box.root)])
    out, err = io.StringIO(), Terminal()

    run_review_command(
        args,
        environ={PROJECTS_DIR_ENV: str(box.projects), ORIGIN_ENV: box.origin.id},
        stdout=out,
        stderr=err,
        clock=lambda: box.now,
    )

    assert "\rchat review [" in err.getvalue()
    assert "1/1 sessions" in err.getvalue()
    assert "\r" not in out.getvalue()


def test_now_reviews_the_sessions_deferred_as_active(
    box: ReviewBox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(extractive.ExtractiveReviewer, "review", lambda self, args: KEENE)
    active = box.add_session(conversation(4), age=timedelta(minutes=5))

    assert bbx_review(box, "status")[1] == (
        "0 chat sessions ready to review\n"
        "  1 deferred: active in the last 30 minutes; --now reviews them anyway\n"
    )
    assert bbx_review(box, "status", "--now")[1] == "1 chat session ready to review\n"
    assert bbx_review(box, "status", "--check", "--now")[0] == 0
    dry_run = bbx_review(box, "run", "--dry-run", "--now")[1]
    assert dry_run.splitlines()[1].startswith(f"  {active.session_id}  ")
    assert bbx_review(box, "run")[1] == (
        "reviewed 0 session(s), 1 still active (--now reviews them anyway)\n"
    )
    assert box.field(active, "review-span") is None

    reviewed = bbx_review(box, "run", "--now")
    assert reviewed[:2] == (0, "reviewed 1 session(s), 1 read from the top\n")
    assert box.field(active, "title") == KEENE["title"]


@pytest.mark.parametrize("command", [["status"], ["run", "--dry-run"], ["run"]])
@pytest.mark.parametrize("folder", ["missing", "plain", "file"])
def test_a_folder_that_is_not_a_box_is_an_error(
    box: ReviewBox, tmp_path: Path, command: list[str], folder: str
) -> None:
    path = tmp_path / folder
    if folder == "plain":
        path.mkdir()
    elif folder == "file":
        path.write_text("not a box")

    code, out, err = bbx_review(box, *command, folder=path)

    assert (code, out) == (1, "")
    assert err.startswith("bbx: ")
    assert str(path) in err
    assert err.count("\n") == 1
    if folder == "missing":
        assert "no such folder" in err
        assert not path.exists(), "nothing made where the box was not"
    elif folder == "file":
        assert "not a folder" in err
    else:
        assert f"run `bbx init {path}`" in err


def test_a_husk_folder_the_system_refuses_is_an_error_not_a_traceback(box: ReviewBox) -> None:
    husks = box.root / "_content" / "chat" / "web"
    husks.rmdir()
    husks.write_text("a file where the husks go")

    code, out, err = bbx_review(box, "status")

    assert (code, out) == (1, "")
    assert err.startswith(f"bbx: cannot review the chats of {box.root}: ")
    assert "Not a directory" in err


def test_warnings_are_said_as_bbx(box: ReviewBox, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: object, args: object) -> object:
        raise RuntimeError("the model is away")

    monkeypatch.setattr(extractive.ExtractiveReviewer, "review", refuse)
    session = box.add_session(conversation(4))

    code, _, err = bbx_review(box, "run")

    assert code == 0
    assert err == (
        f"bbx: chat review: reviewer failed on session {session.session_id}: the model is away\n"
    )


def test_the_echo_engines_sessions_in_the_box_are_reviewed(tmp_path: Path) -> None:
    # Where the box's own (echo) engine writes when not told elsewhere.
    root = init_box(tmp_path / "box").root
    box = ReviewBox(root, box_projects_root(root))
    box.add_session(conversation(4))
    assert bbx_review(box, "status", told_where=False)[1] == "1 chat session ready to review\n"
