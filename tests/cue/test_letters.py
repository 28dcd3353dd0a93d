"""The A–D letter parser: every documented case (docs/cue.md, "Reading the letter")."""

from __future__ import annotations

import pytest

from harness.cue.answer import parse_choice

OPTIONS = {
    "A": "A salsa dance class",
    "B": "Not stated in the conversation history",
    "C": "A chess club",
    "D": "Oslo",
}

CASES = [
    # reply, letter, rule                      (the release's first-character rule reads)
    ("B", "B", "bare"),
    ("(c)", "C", "bare"),
    ("D.", "D", "bare"),
    ("D. Oslo", "D", "leading"),
    ("A) salsa", "A", "leading"),
    ("B: not stated", "B", "leading"),
    ("D Oslo", "D", "leading"),
    ("C Oslo", None, "ambiguous"),  # the letter says C, the text quotes D
    ("According to the memory, the answer is C.", "C", "declared"),  # release: A
    ("Based on the history, option D.", "D", "declared"),  # release: B
    ("**Answer:** B", "B", "declared"),
    ("The answer is B, not C.", "B", "declared"),
    ("C is correct.", "C", "declared"),
    ("A chess club", "C", "option_text"),  # release: A
    ("Definitely B", "B", "lone_letter"),  # release: D
    ("Clearly the user likes tea.", None, "none"),  # release: C
    ("I think B or C.", None, "ambiguous"),
    ("<think>A or B?</think>\nC", "C", "bare"),
    ("", None, "empty"),
    (None, None, "empty"),
]


@pytest.mark.parametrize(("reply", "letter", "rule"), CASES)
def test_documented_cases(reply: str | None, letter: str | None, rule: str) -> None:
    parsed = parse_choice(reply, OPTIONS)
    assert (parsed.letter, parsed.rule) == (letter, rule)


def test_option_text_needs_the_options() -> None:
    assert parse_choice("A chess club").letter is None


def test_an_option_quoted_inside_a_longer_one_does_not_count() -> None:
    options = {"A": "Oslo", "B": "Oslo, Norway", "C": "Bergen", "D": "Tromsø"}
    assert parse_choice("She lives in Oslo, Norway", options).letter == "B"


def test_the_article_a_is_not_a_letter() -> None:
    assert parse_choice("A walk in the park would suit her, so D", OPTIONS).letter == "D"
