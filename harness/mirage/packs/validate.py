"""``validate_pack``: every check a pack must pass, reported as a list of readable problems.

Checks: the schema (via loading), files on disk, unique ids, planting covers each artifact,
answerable/unanswerable pairing, golds re-derived from each artifact's data (answerable ones
reproduce, unanswerable ones find no support), content keywords (present, in the artifact's
own text, nowhere else in the pack), and filler disjointness (no artifact id, title
keyword or gold value in any filler template or slot value, so in no sampled turn).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from harness.kit.packfiles import PackFormatError
from harness.mirage.packs.filler import library_texts
from harness.mirage.packs.pack import Pack, load_pack
from harness.mirage.packs.resolve import DerivationError, NoSupport, derive, format_answer
from harness.mirage.packs.schema import Answerability, AnswerType, Question
from harness.mirage.protocol.keywords import keyword_problems

TITLE_STOPWORDS = frozenset(
    {
        "with",
        "from",
        "that",
        "this",
        "their",
        "there",
        "about",
        "into",
        "over",
        "under",
        "between",
        "versus",
        "than",
        "per",
        "average",
        "times",
        "time",
        "share",
        "rate",
        "total",
        "data",
        "report",
        "list",
        "view",
        "screen",
        "app",
        "chart",
        "profile",
        "module",
        "file",
    }
)


def title_keywords(title: str) -> set[str]:
    words = re.findall(r"[A-Za-z][A-Za-z'\-]*[A-Za-z]", title)
    return {w.lower() for w in words if len(w) >= 4 and w.lower() not in TITLE_STOPWORDS}


def term_pattern(term: str, numeric: bool = False) -> re.Pattern[str]:
    if numeric:
        return re.compile(rf"(?<![\w.,])(?<!\w-){re.escape(term)}(?!\w|[.,]\d)")
    return re.compile(rf"(?<!\w){re.escape(term)}(?!\w)", re.IGNORECASE)


def forbidden_terms(pack: Pack) -> dict[str, re.Pattern[str]]:
    """What filler must never mention: artifact ids, title keywords, answerable gold values."""
    terms: dict[str, re.Pattern[str]] = {}
    for artifact in pack.spec.artifacts:
        terms[f"artifact id {artifact.id}"] = term_pattern(artifact.id)
        for word in title_keywords(artifact.title):
            terms[f"title keyword {word!r}"] = term_pattern(word)
    for question in pack.questions:
        if question.gold_answerable is Answerability.YES:
            terms.update(_gold_patterns(question))
    return terms


def _gold_patterns(question: Question) -> dict[str, re.Pattern[str]]:
    gold = question.gold_answer.strip()
    if question.answer_type is not AnswerType.numeric:
        return {f"gold value {gold!r} ({question.id})": term_pattern(gold)}
    bare = gold.lstrip("-")
    patterns = {f"gold value {gold!r} ({question.id})": term_pattern(bare, numeric=True)}
    whole, _, fraction = bare.partition(".")
    if len(whole) > 3:
        grouped = f"{int(whole):,}" + (f".{fraction}" if fraction else "")
        patterns[f"gold value {grouped!r} ({question.id})"] = term_pattern(grouped, numeric=True)
    return patterns


def any_term(terms: dict[str, re.Pattern[str]]) -> re.Pattern[str]:
    """One pattern matching wherever any of ``terms`` matches (a fast first pass)."""
    return re.compile("|".join(f"(?:{p.pattern})" for p in terms.values()), re.IGNORECASE)


def check_filler(pack: Pack) -> list[str]:
    terms = forbidden_terms(pack)
    combined = any_term(terms)
    problems = []
    for where, text in library_texts(pack.filler_library):
        if not combined.search(text):
            continue
        for label, pattern in terms.items():
            if pattern.search(text):
                problems.append(f"{where} mentions {label}")
    return problems


def check_files(pack: Pack) -> list[str]:
    problems = []
    owned: set[str] = set()
    for artifact in pack.spec.artifacts:
        for relative in artifact.files:
            owned.add(relative)
            if not (pack.root / relative).is_file():
                problems.append(f"artifact {artifact.id}: file {relative} does not exist")
        if artifact.data is not None and artifact.data not in artifact.files:
            problems.append(f"artifact {artifact.id}: data {artifact.data} is not one of its files")
    for index, turn in enumerate(pack.spec.planting):
        for attachment in turn.attachments:
            if attachment.artifact not in pack.artifacts:
                problems.append(f"planting turn {index}: unknown artifact {attachment.artifact}")
            elif attachment.file not in pack.artifacts[attachment.artifact].files:
                problems.append(
                    f"planting turn {index}: {attachment.file} is not a file of "
                    f"{attachment.artifact}"
                )
        problems += [
            f"planting turn {index}: workspace write {path} belongs to no artifact"
            for path in turn.workspace_writes
            if path not in owned
        ]
    return problems


def check_ids(pack: Pack) -> list[str]:
    problems = []
    for kind, ids in (
        ("artifact", [a.id for a in pack.spec.artifacts]),
        ("question", [q.id for q in pack.questions]),
    ):
        problems += [f"duplicate {kind} id {i}" for i, n in Counter(ids).items() if n > 1]
    planted = {a.artifact for turn in pack.spec.planting for a in turn.attachments}
    problems += [
        f"artifact {a} is never attached in the planting script"
        for a in pack.artifacts
        if a not in planted
    ]
    problems += [
        f"question {q.id}: artifact {q.artifact} is not in the pack"
        for q in pack.questions
        if q.artifact not in pack.artifacts
    ]
    return problems


def check_pairs(pack: Pack) -> list[str]:
    pairs: dict[str, list[Question]] = defaultdict(list)
    problems = []
    for question in pack.questions:
        if question.pair_id is None:
            if question.gold_answerable is Answerability.NO:
                problems.append(f"question {question.id}: unanswerable question without pair_id")
            continue
        pairs[question.pair_id].append(question)
    for pair_id, members in pairs.items():
        labels = sorted(q.gold_answerable.value for q in members)
        if labels != ["NO", "YES"]:
            problems.append(f"pair {pair_id}: expected one YES and one NO question, got {labels}")
        elif len({(q.artifact, q.answer_type) for q in members}) != 1:
            problems.append(f"pair {pair_id}: members differ in artifact or answer_type")
    return problems


def check_derivations(pack: Pack) -> list[str]:
    problems = []
    data_cache: dict[str, Any] = {}
    for question in pack.questions:
        if question.derivation is None or question.artifact not in pack.artifacts:
            continue
        if question.artifact not in data_cache:
            data_cache[question.artifact] = pack.data_for(question.artifact)
        data = data_cache[question.artifact]
        if data is None:
            problems.append(
                f"question {question.id}: has a derivation but its artifact has no data"
            )
            continue
        problem = derivation_problem(question, data)
        if problem:
            problems.append(f"question {question.id}: {problem}")
    return problems


def derivation_problem(question: Question, data: Any) -> str | None:
    """Why ``question``'s gold disagrees with ``data``, or None when it agrees."""
    assert question.derivation is not None
    try:
        result = derive(data, question.derivation)
    except NoSupport as exc:
        if question.gold_answerable is Answerability.NO:
            return None
        return f"derivation finds no support ({exc}) but gold is answerable"
    except DerivationError as exc:
        return f"malformed derivation: {exc}"
    if question.gold_answerable is Answerability.NO:
        return f"gold is NONE but the data supports an answer ({result.value!r})"
    gold = question.gold_answer
    places = len(gold.split(".")[1]) if "." in gold else 0
    derived = format_answer(result, question.answer_type, places)
    if derived != gold:
        return f"gold {gold!r} but the data gives {derived!r}"
    return None


def check_keywords(pack: Pack) -> list[str]:
    """Every artifact has content keywords, each one token of its own text representation that
    occurs nowhere else in the pack (planting, filler, names, other artifacts) and is not its
    id: otherwise the retrieval path could not tell its content from its mention."""
    problems = []
    for artifact in pack.spec.artifacts:
        problems += keyword_problems(
            artifact.id,
            artifact.keywords,
            pack.content_text(artifact.id),
            pack.keyword_exclusions(artifact.id),
        )
    return problems


def validate_pack(name_or_path: str | Path) -> list[str]:
    """All problems of a pack (empty when it is valid)."""
    try:
        pack = load_pack(name_or_path)
    except PackFormatError as exc:
        return exc.lines()
    problems = check_files(pack) + check_ids(pack) + check_pairs(pack)
    if not problems:
        problems += check_derivations(pack) + check_keywords(pack)
    return problems + check_filler(pack)
