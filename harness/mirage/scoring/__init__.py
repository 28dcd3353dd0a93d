"""Deterministic scoring of MIRAGE probes (paper section 3.5).

Above: the probe runner and ``mirage rescore``. Below: the protocol parser, source
canonicalisation through a ``SourceResolver`` and answer-value normalisation, chosen by a
scoring profile (``paper`` by default, or ``lenient``).
"""

from harness.mirage.scoring.indicators import (
    Gold,
    Indicator,
    ProbeScore,
    score_outcome,
    score_reply,
)
from harness.mirage.scoring.profiles import PROFILES, ScoringProfile, get_profile
from harness.mirage.scoring.sources import (
    ChainResolver,
    KnownIdResolver,
    MappingResolver,
    SourceResolver,
    canonical_source,
)
from harness.mirage.scoring.values import ANSWER_TYPES, AnswerType

__all__ = [
    "ANSWER_TYPES",
    "PROFILES",
    "AnswerType",
    "ChainResolver",
    "Gold",
    "Indicator",
    "KnownIdResolver",
    "MappingResolver",
    "ProbeScore",
    "ScoringProfile",
    "SourceResolver",
    "canonical_source",
    "get_profile",
    "score_outcome",
    "score_reply",
]
