"""``validate_cue_pack``: what a CUE pack must satisfy beyond its schema, as readable problems.

Above: ``mirage cue validate``, ``mirage cue build`` and ``mirage cue import``. Below: a loaded
``CuePack`` (loading already proved every clue id exists and every caption level is present).

Problems (the pack is not fit to run):

- support — for a question with ``evidence``: every clue's round contains one of its
  ``answer_terms`` (at some caption level), in at least 2 distinct sessions for an explicit
  question and 3 for an implicit one (paper D.4: implicit targets recur in at least three event
  groups, explicit ones in at least two); an explicit question has a clue that states the term
  (typed or spoken words, or the foreground caption); an implicit question's terms are never
  stated anywhere in the history (only peripheral/background captions and background sound carry
  them); no ``absent_terms`` (distractor and lure key words) occur anywhere in the history;
- leakage — a question's stem does not contain its answer terms; a refusal question has exactly
  one refusal option and it is the answer (for an imported question the answer option is the
  refusal option by role, whatever its words; the others must not read as refusals); and, as
  mirage's own heuristics (warnings on imported release questions, problems otherwise), the stem
  shares no more words with the correct option than with some distractor, the correct option is
  not conspicuously longer than every distractor (1.5×), no other question offers a refusal;
- media files named by the pack exist.

Warnings (fit to run, weaker statistics): a profile without questions for some task × setting,
a stratum with a single question (no bootstrap variance), answer letters far from balanced.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

from pydantic import BaseModel, Field

from harness.cue.pack import CuePack
from harness.cue.schema import (
    LETTERS,
    REFUSAL_OPTION,
    ProfileHistory,
    Question,
    Round,
    Setting,
    Task,
    contains_term,
    content_words,
)

MIN_RECURRENCE = {Setting.explicit: 2, Setting.implicit: 3}
LENGTH_CUE_RATIO = 1.5
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "with",
        "and",
        "or",
        "by",
        "from",
        "her",
        "his",
        "their",
        "its",
        "is",
        "are",
        "was",
        "what",
        "which",
        "does",
        "do",
        "did",
        "most",
        "best",
        "would",
        "who",
        "how",
        "when",
        "where",
        "why",
        "that",
        "this",
        "user",
        "s",
        "she",
        "he",
        "they",
        "it",
    ]
)
_REFUSAL = re.compile(
    r"\b(not (stated|mentioned|said|known|specified|given|recorded|shared)"
    r"|(does|do|did) ?n[o']t (say|state|mention|specify|tell)|never (said|stated|mentioned)"
    r"|no (information|mention|record|evidence)|not enough (information|evidence|context)"
    r"|insufficient (information|evidence|context)|cannot be (determined|known|inferred)"
    r"|can'?not (tell|determine|say)|unknown|unclear|unanswerable)\b"
    r"|没有(说明|提到|提及|说过|记录|相关信息|足够)|未(提及|说明|提到)|无法(确定|判断|得知|回答)"
    r"|不确定|信息不足|不知道",
    re.IGNORECASE,
)
"""Wording of a refusal option. An imported refusal question's refusal option is known by role
(its answer letter); the wording only finds refusal options elsewhere."""


class ValidationReport(BaseModel):
    problems: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def stated_texts(round_: Round) -> Iterator[str]:
    """What the user or assistant said in words, and what a photo shows in its foreground."""
    for text in (round_.user, round_.assistant):
        if text:
            yield text
    if round_.user_voice and "asr" in round_.user_voice:
        yield round_.user_voice["asr"]
    for voice in round_.voices:
        if "asr" in voice.captions:
            yield voice.captions["asr"]
    for image in round_.images:
        if "brief" in image.captions:
            yield image.captions["brief"]


def all_texts(round_: Round) -> Iterator[str]:
    for text in (round_.user, round_.assistant):
        if text:
            yield text
    yield from (round_.user_voice or {}).values()
    for media in (*round_.images, *round_.voices):
        yield from media.captions.values()


def _mentions(texts: Iterator[str], terms: tuple[str, ...]) -> bool:
    return any(contains_term(text, term) for text in texts for term in terms)


def _rounds(history: ProfileHistory) -> dict[str, tuple[str, Round]]:
    return {r.round: (s.session_id, r) for s in history.sessions for r in s.rounds}


def _support(pack: CuePack, question: Question) -> list[str]:
    assert question.evidence is not None
    terms = question.evidence.answer_terms
    if not terms:
        return []
    rounds = _rounds(pack.histories[question.profile])
    index = pack.evidence_rounds(question.profile)
    problems = []
    supporting_sessions = set()
    for clue in question.clues:
        session, round_ = rounds[index[clue]]
        if _mentions(all_texts(round_), terms):
            supporting_sessions.add(session)
        else:
            problems.append(f"clue {clue} does not show any of {list(terms)}")
    needed = MIN_RECURRENCE[question.setting]
    if len(supporting_sessions) < needed:
        problems.append(
            f"{question.setting} evidence must recur in {needed} sessions; clues cover "
            f"{len(supporting_sessions)}"
        )
    stated_anywhere = any(_mentions(stated_texts(r), terms) for _, r in rounds.values())
    if question.setting is Setting.implicit and stated_anywhere:
        problems.append(f"implicit terms {list(terms)} are stated or foregrounded in the history")
    stated_in_clue = any(
        _mentions(stated_texts(rounds[index[c]][1]), terms) for c in question.clues
    )
    if question.setting is Setting.explicit and not stated_in_clue:
        problems.append(f"no clue states {list(terms)} (typed, spoken or foregrounded)")
    return problems


def _absent(pack: CuePack, question: Question) -> list[str]:
    assert question.evidence is not None
    history = pack.histories[question.profile]
    found = []
    for term in question.evidence.absent_terms:
        for _, round_ in _rounds(history).values():
            if _mentions(all_texts(round_), (term,)):
                found.append(f"absent term {term!r} occurs in round {round_.round}")
                break
    return found


def _overlap(stem: str, option: str) -> int:
    return len((content_words(stem) - STOPWORDS) & (content_words(option) - STOPWORDS))


def is_refusal_option(text: str) -> bool:
    return text == REFUSAL_OPTION or _REFUSAL.search(text) is not None


class _Findings(BaseModel):
    """One question's findings: release-rule ``problems`` and mirage-heuristic ``heuristics``."""

    problems: list[str] = Field(default_factory=list)
    heuristics: list[str] = Field(default_factory=list)


