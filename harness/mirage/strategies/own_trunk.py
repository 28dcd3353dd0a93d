"""What the built-in runtime and an external agent share: the trunk mirage builds (or reuses)
with its trunk model and summarizer, restored per probe.

Above: the ``builtin`` and ``external`` strategies. Below: the run's checkpoint family
(``harness.mirage.run.family``), the run's backbones.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from compaction.config import split_format
from harness.mirage.config import RunConfig
from harness.mirage.strategies.base import Backbones, RunStages
from harness.mirage.trunk.checkpoints import SCRIPTED_TRUNK_MODEL

if TYPE_CHECKING:
    from harness.mirage.trunk.checkpoints import Checkpoint

SCRIPTED_TRUNK_WINDOW = 8192


class OwnTrunk:
    """The parts of a strategy whose trunk is mirage's own."""

    own_prompt = False

    def __init__(self, config: RunConfig) -> None:
        self.config = config

    def trunk_window(self, models: Backbones) -> int:
        config = self.config
        if config.trunk_model == SCRIPTED_TRUNK_MODEL:
            return SCRIPTED_TRUNK_WINDOW
        return int(models.backbone(config.trunk_model, config.trunk_output_tokens).context_window)

    def trunk_models(self) -> list[str]:
        """The models building the trunk and its format branches needs: the trunk model (none
        for a scripted trunk), the summarizer, and each summary format's own summarizer."""
        config = self.config
        trunk = [] if config.trunk_model == SCRIPTED_TRUNK_MODEL else [config.trunk_model]
        own = [split_format(entry)[1] for entry in config.summary_formats]
        return [*trunk, config.summarizer, *(model for model in own if model is not None)]

    def family(self, run: RunStages) -> str | None:
        return run.family.directory.name

    @asynccontextmanager
    async def checkpoints(self, run: RunStages, index: Any) -> AsyncIterator[dict[str, Checkpoint]]:
        yield await run.family.checkpoints(index)

    def trunk_roles(self) -> list[tuple[str, str]]:
        return [("trunk", self.config.trunk_model), ("summarizer", self.config.summarizer)]

    def agent_software(self) -> str | None:
        return None
