"""The public API: what `from beebox_impl import …` offers, pinned (issue 35).

Adding a name is a decision (add it here); removing or renaming one breaks hosts
(a test fails). The three spellings of the list in `beebox_impl/__init__.py` — the
imports type checkers read, `__all__`, the table `__getattr__` loads from — must
agree, and importing the package must not import what its names live in.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import beebox_impl

INIT = Path(beebox_impl.__file__)

PUBLIC_NAMES = {
    # The box, and the folder it lives in.
    "Box", "BoxPaths", "init_box", "is_box",
    # Sending.
    "SendRequest", "Attachment", "Sender", "SendOutcome", "TurnStarted", "Queued",
    "Deduplicated", "PhotosWaiting", "SendFailed", "LoopRunner",
    # Reading: history, photos, bootstrap, status.
    "HistorySlice", "TailSlice", "PageSlice", "SessionHistory", "SessionEntry",
    "SessionContentBlock", "PhotoMode", "MediaFound", "MediaMissing", "Bootstrap",
    "ChatStatus",
    # Events, each name with its data's TypedDict.
    "BoxEvent", "EventSubscription", "BOX_EVENT_NAMES", "BoxEventName", "BoxEventOf",
    "ChatTurnData", "ChatUserMessageData", "CloseData", "MessageData", "NoData",
    "PermissionEndedData", "PermissionRequestData", "SenderData", "SessionIdData",
    "StartFailedData", "TurnErrorData", "TurnTextData",
    # Permission requests.
    "PermissionRequest", "PermissionReply", "PermissionDecision", "Answerer",
    # Engines, clocks, thread sessions, HTTP, settings.
    "Engine", "StartOptions", "EchoEngine", "ClaudeEngine", "SessionClock", "SystemClock",
    "ManualClock", "ChatSessionPool", "serve_box", "RunningServer", "HttpLimits",
    "BoxSettings",
    # The error tree.
    "BeeboxError", "Rejection", "InvalidArgument", "InvariantError", "BoxStateError",
    "NotABox", "BoxInUse", "BoxClosed", "SchemaTooNew", "WrongThread", "InvalidRequest",
    "MalformedMediaRef", "InvalidSessionId", "InvalidHistorySlice", "InvalidBoxSettings",
    "InvalidPermissionMode", "PermissionNotFound", "PermissionAlreadyEnded",
    "SessionBusyError", "EngineStartError", "LockHeldError", "RemoteBindRefused",
}  # fmt: skip


def test_the_public_names_are_pinned() -> None:
    assert set(beebox_impl.__all__) == PUBLIC_NAMES
    assert len(beebox_impl.__all__) == len(PUBLIC_NAMES)


def test_every_public_name_resolves_and_is_what_its_home_defines() -> None:
    for name in beebox_impl.__all__:
        value = getattr(beebox_impl, name)
        assert value is not None, name


def test_the_three_spellings_of_the_list_agree() -> None:
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    type_checked: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom)
                for alias in statement.names:
                    type_checked[alias.name] = str(statement.module)
    homes = beebox_impl._HOMES
    assert type_checked == homes
    assert set(homes) == set(beebox_impl.__all__)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchThing"):
        getattr(beebox_impl, "NoSuchThing")  # noqa: B009 - the name is not one of ours


def test_importing_the_package_imports_none_of_its_names_homes() -> None:
    # A light `bbx` command imports a submodule, which imports this package first.
    probe = (
        "import sys, beebox_impl; "
        "print(sorted(m for m in sys.modules if m.startswith(('beebox_impl.', 'beebox_spec'))))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    # Only the loader the names go through.
    assert loaded.strip() == "['beebox_impl.lazy']"
