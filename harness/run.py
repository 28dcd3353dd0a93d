"""``mirage run``: the MIRAGE protocol end to end (papers/mirage.txt, Algorithm 1).

1. materialise the pack's workspace W and index it;
2. build the trunk T = plant ⊕ filler with the trunk model (compaction on) and capture one
   checkpoint per state — or reuse the family of checkpoints a previous run built with the same
   trunk configuration;
3. for each answerer model: every state × condition × question × repeat on a fresh restore,
   with the memory server pinned to the checkpoint's workspace version and a per-probe
   attribution tag; records appended to ``<out>/<model>/results.jsonl`` (resumable);
4. report (``summary.json``, ``report.md``, figures) per model.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, Field

from harness.checkpoints import Checkpoint, TrunkConfig, load_family, mark_family_complete
from harness.protocol import CONDITIONS, Condition
from harness.scoring import Gold

log = structlog.get_logger(__name__)

DEFAULT_MODEL = "local/smollm2-135m"
SCRIPTED_TRUNK_WINDOW = 8192


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pack: str = "mirage-core"
    models: list[str] = Field(default_factory=lambda: [DEFAULT_MODEL])
    trunk_model: str = DEFAULT_MODEL
    summarizer_model: str | None = None
    profile: str = "scaled"
    conditions: list[Condition] = Field(default_factory=lambda: list(CONDITIONS))
    repeats: int = Field(default=1, ge=1)
    limit: int | None = Field(default=None, ge=2)
    summary_format: str = "verbatim"
    memory_flush: bool = True
    seed: int = 0
    out: Path = Path("mirage-runs/default")
    concurrency: int = Field(default=1, ge=1)
    trunk_max_output_tokens: int = Field(default=96, ge=8)
    probe_max_output_tokens: int = Field(default=64, ge=8)
    adapters: bool = False
    api_base: str | None = None
    window: int | None = Field(
        default=None,
        ge=1024,
        description="Trunk window; default the trunk model's own (8192 for a scripted trunk).",
    )

    @property
    def summarizer(self) -> str:
        if self.summarizer_model:
            return self.summarizer_model
        return DEFAULT_MODEL if self.trunk_model == "scripted" else self.trunk_model


def model_slug(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("_") or "model"


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


def pack_digest(pack_root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in pack_root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(pack_root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@contextmanager
def memory_http(
    workspace: Path, index: Any, version: str | None, call_log: Path
) -> Iterator[Callable[[str], str]]:
    """The memory server over HTTP on loopback, pinned to ``version``; yields tag → URL."""
    from memory_server.http import HttpServerThread
    from memory_server.server import build_server
    from memory_server.service import MemoryService
    from memory_server.workspace import Workspace

    service = MemoryService(Workspace.open(workspace), index, call_log=call_log, version=version)
    server = build_server(workspace, service=service, transport="streamable-http")
    with HttpServerThread(server) as http:
        yield http.tagged_url


class MirageRun:
    """One ``mirage run``: owns the output folder layout and the run's stages."""

    def __init__(self, config: RunConfig, progress: Any | None = None) -> None:
        from harness.packs import load_pack
        from harness.states import resolve_profile

        self.config = config
        self.out = config.out
        self.pack = load_pack(config.pack)
        self.progress = progress
        self.window = self._trunk_window()
        self.profile = resolve_profile(config.profile, self.window)
        self.workspace = self.out / "workspace"

    def _trunk_window(self) -> int:
        if self.config.window is not None:
            return self.config.window
        if self.config.trunk_model == "scripted":
            return SCRIPTED_TRUNK_WINDOW
        backbone = self._backbone(self.config.trunk_model, self.config.trunk_max_output_tokens)
        return int(backbone.context_window)

    def _backbone(self, model: str, max_output_tokens: int) -> Any:
        from runtime.backbones import make_backbone

        options: dict[str, Any] = {"max_output_tokens": max_output_tokens}
        if self.config.api_base and not model.startswith("local/"):
            options["api_base"] = self.config.api_base
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
            summary_format=self.config.summary_format,
            summarizer_model=self.config.summarizer,
            memory_flush=self.config.memory_flush,
            max_output_tokens=self.config.trunk_max_output_tokens,
        )

    def prepare_workspace(self) -> Any:
        from memory_server.index import HybridIndex
        from memory_server.workspace import Workspace

        if not (self.workspace / "MANIFEST.yaml").exists():
            self.pack.materialize_workspace(self.workspace)
        index = HybridIndex(Workspace.open(self.workspace))
        index.sync()
        return index

    async def checkpoints(self, index: Any) -> dict[str, Checkpoint]:
        trunk = self.trunk_config()
        family_dir = self.out / "checkpoints" / trunk.family_id()
        existing = load_family(family_dir, [s.name for s in self.profile.states])
        if existing is not None:
            log.info("checkpoints_reused", family=family_dir.name)
            return existing
        return await self._build_trunk(trunk, family_dir, index)

    async def _build_trunk(
        self, trunk: TrunkConfig, family_dir: Path, index: Any
    ) -> dict[str, Checkpoint]:
        from harness.trunk import TrunkRunner, build_trunk_agent
        from memory_server.workspace import Workspace
        from runtime.mcp_client import MCPServerConfig, MCPToolset

        workspace = Workspace.open(self.workspace)
        trunk_backbone = None
        if self.config.trunk_model != "scripted":
            trunk_backbone = self._backbone(self.config.trunk_model, trunk.max_output_tokens)
        summarizer = (
            trunk_backbone
            if self.config.summarizer == self.config.trunk_model
            else self._backbone(self.config.summarizer, 512)
        )
        with memory_http(self.workspace, index, None, self.out / "trunk-calls.jsonl") as url:
            async with AsyncExitStack() as stack:
                tools = await stack.enter_async_context(
                    MCPToolset([MCPServerConfig(name="memory", url=url("trunk"))])
                )
                agent = build_trunk_agent(
                    trunk, self.profile, trunk_backbone, summarizer, tools, self.workspace
                )
                runner = TrunkRunner(
                    self.pack, trunk, self.profile, agent, family_dir, workspace.snapshot
                )
                checkpoints = await runner.run(self._trunk_progress())
        mark_family_complete(
            family_dir,
            trunk,
            {
                "turns": runner.position,
                "states": {name: cp.manifest.eit for name, cp in checkpoints.items()},
            },
        )
        return checkpoints

    def _trunk_progress(self) -> Callable[[int, int], None] | None:
        progress = self.progress
        if progress is None:
            return None
        task = progress.add_task("trunk (EIT)", total=self.profile.window)

        def update(position: int, eit: int) -> None:
            progress.update(
                task,
                completed=min(eit, self.profile.window),
                description=f"trunk turn {position} · EIT {eit}",
            )

        return update

    def questions(self) -> list[tuple[str, str, Gold]]:
        chosen = select_questions(list(self.pack.questions), self.config.limit)
        return [(q.id, q.question, Gold.from_question(q)) for q in chosen]

    def resolver(self) -> Any:
        from harness.scoring import ChainResolver, KnownIdResolver
        from memory_server.workspace import Workspace

        return ChainResolver(Workspace.open(self.workspace), KnownIdResolver(self.pack.artifacts))

    async def probe_model(self, model: str, checkpoints: dict[str, Checkpoint], index: Any) -> Path:
        from harness.agents import BuiltinAgent
        from harness.probes import plan_probes, run_probes
        from harness.records import ResultsLog

        model_dir = self.out / model_slug(model)
        backbone = self._backbone(model, self.config.probe_max_output_tokens)
        agent = BuiltinAgent(
            backbone,
            memory_url=None,
            max_output_tokens=self.config.probe_max_output_tokens,
            adapters=self.config.adapters,
        )
        questions = self.questions()
        resolver = self.resolver()
        with ResultsLog(model_dir / "results.jsonl") as results:
            for state, checkpoint in checkpoints.items():
                tasks = list(
                    plan_probes(
                        {state: checkpoint}, questions, self.config.conditions, self.config.repeats
                    )
                )
                if all(task.key in results for task in tasks):
                    continue
                version = checkpoint.manifest.workspace_version
                with memory_http(self.workspace, index, version, model_dir / "calls.jsonl") as url:
                    agent.memory_url = url
                    await run_probes(
                        agent,
                        tasks,
                        results,
                        resolver,
                        concurrency=self.config.concurrency,
                        on_done=self._probe_progress(model, state, len(tasks)),
                    )
        return model_dir

    def _probe_progress(self, model: str, state: str, total: int) -> Callable[[Any], None] | None:
        progress = self.progress
        if progress is None:
            return None
        task = progress.add_task(f"{model_slug(model)} · {state}", total=total)
        return lambda _record: progress.advance(task)

    async def execute(self) -> list[Path]:
        """Every stage; returns the per-model result folders (each with its report)."""
        from harness.report import write_report

        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "run.json").write_text(self.config.model_dump_json(indent=2))
        index = self.prepare_workspace()
        try:
            checkpoints = await self.checkpoints(index)
            folders = []
            for model in self.config.models:
                folder = await self.probe_model(model, checkpoints, index)
                write_report(folder)
                folders.append(folder)
            return folders
        finally:
            index.close()
