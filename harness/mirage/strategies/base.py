"""The run-strategy seam: what differs between the kinds of agent a ``mirage run`` evaluates.

Above: ``harness.mirage.run.MirageRun``, which keeps the protocol's order (resumable? models
exist? lock, ``run.json``, ``study.json``, workspace and index, checkpoints, probes, reports) and
asks its strategy — picked once from the configuration by ``harness.mirage.strategies.
strategy_for`` — at each step where the kinds differ; the dry run (``harness.mirage.run.plan``) asks
it which answerers it prices. Below, one module per kind:

- ``builtin``: mirage's own runtime answers (the embedded model, litellm models, the reference
  agents ``reference/*``) on the trunk family mirage builds or reuses;
- ``external``: an agent we did not write (``--agent openai:URL`` / ``cmd:COMMAND``), restored
  from the same family, its R_tool taken from the memory server's log;
- ``openclaw``: the real OpenClaw (``--agent openclaw``), its trunk replayed through its own
  gateway, which then serves the probes too.

``RunStages`` is what a strategy uses of the run around it.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from harness.kit.agents.base import AgentUnderTest
    from harness.kit.memory import MemoryEndpoint
    from harness.mirage.config import RunConfig
    from harness.mirage.packs import Pack
    from harness.mirage.trunk.checkpoints import Checkpoint, TrunkConfig
    from harness.mirage.trunk.states import DepthProfile


class Backbones(Protocol):
    """The run's backbones by model string (``harness.mirage.run.backbones``)."""

    def backbone(self, model: str, max_output_tokens: int, **extra: Any) -> Any: ...


class FamilyStage(Protocol):
    """What a strategy uses of the run's checkpoint family (``harness.mirage.run.family``)."""

    @property
    def directory(self) -> Path: ...

    def trunk_config(self) -> TrunkConfig: ...

    def existing(self) -> dict[str, Checkpoint] | None: ...

    async def checkpoints(self, index: Any) -> dict[str, Checkpoint]: ...


class ProbingStage(Protocol):
    """What a strategy uses of the run's probe loop (``harness.mirage.run.probing``)."""

    def pending_probes(self, model_dir: Path, checkpoints: dict[str, Checkpoint]) -> int: ...

    async def probe_agent(
        self, agent: AgentUnderTest, model_dir: Path, checkpoints: dict[str, Checkpoint], index: Any
    ) -> Path: ...

    async def probe_states(
        self,
        agent: AgentUnderTest,
        model_dir: Path,
        checkpoints: dict[str, Checkpoint],
        memory: MemoryEndpoint,
    ) -> None: ...


class ProgressBars(Protocol):
    """What a strategy uses of the run's progress bars (``harness.mirage.run.progress``)."""

    def trunk(self, window: int) -> Callable[[int, int], None] | None: ...


class RunStages(Backbones, Protocol):
    """What a strategy uses of ``MirageRun``: its options, folders, pack and states, backbones,
    progress bars, checkpoint family and probe loop."""

    config: RunConfig
    out: Path
    workspace: Path
    pack: Pack
    profile: DepthProfile

    @property
    def progress(self) -> ProgressBars: ...

    @property
    def family(self) -> FamilyStage: ...

    @property
    def probing(self) -> ProbingStage: ...


class RunStrategy(Protocol):
    """How one kind of agent is run through the protocol."""

    attributed: bool
    """Whether R_tool comes from the memory server's log (an attribution summary per folder)."""
    own_prompt: bool
    """Whether the agent assembles a prompt of its own, which mirage cannot count."""

    def answerers(self) -> list[str]:
        """Who is probed, in order: one result folder each."""
        ...

    def result_dir(self, out: Path, answerer: str) -> Path: ...

    def trunk_window(self, models: Backbones) -> int:
        """The trunk's window when ``--window`` is not given."""
        ...

    def models_to_check(self, run: RunStages) -> list[str]:
        """The models this run still needs, checked before any work (a finished run resumes or
        reports without them)."""
        ...

    def family(self, run: RunStages) -> str | None:
        """The checkpoint family ``study.json`` names (None: the agent's own trunk)."""
        ...

    def checkpoints(
        self, run: RunStages, index: Any
    ) -> AbstractAsyncContextManager[dict[str, Checkpoint]]:
        """Every state's checkpoint by record state, built or reused; open while the
        answerers are probed."""
        ...

    async def probe(
        self, run: RunStages, answerer: str, checkpoints: dict[str, Checkpoint], index: Any
    ) -> Path:
        """Every unfinished probe of ``answerer``; returns its result folder."""
        ...

    def provenance_roles(self) -> list[tuple[str, str]]:
        """(role, model) of every model ``run.json``'s provenance names."""
        ...

    def agent_software(self) -> str | None:
        """The agent's own software and version, for the provenance (None: mirage's runtime)."""
        ...

    def priced_answerers(self) -> list[str]:
        """The answerers the dry run prices (reference agents call no model)."""
        ...
