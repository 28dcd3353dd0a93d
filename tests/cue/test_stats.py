"""The stratified bootstrap and Holm against exact, hand-computed and scipy values (seeded)."""

from __future__ import annotations

import itertools
from math import comb

import numpy as np
import pytest
from scipy.stats import bootstrap as scipy_bootstrap

from harness.cue.metrics import condition_metrics, stratum_outcomes
from harness.cue.stats import Difference, bootstrap_contrast, bootstrap_p, holm
from tests.cue.records_fixture import ER, E, I, hand_computed, record

B = 10_000


def _binomial(n: int, p: float) -> dict[float, float]:
    return {k / n: comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n + 1)}


def test_explicit_vs_implicit_matches_the_exact_bootstrap_distribution() -> None:
    """One profile, ER explicit [1,0,1,1] and implicit [0,0,0,1]: each replicate mean is
    Binomial(4, p)/4, independently, so P(Δ* <= 0) and the two-sided p are exact sums."""
    explicit = [record(f"e{i}", "p1", ER, E, c) for i, c in enumerate([True, False, True, True])]
    implicit = [record(f"i{i}", "p1", ER, I, c) for i, c in enumerate([False, False, False, True])]
    outcomes = [stratum_outcomes(explicit + implicit)]
    spec = Difference(metric="accuracy", task=ER, within_settings=True)
    estimate, low, high, p, used = bootstrap_contrast(spec, outcomes, replicates=B, seed=7, index=0)
    pairs = itertools.product(_binomial(4, 0.75).items(), _binomial(4, 0.25).items())
    at_most_zero = sum(px * py for (x, px), (y, py) in pairs if x - y <= 0)
    assert estimate == 50.0 and used == 8
    assert p == pytest.approx(2 * at_most_zero, abs=0.015)  # exact: 2 * 0.1138 = 0.2276
    # exact CDF: P(Δ <= -0.5) = 0.0042, P(Δ <= -0.25) = 0.0273, P(Δ < 1) = 0.8999
    assert (low, high) == (-25.0, 100.0)


def test_paired_condition_contrast_agrees_with_scipy_percentile_interval() -> None:
    rng = np.random.default_rng(3)
    a_correct = rng.random(40) < 0.7
    b_correct = rng.random(40) < 0.4
    a = [record(f"q{i}", "p1", ER, I, bool(c), condition="a") for i, c in enumerate(a_correct)]
    b = [record(f"q{i}", "p1", ER, I, bool(c), condition="b") for i, c in enumerate(b_correct)]
    spec = Difference(metric="accuracy", task=ER, setting=I)
    estimate, low, high, _, _ = bootstrap_contrast(
        spec, [stratum_outcomes(a), stratum_outcomes(b)], replicates=B, seed=1, index=0
    )
    differences = a_correct.astype(float) - b_correct.astype(float)
    reference = scipy_bootstrap(
        (differences,), np.mean, n_resamples=B, method="percentile", random_state=0
    ).confidence_interval
    assert estimate == pytest.approx(100 * differences.mean(), abs=0.01)
    assert low == pytest.approx(100 * reference.low, abs=2.5)
    assert high == pytest.approx(100 * reference.high, abs=2.5)


def test_point_estimate_is_the_profile_weighted_metric() -> None:
    records = hand_computed()
    spec = Difference(metric="memory_avg", within_settings=True)
    estimate, *_ = bootstrap_contrast(
        spec, [stratum_outcomes(records)], replicates=200, seed=0, index=0
    )
    assert estimate == pytest.approx(condition_metrics("c", records).ei_gap, abs=0.01)


def test_seeded_replicates_reproduce_and_depend_on_the_seed() -> None:
    outcomes = [stratum_outcomes(hand_computed())]
    spec = Difference(metric="memory_avg", within_settings=True)
    first = bootstrap_contrast(spec, outcomes, replicates=2000, seed=5, index=0)
    assert bootstrap_contrast(spec, outcomes, replicates=2000, seed=5, index=0) == first
    assert bootstrap_contrast(spec, outcomes, replicates=2000, seed=6, index=0) != first


def test_p_value_formula_and_the_papers_smallest_holm_value() -> None:
    assert bootstrap_p(np.ones(B)) == pytest.approx(2 / (B + 1))
    assert bootstrap_p(np.array([-1.0, 1.0, 1.0, 1.0])) == pytest.approx(min(1.0, 2 * 2 / 5))
    assert bootstrap_p(np.zeros(10)) == 1.0
    # 13 contrasts, none crossing zero: Holm gives 13 * 2/10001 = 0.0026 (paper D.1)
    assert round(holm([2 / (B + 1)] * 13)[0], 4) == 0.0026


def test_holm_by_hand() -> None:
    # sorted 0.005 (x4 = 0.02), 0.01 (x3 = 0.03), 0.03 (x2 = 0.06), 0.04 (x1, kept monotone: 0.06)
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert holm([]) == []


def test_a_contrast_without_questions_is_not_estimable() -> None:
    outcomes = [stratum_outcomes([r for r in hand_computed() if r.setting == E])]
    spec = Difference(metric="memory_avg", within_settings=True)
    assert bootstrap_contrast(spec, outcomes, replicates=100, seed=0, index=0)[0] is None
