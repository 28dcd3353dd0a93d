"""Probe records and the append-only, keyed, resumable ``results.jsonl``.

Above: the probe runner (appends one record per probe), ``mirage rescore`` (rewrites indicator
fields from raw outputs) and aggregation (reads indicator fields only). Below: one JSON object per
line on disk. A record is keyed by (state, condition, question_id, repeat); a key is never
written twice.

Durability: every append is one ``write`` of a whole line followed by ``fsync`` (a few ms,
against ≥ 50 ms of harness work per probe and seconds of model time:
``benchmarks/bench_results_log.py``), so an acknowledged probe survives a ``kill -9``, a native
crash in the model or a power cut. Such a stop can at worst leave a torn last line (no final
newline, or not JSON): reading leaves it out with a warning, opening the log for writing cuts it
off so its probe runs again. A bad line anywhere else is never dropped: it is an error naming
the file and line.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Generic, Literal, NamedTuple, Protocol, TypeVar, overload

import structlog
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from harness.metrics import ANSWERABLE_ONLY, PROBE_INDICATORS, UNANSWERABLE_ONLY
from harness.mirage.paths import RETRIEVAL_TOOLS
from harness.protocol import DEFAULT_PROFILE, Condition, ParsedResponse, ProfileName
from harness.scoring import (
    Gold,
    Indicator,
    ProbeScore,
    ScoringProfile,
    SourceResolver,
    get_profile,
    score_reply,
)

log = structlog.get_logger(__name__)

RESULTS_FILE = "results.jsonl"
# 1: no scoring profile recorded (scored by what is now ``lenient``); 2: ``scoring`` and
# ``prompt_template`` recorded with every record.
SCHEMA_VERSION = 2
STORED = "stored"  # validation context flag: the data comes from a results file
RetrievalPath = Literal["R_context", "R_tool"]


class RecordKey(NamedTuple):
    state: str
    condition: str
    question_id: str
    repeat: int


class ToolCallRecord(BaseModel):
    """One tool call attempted in the probe turn, with its parse/compliance outcome."""

    name: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    label: str = "ok"
    executed: bool = False
    error: str | None = None


class ProbeUsage(BaseModel):
    """Tokens of one probe: ``eit`` is the input of its first backbone call (the state's depth
    plus the question); the other fields sum over every call of the probe turn (tool rounds
    included): all input, the parts read from and written to a prompt cache, output."""

    eit: int | None = None
    input_tokens: int | None = None
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    output_tokens: int | None = None
    calls: int | None = None


class ProbeRecord(BaseModel):
    """One line of ``results.jsonl``; see docs/metrics.md for every field."""

    model_config = ConfigDict(extra="allow")

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
    path: RetrievalPath = "R_context"
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    usage: ProbeUsage = Field(default_factory=ProbeUsage)
    latency_s: float | None = Field(default=None, ge=0)
    gold: Gold | None = None
    canonical_source: str | None = None
    provider_error: str | None = None
    model: str | None = None

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
        lenient; records built in code without a version are the current version."""
        stored = bool(info.context and info.context.get(STORED))
        if stored and isinstance(data, dict) and "schema_version" not in data:
            return {**data, "schema_version": 1, "scoring": data.get("scoring", "lenient")}
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


