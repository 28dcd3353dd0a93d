"""The built-in runtime as the agent under test: each ``--model`` (the embedded model, a litellm
model) answers through ``BuiltinAgent``, each reference agent (``reference/*``) through its own
adapter, every one restored from the trunk family mirage builds or reuses.

Above: ``MirageRun`` (``harness.mirage.strategies.base``). Below: ``BuiltinAgent`` and the
reference agents, the run's backbones as ``RunContext`` hands them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from harness.mirage.references import is_reference
from harness.mirage.strategies.base import AgentKind, RunContext
from harness.mirage.strategies.own_trunk import OwnTrunk

if TYPE_CHECKING:
    from harness.kit.agents.base import AgentUnderTest


class BuiltinStrategy(OwnTrunk):
    @property
    def kind(self) -> AgentKind:
        answerers = self.names()
        return AgentKind(
            attributed=False,
            own_prompt=False,
            builds_trunk=False,
            model_answerers=True,
            trunk_models=self.trunk_models(),
            priced=tuple(model for model in answerers if not is_reference(model)),
            roles=(*(("answerer", model) for model in answerers), *self.trunk_roles()),
        )

    def names(self) -> list[str]:
        return self.config.answerers

    def agent(self, context: RunContext, answerer: str, folder: Path) -> AgentUnderTest:
        from harness.kit.agents import BuiltinAgent
        from harness.kit.attribution import AttributedAgent
        from harness.mirage.references import make_reference

        if is_reference(answerer):  # R_tool from the memory server's log, not the agent's word
            return AttributedAgent(make_reference(answerer), folder / "calls.jsonl")
        budget = self.config.probe_output_tokens(answerer)
        return BuiltinAgent(
            context.backbones.backbone(answerer, budget),
            memory_url=None,
            max_output_tokens=budget,
            adapters=self.config.adapters,
        )
