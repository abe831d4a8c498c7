"""The public checks: each passes with beebox's own code and catches a broken one, readably.

Every ``check_*`` runs against the real thing (`beebox_spec`'s modules, the
implementation's readers, engines and sessions) and must pass; then against a
deliberately wrong implementation of its area — one rule broken — and must raise
`ConformanceFailure` whose message names the file, the case, what was expected,
what came back and where they first differ. The async checks run on asyncio and
on trio (`tests/conftest.py`), as a host's own suite would call them.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.lowlevel import checkpoint

import beebox_spec.media
import beebox_spec.phases
import beebox_spec.reconcile
import beebox_spec.review.journal
import conformance
from beebox_impl.engine import EchoEngine, Engine, Run, ScriptedEngine, StartOptions, TurnContent
from beebox_impl.session import ChatSession, ChatThreadSession, PendingTurn, ThreadRun
from beebox_spec.entries import (
    JsonObject,
    JsonValue,
    PendingMessage,
    SessionContentBlock,
    SessionEntry,
)
from beebox_spec.media import LineLookup, MediaEntryRef, MediaRef
from beebox_spec.phases import Phase
from beebox_spec.reconcile import ReconcileResult
from beebox_spec.review.journal import JournalBoundary, ResolvedSpan
from conformance import (
    ConformanceFailure,
    check_chat_session,
    check_content_transform,
    check_engine,
    check_journal,
    check_lifecycle,
    check_media_refs,
    check_reconcile,
    check_review_rules,
    check_thread_session,
    check_transcript_reader,
)
from conformance.engine_contract import CONTRACT_SOURCE, ENGINE_CONTRACT
from conformance.runner import PACKAGED_VECTORS
from conformance.targets.impl import ImplTranscriptReader
from conformance.targets.spec_review import SpecReviewRules
from tests.mutants.chat_mutants import StopDrainsTheQueue

VECTORS = PACKAGED_VECTORS
DOCS = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"
CLOCK_START = datetime(2025, 1, 1, tzinfo=UTC)


def failure_of(check: Any, *args: Any, **kwargs: Any) -> str:
    """The message of the `ConformanceFailure` ``check`` must raise."""
    with pytest.raises(ConformanceFailure) as caught:
        check(*args, **kwargs)
    return str(caught.value)


def assert_case_fails(message: str, vector_file: Path, case: str, expected: Any, got: Any) -> None:
    """``message`` holds the runner's line for this case: file, case, expected, got."""
    shown = json.dumps(expected, ensure_ascii=False, sort_keys=True)
    line = f"FAIL {vector_file} :: {case}: expected {shown}, got "
    assert line + json.dumps(got, ensure_ascii=False, sort_keys=True) in message, message
    assert "first difference at $" in message


