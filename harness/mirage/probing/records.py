"""MIRAGE's probe records: one ``ProbeRecord`` per probe, built, scored and rescored here.

Above: the probe runner (appends one record per probe), ``mirage rescore`` (rewrites indicator
fields from raw outputs) and aggregation (reads indicator fields only). Below: the kit's
append-only, keyed, resumable results log (``harness.kit.results``: ``ResultsLog``,
``read_records``), which stores them one JSON object per line; a record is keyed by (state,
condition, question_id, repeat), and a key is never written twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal, NamedTuple

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    model_validator,
)

from harness.kit.agents.base import ProbeUsage, ToolCallRecord
from harness.kit.agents.context import ProbeContext
from harness.kit.attribution import RETRIEVAL_TOOLS
from harness.kit.results import STORED
from harness.mirage.probing.retrieval_paths import (
    PathEvidence,
    ProbeCall,
    RetrievalPath,
    classify_path,
)
from harness.mirage.protocol import DEFAULT_PROFILE, Condition, ParsedResponse, ProfileName
from harness.mirage.scoring import (
    Gold,
    Indicator,
    ProbeScore,
    ScoringProfile,
    SourceResolver,
    get_profile,
    score_reply,
)
from harness.mirage.scoring.metrics import ANSWERABLE_ONLY, PROBE_INDICATORS, UNANSWERABLE_ONLY

# 1: no scoring profile recorded (scored by what is now ``lenient``); 2: ``scoring`` and
# ``prompt_template`` recorded with every record; 3: the four-way ``path`` with its
# ``path_evidence`` and ``path_source``, and the gold's artifact id and keywords.
SCHEMA_VERSION = 3
FOUR_WAY_SCHEMA = 3
PathSource = Literal["probe", "checkpoint", "binary"]
"""Where a record's ``path`` was decided: ``probe`` from what the probe itself had (its
context, start-of-session material and calls); ``checkpoint`` by ``mirage rescore`` from the
checkpoint's restored context and the recorded calls; ``binary`` an older file's two-way label
(``R_tool`` if a retrieval call ran, else ``R_context``), kept as it was."""


class RecordKey(NamedTuple):
    state: str
    condition: str
    question_id: str
    repeat: int


class ProbeRecord(BaseModel):
    """One line of ``results.jsonl``; see docs/metrics.md for every field. Read back strictly
    (``harness.kit.results``): no unknown field, no coerced value."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = Field(default=SCHEMA_VERSION, ge=1, le=SCHEMA_VERSION)
    scoring: ProfileName = DEFAULT_PROFILE
    prompt_template: str | None = None
    state: str = Field(min_length=1)
    summary_format: str | None = None
    """The compaction summary format behind the state (None before the first compaction)."""
    condition: Condition
    question_id: str = Field(min_length=1)
    repeat: int = Field(ge=0)
    gold_answerable: Literal["YES", "NO"]
    raw_output: str | None = None
    parsed: ParsedResponse = Field(default_factory=ParsedResponse)
    pf: bool = False
    pf_reason: str | None = None
    AC: Indicator | None = None
    SC: Indicator | None = None
    VC: Indicator | None = None
    GC: Indicator | None = None
    WS: Indicator | None = None
    HR: Indicator | None = None
    path: RetrievalPath = "R_none"
    path_evidence: PathEvidence | None = None
    path_source: PathSource = "probe"
    declared_path: RetrievalPath | None = None
    """The access path a reference agent declares it used (docs/references.md); None for any
    other agent, and for a reference that abstained."""
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    usage: ProbeUsage = Field(default_factory=ProbeUsage)
    latency_s: float | None = Field(default=None, ge=0)
    gold: Gold | None = None
    canonical_source: str | None = None
    provider_error: str | None = None
    finish_reason: str | None = None
    """The provider's ``finish_reason`` for the probe turn's last model call, as the agent
    reported it (also on a provider error: ``content_filter`` for a refusal); None when not
    known, and in lines written before it was recorded."""
    model: str | None = None
    checkpoint_sha256: str | None = None
    """The name of the checkpoint the probe restored (``runtime.snapshot``)."""
    restored_sha256: str | None = None
    """The name of the session the agent said it restored (equal to the checkpoint's)."""
    state_eit: int | None = None
    """The checkpoint's EIT."""
    tag: str | None = None
    """The probe's attribution tag on the memory server (``harness.kit.memory``)."""
    trace: dict[str, Any] | None = None
    """What the agent reported beside its reply (rounds, parse outcomes, a reference's
    account)."""

    @property
    def key(self) -> RecordKey:
        return RecordKey(self.state, self.condition, self.question_id, self.repeat)

    @property
    def scored(self) -> bool:
        """A recorded probe call that enters the metrics (provider errors do not)."""
        return self.provider_error is None

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: Any, info: ValidationInfo) -> Any:
        """A stored version-1 line (no ``schema_version``) was scored by the rules now called
        lenient; a stored line older than version 3 carries the two-way path (``path_source``
        ``binary``). Records built in code without a version are the current version."""
        stored = bool(info.context and info.context.get(STORED))
        if not (stored and isinstance(data, dict)):
            return data
        if "schema_version" not in data:
            data = {**data, "schema_version": 1, "scoring": data.get("scoring", "lenient")}
        version = data["schema_version"]
        if isinstance(version, int) and version < FOUR_WAY_SCHEMA and "path_source" not in data:
            data = {**data, "path_source": "binary", "path": data.get("path", "R_context")}
        return data

    @classmethod
    def from_line(cls, line: str | bytes) -> ProbeRecord:
        """A record as stored in ``results.jsonl`` (older schema versions migrated)."""
        return cls.model_validate_json(line, context={STORED: True})

    @model_validator(mode="after")
    def _indicators_consistent(self) -> ProbeRecord:
        if self.gold is not None and self.gold.answerable != self.gold_answerable:
            raise ValueError("gold.answerable disagrees with gold_answerable")
        if self.pf or self.provider_error is not None:
            filled = [n for n in PROBE_INDICATORS if getattr(self, n) is not None]
            if filled:
                raise ValueError(f"a PF or provider-error record has indicators {filled}")
            return self
        not_applicable = UNANSWERABLE_ONLY if self.gold_answerable == "YES" else ANSWERABLE_ONLY
        wrong = [n for n in not_applicable if getattr(self, n) is not None]
        if wrong:
            raise ValueError(f"indicators {wrong} do not apply to gold {self.gold_answerable}")
        return self


