"""How the reference agents read: the question out of the probe message, artifact ids out of
text, and a value out of evidence text (docs/references.md, "The reading rules").

Nothing here sees a pack: every input is text an agent under test also receives (the probe
message, the restored transcript, what ``artifact_recall`` returned).

- **Question**: the probe message is matched against every probe wording of
  ``harness.mirage.protocol.templates`` (the public protocol text); the part in the
  ``{question}`` slot is the question. A message no wording matches is the question itself.
- **Artifact id**: a token ``<kind>_<8 hex digits>`` (the shape of the bundled packs' ids).
- **Sections** of a text: it is cut where a line mentions an artifact id other than the current
  section's; each section belongs to the first id of its first line (so one message that
  carries several artifacts, like a compaction summary, is read artifact by artifact).
- **Content words** of a text: its words of three or more letters and its numbers, lower-cased,
  a trailing ``'s`` and plural ``s`` removed, minus a short list of function words.
- **Value** (``read_value``), two rules in order:

  1. *cell*: the evidence's records are the rows of its comma-separated tables (a header line
     and rows with as many fields) and its lines of ``name: value`` pairs separated by ``;``
     (how ``artifact_recall`` shows a table row); a record's first value is its row label.
     The value is the first field whose name, like the record's row label, is made of
     content words of the question. When the question names a row label or a field of some
     record but no record has both, nothing fits (the value is not in the evidence).
  2. *clause*: otherwise the evidence is cut into clauses (lines, split again at ``;`` and
     ``|``); the clause sharing the most content words with the question, at least
     ``MIN_SHARED``, gives the value: its first number, else its text after the last ``:``
     (at most ``MAX_VALUE_WORDS`` words).

  A trailing citation ``[source: …]`` (the per-fact-citations format's) is not part of a value.

  Nothing fits → no value (the agent answers NO/NONE).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from compaction.references import ARTIFACT_ID
from harness.mirage.protocol.templates import QUESTION_SLOT, TEMPLATES

MIN_SHARED = 2
MAX_VALUE_WORDS = 6
FUNCTION_WORDS = frozenset(
    [
        "the",
        "and",
        "for",
        "was",
        "were",
        "what",
        "which",
        "how",
        "much",
        "many",
        "with",
        "from",
        "that",
        "this",
        "are",
        "has",
        "have",
        "had",
        "did",
        "does",
        "according",
        "shared",
        "sent",
        "send",
        "my",
        "your",
        "our",
        "their",
        "its",
        "into",
        "onto",
        "than",
        "then",
        "there",
        "value",
        "number",
        "total",
        "please",
        "tell",
        "give",
        "show",
    ]
)
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]+|\d+(?:[.,]\d+)*")
_NUMBER = re.compile(r"[-+−]?\d[\d,]*(?:\.\d+)?%?")
_CLAUSE_SPLIT = re.compile(r"[;|]")
_PAIR = re.compile(r"([^:;]+?):\s*(\S[^;]*?)")
_CITATION = re.compile(r"\s*\[source:[^\]]*\]\s*$")
_LIST_MARK = re.compile(r"^\s*(?:[-*•]|\d+\.)\s*")


def _wording_pattern(template: str) -> re.Pattern[str]:
    before, after = template.split(QUESTION_SLOT)
    return re.compile(re.escape(before) + r"(?P<question>.+?)" + re.escape(after), re.DOTALL)


_WORDINGS = [  # the most fixed text first (Cm's wording around the question before C0's)
    _wording_pattern(template)
    for template in sorted(
        (t for by_condition in TEMPLATES.values() for t in by_condition.values()),
        key=len,
        reverse=True,
    )
]


def question_from_probe(message: str) -> str:
    """The question inside a probe message (the message itself when no wording matches)."""
    for pattern in _WORDINGS:
        match = pattern.fullmatch(message.strip())
        if match:
            return match.group("question").strip()
    return message.strip()


def artifact_ids(text: str) -> list[str]:
    """Artifact ids mentioned in ``text``, first mention first, each once."""
    return list(dict.fromkeys(ARTIFACT_ID.findall(text)))


def sections(text: str) -> list[tuple[str, str]]:
    """``text`` cut where a line mentions an artifact id other than the current section's:
    (the section's artifact id, its text); lines before the first id belong to the first
    section. A text without ids has none."""
    found: list[tuple[str, list[str]]] = []
    prefix: list[str] = []
    for line in text.splitlines():
        ids = artifact_ids(line)
        if ids and (not found or ids[0] != found[-1][0]):
            found.append((ids[0], [*prefix, line]))
            prefix = []
        elif found:
            found[-1][1].append(line)
        else:
            prefix.append(line)
    return [(artifact_id, "\n".join(lines)) for artifact_id, lines in found]


def _word_form(word: str) -> str:
    word = word.lower().replace("’", "'")
    word = word.removesuffix("'s").strip("'-")
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss") and word.isalpha():
        word = word[:-1]
    return word


def content_words(text: str) -> set[str]:
    """The content words of ``text`` (see the module docstring)."""
    forms = (_word_form(w) for w in _WORD.findall(text))
    return {w for w in forms if w and w not in FUNCTION_WORDS and (len(w) >= 3 or w.isdigit())}


Record = list[tuple[str, str]]


def _csv_records(lines: list[str]) -> Iterable[Record]:
    """The rows of every comma-separated table (a line with two or more commas followed by
    lines with as many fields) as (header, cell) pairs."""
    index = 0
    while index < len(lines):
        header = [cell.strip() for cell in lines[index].split(",")]
        taken = 0
        while len(header) >= 3 and index + 1 + taken < len(lines):
            cells = [cell.strip() for cell in lines[index + 1 + taken].split(",")]
            if len(cells) != len(header):
                break
            yield list(zip(header, cells, strict=True))
            taken += 1
        index += taken + 1


def _pair_records(lines: list[str]) -> Iterable[Record]:
    """Every line of two or more ``name: value`` pairs separated by ``;``."""
    for line in lines:
        pairs = [_PAIR.fullmatch(part.strip()) for part in line.split(";")]
        if len(pairs) >= 2 and all(pairs):
            yield [(m.group(1), m.group(2)) for m in pairs if m]


def _uncited(line: str) -> str:
    return _CITATION.sub("", line)


def records(evidence: str) -> list[Record]:
    lines = [_uncited(line) for line in evidence.splitlines()]
    return [*_csv_records(lines), *_pair_records(lines)]


def _named(label: str, asked: set[str]) -> bool:
    names = content_words(label)
    return bool(names) and names <= asked


def cell_value(question: str, evidence: str) -> tuple[bool, str | None]:
    """(whether the question names a row label or a field of a record of ``evidence``, the
    fitting cell or None)."""
    asked = content_words(question)
    named = False
    for record in records(evidence):
        (_, label), fields = record[0], record[1:]
        columns = [value for name, value in fields if value and _named(name, asked)]
        row = _named(label, asked)
        named = named or row or bool(columns)
        if row and columns:
            return True, columns[0]
    return named, None


def _clauses(evidence: str) -> Iterable[str]:
    for line in map(_uncited, evidence.splitlines()):
        for clause in _CLAUSE_SPLIT.split(_LIST_MARK.sub("", line)):
            if clause.strip():
                yield clause.strip()


def clause_value(question: str, evidence: str) -> str | None:
    """The value of the clause sharing the most content words with the question."""
    asked = content_words(question)
    best, shared = None, MIN_SHARED - 1
    for clause in _clauses(evidence):
        overlap = len(content_words(clause) & asked)
        if overlap > shared:
            best, shared = clause, overlap
    if best is None:
        return None
    number = _NUMBER.search(best)
    if number:
        return number.group(0).rstrip(",")
    words = best.rsplit(":", 1)[-1].split()
    return " ".join(words[:MAX_VALUE_WORDS]) or None


def read_value(question: str, evidence: str) -> str | None:
    """The value ``evidence`` gives for ``question`` by the cell rule, else the clause rule;
    None when nothing fits."""
    named, cell = cell_value(question, evidence)
    if cell is not None or named:
        return cell
    return clause_value(question, evidence)


def overlap(question: str, text: str) -> int:
    """How many content words of ``question`` ``text`` shares."""
    return len(content_words(question) & content_words(text))
