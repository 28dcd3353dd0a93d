"""Compaction settings and the token budgets derived from them.

Above: ``CompactionPolicy`` (when to flush, when to compact, how much to keep) and the
``mirage compact`` command. Below: arithmetic on the effective context window, and the
strategy registry, which checks the summary format (``check_format``) when a config is made.

With ``W`` the effective window (the model's window, optionally capped by ``window_cap``):

* ``prompt_floor(W) = min(min_prompt_tokens, floor(min_prompt_share · W))`` — the part of the
  window that always stays usable for the prompt (defaults: min(8,000, 50% of W)).
* ``reserve(W) = min(reserve_tokens, W − prompt_floor(W))`` — the reserve floor of 20,000
  tokens, shrunk on small windows so that ``prompt_floor(W)`` remains.
* ``threshold(W) = W − reserve(W)`` — compact after a turn whose context exceeds it.
* ``keep_recent(W) = min(keep_recent_tokens, threshold(W) // 2)`` — the verbatim tail; at most
  half the threshold, so that tail + summary lands well below the threshold again.
* ``soft(W) = min(soft_threshold_tokens, threshold(W) // 4)`` and
  ``flush_threshold(W) = threshold(W) − soft(W)`` — the memory flush runs once the context
  crosses it (4,000 tokens before the trigger on large windows).

Examples with the defaults: W = 8,192 → reserve 4,096, threshold 4,096, keep 2,048, flush at
3,072; W = 32,768 → 20,000 / 12,768 / 6,384 / 9,576; W = 128,000 → 20,000 / 108,000 / 20,000 /
104,000; W = 200,000 → 20,000 / 180,000 / 20,000 / 176,000.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

DEFAULT_FORMAT = "verbatim"


SUMMARIZER_SEPARATOR = "~"
"""``FORMAT~SUMMARIZER``: a summary format written by a summarizer of its own (e.g.
``free-form~reference/keep-charts``), a branch of ``mirage run``'s formats axis."""


def split_format(entry: str) -> tuple[str, str | None]:
    """(summary format, its own summarizer or None) of a formats-axis entry."""
    summary_format, separator, summarizer = entry.partition(SUMMARIZER_SEPARATOR)
    return summary_format, (summarizer if separator else None)


def check_format(name: str) -> str:
    """``name`` if it is a known summary format (``FORMAT`` or ``FORMAT~SUMMARIZER``); a
    ``template:FILE`` is read and its placeholders checked now, a reference summarizer's name
    too. Raises ``UnknownStrategyError``, ``TemplateError`` or ``ValueError`` with a one-line
    reason, so a bad format fails before any work starts."""
    from compaction.references import REFERENCE_SUMMARIZER_PREFIX, reference_spec
    from compaction.strategies import get_strategy

    summary_format, summarizer = split_format(name)
    get_strategy(summary_format)
    if summarizer is not None and not summarizer.strip():
        raise ValueError(f"summary format {name!r}: give the summarizer after '~'")
    if summarizer is not None and summarizer.startswith(REFERENCE_SUMMARIZER_PREFIX):
        reference_spec(summarizer)
    return name


class CompactionBudget(BaseModel):
    """The budgets for one effective window (all in tokens)."""

    model_config = ConfigDict(frozen=True)

    window: int
    reserve: int
    threshold: int
    keep_recent: int
    soft_threshold: int
    flush_threshold: int


class CompactionConfig(BaseModel):
    """How and when a session is compacted. Every field is a study variable."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(default=True, description="Automatic compaction after turns.")
    format: str = Field(default=DEFAULT_FORMAT, description="Summary format (strategy name).")
    summarizer_model: str | None = Field(
        default=None, description="Model that writes summaries; None means the agent's backbone."
    )
    window_cap: int | None = Field(
        default=None, ge=1024, description="Cap the effective window below the model's own."
    )
    reserve_tokens: int = Field(default=20_000, ge=0)
    keep_recent_tokens: int = Field(default=20_000, ge=0)
    min_prompt_tokens: int = Field(default=8_000, ge=1)
    min_prompt_share: float = Field(default=0.5, gt=0.0, le=1.0)
    memory_flush: bool = Field(default=True, description="Run the pre-compaction memory flush.")
    soft_threshold_tokens: int = Field(default=4_000, ge=0)

    @field_validator("format")
    @classmethod
    def _format_is_known(cls, value: str) -> str:
        if split_format(value)[1] is not None:
            raise ValueError(
                f"format {value!r}: give the summarizer as summarizer_model, the format alone"
            )
        return check_format(value)

    def effective_window(self, model_window: int) -> int:
        if model_window < 1:
            raise ValueError(f"context window must be positive, got {model_window}")
        return min(model_window, self.window_cap) if self.window_cap else model_window

    def budget(self, model_window: int) -> CompactionBudget:
        window = self.effective_window(model_window)
        prompt_floor = min(self.min_prompt_tokens, int(window * self.min_prompt_share))
        reserve = max(0, min(self.reserve_tokens, window - prompt_floor))
        threshold = window - reserve
        soft = min(self.soft_threshold_tokens, threshold // 4)
        return CompactionBudget(
            window=window,
            reserve=reserve,
            threshold=threshold,
            keep_recent=min(self.keep_recent_tokens, threshold // 2),
            soft_threshold=soft,
            flush_threshold=threshold - soft,
        )
