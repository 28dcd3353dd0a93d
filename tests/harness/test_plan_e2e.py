"""A dry run, then the real run it planned, on the bundled pack with a scripted trunk: the
planned input of a probe's first call matches, per state, what the run's probes reported
(within 5% before the trunk exists; exactly once its checkpoints do)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from harness.mirage.config import RunConfig
from harness.mirage.run import MirageRun
from harness.mirage.run.plan import plan_run
from harness.mirage.run.replay import placeholder_text
from runtime.backbones.scripted import FunctionBackbone
from runtime.messages import Message, ToolSpec
from tests.harness.test_run_e2e import oracle

pytestmark = pytest.mark.slow

SUMMARY_BUDGET = 64


class BudgetedSummarizer(FunctionBackbone):
    """A summarizer whose summaries fill its output budget, as the plan assumes."""

    max_output_tokens = SUMMARY_BUDGET


def summarize(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
    return placeholder_text(SUMMARY_BUDGET)


def mirage_run(out: Path, answerer: FunctionBackbone) -> MirageRun:
    config = RunConfig(
        models=["oracle"], trunk_model="scripted", summarizer_model="summarizer", limit=4, out=out
    )
    backbones = {"oracle": answerer, "summarizer": BudgetedSummarizer(summarize, model="s")}
    return MirageRun(config, backbones=backbones)


async def test_the_dry_run_predicts_the_input_tokens_of_the_run_that_follows(
    tmp_path: Path,
) -> None:
    out = tmp_path / "run"
    before = plan_run(mirage_run(out, FunctionBackbone(oracle, model="oracle")))
    assert not out.exists()

    [folder] = await mirage_run(out, FunctionBackbone(oracle, model="oracle")).execute()
    [usage] = json.loads((folder / "summary.json").read_text())["usage"]
    measured = usage["eit_by_state"]

    after = plan_run(mirage_run(out, FunctionBackbone(oracle, model="oracle")))
    assert after.trunk.reused
    for estimated, planned in zip(
        before.answerers[0].states, after.answerers[0].states, strict=True
    ):
        real = measured[estimated.state]
        assert (estimated.source, planned.source) == ("estimate", "checkpoint")
        assert abs(estimated.probe_input - real) <= 0.05 * real, (estimated.state, real)
        assert planned.probe_input == pytest.approx(real, abs=0.5), planned.state
    assert usage["probes"] == before.answerers[0].probes
