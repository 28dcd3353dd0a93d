"""``mirage run``: the MIRAGE protocol end to end (papers/mirage.txt, Algorithm 1), one module
per stage:

1. ``resume``: the output folder can be resumed; every model still needed exists, has its
   provider's key and, served, an endpoint that answers (``backbones``); then the folder is
   locked, the summarizers named, with a warning when a summary will take several calls
   (``harness.mirage.trunk.summarizers``), and ``run.json`` (options and provenance) and
   ``study.json`` written;
2. ``layout``: what the run is (pack, depth states, summary formats, questions, folders) and the
   pack's workspace W, materialised and indexed;
3. ``family``: one checkpoint per state — the trunk T = plant ⊕ filler built with the trunk
   model (compaction on), or the family a previous run built with the same trunk configuration;
   with several summary formats, the first compacts inline and every other one branches its
   compaction states (``S2@<format>``) from the state right before the first compaction (an
   agent with its own trunk builds it through its strategy instead);
4. ``probing``: for each answerer, every state × condition × question × repeat on a fresh
   restore, records appended to ``<out>/<answerer>/results.jsonl`` (resumable);
5. reports (``harness.mirage.report``: ``summary.json``, ``report.md``, figures) per answerer.

``MirageRun`` holds this order and nothing that depends on the kind of agent: what differs is its
run strategy's (``harness.mirage.strategies``, picked once from the configuration), which the run
asks and hands values (``RunContext``); the strategy never calls back into the run.
``progress`` (the bars), ``backbones`` (models by string) and ``errors`` (the run's refusals)
serve every stage.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.mirage.config import RunConfig
from harness.mirage.run.errors import ResumeError, RunInputError, bad_files_reported
from harness.mirage.run.family import TrunkFamily
from harness.mirage.run.layout import RunLayout, select_questions
from harness.mirage.run.probing import Probing
from harness.mirage.strategies import RunContext
from harness.mirage.strategies.own_trunk import SCRIPTED_TRUNK_WINDOW

if TYPE_CHECKING:
    from harness.mirage.report import ReportFiles
    from harness.mirage.trunk.checkpoints import Checkpoint
    from memory_server.index import HybridIndex

__all__ = [
    "SCRIPTED_TRUNK_WINDOW",
    "MirageRun",
    "ResumeError",
    "RunInputError",
    "bad_files_reported",
    "select_questions",
]


class MirageRun(RunLayout):
    """One ``mirage run``: its layout (``RunLayout``), its checkpoint family and probes, and the
    stages in the protocol's order."""

    def __init__(
        self,
        config: RunConfig,
        progress: Any | None = None,
        backbones: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(config, progress, backbones)
        self.family = TrunkFamily(self)
        self.probing = Probing(self)
        self.reports: list[ReportFiles] = []  # one per result folder, once ``execute`` ends
        self._held = ExitStack()  # the output folder's run lock, while ``execute`` runs

    async def execute(self) -> list[Path]:
        """Every stage; returns the per-model result folders, each with its report (its files
        and aggregate in ``self.reports``); one run at a time per output folder."""
        with bad_files_reported(), ExitStack() as self._held:
            return await self._stages()

    async def _stages(self) -> list[Path]:
        from harness.kit.outlock import out_lock
        from harness.mirage.run.provenance import write_run_config
        from harness.mirage.run.resume import check_resumable
        from harness.mirage.run.shards import write_study

        check_resumable(self, self.family, self.family_id())
        self.models.check(self.models_to_check())  # exist, keys set, served
        self.questions()  # every chosen question's artifact has keywords: fail before the trunk
        self._held.enter_context(out_lock(self.out))  # creates --out; one run there from now
        self._say_summarizers()
        write_run_config(self)  # the options and the provenance (the first run's on a resume)
        write_study(self.config, self.pack.root, self.family_id())
        index = self.prepare_workspace()
        try:
            folders, family = [], None
            if not self.strategy.kind.builds_trunk:  # mirage's trunk family, built or reused
                family = await self.family.checkpoints(index)
            async with self.strategy.probes(self.context(index, family)) as probes:
                for answerer, folder in self.answerers().items():
                    folders.append(await self.probing.probe_model(answerer, folder, probes, index))
            self._report(folders)
            return folders
        finally:
            index.close()

    def family_id(self) -> str | None:
        """The checkpoint family ``study.json`` names: mirage's trunk family (None: the agent
        builds its own trunk)."""
        return None if self.strategy.kind.builds_trunk else self.family.directory.name

    def models_to_check(self) -> list[str]:
        """The models this run still needs, checked before any work (a finished run resumes or
        reports without them): answerers that are models with probes left (all of them while
        mirage's family is not built), and the family's models when it is not built."""
        kind = self.strategy.kind
        existing = None if kind.builds_trunk else self.family.existing()
        answering = [
            answerer
            for answerer, folder in self.answerers().items()
            if kind.model_answerers
            and (existing is None or self.probing.pending_probes(folder, existing))
        ]
        return answering + (list(kind.trunk_models) if existing is None else [])

    def context(self, index: HybridIndex, family: dict[str, Checkpoint] | None) -> RunContext:
        """What the strategy is handed for its probes: values, no way back into the run."""
        return RunContext(
            config=self.config,
            out=self.out,
            workspace=self.workspace,
            index=index,
            pack=self.pack,
            profile=self.profile,
            trunk=self.family.trunk_config(),
            backbones=self.models,
            family=family,
            planned={answerer: self.probing.planned(answerer) for answerer in self.answerers()},
            trunk_bar=lambda: self.progress.trunk(self.profile.window),
        )

    def _say_summarizers(self) -> None:
        """The run's first lines: who writes its compaction summaries, and a warning when the
        first compaction exceeds what one call of a summarizer holds (the dry run's estimate,
        ``harness.mirage.run.replay.summarizer_notes``; an estimate that cannot reach every state
        says nothing: the trunk itself will say why)."""
        from harness.mirage.run.replay import summarizer_notes
        from harness.mirage.trunk.driver import TrunkError

        try:
            notes = summarizer_notes(self)
        except TrunkError:
            return
        for line in notes:
            self.progress.say(line)

    def _report(self, folders: list[Path]) -> None:
        from harness.mirage.report import write_report
        from harness.mirage.report.attribution import write_attribution_summary

        for folder in folders:
            if self.strategy.kind.attributed:
                write_attribution_summary(folder)  # before the report, which may cite it
            self.reports.append(write_report(folder))
