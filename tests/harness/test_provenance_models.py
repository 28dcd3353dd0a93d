"""The provenance block names every answerer a run probes, the references included, and says
where each one's answers come from."""

from __future__ import annotations

from types import SimpleNamespace

from harness.mirage.checkpoints import SCRIPTED_TRUNK_MODEL
from harness.mirage.config import RunConfig
from harness.mirage.provenance import _models
from harness.mirage.references import REFERENCE_MODELS
from runtime.backbones import DEFAULT_MODEL


def test_a_default_run_lists_the_references_the_embedded_model_and_a_scripted_trunk() -> None:
    config = RunConfig(trunk_model=SCRIPTED_TRUNK_MODEL)
    models = _models(SimpleNamespace(config=config, backbones={}))  # type: ignore[arg-type]
    by_model = {(m.role, m.model): m for m in models}
    for reference in REFERENCE_MODELS:
        assert by_model["answerer", reference].provider == "mirage reference agent"
    assert by_model["trunk", SCRIPTED_TRUNK_MODEL].provider == "scripted replies"
    # a scripted trunk still compacts with the embedded model; both carry the GGUF's digest
    assert by_model["summarizer", DEFAULT_MODEL].sha256
    assert (
        by_model["answerer", DEFAULT_MODEL].sha256 == by_model["summarizer", DEFAULT_MODEL].sha256
    )
