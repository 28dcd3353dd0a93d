"""Content keywords of a planted artifact: the tokens whose presence in a text shows that the
artifact's *content* is there, not merely a mention of it (its id, title or file names).

Above: the pack build, import and validator (which derive and check each artifact's
``keywords``), the retrieval-path classifier and the visibility map (which count keywords in
the active context, the compaction summary and the workspace notes). Below: plain text only.

One token rule serves derivation and matching, so a keyword derived from a text always matches
that text: a token is a number (``41.2``, ``1,315``, ``22:41``, ``1:46:05``) or a word (a letter,
then letters, digits, ``_`` or ``-``: ``Elmbrook``, ``INV-20417``, ``DATUM_OFFSET_M``);
everything else separates tokens. Matching is case-insensitive and whole-token: ``41.2`` does
not match ``41.25``, ``Elmbrook`` matches ``Elmbrook's``. ``docs/packs.md`` states the
derivation rule, ``docs/metrics.md`` how the keywords decide the retrieval path.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

NUMBER = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\d)|\d+(?:[.:]\d+)*"
WORD = r"[^\W\d_](?:[\w\-]*\w)?"
TOKEN = re.compile(rf"{NUMBER}|{WORD}")
_NUMBER = re.compile(rf"(?:{NUMBER})")

MIN_MATCHES = 2
"""Distinct keywords that must be present (``min(MIN_MATCHES, n)``), as the released
classifier requires: one coincidental word is not the artifact."""
MAX_KEYWORDS = 8
NUMBER_SHARE = 5 / 8
MIN_DIGITS = 3
MIN_WORD_CHARS = 4


def tokens(text: str) -> list[str]:
    """Every token of ``text`` in order, spelled as written."""
    return TOKEN.findall(text)


def token_set(text: str) -> set[str]:
    """The case-folded tokens of ``text``."""
    return set(tokens(text.casefold()))


def is_number(token: str) -> bool:
    return _NUMBER.fullmatch(token) is not None


def is_single_token(text: str) -> bool:
    return tokens(text) == [text]


def matched(text: str, keywords: Sequence[str]) -> list[str]:
    """The keywords present in ``text`` as whole tokens (case-insensitive), in keyword order.

    A substring test first, so the tokenizer only runs on texts that may hold a keyword."""
    folded = text.casefold()
    candidates = [k for k in keywords if k and k.casefold() in folded]
    if not candidates:
        return []
    present = token_set(text)
    return [k for k in candidates if k.casefold() in present]


def threshold(keywords: Sequence[str], minimum: int = MIN_MATCHES) -> int:
    """How many distinct keywords show the content: ``min(minimum, n)`` (0 without keywords)."""
    return min(minimum, len(keywords))


def _distinctive(token: str) -> bool:
    """A value or a name: a number with a separator (``6.4``, ``9:41``) or of three or more
    digits, or a word of four or more characters with a capital, a digit or an underscore."""
    if is_number(token):
        return not token.isdigit() or len(token) >= MIN_DIGITS
    if len(token) < MIN_WORD_CHARS:
        return False
    return any(char.isupper() or char.isdigit() or char == "_" for char in token)


def _plain_word(token: str) -> bool:
    return not is_number(token) and len(token) >= MIN_WORD_CHARS


def _spread(items: list[str], limit: int) -> list[str]:
    """``limit`` items evenly spread over ``items`` (the first and the last included)."""
    if len(items) <= limit:
        return items
    if limit == 1:
        return items[:1]
    return [items[i * (len(items) - 1) // (limit - 1)] for i in range(limit)]


def derive_keywords(
    artifact_id: str, text: str, excluded: Iterable[str], limit: int = MAX_KEYWORDS
) -> list[str]:
    """Up to ``limit`` keywords of an artifact whose content text is ``text``.

    Candidates are its tokens, in order of first occurrence, that are not (or do not contain)
    the artifact id and are not among the case-folded ``excluded`` tokens (other artifacts'
    texts, titles, aliases, file names, the planting turns, the filler). Distinctive tokens
    (``_distinctive``: values and names) are preferred; plain words of four or more letters
    join them only when fewer than ``MIN_MATCHES`` distinctive ones exist. Numbers take up to
    ``NUMBER_SHARE`` of the places and words the rest (either fills what the other leaves),
    each spread evenly over its candidates, so a long table gives values from its start,
    middle and end."""
    banned = set(excluded)
    own_id = artifact_id.casefold()
    seen: set[str] = set()
    ranked: list[tuple[str, bool]] = []
    for token in tokens(text):
        key = token.casefold()
        if key in seen or key in banned or own_id in key:
            continue
        seen.add(key)
        if _distinctive(token) or _plain_word(token):
            ranked.append((token, _distinctive(token)))
    preferred = [token for token, distinctive in ranked if distinctive]
    pool = preferred if len(preferred) >= MIN_MATCHES else [token for token, _ in ranked]
    numbers = [token for token in pool if is_number(token)]
    words = [token for token in pool if not is_number(token)]
    number_places = max(min(len(numbers), round(limit * NUMBER_SHARE)), limit - len(words))
    chosen = set(_spread(numbers, number_places)) | set(_spread(words, limit - number_places))
    return [token for token in pool if token in chosen]


def keyword_problems(
    artifact_id: str, keywords: Sequence[str], text: str | None, excluded: Mapping[str, str]
) -> list[str]:
    """Why ``keywords`` cannot show artifact ``artifact_id``'s content (empty when they can).

    ``text`` is the artifact's content text (None: it has none); ``excluded`` maps a
    case-folded token to where else it occurs (a keyword found there would match without the
    content)."""
    if text is None:
        return [
            f"artifact {artifact_id}: no text representation, so no content keywords; add a "
            "derived text file saying what it shows (a description, summary or table) and name "
            "it as its `text_representation`"
        ]
    if not keywords:
        return [
            f"artifact {artifact_id}: no keywords; the retrieval path needs content keywords "
            "(rebuild the pack with `mirage pack build`, or list a few distinctive values and "
            "names of its text under `keywords`)"
        ]
    problems = []
    present = token_set(text)
    seen: set[str] = set()
    for keyword in keywords:
        problem = _keyword_problem(artifact_id, keyword, present, excluded, seen)
        if problem:
            problems.append(f"artifact {artifact_id}: keyword {keyword!r} {problem}")
        seen.add(keyword.casefold())
    return problems


def _keyword_problem(
    artifact_id: str,
    keyword: str,
    present: set[str],
    excluded: Mapping[str, str],
    seen: set[str],
) -> str | None:
    key = keyword.casefold()
    if not is_single_token(keyword):
        return "is not one token (a number, or a word of letters, digits, '_' and '-')"
    if key in seen:
        return "is listed twice"
    if artifact_id.casefold() in key:
        return "names the artifact id, which is not content (the planting turn mentions it)"
    if key not in present:
        return "does not occur in the artifact's text representation"
    if key in excluded:
        return f"also occurs in {excluded[key]}, so it would match without the content"
    return None
