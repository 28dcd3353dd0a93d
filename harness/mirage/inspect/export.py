"""A MIRAGE result folder as an Inspect eval log (``mirage export inspect RUN… --to DIR``).

Above: ``mirage export inspect`` (``mirage.cli.export``). Below: the folder's records, read
strictly (``harness.kit.results``), the aggregate ``mirage report`` computes from them
(``harness.mirage.report.aggregate``: the figures of ``summary.json``), the run's provenance and
pack (question wording), the record-to-score mapping (``harness.mirage.inspect.scores``), and
Inspect's log API (``inspect_ai.log.write_eval_log``), which writes the file.

One log per answerer folder; one sample per probe (its id the probe's tag
``STATE.CONDITION.QUESTION.rREPEAT``, as the ``mirage/probe`` task names them), its input the
probe prompt as asked, its output the reply; the provenance block is the eval's metadata
(docs/inspect.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import structlog
from inspect_ai.log import (
    EvalConfig,
    EvalDataset,
    EvalError,
    EvalLog,
    EvalPlan,
    EvalPlanStep,
    EvalSample,
    EvalSpec,
    EvalStats,
    write_eval_log,
)
from inspect_ai.model import ChatMessageAssistant, ChatMessageUser, ModelOutput

from harness.kit.provenance import Provenance, mirage_version
from harness.kit.results import ResultsLogError, read_records
from harness.kit.rundir import RunFileError, model_slug
from harness.mirage.inspect.scores import SCORER, eval_results, gold_target, record_score
from harness.mirage.probing.records import SCHEMA_VERSION, ProbeRecord
from harness.mirage.probing.visibility import check_visibility, read_visibility
from harness.mirage.report import run_provenance_of
from harness.mirage.report.aggregate import aggregate
from harness.mirage.report.compare import result_dirs
from harness.mirage.report.html import question_texts
from harness.mirage.scoring import get_profile

log = structlog.get_logger(__name__)

TASK_NAME = "mirage/probe"
LOG_SUFFIX = ".eval"


class ExportError(ValueError):
    """A folder that cannot be exported (not a mirage run, an older schema, a bad file); the
    message is one line naming the folder and what to do."""


def sample_id(record: ProbeRecord) -> str:
    """The probe's attribution tag, as the ``mirage/probe`` task names its samples."""
    return f"{record.state}.{record.condition}.{record.question_id}.r{record.repeat}"


def read_result_folder(folder: Path) -> list[ProbeRecord]:
    """The folder's records, read strictly; refused when empty or of an older schema (whose
    two-way path has no evidence to export: ``mirage rescore`` brings it to the current one)."""
    try:
        records = read_records(folder, ProbeRecord)
    except (ResultsLogError, OSError) as exc:
        raise ExportError(str(exc)) from exc
    if not records:
        raise ExportError(f"{folder}/results.jsonl holds no probe record: nothing to export")
    old = sorted({r.schema_version for r in records if r.schema_version < SCHEMA_VERSION})
    if old:
        raise ExportError(
            f"{folder}/results.jsonl holds schema-{old[0]} records (this mirage writes schema "
            f"{SCHEMA_VERSION}): run mirage rescore {folder} first, then export"
        )
    return records


def _prompt(record: ProbeRecord, questions: dict[str, str]) -> str:
    """The probe message as asked: the record's template with the pack's question."""
    question = questions.get(record.question_id, f"[question {record.question_id}]")
    template = record.prompt_template or get_profile(record.scoring).template(record.condition)
    return template.replace("{question}", question)


def probe_sample(record: ProbeRecord, questions: dict[str, str], model: str) -> EvalSample:
    """One probe as an Inspect sample: prompt in, reply out, its ``mirage`` score."""
    prompt = _prompt(record, questions)
    reply = record.raw_output or ""
    error = record.provider_error
    output = ModelOutput.from_content(model, reply, error=error)
    metadata = {
        "state": record.state,
        "condition": record.condition,
        "question_id": record.question_id,
        "repeat": record.repeat,
        "tag": record.tag,
        "gold_answerable": record.gold_answerable,
        "summary_format": record.summary_format,
        "state_eit": record.state_eit,
        "checkpoint_sha256": record.checkpoint_sha256,
        "model": record.model,
    }
    return EvalSample(
        id=sample_id(record),
        epoch=1,
        input=prompt,
        target=gold_target(record.gold),
        messages=[ChatMessageUser(content=prompt), ChatMessageAssistant(content=reply)],
        output=output,
        scores={SCORER: record_score(record)},
        metadata=metadata,
        total_time=record.latency_s,
        error=EvalError(message=error, traceback="", traceback_ansi="") if error else None,
    )


def _timestamp(provenance: Provenance | None) -> str:
    if provenance is not None:
        return provenance.recorded_at
    return datetime.now(UTC).isoformat(timespec="seconds")


def eval_log(folder: Path) -> EvalLog:
    """The Inspect eval log of one answerer's result folder."""
    records = read_result_folder(folder)
    try:
        visibility = read_visibility(folder)
        check_visibility(visibility, (r.state for r in records), folder)
        provenance = run_provenance_of(folder)
    except RunFileError as exc:
        raise ExportError(str(exc)) from exc
    agg = aggregate(records, None, visibility)
    model = next((r.model for r in records if r.model), None) or folder.name
    questions = question_texts(folder)
    samples = [probe_sample(r, questions, model) for r in records]
    ids = list(dict.fromkeys(str(s.id) for s in samples))
    created = _timestamp(provenance)
    spec = EvalSpec(
        created=created,
        task=TASK_NAME,
        task_args={"run": str(folder.resolve())},
        dataset=EvalDataset(
            name=provenance.pack if provenance else None, samples=len(ids), sample_ids=ids
        ),
        model=model,
        config=EvalConfig(),
        packages={"mirage-eval": mirage_version()},
        metadata={"provenance": provenance.model_dump(mode="json") if provenance else None},
    )
    completed = sum(r.provider_error is None for r in records)
    return EvalLog(
        status="success",
        eval=spec,
        plan=EvalPlan(steps=[EvalPlanStep(solver="mirage run", params={"answerer": model})]),
        results=eval_results(agg, len(samples), completed),
        stats=EvalStats(started_at=created, completed_at=created),
        samples=samples,
    )


def log_name(log_: EvalLog, folder: Path) -> str:
    """Inspect's file naming (time, task, id), the answerer's folder as the id."""
    stamp = log_.eval.created.replace(":", "-")
    return f"{stamp}_mirage-probe_{model_slug(folder.name)}{LOG_SUFFIX}"


def export_runs(paths: Sequence[Path], to: Path) -> list[Path]:
    """One eval log in ``to`` per answerer folder of ``paths`` (a result folder, or a run folder
    of several); every folder is read before any log is written."""
    try:
        folders = result_dirs(paths)
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise ExportError(f"{exc}: not a mirage run") from exc
    logs = [(folder, eval_log(folder)) for folder in folders]
    to.mkdir(parents=True, exist_ok=True)
    written = []
    for folder, log_ in logs:
        target = to / log_name(log_, folder)
        write_eval_log(log_, target)
        log.info("inspect.exported", folder=str(folder), log=str(target))
        written.append(target)
    return written
