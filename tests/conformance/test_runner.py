"""The conformance runner: the packaged vectors pass, and broken input is reported."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from conformance.__main__ import main as conformance_main
from conformance.runner import PACKAGED_VECTORS, count_kinds, run_files
from conformance.targets import KNOWN_KINDS
from conformance.targets.impl import impl_handlers
from conformance.targets.spec import SPEC_HANDLERS
from conformance.vectorfile import (
    VectorFileError,
    expand_macros,
    first_difference,
    json_equal,
    load_vector_file,
)

# The spec target answers every kind of the format but the live host's (http/exchange).
SPEC_KINDS = KNOWN_KINDS - {"http/exchange"}


def write(path: Path, document: Any) -> Path:
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def vector_file(kind: str, *cases: tuple[str, Any, Any]) -> dict[str, Any]:
    """A vector document of ``kind`` with (name, input, expect) cases."""
    return {
        "kind": kind,
        "description": "a test's own vectors",
        "cases": [
            {"name": name, "input": given, "expect": expect} for name, given, expect in cases
        ],
    }


def test_every_packaged_vector_passes_against_the_spec() -> None:
    report = run_files([PACKAGED_VECTORS], SPEC_HANDLERS)
    assert not report.failures, "\n".join(f.render() for f in report.failures or ())
    assert report.passed >= 300
    # Only a live host answers http/exchange (`--url`): the spec skips exactly that kind.
    assert set(report.skipped_kinds) == {"http/exchange"}


def test_the_packaged_vectors_cover_every_spec_kind() -> None:
    counts = count_kinds([PACKAGED_VECTORS])
    assert set(counts) == SPEC_KINDS | {"http/exchange"}
    assert set(SPEC_HANDLERS) == SPEC_KINDS
    assert all(count >= 5 for count in counts.values()), counts


def test_the_closing_line_and_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = write(
        tmp_path / "good.json",
        vector_file(
            "lifecycle/transition", ("legal", {"from": "idle", "to": "starting"}, {"legal": True})
        ),
    )
    assert conformance_main([str(good)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "1 passed, 0 failed"


def test_a_wrong_expectation_fails_with_file_case_and_difference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write(
        tmp_path / "bad.json",
        vector_file(
            "media-ref/parse",
            ("ok", "s/u/1", {"sessionId": "s", "entryUuid": "u", "index": 1}),
            ("wrong index", "s/u/2", {"sessionId": "s", "entryUuid": "u", "index": 3}),
        ),
    )
    assert conformance_main([str(bad)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "1 passed, 1 failed"
    assert lines[0].startswith(f"FAIL {bad} :: wrong index: expected ")
    assert "first difference at $.index" in lines[0]


def test_an_unknown_kind_and_an_unparsable_file_fail_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "a.json", vector_file("no/such-kind", ("x", 1, 1), ("y", 2, 2)))
    (tmp_path / "b.json").write_text("{not json", encoding="utf-8")
    write(tmp_path / "c.json", {"kind": "lifecycle/flags", "cases": [{"name": "x"}]})
    assert conformance_main([str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "unknown kind 'no/such-kind'" in out
    assert "b.json: cannot parse" in out
    assert "c.json: cannot parse: case 1 must be an object with input and expect" in out
    assert out.splitlines()[-1] == "0 passed, 4 failed", "an unknown kind fails each of its cases"


def test_a_missing_path_is_a_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "absent.json"
    assert conformance_main([str(missing)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"FAIL {missing}: no such file or folder",
        "spec: 0 passed, 1 failed",
        "0 passed, 1 failed",
    ]


def test_a_folder_without_cases_is_not_a_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert conformance_main([str(tmp_path)]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == "0 passed, 0 failed"


def test_a_crashing_handler_is_that_cases_failure(tmp_path: Path) -> None:
    path = write(
        tmp_path / "crash.json",
        vector_file(
            "lifecycle/flags", ("bad phase", {"phase": "nope"}, {"running": False, "busy": False})
        ),
    )
    report = run_files([path], SPEC_HANDLERS)
    assert report.failed == 1
    assert report.failures is not None
    assert "raised ValueError" in report.failures[0].message


def test_list_prints_kinds_and_counts(capsys: pytest.CaptureFixture[str]) -> None:
    assert conformance_main(["--list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "lifecycle/transition\t25" in out
    assert out[-1].endswith(f"cases in {len(SPEC_KINDS) + 1} kinds")


def test_macros_expand_anywhere_in_the_input() -> None:
    given = {
        "a": [{"$repeat": "ab", "times": 3}],
        "b": {"$concat": ["x", {"$repeat": "y", "times": 2}]},
    }
    assert expand_macros(given) == {"a": ["ababab"], "b": "xyy"}
    assert expand_macros({"$json": {"k": "é", "n": [1, 2]}}) == '{"k":"é","n":[1,2]}'
    assert expand_macros({"$repeat": "a", "times": 2, "extra": 1}) == {
        "$repeat": "a", "times": 2, "extra": 1,
    }, "an object with other keys is data, not a macro"  # fmt: skip
    with pytest.raises(VectorFileError):
        expand_macros({"$repeat": "a", "times": -1})
    with pytest.raises(VectorFileError):
        expand_macros({"$concat": ["a", 1]})


def test_expect_is_not_expanded(tmp_path: Path) -> None:
    twice = {"$repeat": "a", "times": 2}
    path = write(
        tmp_path / "v.json", vector_file("review/elide-middle", ("n", {"text": twice}, twice))
    )
    case = load_vector_file(path).cases[0]
    assert case.input == {"text": "aa"}
    assert case.expect == {"$repeat": "a", "times": 2}


def test_json_equality_is_exact() -> None:
    assert json_equal({"a": [1, "x"]}, {"a": [1.0, "x"]})
    assert not json_equal(True, 1)
    assert not json_equal(0, False)
    assert not json_equal(None, [])
    assert not json_equal([1, 2], [1, 2, 3])
    assert first_difference({"a": {"b": [1, 2]}}, {"a": {"b": [1, 3]}}) == "$.a.b[1]"
    assert first_difference({"a": 1}, {"a": 1, "b": 2}) == "$.b (unexpected)"
    assert first_difference({"a": 1, "b": 2}, {"a": 1}) == "$.b (missing)"


def test_a_known_kind_a_target_does_not_answer_is_skipped_and_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "a.json", vector_file("http/exchange", ("x", {}, []), ("y", {}, [])))
    write(
        tmp_path / "b.json",
        vector_file(
            "lifecycle/transition", ("ok", {"from": "idle", "to": "starting"}, {"legal": True})
        ),
    )
    assert conformance_main([str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "spec: 1 passed, 2 skipped (kinds this target does not answer: http/exchange)",
        "1 passed, 0 failed, 2 skipped",
    ]


def test_each_target_says_what_it_ran_and_what_it_skipped_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Kinds every target answers, one only the spec answers in-process, one only a host.
    write(
        tmp_path / "a.json",
        vector_file(
            "lifecycle/transition", ("ok", {"from": "idle", "to": "starting"}, {"legal": True})
        ),
    )
    write(
        tmp_path / "b.json",
        vector_file(
            "reconcile/merge-accepted", ("none", {"pendingMessages": [], "accepted": []}, [])
        ),
    )
    write(tmp_path / "c.json", vector_file("http/exchange", ("x", {}, []), ("y", {}, [])))
    assert conformance_main(["--target", "all", str(tmp_path)]) == 0
    impl = "1 passed, 3 skipped (kinds this target does not answer: http/exchange, "
    impl += "reconcile/merge-accepted)"
    assert capsys.readouterr().out.splitlines() == [
        "spec: 2 passed, 2 skipped (kinds this target does not answer: http/exchange)",
        f"impl/asyncio: {impl}",
        f"impl/trio: {impl}",
        "4 passed, 0 failed, 8 skipped",
    ]


def test_a_backend_whose_package_is_missing_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # What importing a package that is not installed meets (a README venv without trio).
    monkeypatch.setitem(sys.modules, "trio", None)
    scenarios = PACKAGED_VECTORS / "session"
    assert conformance_main(["--target", "impl", str(scenarios)]) == 1
    lines = capsys.readouterr().out.splitlines()
    cases = count_kinds([scenarios])["session/scenario"]
    assert lines == [
        "FAIL impl/trio: not run: the trio backend needs the package 'trio', which is not "
        "installed (pip install trio)",
        f"impl/asyncio: {cases} passed",
        "impl/trio: not run, 1 failed",
        f"{cases} passed, 1 failed",
    ]


def test_target_all_runs_spec_and_implementation_and_names_the_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write(
        tmp_path / "bad.json",
        vector_file(
            "media-ref/parse", ("wrong", "s/u/2", {"sessionId": "s", "entryUuid": "u", "index": 3})
        ),
    )
    assert conformance_main(["--target", "all", str(bad)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert any(line.startswith(f"FAIL {bad} :: wrong: [spec] expected") for line in out)
    for backend in ("asyncio", "trio"):
        assert any(
            line.startswith(f"FAIL {bad} :: wrong: [impl/{backend}] expected") for line in out
        )
    assert out[-1] == "0 passed, 3 failed"


def test_every_packaged_vector_the_implementation_answers_passes_on_both_backends() -> None:
    for backend in ("asyncio", "trio"):
        handlers = impl_handlers(backend)
        report = run_files([PACKAGED_VECTORS], handlers)
        assert not report.failures, "\n".join(f.render() for f in report.failures or ())
        assert report.passed >= 200
        # What the implementation does not answer in-process: the live-host kind
        # (`--url` / `--serve`), and the client-side join (the page's JavaScript,
        # run under Node by tests/web).
        assert set(report.skipped_kinds) == {
            "http/exchange", "reconcile/pending", "reconcile/merge-accepted",
        }  # fmt: skip
