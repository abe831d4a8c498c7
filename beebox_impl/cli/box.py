"""The `bbx` commands that make, run and talk to a box: ``init``, ``serve``, ``chat send``.

- ``bbx init [DIR]`` — the box layout (`beebox_impl.box.init_box`); idempotent.
- ``bbx serve [--box DIR] [--host H] [--port N] [--engine echo|claude]
  [--permission-mode MODE] [--dangerously-bypass-permissions]
  [--start-timeout SECONDS]`` — opens
  the box (creating it if missing) on the embedded defaults and serves it over
  HTTP (`beebox_impl.http.serve_box`), and runs its enabled schedule cards at their
  cron times (`beebox_impl.scheduler`). It prints one line, ``beebox serving
  <box> at <URL>``, the URL carrying the token (opening it logs a browser in),
  and records where it listens in ``.beebox/serve.json`` (0600) for ``bbx chat
  send``. SIGINT or SIGTERM shuts it down cleanly: requests in flight finish,
  then the session and the database close. A non-loopback ``--host`` needs
  ``--allow-remote``. As the owner of its process, it sets glibc's allocator
  up for a long-lived server first: started as the ``bbx`` command, it executes
  itself again (same pid) with glibc's per-thread caches off, then fixes the
  thresholds and arenas (`beebox_impl.allocator`). Before it serves, it says on
  stderr which permission mode is in force (``--permission-mode``, else the box's
  ``_config/settings.yaml``, else ``default``) and what that means;
  ``bypassPermissions`` is refused (exit 2) unless
  ``--dangerously-bypass-permissions`` is given too, and then warned about.
- ``bbx chat permissions [--box DIR] [--limit N] [--json]`` — how the agent's last
  permission requests ended, newest first, read from the box's database (whether
  or not a ``bbx serve`` runs): when, the tool and its input, the decision, who
  gave it (`beebox_impl.store.permissions`).
- ``bbx chat send TEXT [--image FILE]... [--box DIR | --url URL --token T]`` —
  sends a message to a running box over HTTP (with a fresh ``messageId``, so a
  retry of the same command line is not a second message) and prints its answer
  (``turnId``, or ``queued``) with the ``sessionId`` of the chat it went to: for a
  new chat, once the engine has named it (`bbx chat history` then shows it).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import errno
import json
import mimetypes
import os
import signal
import sqlite3
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from functools import partial
from pathlib import Path
from typing import Final

import anyio

from beebox_impl.allocator import (
    TRIM_EVERY_SECONDS,
    can_trim_heap,
    trim_free_heap,
    tune_allocator_for_serving,
)
from beebox_impl.box import Box, BoxPaths, init_box, read_token
from beebox_impl.cli.common import (
    EXIT_FAILED,
    EXIT_USAGE,
    CommandRefused,
    add_box_option,
    box_refusal,
    counted,
    fail,
)
from beebox_impl.engine.bounded import DEFAULT_START_TIMEOUT, check_start_timeout
from beebox_impl.engine.permission_modes import PERMISSION_MODES, PermissionMode
from beebox_impl.engine.protocol import Engine, PreparableEngine
from beebox_impl.errors import BoxInUse, BoxStateError, NotABox
from beebox_impl.http.server import (
    DEFAULT_HOST,
    HttpLimits,
    RemoteBindRefused,
    RunningServer,
    check_host,
    serve_box,
)
from beebox_impl.ids import new_uuid4
from beebox_impl.review.lock import LockHeldError, hold_lock_group
from beebox_impl.scheduler import run_schedules
from beebox_impl.settings import InvalidBoxSettings, PermissionSettings, load_box_settings
from beebox_impl.store.database import BoxDatabase, create_database
from beebox_impl.store.permissions import MAX_LISTED, PermissionDecision, PermissionDecisionStore
from beebox_spec.entries import JsonObject
from beebox_spec.media import SERVABLE_MEDIA_TYPES

__all__ = [
    "add_box_options",
    "parse_serving_line",
    "run_box_command",
    "serve_file_path",
    "serving_line",
]

DEFAULT_PORT: Final = 8765
# How long `bbx chat send` waits for the box's answer, and then for the engine to
# name a new chat's session (a run's start: the engine's own start timeout, 45 s).
_SEND_TIMEOUT_SECONDS: Final = 60.0
_SESSION_POLL_SECONDS: Final = 0.05


# How the one line `bbx serve` prints once it answers begins.
_SERVING: Final = "beebox serving "


def serving_line(box_root: Path, login_url: str) -> str:
    """What `bbx serve` prints once it answers: the box, and the login URL with the token."""
    return f"{_SERVING}{box_root} at {login_url}"


def parse_serving_line(line: str) -> tuple[str, str] | None:
    """The base URL and the token of a `serving_line`; None for any other line."""
    if not line.startswith(_SERVING):
        return None
    url, _, token = line.rsplit(" at ", 1)[1].strip().partition("/?token=")
    return url, token


def serve_file_path(box_root: Path) -> Path:
    """Where a running ``bbx serve`` says where it listens."""
    return BoxPaths(box_root.expanduser().resolve()).state_dir / "serve.json"


def add_box_options(command: str, parser: argparse.ArgumentParser) -> None:
    """Add the options of ``command`` (``init``, ``serve``, ``chat permissions`` or
    ``chat send``) to its parser, which `beebox_impl.cli` made and named."""
    {
        "init": _init_options,
        "serve": _serve_options,
        "chat permissions": _permissions_options,
        "chat send": _send_options,
    }[command](parser)


def _init_options(init: argparse.ArgumentParser) -> None:
    init.add_argument(
        "dir",
        nargs="?",
        type=Path,
        default=Path.cwd(),
        metavar="DIR",
        help="the folder (default: the current folder; made if missing)",
    )


def _serve_options(serve: argparse.ArgumentParser) -> None:
    add_box_option(serve)
    serve.add_argument(
        "--host", default=DEFAULT_HOST, help=f"the address to listen on (default {DEFAULT_HOST})"
    )
    serve.add_argument(
        "--port",
        type=_port,
        default=DEFAULT_PORT,
        help=f"the port to listen on (default {DEFAULT_PORT}; 0: any free port)",
    )
    serve.add_argument(
        "--engine",
        choices=["echo", "claude"],
        default="echo",
        help="who answers: echo (offline, the default) or claude (Claude Code: the claude extra)",
    )
    serve.add_argument(
        "--permission-mode",
        choices=PERMISSION_MODES,
        metavar="MODE",
        help=(
            "how Claude Code asks before it acts: "
            + ", ".join(PERMISSION_MODES)
            + " (default: the box's _config/settings.yaml, else default)"
        ),
    )
    serve.add_argument(
        "--dangerously-bypass-permissions",
        action="store_true",
        help="allow --permission-mode bypassPermissions: every tool runs without asking",
    )
    serve.add_argument(
        "--start-timeout",
        type=_start_timeout,
        default=DEFAULT_START_TIMEOUT,
        metavar="SECONDS",
        help=f"a run the engine has not started by then fails (default {DEFAULT_START_TIMEOUT:g})",
    )
    serve.add_argument(
        "--trim-heap-every",
        type=_trim_interval,
        default=TRIM_EVERY_SECONDS,
        metavar="SECONDS",
        help=(
            "hand the allocator's free pages back this often"
            f" (default {TRIM_EVERY_SECONDS:g}; 0: never)"
        ),
    )
    serve.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a non-loopback --host (the token is then the only guard; use TLS)",
    )


def _permissions_options(permissions: argparse.ArgumentParser) -> None:
    add_box_option(permissions)
    permissions.add_argument(
        "--limit",
        type=counted(MAX_LISTED),
        default=50,
        metavar="N",
        help=f"the N latest (1-{MAX_LISTED}; default 50)",
    )
    permissions.add_argument("--json", action="store_true", help="print them as JSON")


def _send_options(send: argparse.ArgumentParser) -> None:
    send.add_argument("text", help="the message")
    send.add_argument(
        "--image",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help=f"a photo to send with it ({_PHOTO_TYPES}; again for more)",
    )
    add_box_option(send)
    send.add_argument(
        "--url",
        type=_box_url,
        help="the box's base URL (default: from the running bbx serve)",
    )
    send.add_argument("--token", help="the box's token (default: the box's token file)")


def run_box_command(args: argparse.Namespace) -> int | None:
    """Run ``args`` if it is one of these commands; None when it is not."""
    if args.command == "init":
        return _init(args.dir)
    if args.command == "serve":
        return _serve(args)
    if args.command == "chat" and args.chat_command == "send":
        return _chat_send(args)
    if args.command == "chat" and args.chat_command == "permissions":
        return _chat_permissions(args)
    return None


async def _recent_decisions(box_root: Path, limit: int) -> list[PermissionDecision]:
    async with await BoxDatabase.open(box_root) as database:
        return await PermissionDecisionStore(database).recent(limit)


def _chat_permissions(args: argparse.Namespace) -> int:
    refusal = box_refusal(args.box)
    if refusal is not None:
        return fail(refusal)
    try:
        decisions = anyio.run(_recent_decisions, args.box.expanduser().resolve(), args.limit)
    except sqlite3.DatabaseError as error:
        return fail(f"cannot read the box's database: {error}")
    if args.json:
        json.dump([decision.as_json() for decision in decisions], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    if not decisions:
        print("no permission requests yet")
    for decision in decisions:
        print(permission_line(decision))
    return 0


def permission_line(decision: PermissionDecision) -> str:
    """One decision as ``bbx chat permissions`` prints it."""
    shown = decision.as_json()
    tool_input = shown["input"]
    subject = tool_input.get("command") or tool_input.get("file_path")
    said = subject if isinstance(subject, str) else json.dumps(tool_input, ensure_ascii=False)
    if len(said) > 80:
        said = said[:79] + "…"
    decided = shown["decision"] or "none"
    always = " always" if shown["always"] else ""
    return (
        f"{shown['endedAt']}  {decided}{always} by {shown['answeredBy']} ({shown['how']})"
        f"  {shown['toolName']}: {said}"
    )


def _init(folder: Path) -> int:
    try:
        paths = init_box(folder)
    except OSError as error:
        return fail(f"cannot make a box at {folder}: {error}")
    # A box that exists already is looked at, not only found: a damaged token or
    # database is named here, not at the next serve.
    try:
        read_token(paths)
        create_database(paths.root)
    except (NotABox, OSError, sqlite3.DatabaseError) as error:
        return fail(f"the box at {paths.root} is damaged: {error}")
    print(f"box ready at {paths.root}")
    return 0


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65_535:
        raise argparse.ArgumentTypeError(f"not a port: {text!r} (0 to 65535; 0: any free port)")
    return port


def _start_timeout(text: str) -> float:
    try:
        return check_start_timeout(float(text))
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not a start timeout: {text!r}") from error


def _trim_interval(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not (seconds == 0 or 0.1 <= seconds <= 86_400):
        raise argparse.ArgumentTypeError(f"not an interval: {text!r} (0, or 0.1 to 86400 s)")
    return seconds


async def _trim_heap_periodically(every: float) -> None:
    # Photo buffers leave free holes in the heaps that RSS keeps counting
    # (`beebox_impl.allocator`); handed back, a hole costs nothing until reused.
    while True:
        await anyio.sleep(every)
        await anyio.to_thread.run_sync(trim_free_heap)


async def _prepare_engine(engine: Engine | None, ready: anyio.Event) -> None:
    try:
        if isinstance(engine, PreparableEngine):
            await engine.prepare()
    except Exception as error:
        # Not fatal to serving: the first send's start fails and says why again.
        fail(f"the engine is not ready: {error}")
    finally:
        ready.set()


def _engine(name: str, permissions: PermissionSettings) -> Engine | None:
    if name == "claude":
        from beebox_impl.engine.claude import ClaudeEngine  # noqa: PLC0415

        return ClaudeEngine(
            permission_mode=permissions.mode,
            allowed_tools=permissions.allow,
            disallowed_tools=permissions.deny,
        )
    return None  # the box's default: EchoEngine


# What each mode means for a person at the page (`bbx serve`'s stderr line).
_MODE_MEANINGS: Final[dict[PermissionMode, str]] = {
    "default": "Claude Code asks on the page before edits and commands",
    "acceptEdits": "Claude Code edits files in the box without asking, and asks before commands",
    "plan": "Claude Code only reads and plans; it asks before anything else",
    "dontAsk": "Claude Code denies whatever it would have asked about",
    "auto": "Claude Code's classifier decides each tool call",
    "bypassPermissions": "Claude Code runs EVERY tool without asking, in the box and beyond",
}


def serving_permissions(args: argparse.Namespace) -> PermissionSettings:
    """The permission settings ``bbx serve`` runs with: the box's settings file, its
    mode overridden by ``--permission-mode``. Raises `InvalidBoxSettings`."""
    settings = load_box_settings(args.box.expanduser().resolve()).permissions
    if args.permission_mode is None:
        return settings
    return PermissionSettings(args.permission_mode, settings.allow, settings.deny, settings.timeout)


def permission_mode_lines(permissions: PermissionSettings, engine: str) -> list[str]:
    """What ``bbx serve`` says on stderr about the mode in force."""
    minutes = f"{permissions.timeout.total_seconds() / 60:g}"
    line = f"bbx: permission mode {permissions.mode}: {_MODE_MEANINGS[permissions.mode]}"
    if engine == "echo":
        return [f"{line} (the echo engine runs no tools)"]
    lines = [f"{line}; an unanswered request is denied after {minutes} min"]
    if permissions.allow or permissions.deny:
        lines.append(
            f"bbx: allowed without asking: {', '.join(permissions.allow) or 'nothing'};"
            f" always refused: {', '.join(permissions.deny) or 'nothing'}"
        )
    if permissions.mode == "bypassPermissions":
        lines.append(
            "bbx: WARNING: --dangerously-bypass-permissions: nothing stands between the "
            "model and your files, commands and network"
        )
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            lines.append("bbx: WARNING: Claude Code refuses bypassPermissions as root: runs fail")
    return lines


def _served_url_or_refusal(box_root: Path) -> str:
    """The URL of the `bbx serve` serving ``box_root``, from its serve file.

    Raises `FileNotFoundError` (none runs) or `CommandRefused` (the file is not one)."""
    path = serve_file_path(box_root)
    text = path.read_text(encoding="utf-8")
    url = _url_served(text)
    if url is None:
        raise CommandRefused(f"{path} is not a serve file ({text[:40]!r}); restart `bbx serve`")
    return url


def _write_serve_file(box: Box, running: RunningServer) -> Path:
    path = serve_file_path(box.root)
    temporary = path.with_suffix(".tmp")
    handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        json.dump({"url": running.base_url, "pid": os.getpid()}, out)
    os.replace(temporary, path)
    return path


class BoxAlreadyServed(BoxInUse):
    """Another `bbx serve` serves this box (the message says where)."""


# The lock group a `bbx serve` holds for as long as it serves its box: one a box (two
# would share its chat and overwrite each other's serve file). The kernel drops it
# with the process, however that ends (`beebox_impl.review.lock`).
SERVE_LOCK_GROUP: Final = "serve"


def _served_url(box_root: Path) -> str | None:
    """The URL the box's serve file gives, if there is one that gives one."""
    try:
        return _url_served(serve_file_path(box_root).read_text(encoding="utf-8"))
    except OSError:
        return None


