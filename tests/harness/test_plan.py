"""``mirage run --dry-run`` plans without doing: no workspace, trunk, probe or file."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.mirage.config import RunConfig
from harness.mirage.run import SCRIPTED_TRUNK_WINDOW, MirageRun
from harness.mirage.run.plan import plan_run
from harness.mirage.trunk.states import scaled_profile
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


def _dry_run(tmp_path: Path, *arguments: str) -> list[str]:
    out = str(tmp_path / "r")
    result = CliRunner().invoke(app, ["run", *arguments, "--out", out, "--dry-run"])
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "r").exists()
    return result.output.splitlines()


def test_the_paper_profile_dry_run_warns_of_the_embedded_summarizers_window(
    tmp_path: Path,
) -> None:
    lines = _dry_run(
        tmp_path, "--profile", "paper", "--trunk-model", "scripted", "--summarizer",
        "local/smollm2-135m", "--model", "reference/retriever", "--no-references", "--limit", "0",
    )  # fmt: skip
    named = next(line.strip() for line in lines if line.strip().startswith("summarizer "))
    found = re.fullmatch(
        r"summarizer local/smollm2-135m \(window 8,192\) writes the verbatim summary; its first "
        r"compaction summarises ~([\d,]+) tokens",
        named,
    )
    assert found and int(found[1].replace(",", "")) > 8192 * 5  # ~80k of the paper's 120k
    warning = next(line.strip() for line in lines if line.strip().startswith("warning: "))
    chunks = re.fullmatch(
        r"warning: that is more than one call of local/smollm2-135m holds: its verbatim summary "
        r"takes ~(\d+) chunks, one call each, about (\d+) min on 2 idle cores, (\d+) on busy "
        r"ones; --summarizer with a larger window writes it in one",
        warning,
    )
    assert chunks and int(chunks[1]) > 10 and 5 <= int(chunks[2]) < int(chunks[3])
    calls = f"compaction summary (local/smollm2-135m): {chunks[1]} calls, input "
    assert any(line.strip().startswith(calls) for line in lines)  # one call per chunk, priced


def test_a_scripted_trunk_is_summarized_by_a_reference_summarizer_at_no_cost(
    tmp_path: Path,
) -> None:
    arguments = ["--trunk-model", "scripted", "--model", "reference/retriever", "--no-references"]
    lines = [line.strip() for line in _dry_run(tmp_path, *arguments)]
    assert (
        "summarizer reference/keep-charts writes the verbatim summary: a reference summarizer, "
        "no model, milliseconds (its retention declared: docs/references.md)"
    ) in lines
    assert "compaction summary (reference/keep-charts): 1 calls, no model, no cost" in lines
    assert not any("warning" in line or "unknown" in line for line in lines)


def test_the_default_trunk_keeps_its_own_summarizer() -> None:
    assert RunConfig().summarizer == "local/smollm2-135m"  # `mirage run` with no options
    assert RunConfig(trunk_model="scripted").summarizer == "reference/keep-charts"
    assert RunConfig(trunk_model="openai/gpt-4o-mini").summarizer == "openai/gpt-4o-mini"
    given = RunConfig(trunk_model="scripted", summarizer_model="local/smollm2-135m")
    assert given.summarizer == "local/smollm2-135m"
