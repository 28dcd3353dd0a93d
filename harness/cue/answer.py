"""Answering: the multiple-choice prompt and the A–D letter parser.

Above: the runner, which sends the prompt through a ``Backbone`` (or an agent adapter) and parses
the reply. Below: the question (``harness.cue.schema``) and the memory units a system retrieved.

The letter parser. The release reads the reply's first character when it is A–D, otherwise the
first standalone letter — so "According to the memory, the answer is C" scores as A, "Based on
…" as B, "Clearly …" as C, "Definitely B" as D. We read the reply with these rules, first match
wins (docs/cue.md lists worked examples; tests/cue/test_letters.py holds them):

1. ``bare``: the whole reply is one letter, optionally bracketed or followed by ``.``/``)``/``:``
   (lower case accepted here only: "b" alone is unambiguous).
2. ``leading``: the first line starts with a capital letter and a delimiter (``B.``, ``(C)``,
   ``D:``, ``A -``), or with the letter followed by that option's own text ("D Oslo" when D is
   "Oslo"; followed by another option's text it is ``ambiguous``).
3. ``declared``: an explicit declaration anywhere — "answer is C", "Answer: C", "option C",
   "choice (C)", "C is correct". Two different declared letters are ``ambiguous``.
4. ``option_text``: the reply quotes exactly one option's text (an option whose text is part of
   a longer quoted option does not count): "A chess club" picks the option that says so, even
   when that option is not A.
5. ``lone_letter``: exactly one distinct standalone capital A–D, not counting the article
   "A" before a lower-case word ("Definitely B" → B; "I think B or C" → ``ambiguous``).

Otherwise ``none``. An unparsed reply is scored wrong and counted apart (``unparsed``), never
silently.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from harness.cue.schema import LETTERS, Letter, Question, Task
from harness.cue.textualize import MemoryUnit

ParseRule = Literal[
    "bare", "leading", "declared", "option_text", "lone_letter", "ambiguous", "none", "empty"
]

TASK_INSTRUCTIONS = {
    Task.entity_recall: "The question is about a specific person, pet or object in the user's "
    "history.",
    Task.long_pattern: "The question is about a habit or pattern that recurs across the history.",
    Task.recommendation: "Choose the option that best fits the user's preferences and habits.",
    Task.refusal: "If the history does not contain what the question asks, choose the option "
    "saying it is not stated.",
}
ANSWER_INSTRUCTION = "Use only the memory. Reply with the letter of one option (A, B, C or D)."


class ParsedChoice(BaseModel):
    model_config = ConfigDict(frozen=True)

    letter: Letter | None
    rule: ParseRule


_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_MARKUP = re.compile(r"[*_`#>]")
_BARE = re.compile(r"^[(\[]?([A-Da-d])[)\]]?[.):]?$")
_LEADING = re.compile(r"^[(\[]?([A-D])(?:[)\]]|[.:]|\s+[-–—]|$)")
_LEADING_WORDS = re.compile(r"^([A-D])\s+(.+)$")
_DECLARED = (
    re.compile(
        r"\b(?:answer|option|choice)\s*(?:is|:|=|would be|should be|must be)?\s*"
        r"[(\[]?([A-D])\b",
        re.IGNORECASE,
    ),
    re.compile(r"(?<![A-Za-z])[(\[]?([A-D])[)\]]?\s+is\s+(?:the\s+)?(?:correct|right|best)\b"),
)
_LONE = re.compile(r"(?<![A-Za-z'])([A-D])(?![A-Za-z'])")


def _normal(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def _clean(reply: str) -> str:
    return _MARKUP.sub("", _THINK.sub("", reply)).strip().strip("\"'“”")


def _leading(first_line: str, options: Mapping[Any, str]) -> ParsedChoice | None:
    match = _LEADING.match(first_line)
    if match:
        return ParsedChoice(letter=_as_letter(match.group(1)), rule="leading")
    words = _LEADING_WORDS.match(first_line)
    if not words:
        return None
    rest = _normal(words.group(2))
    quoted = [k for k, v in options.items() if _normal(v) and rest.startswith(_normal(v))]
    if quoted == [words.group(1)]:
        return ParsedChoice(letter=_as_letter(words.group(1)), rule="leading")
    if quoted:
        return ParsedChoice(letter=None, rule="ambiguous")  # "C Oslo" when D says "Oslo"
    return None


def _declared(text: str) -> set[str]:
    found: set[str] = set()
    for pattern in _DECLARED:
        found.update(match.group(1).upper() for match in pattern.finditer(text))
    return found


def _option_text(text: str, options: Mapping[Any, str]) -> set[str]:
    reply = f" {_normal(text)} "
    quoted = {
        letter: _normal(value)
        for letter, value in options.items()
        if len(_normal(value)) >= 3 and f" {_normal(value)} " in reply
    }
    return {
        letter
        for letter, value in quoted.items()
        if not any(value != other and value in other for other in quoted.values())
    }


def _lone_letters(text: str) -> set[str]:
    letters = set()
    for match in _LONE.finditer(text):
        following = text[match.end() : match.end() + 2]
        if match.group(1) == "A" and re.match(r"\s[a-z]", following):
            continue  # the article "A", as in "A cat scratching post"
        letters.add(match.group(1))
    return letters


def _single(found: set[str], rule: ParseRule) -> ParsedChoice | None:
    if len(found) == 1:
        return ParsedChoice(letter=_as_letter(next(iter(found))), rule=rule)
    if len(found) > 1:
        return ParsedChoice(letter=None, rule="ambiguous")
    return None


def _as_letter(value: str) -> Letter:
    upper = value.upper()
    for letter in LETTERS:
        if upper == letter:
            return letter
    raise ValueError(f"not an option letter: {value!r}")


def parse_choice(reply: str | None, options: Mapping[Any, str] | None = None) -> ParsedChoice:
    """The option letter a reply chooses, and the rule that read it (module docstring)."""
    if reply is None or not _clean(reply):
        return ParsedChoice(letter=None, rule="empty")
    text = _clean(reply)
    options = options or {}
    bare = _BARE.match(text)
    if bare:
        return ParsedChoice(letter=_as_letter(bare.group(1)), rule="bare")
    leading = _leading(text.splitlines()[0].strip(), options)
    if leading is not None:
        return leading
    for found, rule in (
        (_declared(text), "declared"),
        (_option_text(text, options), "option_text"),
        (_lone_letters(text), "lone_letter"),
    ):
        decided = _single(found, rule)  # type: ignore[arg-type]
        if decided is not None:
            return decided
    return ParsedChoice(letter=None, rule="none")


def system_prompt(name: str) -> str:
    return (
        f"You are {name}'s personal assistant. You answer multiple-choice questions about "
        f"{name} from your memory of earlier conversations with them."
    )


def memory_block(name: str, units: Sequence[MemoryUnit]) -> str:
    if not units:
        return f"Memory of conversations with {name}: nothing was retrieved."
    body = "\n\n".join(unit.text for unit in units)
    return f"Memory — earlier conversation rounds with {name}, oldest first:\n\n{body}"


def question_block(question: Question) -> str:
    return (
        f"Question: {question.prompt_block()}\n\n"
        f"{TASK_INSTRUCTIONS[question.task]} {ANSWER_INSTRUCTION}"
    )


def answer_prompt(name: str, units: Sequence[MemoryUnit], question: Question) -> str:
    """The user turn: the memory first (so consecutive questions of one profile share a prefix
    when the memory is the same, as with full context), then the question."""
    return f"{memory_block(name, units)}\n\n{question_block(question)}"
