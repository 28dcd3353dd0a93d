"""Trigger, reserve, keep and flush budgets at typical window sizes."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from compaction.config import CompactionConfig


@pytest.mark.parametrize(
    ("window", "reserve", "threshold", "keep", "flush"),
    [
        (8_192, 4_096, 4_096, 2_048, 3_072),
        (32_768, 20_000, 12_768, 6_384, 9_576),
        (128_000, 20_000, 108_000, 20_000, 104_000),
        (200_000, 20_000, 180_000, 20_000, 176_000),
    ],
)
def test_budgets_scale_with_the_window(
    window: int, reserve: int, threshold: int, keep: int, flush: int
) -> None:
    budget = CompactionConfig().budget(window)
    assert (budget.reserve, budget.threshold, budget.keep_recent, budget.flush_threshold) == (
        reserve,
        threshold,
        keep,
        flush,
    )
    assert budget.threshold >= min(8_000, window // 2)


def test_window_cap_reproduces_the_mirage_runs() -> None:
    budget = CompactionConfig(window_cap=120_000).budget(200_000)
    assert budget.window == 120_000
    assert budget.threshold == 100_000
    assert budget.flush_threshold == 96_000


def test_cap_above_the_model_window_has_no_effect() -> None:
    assert CompactionConfig(window_cap=500_000).budget(32_768).window == 32_768


def test_larger_reserve_and_smaller_prompt_floor() -> None:
    budget = CompactionConfig(reserve_tokens=40_000, min_prompt_tokens=4_000).budget(32_768)
    assert budget.reserve == 28_768
    assert budget.threshold == 4_000


def test_bad_config_is_rejected() -> None:
    with pytest.raises(ValidationError):
        CompactionConfig(reserve_tokens=-1)
    with pytest.raises(ValidationError):
        CompactionConfig(unknown_field=1)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="positive"):
        CompactionConfig().budget(0)


def test_the_summary_format_is_checked_when_the_config_is_made(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="unknown summary format 'bulleted'"):
        CompactionConfig(format="bulleted")
    with pytest.raises(ValidationError, match="does not exist"):
        CompactionConfig(format=f"template:{tmp_path / 'missing.txt'}")
    template = tmp_path / "t.txt"
    template.write_text("Summarise {transcript} for {audience}")
    with pytest.raises(ValidationError, match=r"unknown placeholder \{audience\}"):
        CompactionConfig(format=f"template:{template}")
    template.write_text("Summarise {transcript}")
    assert CompactionConfig(format=f"template:{template}").format == f"template:{template}"
