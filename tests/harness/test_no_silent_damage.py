"""No silent damage in a run folder (issues 26, 37): a snapshot of the wrong shape with a
consistent byte hash, a damaged family.json that its checkpoints cannot vouch for, a full disk at
the start and mid-probes — each one line naming the file and what to do — and the provenance a
run records, keeps on a resume and compares across runs. Real `mirage run` processes
(tests.harness.run_driver). Every file kind × every damage: ``test_corruption_corpus``."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from harness.kit.results import read_records
from harness.mirage.probing.records import ProbeRecord
from harness.mirage.trunk.checkpoints import FAMILY_FILE, MANIFEST
from mirage.cli import app
from tests.cli_errors import assert_one_line_error
from tests.harness.run_driver import LIMIT

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PROBES = LIMIT * 4 * 2  # questions x states x conditions
RUN = ["run", "--model", "oracle", "--trunk-model", "scripted", "--summarizer", "summarizer"]
RUN += ["--limit", str(LIMIT)]


def _driver(out: Path, *options: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    return subprocess.run(
        [sys.executable, "-m", "tests.harness.run_driver", str(out), "--cli", *options],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("damage") / "run"
    done = _driver(out)
    assert done.returncode == 0, done.stderr
    return out


def _copy(finished: Path, tmp_path: Path) -> tuple[Path, Path]:
    copy = tmp_path / "run"
    shutil.copytree(finished, copy, symlinks=True)
    (family,) = (p for p in (copy / "checkpoints").iterdir() if p.is_dir())
    return copy, family


def _resume(copy: Path) -> Result:
    """A resume through the command line (it fails before any model is needed)."""
    return CliRunner().invoke(app, [*RUN, "--out", str(copy)])


def test_a_snapshot_of_the_wrong_shape_with_a_consistent_hash_is_one_line(
    finished: Path, tmp_path: Path
) -> None:
    copy, family = _copy(finished, tmp_path)
    (snapshot,) = (family / "S1-d50k").glob("*.session")
    head, _, payload = snapshot.read_bytes().partition(b"\n")
    session = json.loads(payload)
    session["message_tokens"] = "many"  # a list of ints in a valid session
    payload = json.dumps(session).encode()
    digest = hashlib.sha256(payload).hexdigest()
    header = {**json.loads(head), "payload_sha256": digest, "length": len(payload)}
    snapshot.write_bytes(json.dumps(header).encode() + b"\n" + payload)
    result = _resume(copy)
    line = assert_one_line_error(
        result, "error: corrupt checkpoint", str(snapshot), "message_tokens", exit_code=2
    )
    assert "does not hold a valid session" in line and f"delete {family} to rebuild" in line


def test_a_damaged_family_record_with_a_missing_checkpoint_is_refused(
    finished: Path, tmp_path: Path
) -> None:
    copy, family = _copy(finished, tmp_path)
    (family / FAMILY_FILE).write_text('{"trunk": [1, 2]}')
    (family / "S1-d0" / MANIFEST).unlink()
    result = _resume(copy)
    line = assert_one_line_error(result, f"error: {family / FAMILY_FILE}", exit_code=2)
    assert f"delete {family} to rebuild" in line and "cannot restore it" in line


def test_the_run_records_its_provenance_in_run_json_summary_and_reports(finished: Path) -> None:
    block = json.loads((finished / "run.json").read_text())["provenance"]
    assert block["pack"] == "mirage-core" and len(block["pack_digest"]) == 16
    assert block["questions"] == LIMIT and len(block["questions_digest"]) == 16
    roles = {m["role"]: m for m in block["models"]}
    assert roles["answerer"]["model"] == "oracle"
    assert len(roles["embedder"]["sha256"]) == 64
    assert block["commit"] != "" and block["scoring"] == "paper"
    assert set(block["libraries"]) >= {"llama_cpp_python", "litellm", "chromadb", "mcp"}
    summary = json.loads((finished / "oracle" / "summary.json").read_text())
    assert next(iter(summary)) == "provenance" and summary["provenance"] == block
    head = (finished / "oracle" / "report.md").read_text().splitlines()[:3]
    assert head[2].startswith("**Provenance:** mirage ") and block["pack_digest"] in head[2]
    assert "<strong>Provenance:</strong>" in (finished / "oracle" / "report.html").read_text()


def _edit_provenance(copy: Path, **changes: object) -> None:
    path = copy / "run.json"
    payload = json.loads(path.read_text())
    payload["provenance"].update(changes)
    path.write_text(json.dumps(payload))


def test_a_resume_keeps_the_first_provenance_and_notes_the_difference(
    finished: Path, tmp_path: Path
) -> None:
    copy, _ = _copy(finished, tmp_path)
    block = json.loads((copy / "run.json").read_text())["provenance"]
    _edit_provenance(copy, commit="0" * 40, libraries={**block["libraries"], "litellm": "0.0.1"})
    resumed = _driver(copy)
    assert resumed.returncode == 0, resumed.stderr
    assert "provenance.resumed_with_differences" in resumed.stderr
    kept = json.loads((copy / "run.json").read_text())["provenance"]
    assert kept["commit"] == "0" * 40 and kept["libraries"]["litellm"] == "0.0.1"
    (note,) = kept["resumed"]
    assert f"commit: {'0' * 40} -> {block['commit']}" in note
    assert f"libraries.litellm: 0.0.1 -> {block['libraries']['litellm']}" in note


def test_report_of_two_runs_shows_where_their_provenance_differs(
    finished: Path, tmp_path: Path
) -> None:
    first, _ = _copy(finished, tmp_path / "a")
    second, _ = _copy(finished, tmp_path / "b")
    _edit_provenance(second, cpu="Another CPU (64 logical cores)")
    out = tmp_path / "compared"
    args = ["report", str(first / "oracle"), str(second / "oracle"), "--compare-out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    text = (out / "comparison.md").read_text()
    assert "## Provenance differences" in text
    (row,) = [line for line in text.splitlines() if line.startswith("| cpu |")]
    assert "Another CPU (64 logical cores)" in row
    assert json.loads((out / "comparison.json").read_text())["provenance_differences"]["cpu"]


@contextmanager
def _small_disk(where: Path, size: str) -> Iterator[Path]:
    """A real tmpfs of ``size`` at ``where`` (root only: skipped elsewhere)."""
    where.mkdir(parents=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _one_disk_full_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: disk full writing "), done.stderr
    assert "re-run the same command to resume" in errors[0]
    return errors[0]


@pytest.mark.parametrize("size", ["16k", "1m", "2m"])  # the workspace copy, the index, ...
def test_a_full_disk_at_the_start_is_one_line_and_exit_1(tmp_path: Path, size: str) -> None:
    with _small_disk(tmp_path / "disk", size) as disk:
        _one_disk_full_line(_driver(disk / "run"))


def test_a_disk_that_fills_mid_probes_leaves_no_torn_line_and_resumes(tmp_path: Path) -> None:
    with _small_disk(tmp_path / "disk", "64m") as disk:
        out = disk / "run"
        _one_disk_full_line(_driver(out, "--fill-disk-after", "5"))
        results = out / "oracle" / "results.jsonl"
        kept = results.read_bytes()
        assert kept.endswith(b"\n") and 0 < kept.count(b"\n") < PROBES
        (disk / "ballast").unlink()
        resumed = _driver(out)
        assert resumed.returncode == 0, resumed.stderr
        final = results.read_bytes()
        assert final.startswith(kept)
        records = read_records(results, ProbeRecord)
        assert len(records) == len({r.key for r in records}) == PROBES