def _url_served(serve_file: str) -> str | None:
    """The URL a serve file's text gives; None for any text that is not a serve file."""
    try:
        served = json.loads(serve_file)
    except ValueError:
        return None
    url = served.get("url") if isinstance(served, dict) else None
    return url if isinstance(url, str) and _is_box_url(url) else None


async def _serve_until_signalled(args: argparse.Namespace) -> None:
    paths = await anyio.to_thread.run_sync(init_box, args.box)
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(hold_lock_group(paths.root, SERVE_LOCK_GROUP, "bbx serve"))
        except LockHeldError as error:
            raise BoxAlreadyServed(
                f"{paths.root} is already served by another `bbx serve`"
                f" ({_served_url(paths.root) or 'its address unknown'}; {error})"
            ) from None
        await _serve_box_until_signalled(args)


async def _serve_box_until_signalled(args: argparse.Namespace) -> None:
    engine = _engine(args.engine, args.permissions)
    engine_ready = anyio.Event()
    async with anyio.create_task_group() as preparing:
        # An engine that can get ready ahead of the first send does so while the box
        # opens (the Claude engine imports its SDK: 0.5–1 s, which a first send
        # would otherwise wait for), and the box says it serves once it is ready.
        preparing.start_soon(_prepare_engine, engine, engine_ready, name="engine preparation")
        await _serve_open_box_until_signalled(args, engine, engine_ready)


