"""The trunk conversation T = plant ⊕ filler and checkpoint capture (Algorithm 1, lines 1–2).

Above: ``harness.run``. Below: the runtime agent loop with compaction (``CompactionPolicy``)
and the memory server's tools. Planting turns whose assistant reply the pack scripts are
replayed verbatim (the reply is not generated, usage is a tiktoken estimate); every other
assistant turn comes from the trunk model — or, with ``trunk_model="scripted"``, from a fixed
acknowledgement, so one checkpoint family can be shared by every answerer without any model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import structlog

from compaction.config import CompactionConfig
from compaction.policy import CompactionPolicy
from harness.checkpoints import (
    Checkpoint,
    TrunkConfig,
    discard_unfinished_family,
    write_checkpoint,
)
from harness.packs import Pack
from harness.states import PAPER_WINDOW, DepthProfile, StateSpec
from runtime.agent import Agent
from runtime.backbones.base import Backbone, Completion
from runtime.factory import new_session
from runtime.messages import Message, ToolSpec, UserMessage
from runtime.profiles import resolve_profile
from runtime.session import AgentConfig
from runtime.tokens import estimate_usage
from runtime.toolset import Toolset

log = structlog.get_logger(__name__)

SCRIPTED_TRUNK_MODEL = "scripted"
SCRIPTED_ACKNOWLEDGEMENT = (
    "Understood. I have noted the details of this task and will keep your constraints in mind "
    "as we continue."
)
MAX_FILLER_TURNS = 5_000


class TrunkError(RuntimeError):
    """The trunk could not reach every requested state."""


class ReplayBackbone(Backbone):
    """Wraps the trunk model: replays a scripted reply when one is queued, else generates."""

    def __init__(self, inner: Backbone | None, context_window: int) -> None:
        self.inner = inner
        self.model = inner.model if inner is not None else SCRIPTED_TRUNK_MODEL
        self.context_window = inner.context_window if inner is not None else context_window
        self.tool_mode = inner.tool_mode if inner is not None else "text"
        self.profile = inner.profile if inner is not None else resolve_profile(self.model)
        self.queued: str | None = None

    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Completion:
        text, self.queued = self.queued, None
        if text is None and self.inner is not None:
            return await self.inner.complete(messages, tools)
        text = text if text is not None else SCRIPTED_ACKNOWLEDGEMENT
        usage = estimate_usage(messages, tools, text)
        if self.inner is not None:  # the model's own tokenizer when it has one: EIT on one scale
            counted = self.inner.count_prompt_tokens(messages, tools)
            usage = usage.model_copy(
                update={"input_tokens": counted.tokens, "source": counted.source}
            )
        return Completion(text=text, usage=usage, model=self.model, finish_reason="stop")


def compaction_config(
    profile: DepthProfile, summary_format: str, summarizer_model: str, memory_flush: bool
) -> CompactionConfig:
    """Compaction budgets on the profile's window; the scaled profile scales the token
    budgets by window / 120k so compaction lands where it did in the paper (~100k of 120k)."""
    factor = profile.window / PAPER_WINDOW if profile.name == "scaled" else 1.0
    defaults = CompactionConfig()
    return CompactionConfig(
        format=summary_format,
        summarizer_model=summarizer_model,
        window_cap=profile.window,
        reserve_tokens=round(defaults.reserve_tokens * factor),
        keep_recent_tokens=round(defaults.keep_recent_tokens * factor),
        soft_threshold_tokens=round(defaults.soft_threshold_tokens * factor),
        memory_flush=memory_flush,
    )


def check_states_reachable(profile: DepthProfile, threshold: int) -> None:
    for spec in profile.states:
        if spec.kind == "depth" and spec.eit is not None and spec.eit >= threshold:
            raise TrunkError(
                f"state {spec.name} (EIT {spec.eit}) is not below the compaction threshold "
                f"({threshold} tokens on a {profile.window}-token window): it would never be "
                "reached before the first compaction"
            )


class TrunkRunner:
    """Drives one trunk and writes a checkpoint the moment each state is reached."""

    def __init__(
        self,
        pack: Pack,
        trunk: TrunkConfig,
        profile: DepthProfile,
        agent: Agent,
        family_dir: Path,
        workspace_version: Callable[[], str | None],
    ) -> None:
        self.pack, self.trunk, self.profile, self.agent = pack, trunk, profile, agent
        self.family_dir = family_dir
        self.workspace_version = workspace_version
        self.checkpoints: dict[str, Checkpoint] = {}
        self.position = 0

    @property
    def replay(self) -> ReplayBackbone:
        backbone = self.agent.backbone
        assert isinstance(backbone, ReplayBackbone)
        return backbone

    def _capture(self, spec: StateSpec) -> None:
        session = self.agent.session
        self.checkpoints[spec.name] = write_checkpoint(
            self.family_dir,
            session,
            state=spec.name,
            trunk=self.trunk,
            trunk_position=self.position,
            trunk_turns_total=self.position,
            workspace_version=self.workspace_version(),
        )
        log.info(
            "checkpoint",
            state=spec.name,
            eit=session.ledger.current_eit,
            compactions=session.compaction_count,
            position=self.position,
        )

    def _capture_due(self, kinds: set[str]) -> None:
        for spec in self.profile.states:
            if spec.name in self.checkpoints or spec.kind not in kinds:
                continue
            if self._reached(spec):
                self._capture(spec)

    def _reached(self, spec: StateSpec) -> bool:
        session = self.agent.session
        if spec.kind == "depth":
            depth = spec.eit or 0
            return session.compaction_count == 0 and session.ledger.current_eit >= depth
        if spec.kind == "compaction":
            return session.compaction_count >= spec.compactions
        return True

    async def _turn(self, message: UserMessage, scripted: str | None) -> None:
        self.replay.queued = scripted
        await self.agent.turn(message)
        self.position += 1

    async def run(self, on_turn: Callable[[int, int], None] | None = None) -> dict[str, Checkpoint]:
        discard_unfinished_family(self.family_dir)  # what an interrupted trunk left behind
        for planted in self.pack.planting_turns():
            await self._turn(planted.to_user_message(), planted.assistant)
            if on_turn:
                on_turn(self.position, self.agent.session.ledger.current_eit)
        self._capture_due({"plant_end"})
        filler = self.pack.filler_turns(self.trunk.seed, n_turns=MAX_FILLER_TURNS)
        for turn in filler:
            if len(self.checkpoints) == len(self.profile.states):
                break
            await self._turn(UserMessage.text(turn.text), None)
            self._capture_due({"depth", "compaction"})
            if on_turn:
                on_turn(self.position, self.agent.session.ledger.current_eit)
        missing = [s.name for s in self.profile.states if s.name not in self.checkpoints]
        if missing:
            session = self.agent.session
            raise TrunkError(
                f"the trunk ended after {self.position} turns at EIT "
                f"{session.ledger.current_eit} with {session.compaction_count} compaction(s) "
                f"without reaching state(s) {', '.join(missing)}"
            )
        return {spec.name: self.checkpoints[spec.name] for spec in self.profile.states}


def build_trunk_agent(
    trunk: TrunkConfig,
    profile: DepthProfile,
    trunk_backbone: Backbone | None,
    summarizer: Backbone | None,
    toolset: Toolset | None,
    workspace: Path,
) -> Agent:
    replay = ReplayBackbone(trunk_backbone, context_window=profile.window)
    if replay.context_window < profile.window:
        raise TrunkError(
            f"profile {profile.name!r} needs a {profile.window}-token window but the trunk "
            f"model {replay.model} has {replay.context_window}; use --profile scaled"
        )
    config = AgentConfig(
        model=replay.model, context_window=profile.window, max_output_tokens=trunk.max_output_tokens
    )
    session = new_session(config, profile.window, workspace)
    compaction = compaction_config(
        profile, trunk.summary_format, trunk.summarizer_model, trunk.memory_flush
    )
    check_states_reachable(profile, compaction.budget(profile.window).threshold)
    policy = CompactionPolicy(compaction, summarizer=summarizer)
    return Agent(session, replay, toolset, policy)
