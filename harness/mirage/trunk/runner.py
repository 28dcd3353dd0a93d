"""The trunk conversation T = plant ⊕ filler and checkpoint capture (Algorithm 1, lines 1–2).

Above: ``harness.mirage.run``. Below: the trunk driver (``harness.mirage.trunk.driver``: the walk
over the pack's turns and when each state is reached), the runtime agent loop with compaction
(``CompactionPolicy``) and the memory server's tools; ``TrunkRunner`` is the driver's steps (one
agent turn, one checkpoint). Planting turns whose assistant reply the pack scripts are
replayed verbatim (the reply is not generated, usage is a tiktoken estimate); every other
assistant turn comes from the trunk model — or, with ``trunk_model="scripted"``, from a fixed
acknowledgement, so one checkpoint family can be shared by every answerer without any model.

Summary formats: the trunk compacts with the run's first format and, right before its first
compaction (after the memory flush), captures the branch point; every other format branches from
it (``harness.mirage.trunk.branches``), so the shared trunk and its S1 states are built once (the
paper's appendix A.2).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import structlog

from compaction.compactor import Reason
from compaction.config import CompactionConfig, split_format
from compaction.flush import FLUSH_STATE_KEY, FlushRecord, flush_records
from compaction.policy import FAILURES_STATE_KEY, CompactionPolicy
from compaction.strategies.base import ChunkProgress
from harness.mirage.packs import Pack
from harness.mirage.trunk.checkpoints import (
    BRANCH_POINT,
    SCRIPTED_TRUNK_MODEL,
    Checkpoint,
    TrunkConfig,
    discard_unfinished_family,
    write_checkpoint,
)
from harness.mirage.trunk.driver import TrunkDriver, TrunkError, TrunkTurn
from harness.mirage.trunk.states import PAPER_WINDOW, DepthProfile, StateSpec
from runtime.agent import Agent
from runtime.backbones.base import Backbone, Completion
from runtime.factory import new_session
from runtime.messages import Message, ToolSpec, UserMessage
from runtime.profiles import resolve_profile
from runtime.session import AgentConfig, CompactionRecord, Session, WorkspaceRef
from runtime.snapshot import session_bytes, session_from_payload
from runtime.tokens import estimate_usage
from runtime.toolset import Toolset

log = structlog.get_logger(__name__)

RUN_WORKSPACE = "workspace"  # the run's workspace, relative to its --out (MirageRun.workspace)
PACK_VERSION_TAG = "pack"
TRUNK_DATE = "2026-01-01"
"""The trunk's day: its memory flush's prompt names ``memory/<TRUNK_DATE>.md`` and the memory
server writes the trunk's notes there, whatever day the trunk is built, so two builds of one
family are identical on any day (docs/running.md, Reproducibility)."""
"""The run workspace's version as the pack materialised it: a trunk built in the run folder
starts from it, not from notes an earlier, unfinished trunk wrote."""

SCRIPTED_ACKNOWLEDGEMENT = (
    "Understood. I have noted the details of this task and will keep your constraints in mind "
    "as we continue."
)


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
    budgets by window / 120k so compaction lands where it did in the paper (~100k of 120k).
    ``summary_format`` may name its own summarizer (``FORMAT~SUMMARIZER``)."""
    factor = profile.window / PAPER_WINDOW if profile.name == "scaled" else 1.0
    defaults = CompactionConfig()
    plain_format, own_summarizer = split_format(summary_format)
    return CompactionConfig(
        format=plain_format,
        summarizer_model=own_summarizer or summarizer_model,
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


class BranchingPolicy(CompactionPolicy):
    """The trunk's compaction policy: keeps the session (as snapshot bytes) as it was right
    before the first threshold compaction, after the memory flush — the summary formats'
    branch point — and, given ``workspace_version``, the workspace version right before the
    first cycle's flush (where a format whose flush differs from the trunk's starts). A
    compaction that fails is retried on a later turn, which keeps a new one."""

    def __init__(
        self,
        config: CompactionConfig,
        summarizer: Backbone | None,
        workspace_version: Callable[[], str | None] | None = None,
        on_chunk: ChunkProgress | None = None,
    ) -> None:
        super().__init__(config, summarizer=summarizer, on_chunk=on_chunk, notes_date=TRUNK_DATE)
        self.branch_point: bytes | None = None
        self.workspace_version = workspace_version
        self.pre_flush_version: str | None = None

    async def flush(self, agent: Agent, eit: int) -> FlushRecord:
        first = agent.session.compaction_count == 0 and not flush_records(agent.session)
        if first and self.workspace_version is not None:
            self.pre_flush_version = self.workspace_version()
        return await super().flush(agent, eit)

    async def compact(
        self,
        agent: Agent,
        *,
        reason: Reason = "manual",
        keep_recent_tokens: int | None = None,
        focus: str | None = None,
    ) -> CompactionRecord | None:
        if reason == "threshold" and agent.session.compaction_count == 0:
            self.branch_point = session_bytes(agent.session)
        return await super().compact(
            agent, reason=reason, keep_recent_tokens=keep_recent_tokens, focus=focus
        )


class TrunkRunner:
    """The built-in trunk under the trunk driver (``harness.mirage.trunk.driver``): takes each turn
    with the trunk's agent and writes a checkpoint the moment the driver finds a state reached;
    compaction states under ``summary_format`` (the agent's policy's format)."""

    label = "the trunk"

    def __init__(
        self,
        pack: Pack,
        trunk: TrunkConfig,
        profile: DepthProfile,
        agent: Agent,
        family_dir: Path,
        workspace_version: Callable[[], str | None],
        summary_format: str | None = None,
    ) -> None:
        self.pack, self.trunk, self.profile, self.agent = pack, trunk, profile, agent
        self.family_dir = family_dir
        self.workspace_version = workspace_version
        if isinstance(agent.policy, BranchingPolicy):
            agent.policy.workspace_version = workspace_version
        self.summary_format = summary_format
        self.driver = TrunkDriver(self, pack, profile, trunk.seed)
        self.branch_point: Checkpoint | None = None
        self.branched_from: str | None = None  # BRANCH_POINT for a format branched later
        self.position = 0

    @property
    def checkpoints(self) -> dict[str, Checkpoint]:
        return self.driver.captured

    @property
    def eit(self) -> int:
        return self.agent.session.ledger.current_eit

    @property
    def compactions(self) -> int:
        return self.agent.session.compaction_count

    @property
    def replay(self) -> ReplayBackbone:
        backbone = self.agent.backbone
        assert isinstance(backbone, ReplayBackbone)
        return backbone

    async def capture(self, spec: StateSpec) -> Checkpoint:
        session = self.agent.session
        checkpoint = write_checkpoint(
            self.family_dir,
            session,
            state=spec.name,
            trunk=self.trunk,
            trunk_position=self.position,
            trunk_turns_total=self.position,
            workspace_version=self.workspace_version(),
            summary_format=self.summary_format if session.compaction_count else None,
            branched_from=self.branched_from if session.compaction_count else None,
        )
        log.info(
            "checkpoint",
            state=spec.name,
            eit=session.ledger.current_eit,
            compactions=session.compaction_count,
            position=self.position,
        )
        return checkpoint

    def _capture_branch_point(self) -> None:
        """The session the policy kept during the last turn (after the first cycle's memory
        flush, before its first compaction); the workspace is as then (compaction writes none),
        and the manifest also names the workspace version from before that flush."""
        policy = self.agent.policy
        if not isinstance(policy, BranchingPolicy) or policy.branch_point is None:
            return
        session = session_from_payload(policy.branch_point, BRANCH_POINT)
        policy.branch_point = None
        self.branch_point = write_checkpoint(
            self.family_dir,
            session,
            state=BRANCH_POINT,
            trunk=self.trunk,
            trunk_position=self.position,
            trunk_turns_total=self.position,
            workspace_version=self.workspace_version(),
            pre_flush_workspace_version=policy.pre_flush_version,
        )
        log.info("checkpoint", state=BRANCH_POINT, eit=session.ledger.current_eit)

    async def turn(self, turn: TrunkTurn) -> None:
        await self._turn(turn.message, turn.scripted)
        self._capture_branch_point()

    async def _turn(self, message: UserMessage, scripted: str | None) -> None:
        self.replay.queued = scripted
        await self.agent.turn(message)
        self.position += 1

    async def run(self, on_turn: Callable[[int, int], None] | None = None) -> dict[str, Checkpoint]:
        discard_unfinished_family(self.family_dir)  # what an interrupted trunk left behind
        return await self.driver.run(on_turn)

    async def run_branch(self, own_flush: bool) -> dict[str, Checkpoint]:
        """On a session restored from the branch point (and a workspace checked out to match):
        with ``own_flush``, this format's memory flush in place of the trunk's, then its first
        compaction, then its compaction states (all must come right after it)."""
        policy, agent = self.agent.policy, self.agent
        assert isinstance(policy, CompactionPolicy)
        keep = policy.budget(agent).keep_recent
        if own_flush:
            agent.session.tool_state.pop(FLUSH_STATE_KEY, None)  # the trunk's flush, replaced
            await policy.flush(agent, agent.session.ledger.current_eit)
        await policy.compact(agent, reason="threshold", keep_recent_tokens=keep)
        if agent.session.compaction_count == 0:
            failures = agent.session.tool_state.get(FAILURES_STATE_KEY) or [{}]
            raise TrunkError(
                f"summary format {self.summary_format}: the compaction from the branch point "
                f"failed ({failures[-1].get('error', 'no summary')})"
            )
        await self.driver.capture_due({"compaction"})
        missing = self.driver.missing("compaction")
        if missing:
            raise TrunkError(
                f"state(s) {', '.join(missing)} come after a later compaction: summary formats "
                "branch only at the first one; run each format with its own --out"
            )
        compaction_states = [s for s in self.profile.states if s.kind == "compaction"]
        return {spec.name: self.checkpoints[spec.name] for spec in compaction_states}


class TrunkModels(NamedTuple):
    """The trunk's model (None: scripted replies), the compaction summarizer, and the
    summarizers of formats that name their own (``FORMAT~SUMMARIZER`` → backbone)."""

    trunk: Backbone | None
    summarizer: Backbone | None
    own_summarizers: Mapping[str, Backbone] = {}

    def summarizer_of(self, summary_format: str) -> Backbone | None:
        """The summarizer that writes ``summary_format``."""
        own = split_format(summary_format)[1]
        return self.summarizer if own is None else self.own_summarizers[own]


def trunk_agent(
    session: Session,
    trunk: TrunkConfig,
    profile: DepthProfile,
    models: TrunkModels,
    toolset: Toolset | None,
    summary_format: str,
    on_chunk: ChunkProgress | None = None,
) -> Agent:
    """The trunk's agent on ``session``, compacting with ``summary_format`` (``on_chunk``: its
    summaries' progress)."""
    replay = ReplayBackbone(models.trunk, context_window=profile.window)
    summarizer = models.summarizer_of(summary_format)
    policy = trunk_policy(trunk, profile, summary_format, summarizer, on_chunk)
    check_states_reachable(profile, policy.config.budget(profile.window).threshold)
    return Agent(session, replay, toolset, policy)


def trunk_policy(
    trunk: TrunkConfig,
    profile: DepthProfile,
    summary_format: str,
    summarizer: Backbone | None,
    on_chunk: ChunkProgress | None = None,
) -> BranchingPolicy:
    """The trunk's compaction policy (the dry run asks the same one, without a summarizer)."""
    compaction = compaction_config(
        profile, summary_format, trunk.summarizer_model, trunk.memory_flush
    )
    return BranchingPolicy(compaction, summarizer=summarizer, on_chunk=on_chunk)


def build_trunk_agent(
    trunk: TrunkConfig,
    profile: DepthProfile,
    models: TrunkModels,
    toolset: Toolset | None,
    workspace: Path,
    summary_format: str,
    on_chunk: ChunkProgress | None = None,
) -> Agent:
    """The trunk's agent on a new session, compacting with ``summary_format`` (``on_chunk``:
    its summaries' progress)."""
    model, window = SCRIPTED_TRUNK_MODEL, profile.window
    if models.trunk is not None:
        model, window = models.trunk.model, models.trunk.context_window
    if window < profile.window:
        raise TrunkError(
            f"profile {profile.name!r} needs a {profile.window}-token window but the trunk "
            f"model {model} has {window}; use --profile scaled"
        )
    config = AgentConfig(
        model=model, context_window=profile.window, max_output_tokens=trunk.max_output_tokens
    )
    session = reproducible(new_session(config, profile.window, workspace), trunk)
    return trunk_agent(session, trunk, profile, models, toolset, summary_format, on_chunk)


def reproducible(session: Session, trunk: TrunkConfig) -> Session:
    """The trunk's session with nothing that differs between two builds of one family: its id
    is the family's and its workspace is named relative to the run folder, so the same trunk
    configuration gives byte-identical checkpoints in any ``--out`` on any machine (the shards
    of ``mirage run --shard K/N`` rebuild their trunk: ``harness.mirage.run.shards``)."""
    workspace = None if session.workspace is None else WorkspaceRef(path=RUN_WORKSPACE)
    return session.model_copy(
        update={"session_id": f"trunk-{trunk.family_id()}", "workspace": workspace}
    )
