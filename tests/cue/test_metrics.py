"""Accuracy by task × setting, Memory Avg, EI-Gap, refusal, retrieval and tokens on hand-computed
fixtures (tests/cue/records_fixture.py)."""

from __future__ import annotations

import pytest

from harness.cue.metrics import condition_metrics, retrieval_at
from tests.cue.records_fixture import AR, ER, LP, PR, E, I, hand_computed, record


def test_accuracy_weights_profiles_equally_within_a_task() -> None:
    metrics = condition_metrics("c", hand_computed())
    cell = metrics.cells[ER][E]
    assert cell.accuracy == 75.0  # mean of p1 50% and p2 100%; pooled would be 66.7%
    assert (cell.k, cell.n, cell.profiles, cell.errors) == (2, 3, 2, 1)
    assert metrics.cells[ER][I].accuracy == pytest.approx(16.67)
    assert metrics.cells[LP][E].accuracy == 50.0
    assert metrics.cells[LP][I].accuracy == 50.0
    assert metrics.cells[PR][E].accuracy == 50.0
    assert metrics.cells[PR][I].accuracy == 0.0


def test_memory_avg_ei_gap_and_refusal() -> None:
    metrics = condition_metrics("c", hand_computed())
    assert metrics.memory_avg[E] == pytest.approx(58.33)
    assert metrics.memory_avg[I] == pytest.approx(22.22)
    assert metrics.ei_gap == pytest.approx(36.11)
    assert metrics.refusal == {E: 100.0, I: 0.0}
    assert metrics.task_ei_gap[ER] == pytest.approx(58.33)
    assert (metrics.scored, metrics.errors) == (19, 1)


def test_memory_avg_is_undefined_without_one_of_its_tasks() -> None:
    records = [r for r in hand_computed() if r.task != PR]
    metrics = condition_metrics("c", records)
    assert metrics.memory_avg[E] is None and metrics.ei_gap is None
    assert metrics.cells[ER][E].accuracy == 75.0


def test_recall_and_precision_at_k_against_clue_rounds() -> None:
    ranked = ("r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10")
    records = [
        record("a", "p1", ER, E, True, retrieved=ranked, clues=("r2", "r9")),
        record("b", "p1", LP, I, True, retrieved=ranked, clues=("r1",)),
        record("c", "p1", AR, I, True, retrieved=ranked, clues=("r5",)),  # refusal: excluded
    ]
    at1, at5, at10 = (retrieval_at(records, k) for k in (1, 5, 10))
    assert (at1.recall, at1.precision, at1.n) == (50.0, 50.0, 2)  # (0 + 1)/2; (0 + 1)/2
    assert (at5.recall, at5.precision) == (75.0, 20.0)  # (1/2 + 1)/2; (1/5 + 1/5)/2
    assert (at10.recall, at10.precision) == (100.0, 15.0)  # (2/10 + 1/10)/2


def test_tokens_and_clue_coverage() -> None:
    records = [
        record(
            "a", "p1", ER, E, True, retrieved=("r1", "r2", "r3"), clues=("r2", "r3"), tokens=100
        ),
        record("b", "p1", LP, E, False, retrieved=("r4", "r5"), clues=("r9",), tokens=300),
    ]
    metrics = condition_metrics("c", records)
    assert metrics.memory_tokens_mean == 200.0
    assert metrics.clue_coverage == 25.0  # in_context = first two: 1/2 and 0/1


def test_no_recall_at_k_for_a_system_that_ranks_fewer_than_k_rounds() -> None:
    records = [
        record("a", "p1", ER, E, True, retrieved=("r1", "r2", "r3", "r4", "r5"), clues=("r2",))
    ]
    assert retrieval_at(records, 5).recall == 100.0
    assert retrieval_at(records, 10).recall is None
