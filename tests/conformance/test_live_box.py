"""`python -m conformance --url`: someone's live box is written to only with --allow-writes.

The live box here is a real `bbx serve` (`conformance.serve.served_box`) with a chat
of its own: one message sent and answered before the run, as a person's box has.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from conformance.__main__ import main as conformance_main
from conformance.runner import PACKAGED_VECTORS
from conformance.serve import ServedBox, served_box
from conformance.targets.http import HttpHost, exchange_writes
from conformance.vectorfile import load_vector_file

HTTP_VECTORS = PACKAGED_VECTORS / "http"
# How long the echo engine may take to answer the seeding message.
_ANSWER_TIMEOUT_S = 60.0


def _get(host: HttpHost, path: str) -> Any:
    status, _, body = host.request("GET", path)
    assert status == 200, (path, status, body[:200])
    return json.loads(body)


def _chat_and_sessions(host: HttpHost) -> dict[str, Any]:
    """What a person sees of their box: the current chat, its history, the session list."""
    bootstrap = _get(host, "/api/chat/bootstrap")
    history = bootstrap["history"] or {"entries": []}
    return {
        "kind": bootstrap["kind"],
        "sessionId": bootstrap["sessionId"],
        "history": [(entry["uuid"], entry["type"]) for entry in history["entries"]],
        "sessions": _get(host, "/api/chat/sessions"),
    }


@pytest.fixture
def live_box() -> Iterator[ServedBox]:
    """A served box whose chat has one answered message."""
    with served_box() as served:
        host = HttpHost(served.url, served.token)
        body = json.dumps({"message": "my own chat, not the run's"}).encode()
        status, _, answer = host.request(
            "POST", "/api/chat/send", body=body, headers={"Content-Type": "application/json"}
        )
        assert status == 200, answer
        deadline = time.monotonic() + _ANSWER_TIMEOUT_S
        while True:
            seen = _chat_and_sessions(host)
            answered = any(kind == "assistant" for _, kind in seen["history"])
            if answered and not _get(host, "/api/chat/bootstrap?tail=1")["status"]["busy"]:
                break
            assert time.monotonic() < deadline, f"the seeding message was never answered: {seen}"
            time.sleep(0.05)
        yield served


def _writing_cases() -> set[str]:
    return {
        case.name
        for path in sorted(HTTP_VECTORS.glob("*.json"))
        for case in load_vector_file(path).cases
        if exchange_writes(case.input, case.expect) is not None
    }


def _case_count() -> int:
    return sum(len(load_vector_file(path).cases) for path in HTTP_VECTORS.glob("*.json"))


def test_a_live_box_run_leaves_the_chat_and_sessions_as_they_were_and_says_what_it_skipped(
    live_box: ServedBox, capsys: pytest.CaptureFixture[str]
) -> None:
    host = HttpHost(live_box.url, live_box.token)
    before = _chat_and_sessions(host)
    # A chat to lose: what a reset or a send would change.
    assert before["kind"] == "resumable", before
    assert before["sessions"]["sessions"], before

    argv = ["--url", live_box.url, "--token", live_box.token, str(HTTP_VECTORS)]
    assert conformance_main(argv) == 0
    lines = capsys.readouterr().out.splitlines()

    assert _chat_and_sessions(host) == before
    writing = _writing_cases()
    # The resets, the send and the photo are among them, and they are all skipped,
    # each on a line naming it, what it would write, and the flag that runs it.
    assert {
        "a chat with no session (after a reset) bootstraps empty",
        "a send is answered 200 and a repeated messageId is deduplicated",
        "a photo line over 16 MiB is 413",
    } <= writing
    skips = [line for line in lines if line.startswith("SKIP ")]
    assert len(skips) == len(writing)
    for name in writing:
        (line,) = [skip for skip in skips if f" :: {name}: it writes to the box (" in skip]
        assert line.endswith("; --allow-writes runs it"), line
    assert "(POST /api/chat/reset)" in " ".join(skips)
    assert "(its setup sends a photo)" in " ".join(skips)
    # Every read-only case ran (and passed), the refusals of unsafe methods among them.
    ran = _case_count() - len(writing)
    writes = len(writing)
    summary = f"http: {ran} passed, {writes} skipped ({writes} that write to the box: "
    assert summary + "--allow-writes runs them)" in lines
    assert lines[-1] == f"{ran} passed, 0 failed, {writes} skipped"


def test_allow_writes_runs_every_case_on_a_live_box(
    live_box: ServedBox, capsys: pytest.CaptureFixture[str]
) -> None:
    host = HttpHost(live_box.url, live_box.token)
    before = _chat_and_sessions(host)
    argv = ["--url", live_box.url, "--token", live_box.token, "--allow-writes", str(HTTP_VECTORS)]
    assert conformance_main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert not [line for line in lines if line.startswith("SKIP ")]
    assert lines[-2:] == [f"http: {_case_count()} passed", f"{_case_count()} passed, 0 failed"]
    # What the flag is for: the run did reset the chat and send to the box.
    assert _chat_and_sessions(host) != before


def test_allow_writes_without_a_live_box_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        conformance_main(["--serve", "--allow-writes"])
    assert exited.value.code == 2
    assert "--allow-writes applies only to a live box (--url)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("case_input", "expect", "writes"),
    [
        ({"requests": [{"method": "GET", "path": "/a"}]}, [{"status": 200}], None),
        ({"requests": [{"method": "HEAD", "path": "/a"}]}, [{"status": 200}], None),
        # A refusal changes nothing: the 400s, 401s and 405s of unsafe methods run.
        ({"requests": [{"method": "POST", "path": "/a"}]}, [{"status": 401}], None),
        ({"requests": [{"method": "DELETE", "path": "/a"}]}, [{"status": 405}], None),
        ({"setup": {"idle": True}, "requests": []}, [], None),
        # A request the host is expected to take writes; so does one whose answer is not said.
        (
            {"requests": [{"method": "GET", "path": "/a"}, {"method": "post", "path": "/b"}]},
            [{"status": 200}, {"status": 200}],
            "POST /b",
        ),
        ({"requests": [{"method": "PUT", "path": "/a"}]}, [], "PUT /a"),
        ({"requests": [{"method": "PATCH", "path": "/a"}]}, [{"status": 303}], "PATCH /a"),
        ({"setup": {"photo": {}}, "requests": []}, [], "its setup sends a photo"),
        ({"setup": {"seed": 1}, "requests": []}, [], "its setup 'seed'"),
        ("not a case", [], "a case that cannot be read"),
    ],
)
def test_which_exchanges_write(case_input: Any, expect: Any, writes: str | None) -> None:
    assert exchange_writes(case_input, expect) == writes
