"""Each target's seed corpus, built from the tests' own inputs (nothing is checked in).

- transcripts: the conformance vectors' lines (`transcript/*`, `media/find-line`),
  generated transcripts with photos (`bench/generate_transcript.py`), and the
  first lines of each real transcript of the shared corpus when it is there;
- media references: `media-ref/parse` inputs and refs minted from those lines;
- extraction: `media/extract` lines;
- cards: every string literal that starts with ``---`` in `tests/impl/review`,
  and cards `render_card` writes;
- HTTP: a request to every route of the table, with and without the token, the
  conformance `http/*` requests, and the malformed requests of the HTTP tests.

Long base64 runs are folded into the ``\\xfe n`` macro (`fuzz.targets.expand`),
so seeds stay small while still reaching the 256 KiB oversize mark.
"""

from __future__ import annotations

import ast
import json
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from beebox_impl.http.routes import ROUTES
from beebox_impl.review.cards import render_card
from conformance.vectorfile import load_vector_file
from fuzz.targets import FUZZ_TOKEN, MACRO

__all__ = ["REPO", "fold", "seeds", "write_seeds"]

REPO: Final = Path(__file__).resolve().parents[1]
VECTORS: Final = REPO / "conformance" / "vectors"
CORPUS: Final = Path(
    os.environ.get("BBX_CORPUS_DIR", REPO.parent / "shared" / "corpus" / "claude-transcripts")
)
# A seed's bytes at most (libFuzzer's -max_len is set above this).
MAX_SEED_BYTES: Final = 48 * 1024
_BASE64_RUN: Final = re.compile(rb"[A-Za-z0-9+/=]{2048,}")


