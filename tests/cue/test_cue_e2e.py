"""``mirage cue run`` end to end on the embedded SmolLM2: the default three systems over one
profile of the bundled pack, then a resume that adds nothing (slow)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from harness.cue.pack import BUNDLED_DIR, DEFAULT_PACK
from harness.cue.records import CueRecord
from harness.kit.results import read_records
from mirage.cli import app


def one_profile_pack(target: Path, profile: str = "p1") -> Path:
    shutil.copytree(BUNDLED_DIR / DEFAULT_PACK, target)
    spec = yaml.safe_load((target / "pack.yaml").read_text())
    spec["profiles"] = [profile]
    (target / "pack.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    bank = yaml.safe_load((target / "questions.yaml").read_text())
    bank["questions"] = [q for q in bank["questions"] if q["profile"] == profile]
    text = yaml.safe_dump(bank, sort_keys=False, allow_unicode=True)
    (target / "questions.yaml").write_text(text)
    return target


@pytest.mark.slow
def test_cue_run_on_the_embedded_model_then_resume(tmp_path: Path) -> None:
    pack = one_profile_pack(tmp_path / "pack")
    out = tmp_path / "run"
    args = ["cue", "run", "--pack", str(pack), "--out", str(out), "--replicates", "1000"]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    folder = out / "local_smollm2-135m"
    records = read_records(folder / "results.jsonl", CueRecord)
    assert len(records) == 3 * 16 and all(r.error is None for r in records)
    assert {r.condition for r in records} == {
        "full-context@detailed/split",
        "naive-rag@detailed/split",
        "mirage-memory@detailed/split",
    }
    assert all(r.raw_output is not None and r.usage.input_tokens for r in records)
    summary = json.loads((folder / "summary.json").read_text())
    assert set(summary["metrics"]) == {r.condition for r in records}
    assert [c["p_holm"] is not None for c in summary["contrasts"]] == [True] * 5
    report = (folder / "report.md").read_text()
    assert "near chance" in report and "## Contrasts" in report
    assert sorted(p.name for p in (folder / "figures").iterdir()) == [
        "accuracy_by_task.png",
        "contrasts.png",
        "memory_avg.png",
        "retrieval_recall.png",
    ]
    second = CliRunner().invoke(app, args)
    assert second.exit_code == 0, second.output
    assert read_records(folder / "results.jsonl", CueRecord) == records
