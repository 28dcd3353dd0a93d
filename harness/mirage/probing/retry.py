"""Failed probes: counted and named at the end of every run, and re-run by ``--retry-errors``.

A *failed probe* is a record with ``provider_error`` set: the answerer's backbone (built-in
runtime: ``provider_error: …``) or the agent under test (``--agent``: ``agent_error: …``) failed
after its bounded retries, or the provider refused to answer (``…: provider_refusal: …``: its
content filter withheld or cut the reply). Such a record enters no metric; ``failure_summary``
names every one, per state × condition, for ``summary.json`` (``failed_probes``),
``report.md`` / ``report.html`` and the console, and ``mirage run`` exits 1 while any remain.

``mirage run --retry-errors`` (same flags otherwise) re-runs exactly the failed probes of each
result folder and nothing else. The new records go to a side log, ``results.retry.jsonl``
(append-only and resumable like the main one); when the probes are done its records replace the
failed ones in ``results.jsonl`` in one atomic swap (``ResultsLog.replace``: a new file written,
fsynced and renamed over the old one). A kill at any moment leaves ``results.jsonl`` whole (the
old file or the new one) and the side log holding the probes retried so far; the next run, with
or without ``--retry-errors``, first settles that side log into ``results.jsonl`` (the swap is
idempotent, so a kill between the swap and the side log's removal is harmless).

Above: ``Probing.probe_states`` / ``pending_probes`` (``harness.mirage.run.probing``), the
report writer and ``mirage run``.
Below: the kit's results log and ``ProbeRecord``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import structlog
from pydantic import BaseModel

from harness.kit.report.tables import markdown_table
from harness.kit.results import RESULTS_FILE, ResultsLog, read_records
from harness.mirage.probing.records import ProbeRecord, RecordKey

log = structlog.get_logger(__name__)

RETRY_FILE = "results.retry.jsonl"
ERROR_WIDTH = 160  # characters of an error kept in summaries


class FailedProbe(BaseModel):
    state: str
    condition: str
    question_id: str
    repeat: int
    error: str

    @property
    def tag(self) -> str:
        return f"{self.state}.{self.condition}.{self.question_id}.r{self.repeat}"


class FailureSummary(BaseModel):
    """Every failed probe of one result folder, and their count per state and condition."""

    total: int = 0
    cells: dict[str, dict[str, int]] = {}
    probes: list[FailedProbe] = []


def _first_line(error: str) -> str:
    line = error.strip().splitlines()[0] if error.strip() else "(no detail)"
    return line if len(line) <= ERROR_WIDTH else line[: ERROR_WIDTH - 1] + "…"


def failure_summary(records: Iterable[ProbeRecord]) -> FailureSummary:
    failed = [r for r in records if r.provider_error is not None]
    cells: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for record in failed:
        cells[record.state][record.condition] += 1
    probes = [
        FailedProbe(**record.key._asdict(), error=_first_line(record.provider_error or ""))
        for record in failed
    ]
    return FailureSummary(
        total=len(failed), cells={s: dict(c) for s, c in cells.items()}, probes=probes
    )


def failures_table(summary: FailureSummary) -> str:
    """State × condition: how many probes failed, and which (question.repeat)."""
    named: dict[tuple[str, str], list[str]] = defaultdict(list)
    for probe in summary.probes:
        named[(probe.state, probe.condition)].append(f"{probe.question_id}.r{probe.repeat}")
    rows = [
        [state, condition, str(count), ", ".join(named[(state, condition)])]
        for state, conditions in summary.cells.items()
        for condition, count in sorted(conditions.items())
    ]
    return markdown_table(["State", "Cond.", "Failed", "Probes (question.repeat)"], rows)


def failures_section(summary: FailureSummary) -> str:
    """The report's section on failed probes (empty when none failed)."""
    if not summary.total:
        return ""
    errors = Counter(probe.error for probe in summary.probes)
    reasons = "\n".join(f"- {count}× `{error}`" for error, count in errors.most_common())
    return (
        "\n## Failed probes (provider and agent errors)\n\n"
        f"{summary.total} probe(s) have no answer: the answerer or the agent failed after its "
        "bounded retries, or its provider refused to answer (`provider_refusal`). They enter no "
        "metric (n leaves them out); re-run the same command with `--retry-errors` to run "
        "exactly these probes again.\n\n"
        f"{failures_table(summary)}\n\nErrors:\n\n{reasons}\n"
    )


