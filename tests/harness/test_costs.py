"""Tokens and cost per model from probe records, with prices from litellm's local map."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.kit.agents.base import ProbeUsage
from harness.kit.results import ResultsLog
from harness.mirage.costs import TokenTally, cost_of, model_usage
from harness.mirage.probing.records import ProbeRecord, RecordKey, build_record
from harness.mirage.report import write_report
from harness.mirage.scoring import Gold, KnownIdResolver

HAIKU = "anthropic/claude-haiku-4-5"  # $1 / $5 per M tokens; reads $0.10, writes $1.25


def test_cache_reads_and_writes_are_priced_on_their_own() -> None:
    tally = TokenTally(input=100_000, cached_read=60_000, cache_write=30_000, output=1_000)
    cost = cost_of(HAIKU, tally).usd
    assert cost == pytest.approx(10_000 * 1e-6 + 60_000 * 1e-7 + 30_000 * 1.25e-6 + 1_000 * 5e-6)
    assert cost_of(HAIKU, tally.uncached).usd == pytest.approx(0.1 + 0.005)


def test_unknown_prices_are_unknown_never_guessed() -> None:
    missing = cost_of("openai/my-served-qwen", TokenTally(input=10, output=1))
    assert missing.usd is None and "not in litellm's price map" in (missing.unknown or "")
    # the map prices vertex Claude's input but not its cache reads: litellm would bill them
    # at the full input price
    vertex = cost_of("vertex_ai/claude-3-5-haiku", TokenTally(input=100, cached_read=90))
    assert vertex.usd is None and "cache-read price" in (vertex.unknown or "")
    assert cost_of("vertex_ai/claude-3-5-haiku", TokenTally(input=100)).usd is not None
    assert cost_of("local/smollm2-135m", TokenTally(input=10**6, output=10**4)).usd == 0.0


def test_summary_and_report_carry_tokens_and_cost_per_model(tmp_path: Path) -> None:
    gold = Gold(answerable="NO", artifact="chart_1")
    usages = [
        ProbeUsage(eit=50_000, input_tokens=50_000, cache_write_tokens=49_000, output_tokens=20),
        ProbeUsage(
            eit=50_010, input_tokens=101_000, cached_tokens=98_000, output_tokens=40, calls=2
        ),
        ProbeUsage(eit=80_000, output_tokens=10),  # written before per-call sums existed
    ]
    with ResultsLog(tmp_path / "results.jsonl", ProbeRecord) as results:
        for number, (state, usage) in enumerate(
            zip(["S1-d50k", "S1-d50k", "S1-d80k"], usages, strict=True)
        ):
            key = RecordKey(state, "C0", f"q{number}", 0)
            reply = "ANSWERABLE=NO\nSOURCE=NONE\nANSWER=NONE"
            results.append(
                build_record(key, reply, gold, KnownIdResolver([]), usage=usage, model=HAIKU)
            )
    files = write_report(tmp_path)
    [usage] = json.loads(files.summary.read_text())["usage"]
    assert usage["model"] == HAIKU and usage["probes"] == 3
    assert usage["tokens"] == {
        "input": 231_000,
        "cached_read": 98_000,
        "cache_write": 49_000,
        "output": 70,
        "calls": 4,
    }
    assert usage["eit_by_state"] == {"S1-d50k": 50_005.0, "S1-d80k": 80_000.0}
    assert usage["cost"]["usd"] < usage["cost_without_cache"]["usd"]
    markdown = files.report.read_text()
    assert "## Tokens and cost" in markdown and "| anthropic/claude-haiku-4-5 | 3 | 4 |" in markdown
    assert model_usage([]) == []


def test_a_model_missing_from_the_price_map_prints_nothing(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # litellm prints "Provider List: …" banners to stdout for models it cannot place; a report
    # or `mirage view` whose stdout is read by a program must not carry them.
    import litellm

    monkeypatch.setattr(litellm, "suppress_debug_info", False)  # as in a fresh process
    cost = cost_of("tester", TokenTally(input=1000, output=10))
    assert cost.unknown and cost.usd is None
    assert capfd.readouterr().out == ""