async def _serve_open_box_until_signalled(
    args: argparse.Namespace, engine: Engine | None, engine_ready: anyio.Event
) -> None:
    async with (
        Box.open(args.box, engine=engine, start_timeout=args.start_timeout) as box,
        serve_box(box, host=args.host, port=args.port, allow_remote=args.allow_remote) as running,
        anyio.create_task_group() as background,
    ):
        # The box's enabled schedule cards (the nightly chat review, once opted in).
        background.start_soon(
            partial(run_schedules, box.root, clock=box.clock), name="scheduled scripts"
        )
        if args.trim_heap_every and can_trim_heap():
            background.start_soon(
                _trim_heap_periodically, args.trim_heap_every, name="heap trimming"
            )
        serve_file = _write_serve_file(box, running)
        await engine_ready.wait()
        try:
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                for line in permission_mode_lines(args.permissions, args.engine):
                    print(line, file=sys.stderr, flush=True)
                print(serving_line(box.root, running.login_url), flush=True)
                async for received in signals:
                    print(f"bbx: {signal.Signals(received).name}: shutting down", file=sys.stderr)
                    break
        finally:
            serve_file.unlink(missing_ok=True)
            background.cancel_scope.cancel()


def _serve(args: argparse.Namespace) -> int:
    try:
        check_host(args.host, allow_remote=args.allow_remote)
    except RemoteBindRefused as error:
        return fail(f"{error}; pass --allow-remote", EXIT_USAGE)
    try:
        args.permissions = serving_permissions(args)
    except InvalidBoxSettings as error:
        return fail(f"cannot serve: {error}")
    if args.permissions.mode == "bypassPermissions" and not args.dangerously_bypass_permissions:
        return fail(
            "permission mode bypassPermissions lets Claude Code run every tool without"
            " asking; pass --dangerously-bypass-permissions as well if you mean it",
            EXIT_USAGE,
        )
    # Before any thread starts: the photo buffers out of the heaps.
    tune_allocator_for_serving()
    failed = False
    try:
        anyio.run(_serve_until_signalled, args)
    # A box in use (served, or open in a host), damaged, or too new for this beebox.
    except* (OSError, BoxStateError, sqlite3.DatabaseError) as errors:
        for problem in _leaves(errors):
            fail(f"cannot serve: {_why_not_served(problem, args)}")
        failed = True
    return EXIT_FAILED if failed else 0