def failures_line(folder: Path, summary: FailureSummary, shown: int = 5) -> str:
    """One console line naming a folder's failed probes."""
    tags = ", ".join(probe.tag for probe in summary.probes[:shown])
    more = f" and {summary.total - shown} more" if summary.total > shown else ""
    return (
        f"{summary.total} failed probe(s) in {folder} (provider/agent errors: {tags}{more}); "
        "re-run with --retry-errors to run them again"
    )


def folder_failures(folder: Path) -> FailureSummary:
    """The failed probes of a result folder (none when it has no results yet)."""
    results = folder / RESULTS_FILE
    if not results.is_file():
        return FailureSummary()
    return failure_summary(read_records(results, ProbeRecord))


def settle_retry(folder: Path) -> int:
    """Swap the records of a retry side log (a killed ``--retry-errors``) into
    ``results.jsonl`` and remove the side log; returns how many records were replaced."""
    side = folder / RETRY_FILE
    if not side.exists():
        return 0
    with (
        ResultsLog(folder / RESULTS_FILE, ProbeRecord) as main,
        ResultsLog(side, ProbeRecord) as retried,
    ):
        replaced = main.replace(retried.records)
        side.unlink()
    log.info("retry.settled", folder=str(folder), replaced=replaced)
    return replaced


@dataclass
class ProbeTarget:
    """Where a run's probes go and which of the planned ones it runs."""

    log: ResultsLog[ProbeRecord]
    wanted: Callable[[RecordKey], bool]


def pending_keys(folder: Path, planned: Iterable[RecordKey], retry_errors: bool) -> list[RecordKey]:
    """The planned probes a run on ``folder`` would run (reads, writes nothing)."""
    results = folder / RESULTS_FILE
    records = read_records(results, ProbeRecord) if results.is_file() else []
    side = folder / RETRY_FILE
    if side.is_file():
        retried = {r.key: r for r in read_records(side, ProbeRecord)}
        records = [retried.get(r.key, r) for r in records]
    if retry_errors:
        failed = {r.key for r in records if r.provider_error is not None}
        return [key for key in planned if key in failed]
    done = {r.key for r in records}
    return [key for key in planned if key not in done]


@contextmanager
def probe_target(
    folder: Path, retry_errors: bool, planned: Collection[RecordKey]
) -> Iterator[ProbeTarget]:
    """The log and the selection of one result folder's probes among ``planned``: the
    unrecorded ones, or with ``retry_errors`` the failed ones (into the side log, swapped into
    ``results.jsonl`` when the block ends without an error)."""
    settle_retry(folder)
    with ExitStack() as stack:
        main = stack.enter_context(ResultsLog(folder / RESULTS_FILE, ProbeRecord))
        if not retry_errors:
            yield ProbeTarget(main, lambda key: key in planned and key not in main)
            return
        failed = {r.key for r in main.records if r.provider_error is not None} & set(planned)
        missing = sum(key not in main for key in planned)
        if missing:
            log.warning("retry.unrun_probes_left", folder=str(folder), probes=missing)
        side = stack.enter_context(ResultsLog(folder / RETRY_FILE, ProbeRecord))
        yield ProbeTarget(side, lambda key: key in failed and key not in side)
        replaced = main.replace(side.records)
        (folder / RETRY_FILE).unlink()
        log.info("retry.done", folder=str(folder), retried=len(failed), replaced=replaced)
