"""Hybrid index behaviour with the real MiniLM model and a real chroma store."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from memory_server.embedding import Embedder
from memory_server.errors import UnknownReferenceError
from memory_server.index import HybridIndex, IndexConfig
from memory_server.search import rrf_fuse
from memory_server.workspace import Workspace
from tests.memory_server.conftest import write_workspace


def _index(root: Path, embedder: Embedder, cache: Path | None = None) -> HybridIndex:
    return HybridIndex(
        Workspace.open(root),
        IndexConfig(embedding_cache=cache),
        embedder=Embedder(embedder.model_path),
    )


@pytest.fixture(scope="module")
def shared_index(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder, shared_cache: Path
) -> HybridIndex:
    """A read-only index over the standard workspace, for tests that only search."""
    root = write_workspace(tmp_path_factory.mktemp("shared") / "ws")
    return _index(root, embedder, shared_cache)


def test_rrf_fusion_formula() -> None:
    fused = dict(rrf_fuse([["a", "b", "c"], ["c", "a"]]))
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert fused["b"] == pytest.approx(1 / 62)
    assert [item for item, _ in rrf_fuse([["a", "b", "c"], ["c", "a"]])] == ["a", "c", "b"]


@pytest.mark.parametrize(
    ("query", "artifact"),
    [
        ("median rent in Munich 2019", "chart_3f9a1c20"),
        ("INV-2023-0042", "invoice_2023_0042"),
        ("4812.5", "invoice_2023_0042"),
        ("how much did the solar inverter cost", "invoice_2023_0042"),
        ("what is the name of the user's cat", "MEMORY"),
        ("seat preference on trains", "memory/2026-01-03"),
        ("function computing a monthly loan payment", "loan_calc"),
        ("rent chart", "chart_3f9a1c20"),
        ("Project Falcon budget", "meeting_minutes"),
    ],
)
def test_search_finds_the_right_artifact(
    shared_index: HybridIndex, query: str, artifact: str
) -> None:
    hits = shared_index.search(query, 3)
    assert hits, query
    assert hits[0].artifact_id == artifact, [h.artifact_id for h in hits]


def test_hits_cite_exact_lines(shared_index: HybridIndex) -> None:
    root = shared_index.workspace.root
    hit = shared_index.search("Munich 2019 median rent", 1)[0]
    assert hit.path == "derived/chart_3f9a1c20.table.csv"
    assert hit.citation == f"{hit.path}#L{hit.start_line}"
    cited = (root / hit.path).read_text().splitlines()[hit.start_line - 1]
    assert cited == "Munich,2019,2240"
    assert Workspace.open(root).resolve(hit.citation) == "chart_3f9a1c20"


def test_artifact_filter(shared_index: HybridIndex) -> None:
    index = shared_index
    hits = index.search("2019", 10, artifact_id="chart_3f9a1c20")
    assert hits and {hit.artifact_id for hit in hits} == {"chart_3f9a1c20"}
    with pytest.raises(UnknownReferenceError):
        index.search("2019", 3, artifact_id="no_such_artifact")


def test_unchanged_content_is_never_embedded_twice(tmp_path: Path, embedder: Embedder) -> None:
    root = write_workspace(tmp_path / "ws")
    index = _index(root, embedder)
    first = index.sync()
    assert first.texts_embedded == first.chunks_added > 0
    assert index.sync().texts_embedded == 0
    index.workspace.snapshot()
    assert index.sync().texts_embedded == 0
    assert index.rebuild().texts_embedded == 0

    (root / "notes" / "meeting_minutes.txt").write_text("Project Falcon moved to 2025-04-01.\n")
    changed = index.sync()
    assert changed.units_added == 1
    assert changed.texts_embedded == changed.chunks_added == 1

    reopened = _index(root, embedder)
    assert reopened.sync().texts_embedded == 0
    assert reopened.embedder.texts_embedded == 0


@pytest.mark.parametrize("rebuild", [False, True])
def test_batches_store_while_the_next_embeds_and_report_progress(
    tmp_path: Path,
    embedder: Embedder,
    shared_cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    rebuild: bool,
) -> None:
    monkeypatch.setattr("memory_server.ingest._UNITS_PER_BATCH", 4)  # several batches
    root = tmp_path / "ws"
    root.mkdir()
    for number in range(11):
        (root / f"log_{number:02d}.md").write_text(f"# Day {number}\n\nWatered plant {number}.\n")
    (root / "broken.pdf").write_bytes(b"not a pdf")  # skipped with a warning, still counted
    index = _index(root, embedder, shared_cache)
    seen: list[tuple[int, int]] = []

    def progress(done: int, total: int) -> None:
        seen.append((done, total))

    report = index.rebuild(progress) if rebuild else index.sync(progress=progress)
    units = report.units_added + len(report.warnings)
    assert seen[0] == (0, units) and seen[-1] == (units, units)
    assert [done for done, _ in seen] == sorted({done for done, _ in seen})
    assert len(seen) >= 4
    assert index.chunk_count() == report.chunks_added == 11
    assert [h.path for h in index.search("plant 9", 1)] == ["log_09.md"]


def test_rebuild_equals_incremental(tmp_path: Path, embedder: Embedder, shared_cache: Path) -> None:
    incremental_root = write_workspace(tmp_path / "a")
    incremental = _index(incremental_root, embedder, shared_cache)
    incremental.sync()
    (incremental_root / "notes" / "extra.md").write_text(
        "# Extra\n\nThe boiler was serviced in May.\n"
    )
    incremental.sync()
    (incremental_root / "code" / "loan_calc.py").write_text("def fee():\n    return 12.5\n")
    (incremental_root / "notes" / "meeting_minutes.txt").unlink()
    incremental.sync(collect_garbage=True)

    rebuilt_root = tmp_path / "b"
    shutil.copytree(incremental_root, rebuilt_root, ignore=shutil.ignore_patterns(".mirage"))
    rebuilt = _index(rebuilt_root, embedder, shared_cache)
    rebuilt.rebuild()

    def chunks(index: HybridIndex) -> list[tuple[str, str, int, int, str]]:
        return [
            (c.chunk_id, c.path, c.start_line, c.end_line, c.text)
            for c in index.keyword.all_chunks()
        ]

    assert chunks(incremental) == chunks(rebuilt)
    for query in ["boiler service", "Project Falcon", "fee", "Berlin rent 2023", "invoice total"]:
        left = [(h.artifact_id, h.citation) for h in incremental.search(query, 5)]
        right = [(h.artifact_id, h.citation) for h in rebuilt.search(query, 5)]
        assert left == right, query


def test_queries_restricted_to_a_version(
    tmp_path: Path, embedder: Embedder, shared_cache: Path
) -> None:
    root = write_workspace(tmp_path / "ws")
    index = _index(root, embedder, shared_cache)
    old = index.workspace.snapshot()
    (root / "notes" / "meeting_minutes.txt").write_text("Project Falcon was cancelled.\n")
    (root / "notes" / "new_fact.txt").write_text("The garage code is 4417.\n")

    live = index.search("Project Falcon", 1)[0]
    assert "cancelled" in live.snippet
    past = index.search("Project Falcon", 1, version=old)[0]
    assert "Budget approved" in past.snippet
    assert all(h.path != "notes/new_fact.txt" for h in index.search("garage code", 5, version=old))
    assert index.search("garage code", 1)[0].path == "notes/new_fact.txt"


def test_garbage_collection_keeps_snapshotted_content(
    tmp_path: Path, embedder: Embedder, shared_cache: Path
) -> None:
    root = write_workspace(tmp_path / "ws")
    index = _index(root, embedder, shared_cache)
    version = index.workspace.snapshot()
    (root / "notes" / "meeting_minutes.txt").unlink()
    (root / "notes" / "scratch.txt").write_text("temporary scratch text\n")
    index.sync()
    (root / "notes" / "scratch.txt").unlink()
    report = index.sync(collect_garbage=True)
    assert report.units_removed == 1
    assert index.search("Project Falcon budget", 1, version=version)[0].artifact_id == (
        "meeting_minutes"
    )
    assert all(h.artifact_id != "meeting_minutes" for h in index.search("Project Falcon", 5))


def test_lost_store_is_rebuilt_from_files(
    tmp_path: Path, embedder: Embedder, shared_cache: Path
) -> None:
    root = write_workspace(tmp_path / "ws")
    index = _index(root, embedder, shared_cache)
    index.sync()
    index.close()
    current = json.loads((root / ".mirage" / "index" / "current.json").read_text())
    (root / ".mirage" / "index" / current["generation"] / "keyword.sqlite").unlink()
    reopened = _index(root, embedder, shared_cache)
    report = reopened.sync()
    assert (report.units_added, report.texts_embedded) == (11, 0)  # the dated note: 3 units
    assert reopened.search("INV-2023-0042", 1)[0].artifact_id == "invoice_2023_0042"


def test_manifest_change_updates_artifact_ids(
    tmp_path: Path, embedder: Embedder, shared_cache: Path
) -> None:
    root = write_workspace(tmp_path / "ws")
    index = _index(root, embedder, shared_cache)
    assert index.search("Project Falcon budget", 1)[0].artifact_id == "meeting_minutes"
    manifest = (root / "MANIFEST.yaml").read_text()
    manifest += "  - id: falcon_kickoff\n    files: [notes/meeting_minutes.txt]\n"
    (root / "MANIFEST.yaml").write_text(manifest)
    assert index.search("Project Falcon budget", 1)[0].artifact_id == "falcon_kickoff"


def test_pdf_needs_pypdf_or_is_indexed(
    tmp_path: Path, embedder: Embedder, shared_cache: Path
) -> None:
    import importlib.util

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    root = write_workspace(tmp_path / "ws")
    figure = plt.figure()
    figure.text(0.1, 0.5, "Quarterly revenue was 4.2 million EUR")
    figure.savefig(root / "artifacts" / "report_q3.pdf")
    plt.close(figure)
    index = _index(root, embedder, shared_cache)
    report = index.sync()
    if importlib.util.find_spec("pypdf") is None:
        assert any("report_q3.pdf" in w and "pypdf" in w for w in report.warnings)
        return
    assert report.warnings == []
    hit = index.search("quarterly revenue", 1)[0]
    assert (hit.artifact_id, hit.locator) == ("report_q3", "page 1")
    assert "4.2 million" in hit.snippet