def _leakage(question: Question) -> _Findings:
    found = _Findings()
    correct = question.options[question.answer]
    distractors = [question.options[letter] for letter in LETTERS if letter != question.answer]
    worded = [k for k, v in question.options.items() if is_refusal_option(v)]
    if question.task is Task.refusal:
        # Imported (release) questions: the answer option is the refusal option by role, and
        # no other option may read as one (the release's "exactly one refusal option").
        refusal_letters = (
            sorted({question.answer, *worded}) if question.source is not None else worded
        )
        if refusal_letters != [question.answer]:
            found.problems.append(
                f"options: a refusal question needs exactly one refusal option and it must be "
                f"the answer (refusal options: {refusal_letters}, answer {question.answer})"
            )
        return found
    if worded:
        found.heuristics.append(
            f"refusal_option: option(s) {worded} offer a refusal on a non-refusal question"
        )
    if question.evidence and _mentions(iter([question.question]), question.evidence.answer_terms):
        found.problems.append("the stem contains the answer terms")
    shared = _overlap(question.question, correct)
    most = max(_overlap(question.question, d) for d in distractors)
    if shared > most:
        found.heuristics.append(
            f"overlap: the stem shares more words with the correct option ({shared}) than with "
            f"any distractor (at most {most})"
        )
    longest = max(len(d) for d in distractors)
    if len(correct) > LENGTH_CUE_RATIO * longest:
        found.heuristics.append(
            f"length: the correct option is conspicuously longer than every distractor "
            f"({len(correct)} characters against at most {longest}, over {LENGTH_CUE_RATIO}x)"
        )
    return found


def _media(pack: CuePack) -> list[str]:
    missing = []
    for pid, history in pack.histories.items():
        for session in history.sessions:
            for round_ in session.rounds:
                for media in (*round_.images, *round_.voices):
                    if media.file and not (pack.root / media.file).is_file():
                        missing.append(f"profile {pid}: {media.id}: file {media.file} is missing")
    return missing


def _warnings(pack: CuePack) -> list[str]:
    warnings = []
    strata = Counter((q.profile, q.task, q.setting) for q in pack.questions)
    for pid in pack.histories:
        for task in Task:
            for setting in Setting:
                count = strata.get((pid, task, setting), 0)
                if count == 0:
                    warnings.append(f"profile {pid} has no {setting} {task} question")
                elif count == 1:
                    warnings.append(
                        f"profile {pid} has one {setting} {task} question (no bootstrap variance)"
                    )
    letters = Counter(q.answer for q in pack.questions)
    total = len(pack.questions)
    if total >= 16:
        skewed = {
            k: letters.get(k, 0) for k in LETTERS if not 0.1 <= letters.get(k, 0) / total <= 0.4
        }
        if skewed:
            warnings.append(f"answer letters are unbalanced: {dict(letters)} of {total}")
    return warnings


def validate_cue_pack(pack: CuePack) -> ValidationReport:
    """Problems and warnings; mirage's leakage heuristics (length, overlap, a refusal option on
    a non-refusal question) are problems on packs authored in mirage and warnings on imported
    release questions (``source`` set), whose authors filtered leakage their own way."""
    report = ValidationReport(problems=_media(pack), warnings=_warnings(pack))
    for question in pack.questions:
        found = _leakage(question)
        problems = found.problems
        if question.evidence is not None:
            problems += _support(pack, question) + _absent(pack, question)
        report.problems += [f"{question.id}: {problem}" for problem in problems]
        target = report.warnings if question.source is not None else report.problems
        target += [f"{question.id}: {heuristic}" for heuristic in found.heuristics]
    return report
