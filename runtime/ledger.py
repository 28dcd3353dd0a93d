"""Effective-input-token (EIT) ledger.

Every backbone call appends one ``CallRecord`` (provider-reported input tokens including cached
ones, the parts read from and written to a prompt cache separately, output tokens, and whether
the numbers are a tiktoken estimate). Current EIT is the input of the latest conversation call
(compaction summaries and the silent memory flush are recorded but do not move it); peak EIT
the largest seen. Appending is O(1), so a turn costs O(new tokens), not O(whole context).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from runtime.messages import Usage

CallPurpose = Literal["turn", "flush", "summary", "probe", "other"]


class CallRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    index: int
    model: str
    purpose: CallPurpose = "turn"
    input_tokens: int
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int
    source: Literal["provider", "estimate"] = "provider"
    latency_s: float = 0.0
    """Wall-clock seconds: data, not identity (``runtime.session.SERVING_FIELDS``, as the
    cached and cache-write token counts)."""


class Ledger(BaseModel):
    model_config = ConfigDict(extra="forbid")

    context_window: int
    calls: list[CallRecord] = Field(default_factory=list)
    current_eit: int = 0
    peak_eit: int = 0
    total_input_tokens: int = 0
    total_cached_tokens: int = 0
    total_cache_write_tokens: int = 0
    total_output_tokens: int = 0

    def record(
        self, usage: Usage, *, model: str, purpose: CallPurpose = "turn", latency_s: float = 0.0
    ) -> CallRecord:
        call = CallRecord(
            index=len(self.calls),
            model=model,
            purpose=purpose,
            input_tokens=usage.input_tokens,
            cached_tokens=usage.cached_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            output_tokens=usage.output_tokens,
            source=usage.source,
            latency_s=latency_s,
        )
        self.calls.append(call)
        if purpose not in ("summary", "flush"):
            self.current_eit = usage.input_tokens
            self.peak_eit = max(self.peak_eit, usage.input_tokens)
        self.total_input_tokens += usage.input_tokens
        self.total_cached_tokens += usage.cached_tokens
        self.total_cache_write_tokens += usage.cache_write_tokens
        self.total_output_tokens += usage.output_tokens
        return call

    @property
    def headroom(self) -> int:
        return self.context_window - self.current_eit