def _why_not_served(problem: BaseException, args: argparse.Namespace) -> str:
    if isinstance(problem, OSError) and problem.errno == errno.EADDRINUSE:
        return (
            f"port {args.port} on {args.host} is already in use (another program listens"
            " there); pass --port 0 to take any free port"
        )
    return str(problem)


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    """The exceptions inside ``group``, however deeply grouped (task groups nest them)."""
    leaves: list[BaseException] = []
    for error in group.exceptions:
        leaves.extend(_leaves(error) if isinstance(error, BaseExceptionGroup) else [error])
    return leaves


# The photo types a send may carry, as a person names them (`image/png`: png).
_PHOTO_TYPES: Final = ", ".join(sorted(kind.split("/")[1] for kind in SERVABLE_MEDIA_TYPES))

# A request's body limit on a box of the defaults, photos included, base64 (4 bytes
# for 3) and all: a photo larger than this cannot be sent, so it is not read.
_MAX_PHOTO_BYTES: Final = HttpLimits().max_body_bytes * 3 // 4


def _image_payload(path: Path) -> dict[str, str]:
    try:
        size = path.stat().st_size
    except OSError as error:
        raise CommandRefused(f"cannot send the photo {path}: {error.strerror or error}") from None
    media_type, _ = mimetypes.guess_type(path.name)
    if media_type not in SERVABLE_MEDIA_TYPES:
        raise CommandRefused(f"{path}: not a photo type the box keeps ({media_type or 'unknown'})")
    if size > _MAX_PHOTO_BYTES:
        raise CommandRefused(
            f"{path}: too large to send ({size:,} bytes; a send carries at most"
            f" {_MAX_PHOTO_BYTES:,} bytes of photos)"
        )
    try:
        data = path.read_bytes()
    except OSError as error:
        raise CommandRefused(f"cannot send the photo {path}: {error.strerror or error}") from None
    return {"mediaType": media_type, "data": base64.b64encode(data).decode("ascii")}


