"""``mirage run --trunk-model scripted --summarizer local/smollm2-135m`` with nothing stood in:
the embedded SmolLM2 summarizes the trunk (a scripted trunk's own default is a reference
summarizer) and answers the probes, the three reference agents answer beside it, and the
comparison opens with what their rows show and the model's protocol failures stated plainly.
The CI-sized form of the README's first command (two questions; docs/running.md quotes its
time)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.kit.results import read_records
from harness.mirage.probing.records import ProbeRecord
from harness.mirage.references import REFERENCE_MODELS
from mirage.cli import app
from runtime.backbones import DEFAULT_MODEL

pytestmark = pytest.mark.slow

LIMIT = 2  # one answerable and one unanswerable question: 16 probes per answerer


def test_scripted_trunk_default_run_with_the_real_embedded_model(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["run", "--trunk-model", "scripted", "--summarizer", DEFAULT_MODEL]
    result = CliRunner().invoke(app, [*args, "--limit", str(LIMIT), "--out", str(out)])
    assert result.exit_code == 0, result.output

    folders = {m: out / m.replace("/", "_") for m in [DEFAULT_MODEL, *REFERENCE_MODELS]}
    records = {m: read_records(folder, ProbeRecord) for m, folder in folders.items()}
    assert len(records[DEFAULT_MODEL]) == LIMIT * 4 * 2  # questions x states x conditions
    assert all(len(records[m]) == LIMIT * 8 * 2 for m in REFERENCE_MODELS)  # + 4 calibration arms
    model_records = records[DEFAULT_MODEL]
    assert all(r.model == DEFAULT_MODEL and r.raw_output for r in model_records)
    provenance = json.loads((out / "run.json").read_text())["provenance"]
    embedded = [m for m in provenance["models"] if m["model"] == DEFAULT_MODEL]
    assert {m["role"] for m in embedded} >= {"answerer", "summarizer"}
    assert all(len(m["sha256"]) == 64 for m in embedded)  # the GGUF that ran, not a stand-in

    opening = (out / "comparison.md").read_text().split("All answerers ran", 1)[0]
    assert "reference/confabulator, which always answers YES" in opening
    assert "reference/context-reader's GC falls" in opening
    failed = sum(r.pf for r in model_records)
    if failed == len(model_records):  # SmolLM2-135M today: the plain statement of it
        assert f"every one of its {failed} replies failed the protocol" in opening
    assert DEFAULT_MODEL in opening
    comparison = json.loads((out / "comparison.json").read_text())
    assert comparison["instrument"]["declared"] > 0
    own = [c for c in comparison["summary_checks"] if c["state"] == "S2"]
    assert [c["summarizer_model"] for c in own] == [DEFAULT_MODEL]  # SmolLM2's own S2 summary
    flagged = [line for line in result.output.splitlines() if line.startswith("flagged: the S2 ")]
    assert bool(flagged) == own[0]["degenerate"]  # a degenerate summary is said, never silent
