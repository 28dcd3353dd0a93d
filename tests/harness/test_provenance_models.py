"""The provenance block names every answerer a run probes, the references included, and says
where each one's answers come from."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.mirage.config import RunConfig
from harness.mirage.references import REFERENCE_MODELS
from harness.mirage.run.provenance import _models
from harness.mirage.trunk.checkpoints import SCRIPTED_TRUNK_MODEL
from runtime.backbones import DEFAULT_MODEL


def test_a_default_run_lists_the_references_the_embedded_model_and_a_scripted_trunk() -> None:
    config = RunConfig(trunk_model=SCRIPTED_TRUNK_MODEL)
    models = _models(SimpleNamespace(config=config, backbones={}))  # type: ignore[arg-type]
    by_model = {(m.role, m.model): m for m in models}
    for reference in REFERENCE_MODELS:
        assert by_model["answerer", reference].provider == "mirage reference agent"
    assert by_model["trunk", SCRIPTED_TRUNK_MODEL].provider == "scripted replies"
    assert by_model["answerer", DEFAULT_MODEL].sha256  # the GGUF's digest
    # a scripted trunk compacts with a reference summarizer unless told otherwise
    summarizer = by_model["summarizer", "reference/keep-charts"]
    assert summarizer.provider == "mirage reference summarizer, no model"


def test_a_scripted_trunk_summarized_by_the_embedded_model_names_its_digest() -> None:
    config = RunConfig(trunk_model=SCRIPTED_TRUNK_MODEL, summarizer_model=DEFAULT_MODEL)
    models = _models(SimpleNamespace(config=config, backbones={}))  # type: ignore[arg-type]
    by_model = {(m.role, m.model): m for m in models}
    assert by_model["summarizer", DEFAULT_MODEL].sha256
    assert (
        by_model["answerer", DEFAULT_MODEL].sha256 == by_model["summarizer", DEFAULT_MODEL].sha256
    )


def test_the_agent_software_comes_from_the_strategy_and_old_blocks_still_read(
    tmp_path: Path,
) -> None:
    """A run of mirage's own runtime names no agent software; a ``run.json`` written before
    ``agent_software`` (its ``openclaw`` key) is read into it, and an unknown key is refused."""
    from harness.kit.provenance import ProvenanceError, provenance_lines, read_provenance
    from harness.mirage.strategies import strategy_for

    assert strategy_for(RunConfig(trunk_model=SCRIPTED_TRUNK_MODEL)).agent_software() is None
    block = {
        "mirage_version": "0.1.0",
        "commit": "abc",
        "python": "3.11",
        "platform": "linux",
        "cpu": "x (2 logical cores)",
        "recorded_at": "2026-12-01T00:00:00+00:00",
    }
    path = tmp_path / "run.json"
    for old, expected in (("2026.9.6", "OpenClaw 2026.9.6"), (None, None)):
        path.write_text(json.dumps({"provenance": {**block, "openclaw": old}}))
        read = read_provenance(path)
        assert read is not None and read.agent_software == expected
    assert any("OpenClaw 2026.9.6" in line for line in provenance_lines(read.model_copy(
        update={"agent_software": "OpenClaw 2026.9.6"}
    )))  # fmt: skip
    path.write_text(json.dumps({"provenance": {**block, "agent_sofware": "x"}}))
    with pytest.raises(ProvenanceError, match="agent_sofware"):
        read_provenance(path)
