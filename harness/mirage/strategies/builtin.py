"""The built-in runtime as the agent under test: each ``--model`` (the embedded model, a litellm
model) answers through ``BuiltinAgent``, each reference agent (``reference/*``) through its own
adapter, every one restored from the trunk family mirage builds or reuses.

Above: ``MirageRun`` (``harness.mirage.strategies.base``). Below: ``BuiltinAgent`` and the
reference agents, ``Probing.probe_agent`` (``harness.mirage.run.probing``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.kit.rundir import model_slug
from harness.mirage.references import is_reference
from harness.mirage.strategies.base import RunStages
from harness.mirage.strategies.own_trunk import OwnTrunk

if TYPE_CHECKING:
    from harness.mirage.trunk.checkpoints import Checkpoint


class BuiltinStrategy(OwnTrunk):
    attributed = False

    def answerers(self) -> list[str]:
        return self.config.answerers

    def result_dir(self, out: Path, answerer: str) -> Path:
        return out / model_slug(answerer)

    def models_to_check(self, run: RunStages) -> list[str]:
        existing = run.family.existing()
        needed = [
            model
            for model in self.answerers()
            if existing is None
            or run.probing.pending_probes(self.result_dir(run.out, model), existing)
        ]
        return needed + (self.trunk_models() if existing is None else [])

    async def probe(
        self, run: RunStages, answerer: str, checkpoints: dict[str, Checkpoint], index: Any
    ) -> Path:
        from harness.kit.agents import BuiltinAgent
        from harness.kit.attribution import AttributedAgent
        from harness.mirage.references import make_reference

        model_dir = self.result_dir(run.out, answerer)
        if is_reference(answerer):  # R_tool from the memory server's log, not the agent's word
            reference = AttributedAgent(make_reference(answerer), model_dir / "calls.jsonl")
            return await run.probing.probe_agent(reference, model_dir, checkpoints, index)
        budget = self.config.probe_output_tokens(answerer)
        agent = BuiltinAgent(
            run.backbone(answerer, budget),
            memory_url=None,
            max_output_tokens=budget,
            adapters=self.config.adapters,
        )
        return await run.probing.probe_agent(agent, model_dir, checkpoints, index)

    def provenance_roles(self) -> list[tuple[str, str]]:
        return [*(("answerer", model) for model in self.answerers()), *self.trunk_roles()]

    def priced_answerers(self) -> list[str]:
        return [model for model in self.answerers() if not is_reference(model)]
