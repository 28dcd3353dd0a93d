"""``mirage run --dry-run`` plans without doing: no workspace, trunk, probe or file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.mirage.config import RunConfig
from harness.mirage.plan import plan_run
from harness.mirage.run import SCRIPTED_TRUNK_WINDOW, MirageRun
from harness.mirage.states import scaled_profile
from mirage.cli import app
from runtime.backbones.scripted import FunctionBackbone
from runtime.messages import Message, ToolSpec
from tests.cli_errors import assert_one_line_error

HAIKU = "anthropic/claude-haiku-4-5"


def never(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
    raise AssertionError("a dry run called a model")


def scripted_run(out: Path, models: list[str], **fields: object) -> MirageRun:
    config = RunConfig(
        models=models,
        trunk_model="scripted",
        summarizer_model="summarizer",
        limit=4,
        out=out,
        **fields,  # type: ignore[arg-type]
    )
    backbones = {
        "oracle": FunctionBackbone(never, model="oracle", context_window=8192),
        "summarizer": FunctionBackbone(never, model="summarizer"),
    }
    return MirageRun(config, backbones=backbones)


def test_a_fresh_run_is_estimated_from_the_pack_and_nothing_is_written(tmp_path: Path) -> None:
    plan = plan_run(scripted_run(tmp_path / "run", ["oracle"]))
    assert not (tmp_path / "run").exists()
    assert not plan.trunk.reused and plan.trunk.turns and plan.trunk.turns > 7
    [answerer] = plan.answerers
    assert [s.state for s in answerer.states] == ["S1-d0", "S1-d50k", "S1-d80k", "S2"]
    assert {s.source for s in answerer.states} == {"estimate"}
    assert answerer.probes == 4 * 2 * 4  # states x conditions x questions
    d0, d50, d80, s2 = (state.probe_input for state in answerer.states)
    assert d0 < d50 < d80 and s2 < d80
    depth = {spec.name: spec.eit or 0 for spec in scaled_profile(SCRIPTED_TRUNK_WINDOW).states}
    assert d50 >= depth["S1-d50k"] and d80 >= depth["S1-d80k"]
    assert all(state.prefix < state.probe_input for state in answerer.states)
    assert answerer.counted_by == "tiktoken estimate"
    assert answerer.calls.cost.usd is None  # "oracle" has no price


def test_hosted_answerers_are_priced_with_and_without_caching(tmp_path: Path) -> None:
    plan = plan_run(
        scripted_run(tmp_path / "run", [HAIKU, "openai/my-served-qwen"], api_base="http://x:1")
    )
    claude, served = plan.answerers
    assert claude.caching == "explicit" and claude.output_budget == 2048
    calls = claude.calls
    assert calls.tokens.cached_read > 0 and calls.tokens.cache_write > 0
    assert calls.cost.usd is not None and calls.cost_without_cache.usd is not None
    assert calls.cost.usd < calls.cost_without_cache.usd
    assert calls.tokens.calls == 4 * 4 * (1 + 2)  # per state: 4 C0 probes, 4 Cm with a round
    assert served.calls.cost.usd is None
    assert "not in litellm's price map" in (served.calls.cost.unknown or "")


def test_cli_dry_run_prints_the_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    arguments = ["--trunk-model", "scripted", "--model", HAIKU, "--limit", "2", "--out", "r"]
    result = CliRunner().invoke(app, ["run", *arguments, "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "nothing was built, run or written" in result.output
    assert f"answerer {HAIKU}: 16 probes" in result.output
    assert "with caching" in result.output and "$" in result.output
    for state in ("S1-d0", "S1-d50k", "S1-d80k", "S2"):
        assert f"  {state}" in result.output
    assert not (tmp_path / "r").exists()


def test_cli_dry_run_of_a_bad_pack_is_one_line(tmp_path: Path) -> None:
    out = str(tmp_path / "r")
    result = CliRunner().invoke(
        app, ["run", "--pack", str(tmp_path / "nope"), "--out", out, "--dry-run"]
    )
    assert_one_line_error(result, "nope", exit_code=2)
