"""Small statistics for reports: Wilson 95% intervals (paper A.6) and spread over repeats.

Above: aggregation. Below: scipy.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from pydantic import BaseModel
from scipy.stats import binomtest


class Interval(BaseModel):
    """A proportion ``k/n`` in percent with its Wilson interval in percent."""

    k: int
    n: int
    rate: float
    low: float
    high: float


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> Interval | None:
    """Wilson score interval for ``k`` successes out of ``n``; ``None`` when ``n`` is 0."""
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return None
    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    return Interval(k=k, n=n, rate=100.0 * k / n, low=100.0 * ci.low, high=100.0 * ci.high)


class Spread(BaseModel):
    """Mean and spread of one metric over repeats (``sd`` is the sample SD; null for one)."""

    values: list[float]
    mean: float
    sd: float | None
    min: float
    max: float


def mean(values: Sequence[float | None]) -> float | None:
    """Mean of the defined values; ``None`` when there are none."""
    defined = [float(v) for v in values if v is not None]
    return statistics.fmean(defined) if defined else None


def spread(values: Sequence[float | None]) -> Spread | None:
    """Mean and spread of the defined values; ``None`` when there are none."""
    defined = [float(v) for v in values if v is not None]
    if not defined:
        return None
    return Spread(
        values=defined,
        mean=statistics.fmean(defined),
        sd=statistics.stdev(defined) if len(defined) > 1 else None,
        min=min(defined),
        max=max(defined),
    )
