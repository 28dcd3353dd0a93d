"""Prompt-lookup drafts (``runtime/backbones/llama/batch.py``): what a reply is offered to check
per decode step, from the tokens before it."""

from __future__ import annotations

from runtime.backbones.llama.batch import NgramIndex


def test_a_draft_continues_the_latest_earlier_occurrence_of_the_suffix() -> None:
    tokens = [1, 2, 3, 10, 11, 5, 2, 3, 20, 21, 22, 9, 2, 3]
    assert NgramIndex(tokens).draft(2) == [20, 21]  # "2 3" last came before 20 21
    assert NgramIndex(tokens).draft(5) == [20, 21, 22, 9, 2]


def test_the_longest_suffix_wins_over_a_later_shorter_one() -> None:
    tokens = [7, 2, 3, 40, 41, 8, 2, 3, 50, 51, 7, 2, 3]
    assert NgramIndex(tokens).draft(2) == [40, 41]  # "7 2 3" beats the later "2 3"


def test_no_draft_without_an_earlier_occurrence_or_room() -> None:
    assert NgramIndex([1, 2, 3, 4, 5]).draft(4) == []
    assert NgramIndex([1, 2, 1, 2]).draft(0) == []
    assert NgramIndex([]).draft(3) == []


def test_a_reply_drafts_from_its_own_tokens_and_the_shared_prefix() -> None:
    prefix = NgramIndex([4, 5, 6, 7, 8])
    reply = NgramIndex([4, 5, 6, 7, 8, 30, 31, 5, 6], prefix)
    assert reply.draft(3) == [7, 8, 30]
    reply.tokens += [7, 99, 5, 6]  # what the reply generated since: its own occurrence is later
    assert reply.draft(2) == [7, 99]
    assert prefix.ends == NgramIndex([4, 5, 6, 7, 8]).ends  # shared, left unchanged


def test_a_repeating_reply_drafts_its_own_loop() -> None:
    loop = [60, 61, 62]
    reply = NgramIndex([9, 9, *loop, *loop])
    assert reply.draft(6) == loop  # as far as the tokens go: the loop's second turn