def write_vectors(path: Path, kind: str, *cases: tuple[str, Any, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "kind": kind,
        "description": "a host's own vectors",
        "cases": [
            {"name": name, "input": given, "expect": expect} for name, given, expect in cases
        ],
    }
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


# --- The real implementations pass ----------------------------------------------------


def test_the_spec_modules_pass_every_pure_check() -> None:
    check_media_refs(lambda: beebox_spec.media)
    check_content_transform(lambda: beebox_spec.media)
    check_reconcile(lambda: beebox_spec.reconcile)
    check_journal(lambda: beebox_spec.review.journal)
    check_review_rules(SpecReviewRules)
    check_lifecycle(lambda: beebox_spec.phases)


def test_the_implementations_transcript_reader_passes() -> None:
    check_transcript_reader(ImplTranscriptReader)


def scripted_engine(box_root: Path, *, start_fails: bool) -> Engine:
    return ScriptedEngine("fail" if start_fails else "accept")


def echo_engine(box_root: Path, *, start_fails: bool) -> Engine:
    projects_root = box_root.parent / "projects"
    if start_fails:
        # A projects root that is a file: the engine cannot read where transcripts go.
        projects_root.write_text("not a folder", encoding="utf-8")
    return EchoEngine(projects_root, clock=lambda: CLOCK_START)


@pytest.mark.anyio
@pytest.mark.parametrize("make_engine", [scripted_engine, echo_engine], ids=["scripted", "echo"])
async def test_the_implementations_engines_pass_the_engine_contract(make_engine: Any) -> None:
    await check_engine(make_engine)


@pytest.mark.anyio
async def test_the_implementations_sessions_pass_every_scenario() -> None:
    await check_chat_session(ChatSession.open)
    await check_thread_session(ChatThreadSession.open)


# --- A wrong implementation fails, readably -------------------------------------------


class AcceptsDotIds:
    """Takes `.` and `..` as ids: the grammar's safe characters plus the dot."""

    def parse_media_ref_or_none(self, text: str, /) -> MediaRef | None:
        ref = beebox_spec.media.parse_media_ref_or_none(text.replace(".", "_"))
        if ref is None:
            return None
        session_id, entry_uuid, _ = text.split("/")
        return {"sessionId": session_id, "entryUuid": entry_uuid, "index": ref["index"]}

    def encode_media_ref(self, ref: MediaRef, /) -> str:
        return beebox_spec.media.encode_media_ref(ref)


def test_a_ref_parser_that_accepts_dot_dot_fails_check_media_refs() -> None:
    message = failure_of(check_media_refs, AcceptsDotIds)
    parse_vectors = VECTORS / "media-ref" / "parse.json"
    assert_case_fails(
        message,
        parse_vectors,
        "dot-dot as an id",
        None,
        {"sessionId": "..", "entryUuid": "u-1", "index": 0},
    )
    lines = message.splitlines()
    assert lines[0] == "check_media_refs: 2 of 29 cases failed"
    assert lines[-1] == "27 passed, 2 failed"
    assert all(line.startswith(f"FAIL {parse_vectors} :: ") for line in lines[1:-1])


class NeverMintsRefs:
    """Stripped images never get a reference: the line identity is ignored."""

    def transform_content(
        self, content: JsonValue, media_ref: MediaEntryRef | None, /
    ) -> Sequence[SessionContentBlock]:
        return beebox_spec.media.transform_content(content, None)


def test_a_transform_that_never_mints_refs_fails_check_content_transform() -> None:
    message = failure_of(check_content_transform, NeverMintsRefs)
    assert_case_fails(
        message,
        VECTORS / "content" / "transform.json",
        "stripped image with a line identity gets a reference",
        [{"type": "image", "imageRef": "s-1/u-1/0", "mediaType": "image/png"}],
        [{"type": "text", "text": "[image not displayed]"}],
    )


class FirstTextualOccurrence(ImplTranscriptReader):
    """The original's lookup: the first line holding the needle, nested copies included."""

    def find_line(self, path: Path, uuid: str, /) -> LineLookup:
        needle = f'"uuid":"{uuid}"'.encode()
        for number, line in enumerate(path.read_bytes().split(b"\n"), start=1):
            if needle in line:
                return {"found": True, "lineNumber": number}
        return {"found": False, "reason": "not-found"}


def test_a_reader_that_takes_a_nested_copy_fails_check_transcript_reader() -> None:
    message = failure_of(check_transcript_reader, FirstTextualOccurrence)
    assert_case_fails(
        message,
        VECTORS / "media" / "find-line.json",
        "a nested copy in a progress line is passed over",
        {"found": True, "lineNumber": 2},
        {"found": True, "lineNumber": 1},
    )


class MatchesEachPendingAlone:
    """No one-for-one consumption: each pending message is matched on its own, so one
    transcript entry can retire any number of pending copies of its text."""

    def reconcile_pending(
        self, server_messages: Sequence[SessionEntry], pending_messages: Sequence[PendingMessage], /
    ) -> ReconcileResult:
        still_pending = [
            pending
            for pending in pending_messages
            for kept in beebox_spec.reconcile.reconcile_pending(server_messages, [pending])[
                "pendingMessages"
            ]
        ]
        return {"messages": [*server_messages, *still_pending], "pendingMessages": still_pending}

    def merge_accepted_into_pending(
        self, pending: Sequence[PendingMessage], accepted: Sequence[PendingMessage], /
    ) -> Sequence[PendingMessage]:
        return beebox_spec.reconcile.merge_accepted_into_pending(pending, accepted)


def test_a_reconcile_without_consumption_fails_check_reconcile() -> None:
    message = failure_of(check_reconcile, MatchesEachPendingAlone)
    assert_case_fails(
        message,
        VECTORS / "reconcile" / "pending.json",
        "one durable occurrence retires one pending message",
        {"messages": ["u1", "p2"], "pendingMessages": ["p2"]},
        {"messages": ["u1"], "pendingMessages": []},
    )


class IgnoresTextEdits:
    """Checks the boundary's identity but not its prefix: text edited before it goes unseen."""

    def prefix_hash(self, entries: Sequence[SessionEntry], end_index: int, /) -> str:
        return beebox_spec.review.journal.prefix_hash(entries, end_index)

    def resolve_span(
        self, entries: Sequence[SessionEntry], applied: JournalBoundary | None, limit: int, /
    ) -> ResolvedSpan:
        uuids = [entry["uuid"] for entry in entries]
        if applied is not None and applied["endUuid"] in uuids:
            # The bug: whatever the prefix hashes to now is taken as what was applied.
            boundary = uuids.index(applied["endUuid"])
            applied = {**applied, "prefixHash": self.prefix_hash(entries, boundary)}
        return beebox_spec.review.journal.resolve_span(entries, applied, limit)


def test_a_journal_that_ignores_text_edits_fails_check_journal() -> None:
    message = failure_of(check_journal, IgnoresTextEdits)
    assert_case_fails(
        message,
        VECTORS / "journal" / "resolve-span.json",
        "text edited before the boundary, same uuids",
        {
            "entries": ["u-a", "u-b", "u-c"],
            "endIndex": 2,
            "bootstrap": "prefix-rewritten",
            "clipped": False,
        },
        {"entries": ["u-c"], "endIndex": 2, "bootstrap": None, "clipped": False},
    )


class MissesGitHubTokens(SpecReviewRules):
    """The leak scan lets GitHub tokens through."""

    def has_credential(self, text: str, /) -> bool:
        return "gh" not in text and SpecReviewRules.has_credential(text)


def test_a_leak_scan_that_misses_a_shape_fails_check_review_rules() -> None:
    message = failure_of(check_review_rules, MissesGitHubTokens)
    assert_case_fails(
        message,
        VECTORS / "review" / "leak-scan.json",
        "GitHub personal token",
        {"credential": True},
        {"credential": False},
    )


class StartsStreamingFromIdle:
    """The table lets an idle session go straight to streaming, skipping the start."""

    def is_legal_transition(self, source: Phase, target: Phase, /) -> bool:
        if (source, target) == (Phase.IDLE, Phase.STREAMING):
            return True
        return beebox_spec.phases.is_legal_transition(source, target)

    def is_running(self, phase: Phase, /) -> bool:
        return beebox_spec.phases.is_running(phase)

    def is_busy(self, phase: Phase, /, *, was_busy: bool) -> bool:
        return beebox_spec.phases.is_busy(phase, was_busy=was_busy)


def test_a_table_with_an_extra_move_fails_check_lifecycle() -> None:
    message = failure_of(check_lifecycle, StartsStreamingFromIdle)
    assert_case_fails(
        message,
        VECTORS / "lifecycle" / "transition.json",
        "idle → streaming",
        {"legal": False},
        {"legal": True},
    )


# --- Engines that break the contract ------------------------------------------------


class WrappedRun:
    """A real run, passed through; subclasses break one clause of the contract."""

    def __init__(self, inner: Run) -> None:
        self.inner = inner
        self.close_calls = 0

    @property
    def closed(self) -> bool:
        return self.inner.closed

    def messages(self) -> AsyncIterator[JsonObject]:
        return self.inner.messages()

    async def send(self, content: TurnContent) -> None:
        await self.inner.send(content)

    async def interrupt(self) -> None:
        await self.inner.interrupt()

    async def close(self) -> None:
        self.close_calls += 1
        await self.inner.close()


class CloseTwiceRaises(WrappedRun):
    async def close(self) -> None:
        if self.close_calls:
            raise RuntimeError("the run is already closed")
        await super().close()


class SendAfterCloseIsDropped(WrappedRun):
    async def send(self, content: TurnContent) -> None:
        if self.inner.closed:
            await checkpoint()
            return
        await super().send(content)


class SendNeverCheckpoints(WrappedRun):
    async def send(self, content: TurnContent) -> None:
        # Takes the turn without ever yielding: a caller's cancel scope cannot reach it.
        if self.inner.closed:
            raise anyio.ClosedResourceError


class InterruptCloses(WrappedRun):
    async def interrupt(self) -> None:
        await super().close()


class EngineOfWrappedRuns:
    def __init__(self, inner: Engine, wrap: type[WrappedRun]) -> None:
        self.inner = inner
        self.wrap = wrap

    async def start(self, options: StartOptions) -> Run:
        return self.wrap(await self.inner.start(options))


class StartFailsWithTheWrongError:
    async def start(self, options: StartOptions) -> Run:
        await checkpoint()
        raise OSError("the engine binary is missing")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("wrap", "clause", "finding"),
    [
        (
            CloseTwiceRaises,
            "close is idempotent and sets closed",
            "a second close() raised RuntimeError: the run is already closed; "
            "close must be idempotent",
        ),
        (
            SendAfterCloseIsDropped,
            "send after close raises anyio.ClosedResourceError",
            "send() after close() returned: the turn went nowhere, silently",
        ),
        (
            SendNeverCheckpoints,
            "send is a checkpoint",
            "send() returned inside a cancelled scope: it never checkpoints",
        ),
        (
            InterruptCloses,
            "interrupt is a checkpoint and keeps the run open",
            "the run closed on interrupt(): an interrupt ends the turn, not the run",
        ),
    ],
    ids=[
        "close-not-idempotent",
        "send-after-close-dropped",
        "send-no-checkpoint",
        "interrupt-closes",
    ],
)
async def test_an_engine_that_breaks_a_clause_fails_check_engine(
    wrap: type[WrappedRun], clause: str, finding: str
) -> None:
    def make_engine(box_root: Path, *, start_fails: bool) -> Engine:
        return EngineOfWrappedRuns(scripted_engine(box_root, start_fails=start_fails), wrap)

    with pytest.raises(ConformanceFailure) as caught:
        await check_engine(make_engine)
    message = str(caught.value)
    assert f"FAIL {CONTRACT_SOURCE} :: {clause}: {finding}" in message, message
    assert message.splitlines()[0] == f"check_engine: 1 of {len(ENGINE_CONTRACT)} cases failed"


