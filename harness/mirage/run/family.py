"""The checkpoint family of a run whose trunk is mirage's own: the trunk T = plant ⊕ filler
built with the trunk model (compaction on, the first summary format inline), or reused from a
previous run with the same trunk configuration; every other summary format branches its
compaction states (``S2@<format>``) from the state right before the first compaction.

Above: ``MirageRun`` (which hands the checkpoints to a strategy on mirage's trunk: ``builtin``,
``external``), the resume checks, the dry run. Below: the family's files
(``harness.mirage.trunk.checkpoints``), the trunk runner and branches
(``harness.mirage.trunk.runner``), the memory server the trunk calls.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from compaction.config import split_format
from harness.kit.memory import memory_endpoint
from harness.kit.rundir import pack_digest
from harness.mirage.run.errors import RunInputError
from harness.mirage.trunk.checkpoints import (
    BRANCH_POINT,
    SCRIPTED_TRUNK_MODEL,
    Checkpoint,
    TrunkConfig,
    family_lock,
    load_branch,
    load_family,
    mark_family_complete,
    read_checkpoint,
)
from harness.mirage.trunk.runner import TRUNK_DATE

if TYPE_CHECKING:
    from harness.mirage.run.layout import RunLayout
    from harness.mirage.trunk.runner import TrunkModels

log = structlog.get_logger(__name__)

Branches = dict[str, dict[str, Checkpoint]]
"""Summary format → its compaction states' checkpoints."""


