"""What tokens cost: prices from litellm's local cost map, and token tallies of probe records.

Above: ``mirage run --dry-run`` (``harness.mirage.run.plan``) and the run report (``summary.json``
and ``report.md`` carry tokens and cost per model). Below: ``litellm.get_model_info`` and
``litellm.cost_per_token`` on the price map bundled with litellm (the project sets
``LITELLM_LOCAL_MODEL_COST_MAP`` before litellm loads, so nothing is fetched).

A price the map does not have is unknown, never guessed: a model missing from the map, or a
cache read (or write) for a model whose map entry has no cache price, makes that cost ``None``
with the reason. (``litellm.cost_per_token`` would bill such cache reads at the full input
price.) Models of the embedded ``local/`` backbone run on this machine and cost nothing; the
reference agents and summarizers (``reference/…``) call no model and cost nothing either.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, Field

from runtime.backbones.base import LOCAL_PREFIX
from runtime.offline import quiet_litellm


class TokenTally(BaseModel):
    """Tokens of some backbone calls; cache reads and writes are parts of ``input``."""

    input: int = 0
    cached_read: int = 0
    cache_write: int = 0
    output: int = 0
    calls: int = 0

    def __add__(self, other: TokenTally) -> TokenTally:
        return TokenTally(
            input=self.input + other.input,
            cached_read=self.cached_read + other.cached_read,
            cache_write=self.cache_write + other.cache_write,
            output=self.output + other.output,
            calls=self.calls + other.calls,
        )

    @property
    def uncached(self) -> TokenTally:
        """The same calls as if nothing were cached."""
        return self.model_copy(update={"cached_read": 0, "cache_write": 0})


class Cost(BaseModel):
    """US dollars, or None with the reason it is unknown."""

    usd: float | None = None
    unknown: str | None = Field(default=None, description="why the cost is unknown")
    no_model: bool = Field(default=False, description="calls no model (a reference agent)")

    def text(self) -> str:
        if self.no_model:
            return "no model, no cost"
        return f"${self.usd:,.2f}" if self.usd is not None else f"unknown ({self.unknown})"


class Prices(BaseModel):
    """Per-token prices of one model from litellm's map (None: not in the map)."""

    model: str
    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None
    caches_prompts: bool = False


def calls_no_model(model: str) -> bool:
    """A reference agent or summarizer (``reference/…``): deterministic code, no model."""
    from harness.mirage.references import is_reference

    return is_reference(model)


def prices_for(model: str) -> Prices | str:
    """The model's prices, or the reason there are none."""
    if model.startswith(LOCAL_PREFIX):
        return Prices(model=model, input=0.0, output=0.0, cache_read=0.0, cache_write=0.0)
    litellm = quiet_litellm()

    try:
        info: dict[str, Any] = dict(litellm.get_model_info(model))
    except Exception:  # litellm raises a bare Exception for models missing from its map
        return f"{model} is not in litellm's price map"
    if info.get("input_cost_per_token") is None or info.get("output_cost_per_token") is None:
        return f"litellm's price map has no token prices for {model}"
    return Prices(
        model=model,
        input=float(info["input_cost_per_token"]),
        output=float(info["output_cost_per_token"]),
        cache_read=_price(info.get("cache_read_input_token_cost")),
        cache_write=_price(info.get("cache_creation_input_token_cost")),
        caches_prompts=bool(info.get("supports_prompt_caching")),
    )


def _price(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def cost_of(model: str, tally: TokenTally) -> Cost:
    """What ``tally`` costs on ``model``, cache reads and writes at their own prices."""
    if calls_no_model(model):
        return Cost(usd=0.0, no_model=True)
    prices = prices_for(model)
    if isinstance(prices, str):
        return Cost(unknown=prices)
    if model.startswith(LOCAL_PREFIX):
        return Cost(usd=0.0)
    if tally.cached_read and prices.cache_read is None:
        return Cost(unknown=f"litellm's price map has no cache-read price for {model}")
    if tally.cache_write and prices.cache_write is None:
        return Cost(unknown=f"litellm's price map has no cache-write price for {model}")
    litellm = quiet_litellm()

    prompt, completion = litellm.cost_per_token(
        model=model,
        prompt_tokens=tally.input,
        completion_tokens=tally.output,
        cache_read_input_tokens=tally.cached_read,
        cache_creation_input_tokens=tally.cache_write,
    )
    return Cost(usd=float(prompt) + float(completion))


def record_tally(usage: Any) -> TokenTally:
    """The tokens of one probe record's ``usage`` (records written before the per-call sums
    existed count their first call's input)."""
    calls = usage.calls if usage.calls is not None else (1 if usage.eit is not None else 0)
    return TokenTally(
        input=usage.input_tokens if usage.input_tokens is not None else usage.eit or 0,
        cached_read=usage.cached_tokens or 0,
        cache_write=usage.cache_write_tokens or 0,
        output=usage.output_tokens or 0,
        calls=calls,
    )


class ModelUsage(BaseModel):
    """Tokens and cost of one answerer's recorded probes (``summary.json``'s ``usage``)."""

    model: str
    probes: int
    tokens: TokenTally
    cost: Cost
    cost_without_cache: Cost
    eit_by_state: dict[str, float] = Field(
        default_factory=dict, description="mean input of a probe's first call, per state"
    )


def model_usage(records: Iterable[Any]) -> list[ModelUsage]:
    """Per model (records of one folder normally share one), in order of appearance."""
    tallies: dict[str, TokenTally] = {}
    probes: dict[str, int] = {}
    eits: dict[str, dict[str, list[int]]] = {}
    for record in records:
        model = record.model or "unknown"
        tallies[model] = tallies.get(model, TokenTally()) + record_tally(record.usage)
        probes[model] = probes.get(model, 0) + 1
        if record.usage.eit is not None:
            eits.setdefault(model, {}).setdefault(record.state, []).append(record.usage.eit)
    return [
        ModelUsage(
            model=model,
            probes=probes[model],
            tokens=tally,
            cost=cost_of(model, tally),
            cost_without_cache=cost_of(model, tally.uncached),
            eit_by_state={
                state: round(sum(values) / len(values), 1)
                for state, values in eits.get(model, {}).items()
            },
        )
        for model, tally in tallies.items()
    ]


def usage_markdown(usages: list[ModelUsage]) -> str:
    """The report's tokens-and-cost table."""
    header = (
        "| model | probes | calls | input | cached read | cache write | output | cost | "
        "cost without caching |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"
    )
    rows = [
        f"| {u.model} | {u.probes} | {u.tokens.calls} | {u.tokens.input:,} | "
        f"{u.tokens.cached_read:,} | {u.tokens.cache_write:,} | {u.tokens.output:,} | "
        f"{u.cost.text()} | {u.cost_without_cache.text()} |"
        for u in usages
    ]
    return "\n".join([header, *rows]) if rows else "No probe was recorded."