@pytest.mark.anyio
async def test_a_start_failure_of_the_wrong_type_fails_check_engine() -> None:
    def make_engine(box_root: Path, *, start_fails: bool) -> Engine:
        return StartFailsWithTheWrongError() if start_fails else ScriptedEngine("accept")

    with pytest.raises(ConformanceFailure) as caught:
        await check_engine(make_engine)
    assert (
        f"FAIL {CONTRACT_SOURCE} :: a start that fails raises EngineStartError: start() raised "
        "OSError: the engine binary is missing, not EngineStartError"
    ) in str(caught.value)


@pytest.mark.anyio
async def test_an_engine_whose_start_never_answers_is_reported_hung() -> None:
    # A scripted engine in "wait" mode answers no start unless a test does.
    def make_engine(box_root: Path, *, start_fails: bool) -> Engine:
        return ScriptedEngine("wait")

    with pytest.raises(ConformanceFailure) as caught:
        await check_engine(make_engine, timeout_seconds=0.05)
    assert (
        f"FAIL {CONTRACT_SOURCE} :: start returns an open run: hung for 0.05 s while starting a run"
    ) in str(caught.value)


# --- Sessions that break a scenario ---------------------------------------------------


class BusyTurnIsDropped(ChatThreadSession):
    """A turn sent while busy is dropped silently instead of refused with SessionBusyError."""

    def _begin_turn(self, pending: PendingTurn) -> tuple[ThreadRun | None, int | None]:
        if self.busy:
            return None, None
        return super()._begin_turn(pending)