def binary_path(tool_calls: Iterable[ToolCallRecord]) -> RetrievalPath:
    """The two-way label of schema 1 and 2 (``path_source`` ``binary``): R_tool when a
    retrieval call (``RETRIEVAL_TOOLS``) was executed in the probe turn, else R_context."""
    executed = any(c.executed and c.name in RETRIEVAL_TOOLS for c in tool_calls)
    return "R_tool" if executed else "R_context"


def path_fields(
    gold: Gold,
    tool_calls: Sequence[ToolCallRecord],
    context: ProbeContext | None,
    source: PathSource = "probe",
) -> dict[str, Any]:
    """``path``, ``path_evidence`` and ``path_source`` of a probe about ``gold.artifact`` (a
    gold built without it: its source) that had ``context`` (None, or its messages unknown:
    never R_context) and made ``tool_calls``."""
    artifact = gold.artifact or gold.source
    if artifact is None:
        raise ValueError("gold names no artifact (gold.artifact); the retrieval path needs it")
    path, evidence = classify_path(
        artifact,
        gold.keywords,
        active=None if context is None or context.messages is None else context.messages,
        boot=() if context is None else context.boot,
        calls=[ProbeCall.model_validate(call, from_attributes=True) for call in tool_calls],
    )
    return {"path": path, "path_evidence": evidence, "path_source": source}


def _score_fields(score: ProbeScore) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "scoring": score.scoring,
        "parsed": score.outcome.parsed,
        "pf": score.outcome.pf,
        "pf_reason": score.outcome.pf_reason,
        "canonical_source": score.canonical_source,
        **{n: getattr(score, n) for n in PROBE_INDICATORS},
    }


def build_record(
    key: RecordKey,
    raw_output: str | None,
    gold: Gold,
    resolver: SourceResolver | None,
    profile: ProfileName | ScoringProfile = DEFAULT_PROFILE,
    *,
    context: ProbeContext | None = None,
    **extra: Any,
) -> ProbeRecord:
    """Score ``raw_output`` against ``gold`` under ``profile`` and assemble the record for
    ``key``, its retrieval path classified from ``context`` and the calls (``extra`` fields
    such as ``prompt_template`` and ``tool_calls`` are kept)."""
    tool_calls = [ToolCallRecord.model_validate(c) for c in extra.pop("tool_calls", [])]
    fields = _score_fields(score_reply(raw_output, gold, resolver, profile))
    return ProbeRecord(
        **key._asdict(),
        gold_answerable=gold.answerable,
        raw_output=raw_output,
        gold=gold,
        tool_calls=tool_calls,
        **path_fields(gold, tool_calls, context),
        **fields,
        **extra,
    )


def provider_error_record(
    key: RecordKey,
    gold: Gold,
    error: str,
    profile: ProfileName | ScoringProfile = DEFAULT_PROFILE,
    **extra: Any,
) -> ProbeRecord:
    """The record of a probe whose backbone call failed after bounded retries (not a PF)."""
    return ProbeRecord(
        **key._asdict(),
        gold_answerable=gold.answerable,
        gold=gold,
        provider_error=error,
        scoring=get_profile(profile).name,
        **extra,
    )


def rescore_record(
    record: ProbeRecord,
    resolver: SourceResolver | None,
    profile: ProfileName | ScoringProfile = DEFAULT_PROFILE,
) -> ProbeRecord:
    """The same record with its indicators recomputed from ``raw_output`` under ``profile``
    (the record then carries the current schema version and that profile's name)."""
    if record.provider_error is not None:
        scoring = get_profile(profile).name
        return record.model_copy(update={"schema_version": SCHEMA_VERSION, "scoring": scoring})
    if record.gold is None:
        raise ValueError(f"record {tuple(record.key)} has no gold annotation; cannot rescore")
    fields = _score_fields(score_reply(record.raw_output, record.gold, resolver, profile))
    return record.model_copy(update=fields)
