"""Every real transcript of the corpus reads without error, through the spec and the
implementation alike, with its counts pinned.

The corpus (`shared/corpus/claude-transcripts/`, public transcripts with their licences
in its SOURCES.md) sits beside the repository and is not copied into it; set
``BBX_CORPUS_DIR`` to read it from elsewhere. The pinned figures were read off the
files once; a change in any of them is a change in the reading rules.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from beebox_impl.transcript import (
    PageSlice,
    TranscriptIndexCache,
    read_history,
    read_line_records,
)
from beebox_spec.entries import MAX_SESSION_ENTRIES
from beebox_spec.media import STRIPPED_MEDIA_MARKER
from beebox_spec.transcript import entries_from_lines, read_transcript_lines, split_transcript_lines

REPO = Path(__file__).resolve().parents[3]
CORPUS = Path(
    os.environ.get("BBX_CORPUS_DIR", REPO.parent / "shared" / "corpus" / "claude-transcripts")
)

# (file, lines, entries, lines stripped of media, oversize lines, refs minted, inline images)
PINNED = [
    ("claude-code-viewer/1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl", 29, 16, 0, 0, 0, 0),
    ("claude-code-viewer/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl", 53, 31, 0, 0, 0, 0),
    ("claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl", 438, 269, 0, 0, 0, 0),
    (
        "session-share/0ccf1a04-1b4c-43b6-8aa5-79e41db43a68/subagents/agent-a5bdbc1.jsonl",
        7,
        4,
        0,
        0,
        0,
        0,
    ),
    (
        "session-share/0ccf1a04-1b4c-43b6-8aa5-79e41db43a68/subagents/agent-a9cad17.jsonl",
        6,
        3,
        0,
        0,
        0,
        0,
    ),
    (
        "session-share/0ccf1a04-1b4c-43b6-8aa5-79e41db43a68/subagents/agent-aa5ef13.jsonl",
        6,
        3,
        0,
        0,
        0,
        0,
    ),
    (
        "session-share/0ccf1a04-1b4c-43b6-8aa5-79e41db43a68/subagents/agent-ac27727.jsonl",
        6,
        3,
        0,
        0,
        0,
        0,
    ),
    (
        "session-share/0ccf1a04-1b4c-43b6-8aa5-79e41db43a68/subagents/agent-afbbf75.jsonl",
        7,
        4,
        0,
        0,
        0,
        0,
    ),
    # Less its three task notifications (the spec's transcript rule 4).
    ("session-share/0ccf1a04-1b4c-43b6-8aa5-79e41db43a68.jsonl", 86, 35, 0, 0, 0, 0),
    ("session-share/general-tool-calls.jsonl", 562, 289, 0, 0, 0, 0),
    ("session-share/images-in-tool-results.jsonl", 4, 1, 1, 0, 0, 0),
    ("session-share/images-in-user-messages.jsonl", 28, 19, 0, 0, 0, 2),
    (
        "spotter/4d5611e5-241a-462a-8d15-5122611a9569/subagents/agent-a2898e3.jsonl",
        144,
        41,
        0,
        0,
        0,
        0,
    ),
    (
        "spotter/4d5611e5-241a-462a-8d15-5122611a9569/subagents/agent-acompact-e1f845.jsonl",
        5,
        2,
        0,
        0,
        0,
        0,
    ),
    # Less its one task notification.
    ("spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl", 1512, 257, 0, 0, 0, 0),
    ("spotter/short.jsonl", 15, 7, 0, 0, 0, 0),
    ("spotter/subagent.jsonl", 96, 31, 0, 0, 0, 0),
    ("spotter/tool_heavy.jsonl", 39, 15, 0, 0, 0, 0),
    ("synthetic/dag_compact_after_rewind_preserved.jsonl", 12, 11, 0, 0, 0, 0),
]

needs_corpus = pytest.mark.skipif(
    not CORPUS.is_dir(), reason=f"the transcript corpus is not at {CORPUS} (set BBX_CORPUS_DIR)"
)


@needs_corpus
def test_every_corpus_file_is_pinned() -> None:
    on_disk = sorted(str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*.jsonl"))
    assert on_disk == sorted(row[0] for row in PINNED)


@needs_corpus
@pytest.mark.parametrize("row", PINNED, ids=[row[0].rsplit("/", 1)[-1] for row in PINNED])
def test_corpus_file_reads_the_same_through_spec_and_implementation(
    row: tuple[str, int, int, int, int, int, int],
) -> None:
    name, lines, entries, stripped, oversize, refs, inline = row
    path = CORPUS / name
    raw_lines = split_transcript_lines(path.read_bytes())
    spec_records = read_transcript_lines(raw_lines)
    spec_entries = entries_from_lines(path.stem, raw_lines)

    impl_records = list(read_line_records(path))
    window = PageSlice(0, MAX_SESSION_ENTRIES)
    impl = read_history(path, path.stem, window, cache=TranscriptIndexCache())

    blocks = [block for entry in spec_entries for block in entry["content"]]
    assert len(raw_lines) == lines
    assert len(spec_entries) == entries
    assert (
        sum(1 for r in spec_records if r["kind"] == "parseable" and r["mediaStripped"]) == stripped
    )
    assert sum(1 for r in spec_records if r["kind"] == "oversize") == oversize
    assert sum(1 for b in blocks if "imageRef" in b) == refs
    assert sum(1 for b in blocks if b["type"] == "image" and "dataBase64" in b) == inline

    assert [(r.line_number, r.kind, r.media_stripped) for r in impl_records] == [
        (r["lineNumber"], r["kind"], r.get("mediaStripped", False)) for r in spec_records
    ]
    assert impl["entries"] == spec_entries
    assert impl["total"] == entries


@needs_corpus
def test_the_real_image_line_is_stripped() -> None:
    path = CORPUS / "session-share" / "images-in-tool-results.jsonl"
    big = [r for r in read_line_records(path) if r.utf8_bytes > 1_000_000]
    assert len(big) == 1, "the corpus holds one 1.2 MB line with a screenshot in a tool result"
    record = big[0]
    assert record.kind == "parseable"
    assert record.media_stripped
    assert record.text is not None
    assert STRIPPED_MEDIA_MARKER in record.text
    assert len(record.text.encode()) < 20_000, "the payloads, not the line, were the weight"