class TrunkFamily:
    """The family of ``run``'s trunk configuration under ``<out>/checkpoints/``."""

    def __init__(self, run: RunLayout) -> None:
        self.run = run

    def trunk_config(self) -> TrunkConfig:
        run, config = self.run, self.run.config
        states = tuple((s.name, s.kind, s.eit, s.compactions) for s in run.profile.states)
        return TrunkConfig(
            pack=run.pack.name,
            pack_digest=pack_digest(run.pack.root),
            seed=config.seed,
            trunk_model=config.trunk_model,
            profile=run.profile.name,
            window=run.profile.window,
            states=states,
            summary_format=None,  # formats branch at the first compaction: not in the family
            summarizer_model=config.summarizer,
            memory_flush=config.memory_flush,
            max_output_tokens=config.trunk_output_tokens,
        )

    @property
    def directory(self) -> Path:
        return self.run.out / "checkpoints" / self.trunk_config().family_id()

    def existing(self) -> dict[str, Checkpoint] | None:
        """Every state's checkpoint by record state when the family and every format's branch
        are built, else None (builds and writes nothing)."""
        shared = load_family(self.directory, self.run.shared_states)
        if shared is None:
            return None
        branches = self._existing_branches()
        if len(branches) < len(self.run.formats):
            return None
        return self._by_state_key(shared, branches)

    def _existing_branches(self) -> Branches:
        branches = {}
        for fmt in self.run.formats:
            branch = load_branch(self.directory, self.run.compaction_states, fmt)
            if branch is not None:
                branches[fmt] = branch
        return branches

    async def checkpoints(self, index: Any) -> dict[str, Checkpoint]:
        """Every state's checkpoint by record state, building what the family lacks: the
        trunk (with the primary format inline) and the other formats' branches."""
        family_dir = self.directory
        with family_lock(family_dir):
            shared = load_family(family_dir, self.run.shared_states)
            branches = self._existing_branches() if shared is not None else {}
            missing = [f for f in self.run.formats if f not in branches]
            if shared is None or missing:
                shared, built = await self._build(index, missing, shared)
                branches.update(built)
            else:
                log.info("checkpoints_reused", family=family_dir.name)
        return self._by_state_key(shared, branches)

    def _by_state_key(
        self, shared: dict[str, Checkpoint], branches: Branches
    ) -> dict[str, Checkpoint]:
        return {
            key: shared[state] if fmt is None else branches[fmt][state]
            for key, state, fmt in self.run.state_keys()
        }

    async def _build(
        self, index: Any, formats: list[str], shared: dict[str, Checkpoint] | None
    ) -> tuple[dict[str, Checkpoint], Branches]:
        """The trunk when ``shared`` is None (compacting with ``formats[0]``), then a branch
        for every other format; returns the shared states and the formats' compaction states."""
        from runtime.mcp_client import MCPServerConfig, MCPToolset

        run = self.run
        models = self._models()
        branches: Branches = {}
        trunk_calls = run.out / "trunk-calls.jsonl"
        with memory_endpoint(run.workspace, index, trunk_calls, note_date=TRUNK_DATE) as memory:
            async with AsyncExitStack() as stack:
                tools = await stack.enter_async_context(
                    MCPToolset([MCPServerConfig(name="memory", url=memory.tagged_url("trunk"))])
                )
                if shared is None:
                    shared, branches[formats[0]] = await self._build_trunk(
                        models, tools, formats[0]
                    )
                    formats = formats[1:]
                if formats:
                    branches.update(await self._branch(models, tools, formats))
        return shared, branches

    async def _branch(self, models: TrunkModels, tools: Any, formats: list[str]) -> Branches:
        from harness.mirage.trunk.branches import branch_formats
        from harness.mirage.trunk.checkpoints import read_family_record
        from memory_server.workspace import Workspace

        run = self.run
        record, problem = read_family_record(self.directory)
        if record is None or record.summary_format is None:
            raise RunInputError(f"{self.directory}: no trunk format to branch from ({problem})")
        return await branch_formats(
            self._branch_point(formats),
            formats,
            models,
            tools,
            run.pack,
            run.profile,
            Workspace.open(run.workspace),
            record.summary_format,
            run.progress.branches(len(formats)),
            run.progress.summary_chunks(),
        )

    def _models(self) -> TrunkModels:
        from harness.mirage.trunk.runner import TrunkModels
        from harness.mirage.trunk.summarizers import SUMMARIZER_OUTPUT_TOKENS

        run, config = self.run, self.run.config
        trunk_backbone = None
        if config.trunk_model != SCRIPTED_TRUNK_MODEL:
            trunk_backbone = run.backbone(config.trunk_model, config.trunk_output_tokens)
        summarizer = (
            trunk_backbone
            if config.summarizer == config.trunk_model
            else run.backbone(config.summarizer, SUMMARIZER_OUTPUT_TOKENS)
        )
        own = {
            model: run.backbone(model, SUMMARIZER_OUTPUT_TOKENS)
            for model in (split_format(fmt)[1] for fmt in run.formats)
            if model is not None
        }
        return TrunkModels(trunk_backbone, summarizer, own)

    def _branch_point(self, formats: list[str]) -> Checkpoint:
        folder = self.directory / BRANCH_POINT
        if not folder.is_dir():
            raise RunInputError(
                f"{self.directory} has no {BRANCH_POINT} checkpoint (its first compaction came "
                f"from a context overflow in mid-turn): run {', '.join(formats)} with its own --out"
            )
        return read_checkpoint(folder)

    async def _build_trunk(
        self, models: TrunkModels, tools: Any, summary_format: str
    ) -> tuple[dict[str, Checkpoint], dict[str, Checkpoint]]:
        """The shared trunk compacting with ``summary_format``: the states before the first
        compaction, and that format's compaction states."""
        from harness.mirage.trunk.runner import PACK_VERSION_TAG, TrunkRunner, build_trunk_agent
        from memory_server.workspace import Workspace

        run, trunk, family_dir = self.run, self.trunk_config(), self.directory
        agent = build_trunk_agent(
            trunk,
            run.profile,
            models,
            tools,
            run.workspace,
            summary_format,
            run.progress.summary_chunks(),
        )
        workspace = Workspace.open(run.workspace)
        pack_version = workspace.store.tagged(PACK_VERSION_TAG)
        if pack_version is not None:  # the notes of an earlier, unfinished trunk go
            workspace.checkout(pack_version)
        runner = TrunkRunner(
            run.pack, trunk, run.profile, agent, family_dir, workspace.snapshot, summary_format
        )
        checkpoints = await runner.run(run.progress.trunk(run.profile.window))
        run.progress.finish_trunk(run.profile.window, runner.position)
        mark_family_complete(
            family_dir,
            trunk,
            turns=runner.position,
            states={name: cp.manifest.eit for name, cp in checkpoints.items()},
            summary_format=summary_format,
            branch_point=runner.branch_point is not None,
        )
        compacted = set(run.compaction_states)
        inline = {name: cp for name, cp in checkpoints.items() if name in compacted}
        return checkpoints, inline
