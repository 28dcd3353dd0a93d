"""Filler sampling: deterministic per seed, long enough for a >100k-token trunk, disjoint from
the evidence."""

from __future__ import annotations

import pytest

from harness.mirage.packs import load_pack, sample_filler
from harness.mirage.packs.validate import any_term, check_filler, forbidden_terms
from runtime.tokens import count_tokens


@pytest.fixture(scope="module")
def library():  # type: ignore[no-untyped-def]
    return load_pack("mirage-core").filler_library


def test_library_has_twenty_tasks_with_many_turns_each(library) -> None:  # type: ignore[no-untyped-def]
    assert len(library.tasks) == 20
    assert all(len(task.stages) >= 5 for task in library.tasks)


def test_same_seed_same_turns_other_seed_other_order(library) -> None:  # type: ignore[no-untyped-def]
    first = [t.text for t in sample_filler(library, seed=7, n_turns=60)]
    again = [t.text for t in sample_filler(library, seed=7, n_turns=60)]
    other = [t.text for t in sample_filler(library, seed=8, n_turns=60)]
    assert first == again
    assert first != other


def test_prefixes_agree_across_lengths(library) -> None:  # type: ignore[no-untyped-def]
    short = sample_filler(library, seed=3, n_turns=25)
    long = sample_filler(library, seed=3, n_turns=90)
    assert [t.text for t in long[:25]] == [t.text for t in short]


def test_until_tokens_reaches_past_100k_tokens(library) -> None:  # type: ignore[no-untyped-def]
    turns = sample_filler(library, seed=0, until_tokens=110_000)
    total = sum(count_tokens(turn.text) for turn in turns)
    assert total >= 110_000
    assert total - count_tokens(turns[-1].text) < 110_000
    assert len({turn.task_id for turn in turns}) == 20
    distinct = len({turn.text for turn in turns})
    assert distinct / len(turns) > 0.5


def test_sampled_turns_never_mention_evidence() -> None:
    for name in ("mirage-core", "mirage-ext"):
        pack = load_pack(name)
        assert check_filler(pack) == []
        combined = any_term(forbidden_terms(pack))
        for turn in pack.filler_turns(seed=11, until_tokens=40_000):
            assert combined.search(turn.text) is None, (turn.task_id, turn.text)


def test_forbidden_terms_cover_ids_titles_and_golds() -> None:
    pack = load_pack("mirage-core")
    labels = " ".join(forbidden_terms(pack))
    assert pack.spec.artifacts[0].id in labels
    assert "title keyword 'orchard'" in labels
    assert "gold value '1315'" in labels and "gold value '1,315'" in labels


def test_sampling_arguments_are_checked(library) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="exactly one"):
        sample_filler(library, seed=0)
    with pytest.raises(ValueError, match="exactly one"):
        sample_filler(library, seed=0, n_turns=3, until_tokens=10)
