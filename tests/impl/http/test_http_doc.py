"""`docs/http.md`'s "Talking to a box" commands, run as written with curl against `bbx serve`."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.impl.http.support import PHOTO_BYTES, read_address, start_serve, stop_serve

DOC = Path(__file__).resolve().parents[3] / "docs" / "http.md"

# curl's exit status when --max-time ends a transfer still going (an event stream).
CURL_TIMED_OUT = 28

pytestmark = pytest.mark.skipif(
    shutil.which("curl") is None or shutil.which("base64") is None, reason="needs curl"
)


def documented_commands() -> list[str]:
    """The shell commands of the section's code block, continuation lines joined."""
    section = DOC.read_text().split("## Talking to a box", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    commands: list[str] = []
    for line in block.replace("\\\n", " ").splitlines():
        command = line.strip()
        if command and not command.startswith("#"):
            commands.append(command)
    return commands


def test_the_documented_commands_talk_to_a_served_box(tmp_path: Path) -> None:
    box = tmp_path / "box"
    process = start_serve(box, tmp_path / "projects")
    try:
        url, _token = read_address(process, box)
        (box / "photo.png").write_bytes(PHOTO_BYTES)
        set_box, set_token, *commands = documented_commands()
        assert set_box.startswith("BOX=")
        # BOX is the served URL; TOKEN is read as the doc reads it, in the box's folder.
        prelude = f"BOX={url.rstrip('/')}\n{set_token}\n"

        def run(command: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                ["bash", "-c", prelude + command],
                cwd=box,
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )

        send, write_body, send_photo, events, history, media = commands
        assert run(write_body).returncode == 0
        for command in (send, send_photo):
            answer = json.loads(run(command).stdout)
            assert set(answer) & {"turnId", "queued"}, answer
        # The stream stays open: curl is still reading it when its time is up.
        streamed = run(events.replace("curl -sN", "curl -sN --max-time 2", 1))
        assert streamed.returncode == CURL_TIMED_OUT, streamed
        # The echo's turns end within moments; then the history holds the photo, by ref.
        deadline = time.monotonic() + 20
        while True:
            entries = json.loads(run(history).stdout)["entries"]
            photos = [block for e in entries for block in e["content"] if block["type"] == "image"]
            if photos or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        (photo,) = photos
        assert set(photo) == {"type", "imageRef", "mediaType"}
        assert "dataBase64" not in json.dumps(entries)
        fetched = run(media.replace("<imageRef>", photo["imageRef"]))
        assert fetched.returncode == 0, fetched
        assert (box / "photo-back.png").read_bytes() == PHOTO_BYTES
    finally:
        code, errors = stop_serve(process)
    assert code == 0, errors