def _is_box_url(text: str) -> bool:
    """An http(s) URL with a host: what a box can be reached at."""
    try:
        parts = urllib.parse.urlsplit(text)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def _box_url(text: str) -> str:
    if not _is_box_url(text):
        raise argparse.ArgumentTypeError(f"not a box's http(s) URL: {text!r}")
    return text


def _call_box(url: str, token: str, path: str, body: dict[str, object] | None = None) -> JsonObject:
    """One request to the box's API, its JSON answer; raises `urllib.error.URLError`
    (`HTTPError` for an error status), `OSError`, `ValueError` (not JSON) or
    `CommandRefused` (not a JSON object)."""
    request = urllib.request.Request(
        url.rstrip("/") + path,
        data=None if body is None else json.dumps(body).encode("utf-8"),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        method="GET" if body is None else "POST",
    )
    with urllib.request.urlopen(request, timeout=_SEND_TIMEOUT_SECONDS) as response:
        answer = json.loads(response.read().decode("utf-8"))
    if not isinstance(answer, dict):
        raise CommandRefused(f"{path} answered {answer!r}, not a JSON object")
    return answer


def _session_of_send(url: str, token: str) -> str | None:
    """The session of the box's chat once a send is handed over: at once when the chat
    has one; for a new chat, once the engine names it (the chat is busy until then);
    None when the run ended or did not start without naming one."""
    deadline = time.monotonic() + _SEND_TIMEOUT_SECONDS
    while True:
        bootstrap = _call_box(url, token, "/api/chat/bootstrap?tail=1")
        session_id = bootstrap.get("sessionId")
        if isinstance(session_id, str):
            return session_id
        status = bootstrap.get("status")
        busy = isinstance(status, dict) and status.get("busy") is True
        if not busy or time.monotonic() > deadline:
            return None
        time.sleep(_SESSION_POLL_SECONDS)


