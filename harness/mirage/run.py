"""``mirage run``: the MIRAGE protocol end to end (papers/mirage.txt, Algorithm 1).

1. check that the output folder can be resumed and that every model still needed exists; lock
   the folder; write ``run.json`` (options and provenance) and ``study.json``;
2. materialise the pack's workspace W and index it;
3. obtain one checkpoint per state — for the built-in runtime and external agents, build the
   trunk T = plant ⊕ filler with the trunk model (compaction on), or reuse the family of
   checkpoints a previous run built with the same trunk configuration; with several summary
   formats, the first compacts inline and every other one branches its compaction states
   (``S2@<format>``) from the state right before the first compaction; OpenClaw replays the
   trunk through its own gateway;
4. for each answerer: every state × condition × question × repeat on a fresh restore, with the
   memory server pinned to the checkpoint's workspace version and a per-probe attribution tag;
   records appended to ``<out>/<answerer>/results.jsonl`` (resumable);
5. report (``summary.json``, ``report.md``, figures) per answerer.

``MirageRun`` holds this order and nothing that depends on the kind of agent: which models are
needed, the trunk's window, the result folders, how checkpoints are obtained and each answerer
probed, and what the provenance names are its run strategy's (``harness.mirage.strategies``,
picked once from the configuration).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack, ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from compaction.config import split_format
from harness.kit.memory import memory_endpoint
from harness.kit.rundir import model_slug, pack_digest
from harness.mirage.checkpoints import (
    BRANCH_POINT,
    SCRIPTED_TRUNK_MODEL,
    Checkpoint,
    CheckpointError,
    TrunkConfig,
    checkpoint_dir_name,
    family_lock,
    load_branch,
    load_family,
    mark_family_complete,
    read_checkpoint,
)
from harness.mirage.config import RunConfig
from harness.mirage.records import ProbeRecord, RecordKey
from harness.mirage.references import is_reference
from harness.mirage.scoring import Gold, ScoringProfile, get_profile
from harness.mirage.shards import write_study
from harness.mirage.strategies import RunStrategy, strategy_for
from harness.mirage.strategies.own_trunk import SCRIPTED_TRUNK_WINDOW as SCRIPTED_TRUNK_WINDOW
from runtime.backbones import LOCAL_PREFIX

if TYPE_CHECKING:
    from harness.kit.agents.base import AgentUnderTest
    from harness.mirage.report import ReportFiles
    from harness.mirage.trunk import TrunkModels

log = structlog.get_logger(__name__)


class RunInputError(RuntimeError):
    """A file the run reads or writes is bad (pack, checkpoint, results log); the message is
    one line naming the file and what to do."""


@contextmanager
def bad_files_reported() -> Iterator[None]:
    """Turns the errors of bad pack, checkpoint and results files into ``RunInputError``."""
    from harness.kit.outlock import OutLockedError
    from harness.kit.packfiles import PackFormatError
    from harness.kit.results import ResultsLogError
    from harness.kit.rundir import RunFileError
    from harness.mirage.packs.schema import PackPathError

    try:
        yield
    except PackFormatError as exc:
        raise RunInputError(exc.summary()) from exc
    except (PackPathError, CheckpointError, ResultsLogError, OutLockedError, RunFileError) as exc:
        raise RunInputError(str(exc)) from exc


class ResumeError(ValueError):
    """An existing output folder cannot be resumed with this configuration."""


def select_questions(questions: list[Any], limit: int | None) -> list[Any]:
    """All questions, or ``limit`` of them as whole answerable/unanswerable pairs picked
    round-robin across evidence objects (so a small run still covers every object)."""
    if limit is None or limit >= len(questions):
        return list(questions)
    by_pair: dict[str, list[Any]] = defaultdict(list)
    for question in questions:
        by_pair[question.pair_id].append(question)
    by_object: dict[str, list[str]] = defaultdict(list)
    for pair_id, members in by_pair.items():
        answerable = [q for q in members if str(q.gold_answerable) == "YES"]
        by_object[answerable[0].gold_source if answerable else "NONE"].append(pair_id)
    chosen: list[Any] = []
    queues = [list(pairs) for _, pairs in sorted(by_object.items())]
    while len(chosen) < limit and any(queues):
        for queue in queues:
            if queue and len(chosen) < limit:
                chosen.extend(by_pair[queue.pop(0)])
    return chosen


class MirageRun:
    """One ``mirage run``: owns the output folder layout and the run's stages, in the protocol's
    order; what differs between kinds of agent is its strategy's (``harness.mirage.strategies``)."""

    def __init__(
        self,
        config: RunConfig,
        progress: Any | None = None,
        backbones: dict[str, Any] | None = None,
    ) -> None:
        """``backbones`` maps model strings to ready backbones (tests, or callers that build
        their own); every other model string goes through ``make_backbone``."""
        from harness.mirage.packs import load_pack
        from harness.mirage.states import depth_profile

        self.config = config
        self.strategy: RunStrategy = strategy_for(config)
        self.backbones = dict(backbones or {})
        self.out = config.out
        with bad_files_reported():
            self.pack = load_pack(config.pack)
        self.progress = progress
        self.window = self._trunk_window()
        self.profile = depth_profile(config.profile, self.window)
        self._check_format_axis()
        self.workspace = self.out / "workspace"
        self.reports: list[ReportFiles] = []  # one per result folder, once ``execute`` ends
        self._trunk_task: Any = None  # the trunk's progress task
        self._held = ExitStack()  # the output folder's run lock, while ``execute`` runs

    def _check_models(self) -> None:
        """Every model this run still needs exists, before any work: answerers with probes to
        run, and the trunk's models when the trunk must be built (a finished run resumes or
        reports without them)."""
        from runtime.backbones import check_model

        api_base = self.config.api_base
        for model in dict.fromkeys(self.strategy.models_to_check(self)):
            if model in self.backbones or is_reference(model):
                continue
            try:
                check_model(model, None if model.startswith(LOCAL_PREFIX) else api_base)
            except ValueError as exc:
                raise RunInputError(str(exc)) from exc

    @property
    def formats(self) -> list[str]:
        """The run's summary formats: ``--summary-format``'s, then the calibration arms (when on
        and the profile has a compaction state)."""
        arms = self.config.calibration_formats
        if arms and not any(s.kind == "compaction" for s in self.profile.states):
            arms = []
        return [*self.config.summary_formats, *arms]

    def probes_format(self, answerer: str, summary_format: str | None) -> bool:
        """Whether ``answerer`` is probed on the states of ``summary_format``: the calibration
        arms are the reference agents' only."""
        calibration = summary_format in self.config.calibration_formats
        return not calibration or is_reference(answerer)

    def _check_format_axis(self) -> None:
        if len(self.config.summary_formats) == 1:
            return
        compactions = [s for s in self.profile.states if s.kind == "compaction"]
        if not compactions:
            raise RunInputError(
                f"profile {self.profile.name!r} has no compaction state: several summary formats "
                "would give identical states; give one --summary-format"
            )
        later = [s.name for s in compactions if s.compactions > 1]
        if later:
            raise RunInputError(
                f"state(s) {', '.join(later)} come after a later compaction: summary formats "
                "branch only at the first one; run each format with its own --out"
            )

    def state_key(self, state: str, summary_format: str) -> str:
        """The record state of a compaction state under ``summary_format``: the state's own
        name for the primary format, ``<state>@<format>`` for the others."""
        if summary_format == self.config.primary_format:
            return state
        return checkpoint_dir_name(state, summary_format)

    def state_keys(self, answerer: str | None = None) -> list[tuple[str, str, str | None]]:
        """(record state, profile state, summary format — None before the first compaction)
        for every state of this run (of ``answerer``'s probes, when given), in probe order."""
        keys: list[tuple[str, str, str | None]] = []
        for spec in self.profile.states:
            if spec.kind != "compaction":
                keys.append((spec.name, spec.name, None))
                continue
            for fmt in self.formats:
                if answerer is None or self.probes_format(answerer, fmt):
                    keys.append((self.state_key(spec.name, fmt), spec.name, fmt))
        return keys

    def state_formats(self) -> dict[str, str]:
        """Each compaction state key of this run → its summary format."""
        return {key: fmt for key, _, fmt in self.state_keys() if fmt is not None}

    def _trunk_window(self) -> int:
        if self.config.window is not None:
            return self.config.window
        return self.strategy.trunk_window(self)

    def backbone(self, model: str, max_output_tokens: int, **extra: Any) -> Any:
        """``extra``: further ``make_backbone`` options (e.g. a local model's window)."""
        from compaction.references import REFERENCE_SUMMARIZER_PREFIX, ReferenceSummarizer
        from runtime.backbones import check_model, make_backbone

        if model in self.backbones:
            return self.backbones[model]
        if model.startswith(REFERENCE_SUMMARIZER_PREFIX):
            try:
                return ReferenceSummarizer(model)
            except ValueError as exc:
                raise RunInputError(str(exc)) from exc
        options: dict[str, Any] = {"max_output_tokens": max_output_tokens, **extra}
        if self.config.api_base and not model.startswith(LOCAL_PREFIX):
            options["api_base"] = self.config.api_base
        try:
            check_model(model, options.get("api_base"))
        except ValueError as exc:
            raise RunInputError(str(exc)) from exc
        return make_backbone(model, **options)

    def trunk_config(self) -> TrunkConfig:
        states = tuple((s.name, s.kind, s.eit, s.compactions) for s in self.profile.states)
        return TrunkConfig(
            pack=self.pack.name,
            pack_digest=pack_digest(self.pack.root),
            seed=self.config.seed,
            trunk_model=self.config.trunk_model,
            profile=self.profile.name,
            window=self.profile.window,
            states=states,
            summary_format=None,  # formats branch at the first compaction: not in the family
            summarizer_model=self.config.summarizer,
            memory_flush=self.config.memory_flush,
            max_output_tokens=self.config.trunk_output_tokens,
        )

    def prepare_workspace(self) -> Any:
        from memory_server.index import HybridIndex
        from memory_server.workspace import Workspace

        progress = self.progress
        task = progress.add_task("workspace + index", total=1) if progress else None
        if not (self.workspace / "MANIFEST.yaml").exists():
            self.pack.materialize_workspace(self.workspace)
        index = HybridIndex(Workspace.open(self.workspace))
        index.sync()
        if progress:
            progress.update(task, completed=1)
        return index

    @property
    def family_dir(self) -> Path:
        return self.out / "checkpoints" / self.trunk_config().family_id()

    def existing_checkpoints(self) -> dict[str, Checkpoint] | None:
        """Every state's checkpoint by record state when the family and every format's branch
        are built, else None (builds and writes nothing)."""
        shared = load_family(self.family_dir, self.shared_states)
        if shared is None:
            return None
        branches = self._existing_branches()
        if len(branches) < len(self.formats):
            return None
        return self._by_state_key(shared, branches)

    def _existing_branches(self) -> dict[str, dict[str, Checkpoint]]:
        compacted = [s.name for s in self.profile.states if s.kind == "compaction"]
        branches = {}
        for fmt in self.formats:
            branch = load_branch(self.family_dir, compacted, fmt)
            if branch is not None:
                branches[fmt] = branch
        return branches

    async def checkpoints(self, index: Any) -> dict[str, Checkpoint]:
        """Every state's checkpoint by record state, building what the family lacks: the
        trunk (with the primary format inline) and the other formats' branches."""
        trunk, family_dir = self.trunk_config(), self.family_dir
        with family_lock(family_dir):
            shared = load_family(family_dir, self.shared_states)
            branches = self._existing_branches() if shared is not None else {}
            missing = [f for f in self.formats if f not in branches]
            if shared is None or missing:
                shared, built = await self._build_family(trunk, family_dir, index, missing, shared)
                branches.update(built)
            else:
                log.info("checkpoints_reused", family=family_dir.name)
        return self._by_state_key(shared, branches)

    def _by_state_key(
        self, shared: dict[str, Checkpoint], branches: dict[str, dict[str, Checkpoint]]
    ) -> dict[str, Checkpoint]:
        return {
            key: shared[state] if fmt is None else branches[fmt][state]
            for key, state, fmt in self.state_keys()
        }

    async def _build_family(
        self,
        trunk: TrunkConfig,
        family_dir: Path,
        index: Any,
        formats: list[str],
        shared: dict[str, Checkpoint] | None,
    ) -> tuple[dict[str, Checkpoint], dict[str, dict[str, Checkpoint]]]:
        """The trunk when ``shared`` is None (compacting with ``formats[0]``), then a branch
        for every other format; returns the shared states and the formats' compaction states."""
        from harness.mirage.trunk import branch_formats
        from memory_server.workspace import Workspace
        from runtime.mcp_client import MCPServerConfig, MCPToolset

        models = self._trunk_models(trunk)
        branches: dict[str, dict[str, Checkpoint]] = {}
        with memory_endpoint(self.workspace, index, self.out / "trunk-calls.jsonl") as memory:
            async with AsyncExitStack() as stack:
                tools = await stack.enter_async_context(
                    MCPToolset([MCPServerConfig(name="memory", url=memory.tagged_url("trunk"))])
                )
                if shared is None:
                    shared, inline = await self._build_trunk(
                        trunk, family_dir, models, tools, formats[0]
                    )
                    branches[formats[0]] = inline
                    formats = formats[1:]
                if formats:
                    branch_point = self._branch_point(family_dir, formats)
                    branches.update(
                        await branch_formats(
                            branch_point,
                            formats,
                            models,
                            tools,
                            self.pack,
                            self.profile,
                            self._branch_progress(len(formats)),
                            Workspace.open(self.workspace).snapshot,
                        )
                    )
        return shared, branches

    @property
    def shared_states(self) -> list[str]:
        """The states every summary format shares: those before the first compaction."""
        return [s.name for s in self.profile.states if s.kind != "compaction"]

    def _trunk_models(self, trunk: TrunkConfig) -> TrunkModels:
        from harness.mirage.trunk import TrunkModels

        trunk_backbone = None
        if self.config.trunk_model != SCRIPTED_TRUNK_MODEL:
            trunk_backbone = self.backbone(self.config.trunk_model, trunk.max_output_tokens)
        summarizer = (
            trunk_backbone
            if self.config.summarizer == self.config.trunk_model
            else self.backbone(self.config.summarizer, 512)
        )
        own = {
            model: self.backbone(model, 512)
            for model in (split_format(fmt)[1] for fmt in self.formats)
            if model is not None
        }
        return TrunkModels(trunk_backbone, summarizer, own)

    def _branch_point(self, family_dir: Path, formats: list[str]) -> Checkpoint:
        folder = family_dir / BRANCH_POINT
        if not folder.is_dir():
            raise RunInputError(
                f"{family_dir} has no {BRANCH_POINT} checkpoint (its first compaction came from a "
                f"context overflow in mid-turn): run {', '.join(formats)} with its own --out"
            )
        return read_checkpoint(folder)

    async def _build_trunk(
        self,
        trunk: TrunkConfig,
        family_dir: Path,
        models: TrunkModels,
        tools: Any,
        summary_format: str,
    ) -> tuple[dict[str, Checkpoint], dict[str, Checkpoint]]:
        """The shared trunk compacting with ``summary_format``: the states before the first
        compaction, and that format's compaction states."""
        from harness.mirage.trunk import TrunkRunner, build_trunk_agent
        from memory_server.workspace import Workspace

        agent = build_trunk_agent(
            trunk, self.profile, models, tools, self.workspace, summary_format
        )
        runner = TrunkRunner(
            self.pack,
            trunk,
            self.profile,
            agent,
            family_dir,
            Workspace.open(self.workspace).snapshot,
            summary_format,
        )
        checkpoints = await runner.run(self.trunk_progress())
        self.finish_trunk_progress(runner.position)
        mark_family_complete(
            family_dir,
            trunk,
            turns=runner.position,
            states={name: cp.manifest.eit for name, cp in checkpoints.items()},
            summary_format=summary_format,
            branch_point=runner.branch_point is not None,
        )
        compacted = {s.name for s in self.profile.states if s.kind == "compaction"}
        inline = {name: cp for name, cp in checkpoints.items() if name in compacted}
        return checkpoints, inline

    def _branch_progress(self, total: int) -> Callable[[str], None] | None:
        progress = self.progress
        if progress is None:
            return None
        task = progress.add_task("summary formats (S2 branches)", total=total)
        return lambda _format: progress.advance(task)

    def finish_trunk_progress(self, turns: int) -> None:
        """The trunk's bar ends when every state is reached, short of the window."""
        if self.progress is not None and self._trunk_task is not None:
            self.progress.update(
                self._trunk_task,
                completed=self.profile.window,
                description=f"trunk: {turns} turns, every state reached",
            )

    def trunk_progress(self) -> Callable[[int, int], None] | None:
        progress = self.progress
        if progress is None:
            return None
        task = progress.add_task("trunk (EIT)", total=self.profile.window)
        self._trunk_task = task

        def update(position: int, eit: int) -> None:
            progress.update(
                task,
                completed=min(eit, self.profile.window),
                description=f"trunk turn {position} · EIT {eit}",
            )

        return update

    def questions(self) -> list[tuple[str, str, Gold]]:
        chosen = select_questions(list(self.pack.questions), self.config.limit)
        return [(q.id, q.question, self.pack.gold(q)) for q in chosen]

    @property
    def scoring(self) -> ScoringProfile:
        return get_profile(self.config.scoring)

    def resolver(self) -> Any:
        from memory_server.workspace import Workspace

        return self.scoring.source_resolver(Workspace.open(self.workspace))

    def result_dirs(self) -> list[Path]:
        """The per-answerer result folders this run writes."""
        strategy = self.strategy
        return [strategy.result_dir(self.out, answerer) for answerer in strategy.answerers()]

    def check_resumable(self) -> None:
        """Refuse to resume result folders scored under another profile (their prompts differ
        too, so the records would not be comparable) or whose S2 came from another format."""
        from harness.kit.results import RESULTS_FILE, read_records
        from harness.mirage.shards import shard_conflict

        conflict = shard_conflict(self.out, self.config.shard)
        if conflict is not None:
            raise ResumeError(conflict)
        if self.config.retry_errors and not any(
            (folder / RESULTS_FILE).is_file() for folder in self.result_dirs()
        ):
            raise ResumeError(f"{self.out} has no results to retry: run without --retry-errors")
        formats = self.state_formats()
        recorded: dict[Path, list[ProbeRecord]] = {}
        for folder in self.result_dirs():
            if not (folder / RESULTS_FILE).is_file():
                continue
            records = recorded[folder] = read_records(folder, ProbeRecord)
            other = sorted({r.scoring for r in records} - {self.config.scoring})
            if other:
                raise ResumeError(
                    f"{folder / RESULTS_FILE} holds records of scoring profile "
                    f"{', '.join(other)}; resume with --scoring {other[0]} or use a new --out"
                )
            for record in records:
                expected = formats.get(record.state)
                if record.summary_format not in (None, expected):
                    raise ResumeError(
                        f"{folder / RESULTS_FILE} holds {record.state} records under summary "
                        f"format {record.summary_format}, this run's {record.state} is {expected}: "
                        f"give --summary-format {record.summary_format} first or use a new --out"
                    )
        self._check_family_read_back(recorded)

    def _check_family_read_back(self, recorded: dict[Path, list[ProbeRecord]]) -> None:
        """A finished family is read back (strictly, each checkpoint against what names it)
        before anything is written, and the records already probed on it must name its
        checkpoints: a checkpoint replaced since (hashes and all) is refused, not probed."""
        from harness.kit.results import RESULTS_FILE
        from harness.mirage.checkpoints import FAMILY_FILE

        if not (self.family_dir / FAMILY_FILE).is_file():
            return
        checkpoints = self.existing_checkpoints()
        if checkpoints is None:
            return
        for folder, records in recorded.items():
            for record in records:
                checkpoint = checkpoints.get(record.state)
                named = record.checkpoint_sha256
                if checkpoint is None or named in (None, checkpoint.snapshot_sha256):
                    continue
                raise ResumeError(
                    f"{folder / RESULTS_FILE}: its {record.state} records were probed on "
                    f"checkpoint {str(named)[:12]}, {checkpoint.directory} holds "
                    f"{checkpoint.snapshot_sha256[:12]}: the checkpoint changed since they were "
                    "recorded; restore it, or use a new --out"
                )

    async def probe_model(self, model: str, checkpoints: dict[str, Checkpoint], index: Any) -> Path:
        """Every unfinished probe of one answerer (``model``: a model string, a reference agent,
        or the agent under test as ``answerers`` names it), end to end; its result folder."""
        own = {key for key, _, _ in self.state_keys(model)}
        mine = {key: cp for key, cp in checkpoints.items() if key in own}
        return await self.strategy.probe(self, model, mine, index)

    async def probe_agent(
        self, agent: AgentUnderTest, model_dir: Path, checkpoints: dict[str, Checkpoint], index: Any
    ) -> Path:
        """Every probe of ``agent`` in state-major order, the memory server pinned per state;
        the compaction summaries of the states go to ``summaries.json`` and the visibility map
        of the checkpoints to ``visibility.json``, for the report."""
        from harness.mirage.report.formats import collect_summaries, write_summaries
        from harness.mirage.visibility import write_run_visibility

        with memory_endpoint(
            self.workspace,
            index,
            model_dir / "calls.jsonl",
            url=self.config.memory_url,
            token=self.config.memory_token,
        ) as memory:
            agent.bind_memory(memory.tagged_url)
            model_dir.mkdir(parents=True, exist_ok=True)
            write_summaries(model_dir, collect_summaries(checkpoints))
            write_run_visibility(model_dir, checkpoints, self.workspace, self.pack)
            try:
                await self.probe_states(agent, model_dir, checkpoints, memory)
            finally:
                await agent.aclose()  # its connections to the memory server, before it stops
        return model_dir

    def pending_probes(self, model_dir: Path, checkpoints: dict[str, Checkpoint]) -> int:
        """How many probes of ``checkpoints`` this run would still run in ``model_dir``: those
        of its shard with no record yet, or with ``--retry-errors`` the failed ones."""
        from harness.mirage.retry import pending_keys

        planned = self.planned_keys(checkpoints)
        return len(pending_keys(model_dir, planned, self.config.retry_errors))

    def planned_keys(self, checkpoints: dict[str, Checkpoint]) -> list[RecordKey]:
        """The keys of every probe of this run's shard (the whole plan when unsharded)."""
        from harness.mirage.probes import plan_probes
        from harness.mirage.shards import shard_keys

        config = self.config
        tasks = plan_probes(checkpoints, self.questions(), config.conditions, config.repeats)
        return shard_keys(tasks, config.shard)

    async def probe_states(
        self,
        agent: AgentUnderTest,
        model_dir: Path,
        checkpoints: dict[str, Checkpoint],
        memory: Any,
    ) -> None:
        """Every unfinished probe of ``agent``, state by state, ``memory`` pinned per state."""
        from harness.kit.rundir import write_workspace_link
        from harness.mirage.probes import plan_probes, run_probes
        from harness.mirage.retry import probe_target

        questions = self.questions()
        resolver = self.resolver()
        model_dir.mkdir(parents=True, exist_ok=True)
        write_workspace_link(model_dir, self.workspace)
        planned = set(self.planned_keys(checkpoints))
        with probe_target(model_dir, self.config.retry_errors, planned) as target:
            for state, checkpoint in checkpoints.items():
                tasks = [
                    task
                    for task in plan_probes(
                        {state: checkpoint}, questions, self.config.conditions, self.config.repeats
                    )
                    if target.wanted(task.key)
                ]
                if not tasks:
                    continue
                memory.pin(checkpoint.manifest.workspace_version)
                await run_probes(
                    agent,
                    tasks,
                    target.log,
                    resolver,
                    self.scoring,
                    concurrency=self.config.concurrency,
                    on_done=self._probe_progress(agent.name, state, len(tasks)),
                )

    def _probe_progress(self, model: str, state: str, total: int) -> Callable[[Any], None] | None:
        progress = self.progress
        if progress is None:
            return None
        task = progress.add_task(f"{model_slug(model)} · {state}", total=total)
        return lambda _record: progress.advance(task)

    def probe_tally(self) -> tuple[int, int]:
        """(probes kept, probes planned) over this run's result folders, as the results logs
        hold them now: what an interrupted run says it kept (checkpoints not needed)."""
        from harness.kit.results import RESULTS_FILE, read_records
        from harness.mirage.shards import shard_slice

        questions, config = self.questions(), self.config
        kept = total = 0
        for answerer in self.strategy.answerers():
            keys = [
                RecordKey(state, condition, question_id, repeat)
                for state, _, _ in self.state_keys(answerer)
                for condition in config.conditions
                for question_id, _, _ in questions
                for repeat in range(config.repeats)
            ]
            planned = set(shard_slice(keys, config.shard))
            folder = self.strategy.result_dir(self.out, answerer)
            total += len(planned)
            if (folder / RESULTS_FILE).is_file():
                kept += len({r.key for r in read_records(folder, ProbeRecord)} & planned)
        return kept, total

    async def execute(self) -> list[Path]:
        """Every stage; returns the per-model result folders, each with its report (its files
        and aggregate in ``self.reports``); one run at a time per output folder."""
        with bad_files_reported(), ExitStack() as self._held:
            return await self._stages()

    async def _stages(self) -> list[Path]:
        from harness.kit.outlock import out_lock
        from harness.mirage.provenance import write_run_config
        from harness.mirage.report import write_report
        from harness.mirage.report.attribution import write_attribution_summary

        self.check_resumable()
        self._check_models()
        self.questions()  # every chosen question's artifact has keywords: fail before the trunk
        self._held.enter_context(out_lock(self.out))  # creates --out; one run there from now
        write_run_config(self)  # the options and the provenance (the first run's on a resume)
        write_study(self.config, self.pack.root, self.strategy.family(self))
        index = self.prepare_workspace()
        try:
            folders = []
            async with self.strategy.checkpoints(self, index) as checkpoints:
                for answerer in self.strategy.answerers():
                    folders.append(await self.probe_model(answerer, checkpoints, index))
            for folder in folders:
                if self.strategy.attributed:
                    write_attribution_summary(folder)  # before the report, which may cite it
                self.reports.append(write_report(folder))
            return folders
        finally:
            index.close()