def fold(data: bytes) -> bytes:
    """``data`` with each base64 run of 2,048+ bytes as one macro of about its length."""

    def macro(match: re.Match[bytes]) -> bytes:
        units = min(256, len(match.group(0)) // 2048)
        return bytes((MACRO, units - 1))

    return _BASE64_RUN.sub(macro, data)


def _vector_inputs(kind_folder: str) -> list[object]:
    inputs: list[object] = []
    for path in sorted((VECTORS / kind_folder).glob("*.json")):
        inputs.extend(case.input for case in load_vector_file(path).cases)
    return inputs


def _line_sets() -> list[bytes]:
    sets: list[bytes] = []
    for value in [*_vector_inputs("transcript"), *_vector_inputs("media")]:
        if isinstance(value, dict) and isinstance(value.get("lines"), list):
            lines = [line for line in value["lines"] if isinstance(line, str)]
            sets.append("\n".join(lines).encode("utf-8") + b"\n")
        if isinstance(value, dict) and isinstance(value.get("line"), str):
            sets.append(value["line"].encode("utf-8") + b"\n")
    return sets


def _generated_transcripts() -> list[bytes]:
    # Imported here: bench/ is a folder of scripts, not a package.
    import sys  # noqa: PLC0415

    sys.path.insert(0, str(REPO / "bench"))
    try:
        from generate_transcript import (  # type: ignore[import-not-found, unused-ignore]  # noqa: PLC0415
            generate_transcript,
        )
    finally:
        sys.path.remove(str(REPO / "bench"))
    made: list[bytes] = []
    with tempfile.TemporaryDirectory(prefix="bbx-seeds-") as folder:
        for seed, photo_chars in ((1, 1368), (2, 4096), (3, 300_000)):
            written = generate_transcript(
                Path(folder) / str(seed), entries=24, photos=3, photo_chars=photo_chars, seed=seed
            )
            made.append(written.path.read_bytes())
    return made


def _corpus_heads() -> list[bytes]:
    heads: list[bytes] = []
    if not CORPUS.is_dir():
        return heads
    for path in sorted(CORPUS.rglob("*.jsonl"))[:24]:
        with path.open("rb") as file:
            heads.append(b"".join(line for _, line in zip(range(12), file, strict=False)))
    return heads


def _transcripts() -> list[bytes]:
    bodies = [*_line_sets(), *_generated_transcripts(), *_corpus_heads()]
    # The first byte picks the block size: spread the seeds over all three.
    return [bytes((number % 3,)) + fold(body) for number, body in enumerate(bodies)]


def _media_refs() -> list[bytes]:
    refs = [value for value in _vector_inputs("media-ref") if isinstance(value, str)]
    refs += ["s/u/0", "a/b/999", "a/b/1000", "../u/0", "s/../0", "s/u/0/", "s/u/٣"]
    return [ref.encode("utf-8") for ref in refs]


def _extractions() -> list[bytes]:
    seeds: list[bytes] = []
    for value in _vector_inputs("media"):
        if isinstance(value, dict) and isinstance(value.get("line"), str):
            index = value.get("index", 0)
            first = index if isinstance(index, int) and 0 <= index < 256 else 0
            seeds.append(bytes((first,)) + fold(value["line"].encode("utf-8")))
    return seeds


def _string_literals(folder: Path, prefix: str) -> Iterable[str]:
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            value = node.value if isinstance(node, ast.Constant) else None
            if isinstance(value, str) and value.startswith(prefix):
                yield value


def _cards() -> list[bytes]:
    texts = list(_string_literals(REPO / "tests" / "impl" / "review", "---"))
    texts.append(render_card({"session": "s-1", "title": "A title", "origin": "m"}, "body\n"))
    texts.append(render_card({"session": "s-2", "contains": "line one\nline two"}))
    texts += [
        "---\n# a comment\nsession: s  # why\ntitle: 'quoted'\nlist:\n  - a\n  - b\n---\nbody",
        "---\r\nsession: s\r\n---\r\n",
        "---\n{session: s, title: t}\n---\n",
        "---\nsession: &a s\nother: *a\n---\n",
        "---\ntitle: |\n  two\n  lines\n\nsession: s\n---\n",
    ]
    return [text.encode("utf-8") for text in texts]


def _request(
    method: str, path: str, *, token: bool, body: bytes = b"", content_type: str = ""
) -> bytes:
    head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    if token:
        head.append(f"Authorization: Bearer {FUZZ_TOKEN}")
    if body or method == "POST":
        head.append(f"Content-Type: {content_type or 'application/json'}")
        head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


def _http() -> list[bytes]:
    requests: list[bytes] = []
    for route in ROUTES:
        path = route.path.replace("{ref}", "fuzz-session/u-photo/0").replace("{name}", "app.js")
        for method in route.methods:
            body = b"{}" if method == "POST" else b""
            for token in (True, False):
                requests.append(_request(method, path, token=token, body=body))
    for value in _vector_inputs("http"):
        if not isinstance(value, dict):
            continue
        for asked in value.get("requests", []):
            if isinstance(asked, dict) and "json" in asked:
                body = json.dumps(asked["json"]).encode("utf-8")
                requests.append(_request("POST", "/api/chat/send", token=True, body=body))
    cookie = f"Cookie: bbx_token_8765={FUZZ_TOKEN}"
    requests += [
        b"GET /api/chat/history?tail=2 HTTP/1.1\r\n" + cookie.encode() + b"\r\n\r\n",
        f"GET /?token={FUZZ_TOKEN} HTTP/1.1\r\n\r\n".encode(),
        b"GET /api/chat/bootstrap HTTP/1.1\r\nAuthorization: Bearer wrong\r\n\r\n",
        _request("GET", "/api/session-media/..%2F..%2Fetc/u/0", token=True),
        _request("POST", "/api/chat/send", token=True, body=b'{"message": NaN}'),
        _request("POST", "/api/chat/send", token=True, body=b"x", content_type="text/plain"),
        b"POST /api/chat/send HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST /api/chat/send HTTP/1.1\r\nContent-Length: 1073741824\r\n\r\n",
        b"GET / HTTP/1.0\r\n\r\n",
        b"GET /\r\n",
        b"BREW / HTTP/1.1\r\n\r\n",
        # Two requests on one connection (keep-alive, pipelined).
        _request("GET", "/api/chat/bootstrap", token=True) * 2,
        # A finding (12-04): a target urlsplit refuses once it drops the control bytes.
        b"GET \x00\x00\x00\x00//\xbb]TP!\xce\xce\xf2\nHot:s\n",
        # Header blocks parse_fields refuses: folded, space before the colon.
        b"GET / HTTP/1.1\r\nX-A: one\r\n two\r\n\r\n",
        b"GET / HTTP/1.1\r\nX-A : one\r\n\r\n",
    ]
    return requests


def seeds(target: str) -> list[bytes]:
    """The seed inputs of ``target`` (each at most `MAX_SEED_BYTES`)."""
    builders = {
        "transcript": _transcripts,
        "media_ref": _media_refs,
        "media_extract": _extractions,
        "card": _cards,
        "http": _http,
    }
    return [seed[:MAX_SEED_BYTES] for seed in builders[target]()]


def write_seeds(target: str, folder: Path) -> int:
    """Write ``target``'s seeds into ``folder`` (one file each); how many."""
    folder.mkdir(parents=True, exist_ok=True)
    made = seeds(target)
    for number, seed in enumerate(made):
        (folder / f"seed-{number:04d}").write_bytes(seed)
    return len(made)
