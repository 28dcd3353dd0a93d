"""The probes of a built MIRAGE checkpoint family as an Inspect task (``mirage/probe``).

Above: the ``@task`` registered for ``inspect eval mirage/probe -T run=DIR``
(``mirage.inspect_tasks``). Below: the run folder's options, pack and checkpoint family
(``harness.mirage.run.MirageRun``: read, never built here), the probe plan and the records
(``harness.mirage.probing.loop``: ``plan_probes``, ``record_for``), the restore an agent we did not
write receives (``harness.kit.agents.transcript``), the memory server over HTTP and its call
log attribution (``harness.kit.memory``, ``harness.kit.attribution``), and Inspect.

Per sample (one probe: ``STATE.CONDITION.QUESTION.rREPEAT``, its input the probe prompt) the
setup solver puts the checkpoint's transcript before the prompt — a fresh restore — and offers
the memory server as MCP tools at the probe's own tagged URL; the user's solver answers; the
scorer builds the probe's ``ProbeReply`` as the ``cmd:`` adapter would (the reply, the tool calls
the solver reports, the restored context), attributes the memory server's calls by tag, and
writes mirage's own record with ``record_for`` to ``OUT/results.jsonl``: the records a
``mirage run --agent cmd:`` gives with the same replies.
"""

from __future__ import annotations

import atexit
import json
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import structlog
from inspect_ai.dataset import Sample
from inspect_ai.model import ChatMessageAssistant, messages_from_openai
from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, metric, scorer
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.tool import mcp_server_http

from harness.kit.agents.base import ProbeReply, ProbeUsage, ToolCallRecord
from harness.kit.agents.transcript import RestoredContext, TranscriptSource, reported_call
from harness.kit.attribution import CallAttributor, attributed_reply
from harness.kit.memory import MemoryEndpoint, memory_endpoint
from harness.kit.results import ResultsLog
from harness.kit.rundir import RUN_CONFIG, model_slug, write_workspace_link
from harness.mirage.config import RunConfig
from harness.mirage.inspect.scores import CELL_METRICS, gold_target, record_score
from harness.mirage.probing.loop import ProbeTask, plan_probes, record_for
from harness.mirage.probing.records import ProbeRecord
from harness.mirage.report.aggregate import aggregate
from harness.mirage.run.provenance import read_run_file

log = structlog.get_logger(__name__)

CALL_LOG = "calls.jsonl"
MEMORY_SERVER_NAME = "mirage-memory"


class TaskInputError(ValueError):
    """A run folder the task cannot probe (no run.json, no finished checkpoint family)."""


def run_options(run: Path) -> RunConfig:
    """The options ``mirage run`` recorded in ``run/run.json``, read strictly, its --out being
    ``run`` wherever the folder now is."""
    path = run / RUN_CONFIG
    if not path.is_file():
        raise TaskInputError(f"{run} has no {RUN_CONFIG}: not the --out of a mirage run")
    read_run_file(path)  # strict: options and provenance block, or ProvenanceError
    options = json.loads(path.read_bytes())
    options.pop("provenance", None)
    options["out"] = str(run)
    return RunConfig.model_validate(options)