@pytest.mark.anyio
async def test_a_session_that_drains_on_stop_fails_check_chat_session() -> None:
    with pytest.raises(ConformanceFailure) as caught:
        await check_chat_session(StopDrainsTheQueue.open)
    message = str(caught.value)
    assert f"FAIL {VECTORS / 'session' / 'chat-session.json'} :: stop clears the queue" in message
    assert "first difference at $[" in message


@pytest.mark.anyio
async def test_a_thread_session_that_drops_busy_turns_fails_check_thread_session() -> None:
    with pytest.raises(ConformanceFailure) as caught:
        await check_thread_session(BusyTurnIsDropped.open)
    message = str(caught.value)
    thread_vectors = VECTORS / "session" / "thread-session.json"
    assert f"FAIL {thread_vectors} :: a send while starting raises SessionBusyError" in message
    assert 'expected [{"accepted": true' in message


# --- A host's own vector files --------------------------------------------------------

IDLE_FLAGS = ("idle", {"phase": "idle"}, {"running": False, "busy": False})


def test_a_check_runs_a_hosts_own_folder_with_macros_expanded(tmp_path: Path) -> None:
    ref_7 = {"sessionId": "s", "entryUuid": "u", "index": 7}
    built = {"$concat": ["s", {"$repeat": "/u", "times": 1}, "/7"]}
    own = write_vectors(tmp_path / "host" / "refs.json", "media-ref/parse", ("built", built, ref_7))
    check_media_refs(lambda: beebox_spec.media, vectors=[tmp_path / "host"])
    write_vectors(own, "media-ref/parse", ("wrong index", "s/u/7", {**ref_7, "index": 8}))
    message = failure_of(check_media_refs, lambda: beebox_spec.media, vectors=[tmp_path / "host"])
    assert_case_fails(
        message,
        own,
        "wrong index",
        {"sessionId": "s", "entryUuid": "u", "index": 8},
        {"sessionId": "s", "entryUuid": "u", "index": 7},
    )


