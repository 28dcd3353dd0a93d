"""An agent we did not write as the agent under test (``--agent openai:URL`` or
``cmd:COMMAND``): restored from the trunk family mirage builds or reuses, its R_tool taken from
the memory server's log (``AttributedAgent``), one result folder named by its model (or itself).

Above: ``MirageRun`` (``harness.mirage.strategies.base``). Below: the kit's adapter factory
(``external_adapter``), ``AttributedAgent``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from harness.mirage.strategies.base import AgentKind, RunContext
from harness.mirage.strategies.own_trunk import OwnTrunk

if TYPE_CHECKING:
    from harness.kit.agents.base import AgentUnderTest


class ExternalStrategy(OwnTrunk):
    @property
    def agent_name(self) -> str:
        agent = self.config.agent
        assert agent is not None
        return agent

    @property
    def kind(self) -> AgentKind:
        config = self.config
        agent = self.agent_name + (f" (model {config.agent_model})" if config.agent_model else "")
        return AgentKind(
            attributed=True,
            own_prompt=True,
            builds_trunk=False,
            model_answerers=False,
            trunk_models=self.trunk_models(),
            priced=tuple(self.names()),
            roles=(("agent", agent), *self.trunk_roles()),
        )

    def names(self) -> list[str]:
        return [self.config.agent_model or self.agent_name]

    def agent(self, context: RunContext, answerer: str, folder: Path) -> AgentUnderTest:
        from harness.kit.agents.factory import external_adapter
        from harness.kit.attribution import AttributedAgent

        inner = external_adapter(
            self.agent_name,
            model=self.config.agent_model,
            api_key=self.config.agent_api_key,
            timeout_s=self.config.agent_timeout_s,
        )
        return AttributedAgent(inner, folder / "calls.jsonl")