class ProbeSession:
    """What the probes of one eval share: the run's checkpoints, questions and scoring, one
    memory endpoint per workspace version, the call attribution and the results log. Opened
    when the task is created, closed when its last probe is scored, or at exit (Inspect has no
    end-of-task hook for a task's own resources)."""

    def __init__(self, run: Path, name: str, out: Path | None = None) -> None:
        from harness.mirage.run import MirageRun

        self.name = name
        self.run = MirageRun(run_options(run))
        checkpoints = self.run.family.existing()
        if checkpoints is None:
            raise TaskInputError(
                f"{run} has no finished checkpoint family: build it with mirage run first"
            )
        self.checkpoints = checkpoints
        self.out = out or run / model_slug(name)
        self.profile = self.run.scoring
        config = self.run.config
        questions = self.run.questions()
        self.tasks = {
            task.tag: task
            for task in plan_probes(checkpoints, questions, config.conditions, config.repeats)
        }
        self._stack = ExitStack()
        self._transcripts = TranscriptSource()
        self._started: dict[str, tuple[float, RestoredContext]] = {}
        self._open()
        self._unscored = len(self.samples())
        atexit.register(self.close)

    def _open(self) -> None:
        from harness.mirage.probing.visibility import write_run_visibility
        from harness.mirage.report.formats import collect_summaries, write_summaries

        self.out.mkdir(parents=True, exist_ok=True)
        index = self.run.prepare_workspace()
        self._stack.callback(index.close)
        self.results = self._stack.enter_context(
            ResultsLog(self.out / "results.jsonl", ProbeRecord)
        )
        versions = {cp.manifest.workspace_version for cp in self.checkpoints.values()}
        self.resolvers = {version: self.run.resolver(version) for version in versions}
        self.endpoints: dict[str | None, MemoryEndpoint] = {}
        for version in sorted(versions, key=str):
            endpoint = self._stack.enter_context(
                memory_endpoint(self.run.workspace, index, self.out / CALL_LOG)
            )
            endpoint.pin(version)
            self.endpoints[version] = endpoint
        self.attributor = CallAttributor(self.out / CALL_LOG)
        write_workspace_link(self.out, self.run.workspace)
        write_summaries(self.out, collect_summaries(self.checkpoints))
        write_run_visibility(self.out, self.checkpoints, self.run.workspace, self.run.pack)

    def close(self) -> None:
        self._stack.close()

    def samples(self) -> list[Sample]:
        """One sample per probe not yet recorded in ``OUT/results.jsonl`` (a rerun resumes)."""
        return [
            Sample(
                id=tag,
                input=self.profile.prompt(task.question, task.condition),
                target=gold_target(task.gold),
                metadata={
                    "state": task.key.state,
                    "condition": task.key.condition,
                    "question_id": task.key.question_id,
                    "repeat": task.key.repeat,
                    "tag": tag,
                },
            )
            for tag, task in self.tasks.items()
            if task.key not in self.results
        ]

    def memory_url(self, task: ProbeTask) -> str:
        return self.endpoints[task.checkpoint.manifest.workspace_version].tagged_url(task.tag)

    def begin(self, task: ProbeTask) -> RestoredContext:
        """A fresh restore of the probe's checkpoint; its memory calls are counted from now."""
        restored = self._transcripts.restore(task.checkpoint)
        self.attributor.begin(task.tag)
        self._started[task.tag] = (time.perf_counter(), restored)
        return restored

    def finish(self, task: ProbeTask, state: TaskState) -> ProbeRecord:
        """The probe's record, as ``mirage run --agent cmd:`` writes it, appended to the log."""
        started, restored = self._started.pop(task.tag)
        tagged, untagged = self.attributor.end(task.tag)
        reply = solver_reply(state, restored, time.perf_counter() - started)
        reply = attributed_reply(reply, task.tag, tagged, untagged)
        resolver = self.resolvers[task.checkpoint.manifest.workspace_version]
        record = record_for(task, reply, resolver, self.name, self.profile)
        self.results.append(record)
        self._unscored -= 1
        if self._unscored <= 0:  # the last probe: release the log, the servers, the index
            self.close()
        return record


def _reported_calls(state: TaskState, history: int) -> list[ToolCallRecord]:
    """The tool calls the solver's own messages report (after the restored history)."""
    calls = []
    for message in state.messages[history:]:
        if isinstance(message, ChatMessageAssistant):
            for call in message.tool_calls or []:
                calls.append(reported_call({"name": call.function, "arguments": call.arguments}))
    return calls


def _usage(state: TaskState) -> ProbeUsage:
    usage = state.output.usage
    if usage is None:
        return ProbeUsage()
    return ProbeUsage(
        input_tokens=usage.input_tokens,
        cached_tokens=usage.input_tokens_cache_read,
        cache_write_tokens=usage.input_tokens_cache_write,
        output_tokens=usage.output_tokens,
    )


def solver_reply(state: TaskState, restored: RestoredContext, latency_s: float) -> ProbeReply:
    """The solver's answer as the ``cmd:`` adapter reads a command's: its reply text, the tool
    calls it reports, its usage, and the restore it started from."""
    common: dict[str, Any] = {
        "latency_s": latency_s,
        "restored_sha256": restored.restored_sha256,
        "context": restored.context,
    }
    if state.output.error:
        return ProbeReply(error=f"agent_error: inspect: {state.output.error}", **common)
    return ProbeReply(
        text=state.output.completion,
        tool_calls=_reported_calls(state, len(restored.messages)),
        usage=_usage(state),
        trace={"tool_calls_reported": True},
        **common,
    )


@solver
def restore_checkpoint(session: ProbeSession) -> Solver:
    """Put the probe's checkpoint transcript before its prompt and offer the memory server's
    tools at the probe's own URL."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        task = session.tasks[str(state.sample_id)]
        restored = session.begin(task)
        history = await messages_from_openai(list(restored.messages))  # type: ignore[arg-type]
        state.messages = [*history, *state.messages]
        memory = mcp_server_http(name=MEMORY_SERVER_NAME, url=session.memory_url(task))
        state.tools = [*state.tools, *(await memory.tools())]
        return state

    return solve


@metric
def mirage_cells() -> Metric:
    """``summary.json``'s cell figures (``METRIC/STATE/CONDITION``), aggregated by mirage from
    the records the scores carry."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        records = [
            ProbeRecord.model_validate(s.score.metadata["record"])
            for s in scores
            if s.score.metadata and "record" in s.score.metadata
        ]
        figures: dict[str, float] = {}
        for state, conditions in aggregate(records).summary()["states"].items():  # type: ignore[attr-defined]
            for condition, cell in conditions.items():
                for name in CELL_METRICS:
                    if cell[name] is not None:
                        figures[f"{name}/{state}/{condition}"] = cell[name]
        return figures

    return compute


@scorer(metrics=[mirage_cells()], name="mirage")
def mirage_scorer(session: ProbeSession) -> Scorer:
    """mirage's own scoring: the probe's record (indicators, retrieval path) as its score."""

    async def score(state: TaskState, target: Target) -> Score:
        record = session.finish(session.tasks[str(state.sample_id)], state)
        return record_score(record)

    return score