def _chat_send(args: argparse.Namespace) -> int:
    try:
        images = [_image_payload(path) for path in args.image]
    except CommandRefused as error:
        return fail(str(error), EXIT_USAGE)
    try:
        url = args.url or _served_url_or_refusal(args.box)
        token = args.token or read_token(BoxPaths(args.box.expanduser().resolve()))
    except FileNotFoundError as error:
        return fail(f"no running box found ({error.filename}); start `bbx serve`")
    except (CommandRefused, OSError, NotABox) as error:
        return fail(str(error))
    body: dict[str, object] = {"message": args.text, "messageId": new_uuid4()}
    if images:
        body["images"] = images
    try:
        answer = _call_box(url, token, "/api/chat/send", body)
        session_id = _session_of_send(url, token)
    except urllib.error.HTTPError as error:
        return fail(f"{error.code}: {error.read().decode('utf-8', 'replace')}")
    except (urllib.error.URLError, OSError) as error:
        return fail(f"cannot reach the box at {url}: {error}")
    except (ValueError, CommandRefused) as error:
        return fail(f"the box at {url} answered what is not its API: {error}")
    if session_id is None:
        fail("the engine named no session for this send (`bbx chat history` shows the chat)")
    print(json.dumps({**answer, "sessionId": session_id}))
    return 0
