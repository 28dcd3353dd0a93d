"""One run strategy per kind of agent (``base``: the contract); ``strategy_for`` picks one."""

from __future__ import annotations

from harness.mirage.config import RunConfig
from harness.mirage.openclaw.options import AGENT as OPENCLAW_AGENT
from harness.mirage.strategies.base import (
    AgentKind,
    Answering,
    Backbones,
    Probes,
    RunContext,
    RunStrategy,
)

__all__ = [
    "AgentKind",
    "Answering",
    "Backbones",
    "Probes",
    "RunContext",
    "RunStrategy",
    "strategy_for",
]


def strategy_for(config: RunConfig) -> RunStrategy:
    """The strategy of ``config``: a named agent's, another agent we did not write, or the
    built-in runtime."""
    if config.agent == OPENCLAW_AGENT:
        from harness.mirage.strategies.openclaw import OpenClawStrategy

        return OpenClawStrategy(config)
    if config.agent is not None:
        from harness.mirage.strategies.external import ExternalStrategy

        return ExternalStrategy(config)
    from harness.mirage.strategies.builtin import BuiltinStrategy

    return BuiltinStrategy(config)
