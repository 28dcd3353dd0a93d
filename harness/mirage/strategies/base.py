"""The run-strategy seam: what differs between the kinds of agent a ``mirage run`` evaluates.

Above: ``harness.mirage.run.MirageRun``, which keeps the protocol's order (resumable? models
exist? lock, ``run.json``, ``study.json``, workspace and index, checkpoints, probes, reports) and
asks its strategy — picked once from the configuration by
``harness.mirage.strategies.strategy_for`` — at each step where the kinds differ; the dry run
(``harness.mirage.run.plan``) reads its ``kind``. Below, one module per kind:

- ``builtin``: mirage's own runtime answers (the embedded model, litellm models, the reference
  agents ``reference/*``) on the trunk family mirage builds or reuses;
- ``external``: an agent we did not write (``--agent openai:URL`` / ``cmd:COMMAND``), restored
  from the same family, its R_tool taken from the memory server's log;
- ``openclaw``: the real OpenClaw (``--agent openclaw``), its trunk replayed through its own
  gateway, which then serves the probes too.

One direction: the run asks, the strategy answers with values (``AgentKind``, result folders, a
window, ``Probes``); what a strategy needs of the run it is handed as values too
(``RunContext``), and it never calls back into the run. The run drives the probes itself with
what ``probes`` returns.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from harness.mirage.config import RunConfig

if TYPE_CHECKING:
    from harness.kit.agents.base import AgentUnderTest
    from harness.kit.memory import MemoryEndpoint
    from harness.mirage.packs import Pack
    from harness.mirage.probing.records import RecordKey
    from harness.mirage.probing.visibility import UnreadableReason
    from harness.mirage.trunk.checkpoints import Checkpoint, TrunkConfig
    from harness.mirage.trunk.states import DepthProfile
    from memory_server.index import HybridIndex
    from runtime.backbones.base import Backbone

TrunkProgress = Callable[[int, int], None]
"""A trunk's progress: ``(turn, eit)`` after each turn."""


class Backbones(Protocol):
    """Backbones by model string (the run's: ``harness.mirage.run.backbones.RunBackbones``)."""

    def backbone(
        self, model: str, max_output_tokens: int, *, context_window: int | None = None
    ) -> Backbone: ...


@dataclass(frozen=True)
class AgentKind:
    """What the run reads of one kind of agent, as values."""

    attributed: bool
    """R_tool comes from the memory server's log: an attribution summary per result folder."""
    own_prompt: bool
    """The agent assembles a prompt of its own, which mirage cannot count."""
    builds_trunk: bool
    """The agent builds its trunk itself (its checkpoints hold its own store): no mirage trunk
    family is built, and ``study.json`` names none."""
    model_answerers: bool
    """Each answerer is a model mirage calls: checked before any work while it has probes left."""
    trunk_models: tuple[str, ...]
    """The models mirage's trunk family needs, checked before any work when it is not built."""
    priced: tuple[str, ...]
    """The answerers the dry run prices (reference agents call no model)."""
    roles: tuple[tuple[str, str], ...]
    """(role, model) of every model ``run.json``'s provenance names."""


@dataclass(frozen=True)
class RunContext:
    """What a strategy is handed of the run when asked for its probes: values, no way back."""

    config: RunConfig
    out: Path
    workspace: Path
    index: HybridIndex
    pack: Pack
    profile: DepthProfile
    trunk: TrunkConfig
    """The run's trunk configuration (an agent's own trunk is keyed from it)."""
    backbones: Backbones
    family: dict[str, Checkpoint] | None
    """Mirage's trunk family by record state, built or reused (None: ``builds_trunk``)."""
    planned: Mapping[str, Sequence[RecordKey]]
    """Each answerer's planned probes (this shard's), by the keys its records take."""
    trunk_bar: Callable[[], TrunkProgress | None]
    """Opens the trunk's progress bar (None: no display)."""


@dataclass(frozen=True)
class Answering:
    """How one answerer answers its probes."""

    agent: AgentUnderTest
    memory: MemoryEndpoint | None = None
    """The agent's memory server, open and configured already (None: the run opens one for the
    answerer, binds the agent to it, and closes the agent when its probes are done)."""
    own_context: UnreadableReason | None = None
    """The agent keeps a probe's context in its own store: why a checkpoint's context cannot be
    read (the visibility map's reason; no compaction summaries are collected)."""


@dataclass(frozen=True)
class Probes:
    """What the run probes: every state's checkpoint by record state, and how each answerer
    answers (``answering(answerer, folder)``; None: nothing left to probe)."""

    checkpoints: dict[str, Checkpoint]
    answering: Callable[[str, Path], Answering | None]


class RunStrategy(ABC):
    """How one kind of agent is run through the protocol."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config

    @property
    @abstractmethod
    def kind(self) -> AgentKind:
        """What the run reads of this kind of agent."""

    @abstractmethod
    def answerers(self, out: Path) -> dict[str, Path]:
        """Who is probed, in order, each with its result folder under ``out``."""

    @abstractmethod
    def trunk_window(self, backbones: Backbones) -> int:
        """The trunk's window when ``--window`` is not given."""

    @abstractmethod
    def probes(self, context: RunContext) -> AbstractAsyncContextManager[Probes]:
        """The checkpoints and the answering agents, open while the answerers are probed (an
        agent that builds its own trunk builds it here first)."""

    def agent_software(self) -> str | None:
        """The agent's own software and version, for the provenance (None: mirage's runtime)."""
        return None
