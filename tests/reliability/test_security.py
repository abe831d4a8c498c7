"""Security (issue 9 §4): auth on every route, the token, media confinement, the page, binding.

The routes come from the router's own table (`ROUTES`), so a route added later
is held to the same rules without anyone remembering to list it here.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from beebox_impl.box import init_box
from beebox_impl.http.routes import ROUTES, Route, find_route
from beebox_impl.http.server import RemoteBindRefused, check_host, cookie_name, serve_box
from beebox_impl.transcript.location import project_dir
from tests.impl.http.support import Client, Response
from tests.reliability.support import Served, served_box_sync, start_serve

SESSION = "sess-1"
# A photo line: a media reference to it is the one that may be served.
PHOTO = b"\x89PNG-the-photo-of-this-box" * 64


def _concrete(route: Route) -> str:
    # A path the route serves: its parameter filled with something that parses.
    return route.path.replace("{ref}", f"{SESSION}/u-1/0").replace("{name}", "app.js")


def _api_routes() -> list[tuple[str, str]]:
    return [
        (method, _concrete(route))
        for route in ROUTES
        if not route.public
        for method in route.methods
    ]


def _body_for(method: str) -> dict[str, Any]:
    return {"json_body": {}} if method == "POST" else {}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with served_box_sync(tmp_path) as served:
        yield served


def test_every_route_outside_api_is_marked_public_and_every_api_route_is_not() -> None:
    assert ROUTES
    for route in ROUTES:
        under_api = route.path == "/api" or route.path.startswith("/api/")
        assert under_api != route.public, route.operation_id
        # The table sends each route's own path to that route.
        assert find_route(_concrete(route)) is route


WRONG_CREDENTIALS = [
    pytest.param({}, id="none"),
    pytest.param({"Authorization": "Bearer wrong"}, id="wrong-bearer"),
    pytest.param({"Authorization": "Bearer "}, id="empty-bearer"),
    pytest.param({"Authorization": "Basic Ym94OmJveA=="}, id="basic"),
    pytest.param({"Cookie": "bbx_token_1=wrong"}, id="wrong-cookie"),
]


@pytest.mark.parametrize("headers", WRONG_CREDENTIALS)
def test_every_api_route_and_method_is_401_without_the_right_token(
    served: Served, headers: dict[str, str]
) -> None:
    client = served.client
    routes = _api_routes()
    assert len(routes) >= 10
    for method, path in routes:
        answer = client.request(method, path, headers=headers, auth=False, **_body_for(method))
        assert answer.status == 401, (method, path)
        if method != "HEAD":
            assert answer.json() == {"error": "Unauthorized"}
        assert answer.headers["www-authenticate"] == "Bearer"
    # Nothing any of them asked for happened.
    assert served.box.session_id is None


def test_the_right_token_of_another_port_or_case_does_not_open_the_api(served: Served) -> None:
    client, token = served.client, served.box.token
    other_port = {"Cookie": f"{cookie_name(served.running.port + 1)}={token}"}
    for headers in (
        other_port,
        {"Authorization": f"Bearer {token.upper()}"},
        {"Authorization": f"Bearer {token}x"},
        {"Authorization": f"Bearer {token[:-1]}"},
        {"Authorization": f"Token {token}"},
    ):
        answer = client.request("GET", "/api/chat/bootstrap", headers=headers, auth=False)
        assert answer.status == 401, headers


@pytest.mark.parametrize(
    "path",
    [
        "/api/chat/bootstrap/",
        "/API/chat/bootstrap",
        "//api/chat/bootstrap",
        "/api//chat/bootstrap",
        "/api/./chat/bootstrap",
        "/x/../api/chat/bootstrap",
        "/api%2Fchat%2Fbootstrap",
        "/%61pi/chat/bootstrap",
        "/static/../api/chat/bootstrap",
        "/static/%2e%2e/api/openapi.json",
    ],
)
def test_no_spelling_of_an_api_path_gets_past_auth(served: Served, path: str) -> None:
    answer = served.client.request("GET", path, auth=False)
    # Refused, or not found: never the API's answer.
    assert answer.status in (401, 404), (path, answer.status)
    assert b'"sessionId"' not in answer.body
    assert b'"openapi"' not in answer.body


def test_the_token_file_is_0600_in_a_0700_folder(tmp_path: Path) -> None:
    paths = init_box(tmp_path / "box")
    assert stat.S_IMODE(paths.token.stat().st_mode) == 0o600
    assert stat.S_IMODE(paths.state_dir.stat().st_mode) == 0o700
    # A second init keeps the token and its mode.
    token = paths.token.read_text()
    init_box(tmp_path / "box")
    assert paths.token.read_text() == token
    assert stat.S_IMODE(paths.token.stat().st_mode) == 0o600


def _exercise_every_route(client: Client, token: str) -> None:
    client.request("GET", f"/?token={token}", auth=False)
    client.request("GET", "/?token=wrong", auth=False)
    for method, path in _api_routes():
        if path == "/api/events":
            continue  # a stream: exercised by the e2e tests
        client.request(method, path, **_body_for(method))
        client.request(method, f"{path}?token={token}", **_body_for(method))
        client.request(method, path, auth=False, **_body_for(method))


def test_the_token_is_never_logged_in_process(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with served_box_sync(tmp_path) as served:
        token = served.box.token
        _exercise_every_route(served.client, token)
    assert caplog.records
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert token not in logged


def test_the_token_is_never_logged_by_bbx_serve(tmp_path: Path) -> None:
    box, projects = tmp_path / "box", tmp_path / "projects"
    child = start_serve(box, projects)
    token = (box / ".beebox" / "token").read_text().strip()
    try:
        # The one line that carries it is the login URL it prints on purpose.
        assert child.first_line.endswith(f"/?token={token}\n")
        _exercise_every_route(Client("127.0.0.1", child.port, token), token)
    finally:
        code, output = child.stop()
    assert code == 0, output
    assert token not in output
    assert "SIGTERM: shutting down" in output
    for path in box.rglob("*"):
        if path.is_file() and path.name != "token":
            assert token.encode() not in path.read_bytes(), path


# --- media confinement ------------------------------------------------------------------


def _photo_line(uuid: str) -> str:
    data = base64.b64encode(PHOTO).decode("ascii")
    record = {
        "type": "user",
        "uuid": uuid,
        "sessionId": SESSION,
        "timestamp": "2026-03-01T10:00:00.000Z",
        "message": {
            "role": "user",
            "content": [
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": data},
                }
            ],
        },
    }
    return json.dumps(record, separators=(",", ":")) + "\n"


def test_media_is_served_from_the_boxs_own_transcript(served: Served) -> None:
    folder = project_dir(served.box.root, served.projects)
    folder.mkdir(parents=True)
    (folder / f"{SESSION}.jsonl").write_text(_photo_line("u-1"))
    answer = served.client.request("GET", f"/api/session-media/{SESSION}/u-1/0")
    assert (answer.status, answer.body) == (200, PHOTO)


def _plant_outside(tmp_path: Path) -> Path:
    # Another box's transcript, with a photo, outside this box's project folder.
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / f"{SESSION}.jsonl").write_text(_photo_line("u-1"))
    (outside / "other.jsonl").write_text(_photo_line("u-1"))
    return outside


def _refused(answer: Response) -> bool:
    return answer.status in (400, 404) and PHOTO not in answer.body


def test_a_symlinked_transcript_is_not_followed(tmp_path: Path, served: Served) -> None:
    outside = _plant_outside(tmp_path)
    folder = project_dir(served.box.root, served.projects)
    folder.mkdir(parents=True)
    (folder / f"{SESSION}.jsonl").symlink_to(outside / f"{SESSION}.jsonl")
    (folder / "linked.jsonl").symlink_to(outside / "other.jsonl")
    for ref in (f"{SESSION}/u-1/0", "linked/u-1/0"):
        assert _refused(served.client.request("GET", f"/api/session-media/{ref}")), ref
    history = served.client.request("GET", f"/api/chat/history?session={SESSION}")
    assert history.status == 200
    assert history.json()["total"] == 0


def test_a_symlinked_project_folder_is_not_followed(tmp_path: Path, served: Served) -> None:
    outside = _plant_outside(tmp_path)
    served.projects.mkdir(parents=True, exist_ok=True)
    project_dir(served.box.root, served.projects).symlink_to(outside, target_is_directory=True)
    answer = served.client.request("GET", f"/api/session-media/{SESSION}/u-1/0")
    assert _refused(answer)


def test_links_planted_in_the_box_and_projects_folders_lead_nowhere(
    tmp_path: Path, served: Served
) -> None:
    outside = _plant_outside(tmp_path)
    folder = project_dir(served.box.root, served.projects)
    folder.mkdir(parents=True)
    (served.box.root / "escape").symlink_to(outside, target_is_directory=True)
    (served.projects / "escape").symlink_to(outside, target_is_directory=True)
    (folder / "escape").symlink_to(outside, target_is_directory=True)
    for ref in (
        f"escape/{SESSION}/u-1/0",
        f"../escape/{SESSION}/u-1",
        f"..%2Fescape%2F{SESSION}/u-1/0",
        f"escape%2F{SESSION}/u-1/0",
        f"%2e%2e%2f%2e%2e%2fescape%2f{SESSION}/u-1/0",
        f"{SESSION}%00/u-1/0",
        f"{SESSION}.jsonl/u-1/0",
    ):
        assert _refused(served.client.request("GET", f"/api/session-media/{ref}")), ref


# --- the page ---------------------------------------------------------------------------


def test_the_page_is_served_with_its_security_headers(served: Served) -> None:
    for method in ("GET", "HEAD"):
        page = served.client.request(method, "/", auth=False)
        assert page.status == 200
        policy = page.headers.get("content-security-policy", "")
        assert "frame-ancestors 'none'" in policy
        assert "script-src 'self'" in policy
        assert "'unsafe-inline'" not in policy
        assert page.headers.get("x-content-type-options") == "nosniff"
        assert page.headers.get("referrer-policy") in ("no-referrer", "same-origin")
    login = served.client.request("GET", f"/?token={served.box.token}", auth=False)
    # The token must not leave in a Referer once the page is open.
    assert login.headers.get("referrer-policy") == "no-referrer"


def test_the_pages_files_cannot_reach_outside_their_folder(served: Served) -> None:
    for name in ("..%2F__init__.py", "../box.py", "..%2f..%2fbox.py", ".hidden.js", "x/..%2fa.js"):
        answer = served.client.request("GET", f"/static/{name}", auth=False)
        assert answer.status == 404, name


# --- binding ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host", ["0.0.0.0", "::", "192.168.1.10", "10.0.0.1", "localhost.example", "0", "127.0.0.1 "]
)
def test_a_non_loopback_host_needs_the_flag(host: str) -> None:
    with pytest.raises(RemoteBindRefused):
        check_host(host, allow_remote=False)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "::1", "localhost"])
def test_loopback_hosts_need_no_flag(host: str) -> None:
    check_host(host, allow_remote=False)


def test_bbx_serve_refuses_a_remote_host_and_says_how(tmp_path: Path) -> None:
    import subprocess  # noqa: PLC0415

    from tests.reliability.support import SERVE  # noqa: PLC0415

    done = subprocess.run(
        [*SERVE, "--box", str(tmp_path / "box"), "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "BBX_CLAUDE_PROJECTS_DIR": str(tmp_path / "projects")},
        check=False,
    )
    assert done.returncode == 2
    assert "--allow-remote" in done.stderr
    assert done.stdout == ""


def test_an_allowed_remote_bind_warns(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from anyio.from_thread import start_blocking_portal  # noqa: PLC0415

    from beebox_impl.box import Box  # noqa: PLC0415

    caplog.set_level(logging.WARNING)
    with (
        start_blocking_portal("asyncio") as portal,
        portal.wrap_async_context_manager(
            Box.open(tmp_path / "box", projects_root=tmp_path / "projects")
        ) as box,
        portal.wrap_async_context_manager(
            serve_box(box, host="0.0.0.0", port=0, allow_remote=True)
        ) as running,
    ):
        # Still the token's: a remote bind opens the door to nobody without it.
        answer = Client("127.0.0.1", running.port, "wrong").request("GET", "/api/chat/bootstrap")
        assert answer.status == 401
    warnings = [record for record in caplog.records if record.levelno == logging.WARNING]
    assert any("0.0.0.0" in record.getMessage() for record in warnings)