def retrieval_path(tool_calls: Iterable[ToolCallRecord]) -> RetrievalPath:
    """R_tool when a retrieval call (``RETRIEVAL_TOOLS``) was executed in the probe turn."""
    executed = any(c.executed and c.name in RETRIEVAL_TOOLS for c in tool_calls)
    return "R_tool" if executed else "R_context"


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
    **extra: Any,
) -> ProbeRecord:
    """Score ``raw_output`` against ``gold`` under ``profile`` and assemble the record for
    ``key`` (``extra`` fields such as ``prompt_template`` and ``tool_calls`` are kept)."""
    tool_calls = [ToolCallRecord.model_validate(c) for c in extra.pop("tool_calls", [])]
    fields = _score_fields(score_reply(raw_output, gold, resolver, profile))
    return ProbeRecord(
        **key._asdict(),
        gold_answerable=gold.answerable,
        raw_output=raw_output,
        gold=gold,
        tool_calls=tool_calls,
        path=extra.pop("path", retrieval_path(tool_calls)),
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


class ResultsLogError(RuntimeError):
    """The results file is corrupt (not merely torn at the end) or already in use."""


class KeyedRecord(Protocol):
    """A results-file record: pydantic, keyed (``ProbeRecord``; CUE's ``CueRecord``)."""

    @property
    def key(self) -> tuple[Any, ...]: ...

    def model_dump_json(self) -> str: ...


RecordT = TypeVar("RecordT", bound=KeyedRecord)


class _Scan(NamedTuple, Generic[RecordT]):
    records: list[RecordT]
    intact: int  # bytes up to the end of the last line kept
    torn_line: int | None  # number of the torn last line that was left out


def _parse_line(line: bytes, number: int, path: Path, record_type: type[RecordT]) -> RecordT:
    try:
        if record_type is ProbeRecord:
            return ProbeRecord.from_line(line)  # type: ignore[return-value]  # migrates old schemas
        return record_type.model_validate_json(line)  # type: ignore[attr-defined]
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        reason = f"{where}: {first['msg']}" if where else str(first["msg"])
        more = f"; {exc.error_count() - 1} more problem(s)" if exc.error_count() > 1 else ""
        raise ResultsLogError(
            f"{path}:{number}: corrupt probe record ({reason}{more}); mirage never writes such "
            "a line: repair or delete it (a deleted probe is re-run on resume)"
        ) from exc


def _is_torn(line: bytes, terminated: bool) -> bool:
    """A last line cut short by a kill: no final newline, or not JSON at all."""
    if not terminated:
        return True
    try:
        json.loads(line)
    except ValueError:
        return True
    return False


def _scan(path: Path, record_type: type[RecordT]) -> _Scan[RecordT]:
    """Records of every line; only the last non-blank line may be torn, and is left out."""
    data = path.read_bytes() if path.exists() else b""
    lines = data.split(b"\n")  # the final item is whatever follows the last newline
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    records: list[RecordT] = []
    offset = 0
    for index, line in enumerate(lines):
        terminated = index < len(lines) - 1
        if index == last and _is_torn(line, terminated):
            return _Scan(records, offset, index + 1)
        if line.strip():
            records.append(_parse_line(line, index + 1, path, record_type))
        offset += len(line) + terminated
    return _Scan(records, offset, None)


@overload
def read_records(path: str | os.PathLike[str]) -> list[ProbeRecord]: ...
@overload
def read_records(path: str | os.PathLike[str], record_type: type[RecordT]) -> list[RecordT]: ...
def read_records(path: str | os.PathLike[str], record_type: Any = ProbeRecord) -> list[Any]:
    """All records of a results file (a torn last line is left out with a warning; duplicates
    keep the first; a corrupt line anywhere else raises ``ResultsLogError``)."""
    file = Path(path)
    if file.is_dir():
        file = file / RESULTS_FILE
    if not file.exists():
        raise FileNotFoundError(f"no results file at {file}")
    scan = _scan(file, record_type)
    if scan.torn_line is not None:
        log.warning("results.torn_last_line_ignored", path=str(file), line=scan.torn_line)
    return list(_unique(scan.records, file))


def _unique(records: Iterable[RecordT], path: Path) -> Iterator[RecordT]:
    seen: set[tuple[Any, ...]] = set()
    for record in records:
        if record.key in seen:
            log.warning("results.duplicate_key_ignored", path=str(path), key=tuple(record.key))
            continue
        seen.add(record.key)
        yield record


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class ResultsLog(Generic[RecordT]):
    """Append-only writer of ``results.jsonl`` that resumes where a previous run stopped.

    Holds an exclusive lock on the file while open, so two runs cannot interleave. Records are
    ``ProbeRecord`` unless another keyed ``record_type`` is given.
    """

    @overload
    def __init__(self: ResultsLog[ProbeRecord], path: str | os.PathLike[str]) -> None: ...
    @overload
    def __init__(self, path: str | os.PathLike[str], record_type: type[RecordT]) -> None: ...
    def __init__(self, path: str | os.PathLike[str], record_type: Any = ProbeRecord) -> None:
        self.path = Path(path)
        self.record_type = record_type
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        created = not self.path.exists()
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError as exc:
                raise ResultsLogError(f"{self.path} is being written by another run") from exc
            if created:
                _fsync_directory(self.path.parent)  # the new file's name is durable too
            self._records = self._load_and_repair()
        except BaseException:
            self.close()
            raise
        self._keys = {r.key for r in self._records}

    def _load_and_repair(self) -> list[RecordT]:
        """The records so far; a torn last line (a kill mid-write) is cut off, so its probe
        runs again."""
        scan = _scan(self.path, self.record_type)
        size = os.fstat(self._fd).st_size
        if scan.intact < size:
            log.warning(
                "results.torn_last_line_dropped",
                path=str(self.path),
                line=scan.torn_line,
                bytes=size - scan.intact,
            )
            os.ftruncate(self._fd, scan.intact)
            os.fsync(self._fd)
        return list(_unique(scan.records, self.path))

    def __enter__(self) -> ResultsLog[RecordT]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    @property
    def keys(self) -> frozenset[Any]:
        return frozenset(self._keys)

    @property
    def records(self) -> list[RecordT]:
        return list(self._records)

    def append(self, record: RecordT) -> bool:
        """Write ``record`` durably; ``False`` (nothing written) when its key is already there."""
        line = (record.model_dump_json() + "\n").encode()
        with self._lock:
            if self._fd < 0:
                raise ResultsLogError(f"{self.path} is closed")
            if record.key in self._keys:
                return False
            written = os.write(self._fd, line)
            if written != len(line):
                raise ResultsLogError(f"short write to {self.path}: {written}/{len(line)} bytes")
            os.fsync(self._fd)
            self._keys.add(record.key)
            self._records.append(record)
            return True


def rewrite_records(path: str | os.PathLike[str], records: Iterable[ProbeRecord]) -> None:
    """Atomically replace a results file (used by rescore): temp file, fsync, rename.

    Refused while a run holds the file open for writing.
    """
    target = Path(path)
    guard = os.open(target, os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(guard, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise ResultsLogError(f"{target} is being written by a run; rescore later") from exc
        temp = target.with_name(target.name + ".tmp")
        with open(temp, "wb") as handle:
            for record in _unique(records, target):
                handle.write((record.model_dump_json() + "\n").encode())
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    finally:
        os.close(guard)