def test_unparsable_files_and_unknown_kinds_fail_a_check(tmp_path: Path) -> None:
    write_vectors(tmp_path / "ok.json", "lifecycle/flags", IDLE_FLAGS)
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    write_vectors(tmp_path / "odd.json", "no/such-kind", ("x", 1, 1))
    message = failure_of(check_lifecycle, lambda: beebox_spec.phases, vectors=[tmp_path])
    assert f"FAIL {tmp_path / 'broken.json'}: cannot parse: cannot read: " in message
    assert f"FAIL {tmp_path / 'odd.json'}: unknown kind 'no/such-kind'" in message
    assert message.splitlines()[-1] == "1 passed, 2 failed"


def test_a_check_that_finds_no_case_of_its_kinds_fails(tmp_path: Path) -> None:
    write_vectors(tmp_path / "flags.json", "lifecycle/flags", IDLE_FLAGS)
    message = failure_of(check_media_refs, lambda: beebox_spec.media, vectors=[tmp_path])
    assert message.splitlines() == [
        "check_media_refs: no vector case of its kinds was found, so nothing was checked",
        "0 passed, 0 failed",
    ]


@pytest.mark.anyio
async def test_a_thread_scenario_given_to_the_chat_check_fails(tmp_path: Path) -> None:
    idle = {"phase": "idle", "busy": False, "running": False, "queue": [], "runs": []}
    write_vectors(
        tmp_path / "mixed.json",
        "session/scenario",
        ("chat stop while idle", {"session": "chat", "steps": [{"call": "stop"}]}, [idle]),
        ("thread stop while idle", {"session": "thread", "steps": [{"call": "stop"}]}, [idle]),
    )
    with pytest.raises(ConformanceFailure) as caught:
        await check_chat_session(ChatSession.open, vectors=[tmp_path])
    assert str(caught.value).splitlines()[1:] == [
        f"FAIL {tmp_path / 'mixed.json'} :: thread stop while idle: expected "
        f"{json.dumps([idle], sort_keys=True)}, raised ScenarioError: "
        "a thread scenario, and no thread session to run it on",
        "1 passed, 1 failed",
    ]


# --- The documented example -------------------------------------------------------------


def documented_example() -> tuple[str, dict[str, Any]]:
    """The Python example of docs/conformance.md's checks section, and what running it defines."""
    section = DOCS.read_text(encoding="utf-8").split(
        "## Checking your own implementation from Python", 1
    )[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    defined: dict[str, Any] = {}
    exec(compile(code, f"{DOCS} (example)", "exec"), defined)
    return code, defined


def test_the_documented_example_calls_every_check_and_its_pure_checks_pass() -> None:
    code, defined = documented_example()
    for name in conformance.__all__:
        if name.startswith("check_"):
            assert f"{name}(" in code, f"docs/conformance.md does not show {name}"
    defined["test_the_pure_rules"]()
    defined["test_the_transcript_reader"]()


@pytest.mark.anyio
async def test_the_documented_async_example_passes() -> None:
    _, defined = documented_example()
    await defined["test_the_engine_and_the_sessions"]()
