"""An agent we did not write as the agent under test (``--agent openai:URL`` or
``cmd:COMMAND``): restored from the trunk family mirage builds or reuses, its R_tool taken from
the memory server's log (``AttributedAgent``), one result folder named by its model (or itself).

Above: ``MirageRun`` (``harness.mirage.strategies.base``). Below: the kit's adapter factory
(``external_adapter``), ``Probing.probe_agent`` (``harness.mirage.run.probing``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.kit.rundir import model_slug
from harness.mirage.strategies.base import RunStages
from harness.mirage.strategies.own_trunk import OwnTrunk

if TYPE_CHECKING:
    from harness.mirage.trunk.checkpoints import Checkpoint


class ExternalStrategy(OwnTrunk):
    attributed = True
    own_prompt = True

    @property
    def agent(self) -> str:
        agent = self.config.agent
        assert agent is not None
        return agent

    def answerers(self) -> list[str]:
        return [self.config.agent_model or self.agent]

    def result_dir(self, out: Path, answerer: str) -> Path:
        return out / model_slug(answerer)

    def models_to_check(self, run: RunStages) -> list[str]:
        return self.trunk_models() if run.family.existing() is None else []

    async def probe(
        self, run: RunStages, answerer: str, checkpoints: dict[str, Checkpoint], index: Any
    ) -> Path:
        from harness.kit.agents.factory import external_adapter
        from harness.kit.attribution import AttributedAgent

        model_dir = self.result_dir(run.out, answerer)
        inner = external_adapter(
            self.agent,
            model=self.config.agent_model,
            api_key=self.config.agent_api_key,
            timeout_s=self.config.agent_timeout_s,
        )
        agent = AttributedAgent(inner, model_dir / "calls.jsonl")
        return await run.probing.probe_agent(agent, model_dir, checkpoints, index)

    def provenance_roles(self) -> list[tuple[str, str]]:
        config = self.config
        agent = self.agent + (f" (model {config.agent_model})" if config.agent_model else "")
        return [("agent", agent), *self.trunk_roles()]

    def priced_answerers(self) -> list[str]:
        return self.answerers()
