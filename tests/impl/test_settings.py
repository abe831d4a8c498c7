"""The box's settings file (`beebox_impl.settings`) and what `bbx serve` makes of it."""

from __future__ import annotations

import argparse
from datetime import timedelta
from pathlib import Path

import pytest

from beebox_impl.cli import main as bbx
from beebox_impl.cli.box import permission_mode_lines, serving_permissions
from beebox_impl.settings import (
    SETTINGS_TEMPLATE,
    BoxSettings,
    HistorySettings,
    InvalidBoxSettings,
    PermissionSettings,
    install_settings,
    load_box_settings,
    settings_path,
)


def write(box: Path, text: str) -> None:
    settings_path(box).parent.mkdir(parents=True, exist_ok=True)
    settings_path(box).write_text(text)


def test_no_file_is_the_defaults(tmp_path: Path) -> None:
    assert load_box_settings(tmp_path) == BoxSettings()
    assert BoxSettings().permissions == PermissionSettings("default", (), (), timedelta(minutes=10))
    # Every photo by reference unless the box says otherwise.
    assert BoxSettings().history == HistorySettings("refs")


def test_the_template_says_the_defaults_and_is_written_once(tmp_path: Path) -> None:
    assert install_settings(tmp_path) is True
    assert settings_path(tmp_path).read_text() == SETTINGS_TEMPLATE
    assert load_box_settings(tmp_path) == BoxSettings()
    write(tmp_path, "permissions:\n  mode: plan  # mine\n")
    assert install_settings(tmp_path) is False
    assert settings_path(tmp_path).read_text() == "permissions:\n  mode: plan  # mine\n"


def test_bbx_init_writes_the_template(tmp_path: Path) -> None:
    assert bbx(["init", str(tmp_path / "box")]) == 0
    assert settings_path(tmp_path / "box").read_text() == SETTINGS_TEMPLATE


def test_every_key_is_read(tmp_path: Path) -> None:
    write(
        tmp_path,
        "permissions:\n"
        "  mode: acceptEdits\n"
        "  allow: ['Bash(git status:*)', ' Read ']\n"
        "  deny:\n    - Bash(rm:*)\n"
        "  timeout_minutes: 2.5\n"
        "history:\n"
        "  photos: original\n",
    )
    settings = load_box_settings(tmp_path)
    assert settings.permissions == PermissionSettings(
        "acceptEdits", ("Bash(git status:*)", "Read"), ("Bash(rm:*)",), timedelta(minutes=2.5)
    )
    assert settings.history == HistorySettings("original")


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("permissions:\n  mode: yolo\n", ":2: permissions.mode is 'yolo'; expected one of default"),
        ("permissions:\n  mode: 3\n", "permissions.mode is 3"),
        ("permissions:\n  modes: plan\n", ":2: unknown key(s) in permissions: modes"),
        ("permission:\n  mode: plan\n", ":1: unknown key(s) in the file: permission"),
        ("permissions:\n  allow: Bash\n", "permissions.allow is 'Bash'; expected a list"),
        ("permissions:\n  deny: ['']\n", "permissions.deny is ['']"),
        ("permissions:\n  timeout_minutes: 0\n", "more than 0 and at most 1440"),
        ("permissions:\n  timeout_minutes: 1441\n", "at most 1440"),
        ("permissions:\n  timeout_minutes: ten\n", "a number of minutes"),
        ("permissions:\n  timeout_minutes: true\n", "a number of minutes"),
        ("permissions: [1]\n", "permissions must be a mapping"),
        ("- a\n", "the file must be a mapping"),
        ("permissions: {mode: [\n", "not YAML"),
        ("history:\n  photos: all\n", ":2: history.photos is 'all'; expected one of original"),
        ("history:\n  photo: refs\n", ":2: unknown key(s) in history: photo"),
        ("history: refs\n", "history must be a mapping"),
    ],
)
def test_what_is_not_a_setting_is_refused_saying_where(
    tmp_path: Path, text: str, said: str
) -> None:
    write(tmp_path, text)
    with pytest.raises(InvalidBoxSettings) as refused:
        load_box_settings(tmp_path)
    assert str(settings_path(tmp_path)) in str(refused.value)
    assert said in str(refused.value)


def test_an_unreadable_file_is_refused(tmp_path: Path) -> None:
    write(tmp_path, "")
    settings_path(tmp_path).write_bytes(b"\xff\xfe")
    with pytest.raises(InvalidBoxSettings, match="cannot be read"):
        load_box_settings(tmp_path)


def test_an_empty_file_is_the_defaults(tmp_path: Path) -> None:
    write(tmp_path, "# nothing yet\n")
    assert load_box_settings(tmp_path) == BoxSettings()


def serve_args(box: Path, mode: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(box=box, permission_mode=mode)


def test_the_command_line_mode_wins_over_the_file(tmp_path: Path) -> None:
    write(tmp_path, "permissions:\n  mode: plan\n  allow: [Read]\n  timeout_minutes: 1\n")
    assert serving_permissions(serve_args(tmp_path)).mode == "plan"
    chosen = serving_permissions(serve_args(tmp_path, "acceptEdits"))
    assert chosen == PermissionSettings("acceptEdits", ("Read",), (), timedelta(minutes=1))


def test_bbx_serve_says_the_mode_and_warns_of_bypass() -> None:
    (echo,) = permission_mode_lines(PermissionSettings(), "echo")
    assert echo.startswith("bbx: permission mode default: Claude Code asks on the page")
    assert "the echo engine runs no tools" in echo
    lines = permission_mode_lines(
        PermissionSettings("bypassPermissions", ("Read",), ("Bash(rm:*)",)), "claude"
    )
    assert lines[0].startswith("bbx: permission mode bypassPermissions: Claude Code runs EVERY")
    assert "denied after 10 min" in lines[0]
    assert lines[1] == "bbx: allowed without asking: Read; always refused: Bash(rm:*)"
    assert lines[2].startswith("bbx: WARNING: --dangerously-bypass-permissions")


def test_bbx_serve_refuses_bypass_without_its_flag_and_a_bad_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    box = tmp_path / "box"
    assert bbx(["serve", "--box", str(box), "--permission-mode", "bypassPermissions"]) == 2
    assert "--dangerously-bypass-permissions" in capsys.readouterr().err
    write(box, "permissions:\n  mode: bypassPermissions\n")
    assert bbx(["serve", "--box", str(box)]) == 2
    capsys.readouterr()
    write(box, "permissions:\n  mode: nope\n")
    assert bbx(["serve", "--box", str(box)]) == 1
    assert f"bbx: cannot serve: {settings_path(box)}:2" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        bbx(["serve", "--box", str(box), "--permission-mode", "nope"])
    assert usage.value.code == 2
    assert "invalid choice: 'nope'" in capsys.readouterr().err
