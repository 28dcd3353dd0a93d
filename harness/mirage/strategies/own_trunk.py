"""What the built-in runtime and an external agent share: the trunk mirage builds (or reuses)
with its trunk model and summarizer, restored per probe; each answerer's agent bound by the run
to a memory server of its own.

Above: the ``builtin`` and ``external`` strategies. Below: the contract
(``harness.mirage.strategies.base``), the trunk's constants, the summary formats' names.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from compaction.config import split_format
from harness.kit.rundir import model_slug
from harness.mirage.strategies.base import Answering, Backbones, Probes, RunContext, RunStrategy
from harness.mirage.trunk.checkpoints import SCRIPTED_TRUNK_MODEL

if TYPE_CHECKING:
    from harness.kit.agents.base import AgentUnderTest

SCRIPTED_TRUNK_WINDOW = 8192


class OwnTrunk(RunStrategy):
    """A strategy whose trunk is mirage's own: the run hands it the family's checkpoints."""

    def answerers(self, out: Path) -> dict[str, Path]:
        return {answerer: out / model_slug(answerer) for answerer in self.names()}

    @abstractmethod
    def names(self) -> list[str]:
        """The answerers, in order."""

    @abstractmethod
    def agent(self, context: RunContext, answerer: str, folder: Path) -> AgentUnderTest:
        """The agent answering ``answerer``'s probes (its result folder: ``folder``)."""

    def trunk_window(self, backbones: Backbones) -> int:
        config = self.config
        if config.trunk_model == SCRIPTED_TRUNK_MODEL:
            return SCRIPTED_TRUNK_WINDOW
        backbone = backbones.backbone(config.trunk_model, config.trunk_output_tokens)
        return int(backbone.context_window)

    def trunk_models(self) -> tuple[str, ...]:
        """The models building the trunk and its format branches needs: the trunk model (none
        for a scripted trunk), the summarizer, and each summary format's own summarizer."""
        config = self.config
        trunk = [] if config.trunk_model == SCRIPTED_TRUNK_MODEL else [config.trunk_model]
        own = [split_format(entry)[1] for entry in config.summary_formats]
        return (*trunk, config.summarizer, *(model for model in own if model is not None))

    def trunk_roles(self) -> tuple[tuple[str, str], ...]:
        return (("trunk", self.config.trunk_model), ("summarizer", self.config.summarizer))

    @asynccontextmanager
    async def probes(self, context: RunContext) -> AsyncIterator[Probes]:
        family = context.family
        assert family is not None, "a strategy on mirage's trunk is handed its family"

        def answering(answerer: str, folder: Path) -> Answering:
            return Answering(self.agent(context, answerer, folder))

        yield Probes(family, answering)
