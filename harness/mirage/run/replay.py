"""The trunk replayed at the token level, without a model: what the dry run estimates every state
from (``harness.mirage.run.plan``), and what a run says of its summarizers before it starts.

``ReplayedTrunk`` walks the pack's turns under the trunk's own driver
(``harness.mirage.trunk.driver``: the same turns, the same capture rules) with the agent loop's
prompt, the trunk's compaction policy deciding when it flushes and compacts and the compactor which
tail it keeps; replies not scripted and summaries are stand-ins of their budgets. Each compaction's
summary is cut in chunks as its format cuts it for the summarizer's window
(``CompactionStrategy.chunk_plan``). ``replay_summaries`` gives each summary format's
``SummaryPlan``; ``summarizer_notes`` the lines a run says first
(``harness.mirage.trunk.summarizers``).

Above: the dry run (``harness.mirage.run.plan``) and ``MirageRun``'s first stage. Below: the trunk's
agent configuration and policy (``harness.mirage.trunk.runner``), the driver, the memory server's
tool descriptions, the summary formats.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from compaction.references import is_reference_summarizer
from compaction.strategies.base import ChunkPlan
from harness.mirage.config import RunConfig
from harness.mirage.packs import Pack
from harness.mirage.trunk.checkpoints import SCRIPTED_TRUNK_MODEL
from harness.mirage.trunk.driver import TrunkDriver, TrunkTurn, run_without_loop
from harness.mirage.trunk.states import DepthProfile, StateSpec
from harness.mirage.trunk.summarizers import (
    SUMMARIZER_OUTPUT_TOKENS,
    SummaryPlan,
    summary_lines,
    summary_output_tokens,
    summary_plan,
)
from runtime.backbones.base import Backbone
from runtime.messages import AssistantMessage, Message, ToolSpec
from runtime.session import Session
from runtime.tokens import estimate_prompt_tokens
from runtime.toolset import ToolOutcome, Toolset

if TYPE_CHECKING:
    from harness.mirage.run.family import TrunkFamily
    from harness.mirage.strategies import RunStrategy

PLACEHOLDER = (
    "Here is a short plan for this task, with a sketch of the code:\n\n```python\n"
    "def run_step(items: list[str], limit: int = 10) -> dict[str, int]:\n"
    "    counts = {item: len(item) for item in items[:limit]}\n"
    "    return counts\n```\n\n"
)
"""Stand-in for replies not generated yet: the trunk answers technical filler, so prose with
code. Its mix matters because the compaction tail is kept by tiktoken count while the answerer
counts with its own tokenizer: all-prose stand-ins made S2 5.9% short with the embedded model
(its code-heavy replies cost ~1.2 of its tokens per cl100k token, prose ~1.0)."""


class ReplayedRun(Protocol):
    """What the replay reads of a run (``harness.mirage.run.MirageRun``)."""

    config: RunConfig
    pack: Pack
    profile: DepthProfile
    workspace: Path
    strategy: RunStrategy

    @property
    def family(self) -> TrunkFamily: ...

    @property
    def compaction_states(self) -> list[str]: ...

    def backbone(
        self, model: str, max_output_tokens: int, *, context_window: int | None = None
    ) -> Backbone: ...


class OfferedTools(Toolset):
    """The memory server's tools as a probe sees them, without a server to call."""

    def __init__(self, specs: list[ToolSpec]) -> None:
        self._specs = specs

    def specs(self) -> list[ToolSpec]:
        return list(self._specs)

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        return ToolOutcome(text="a dry run calls no tool", is_error=True)


class PromptCounter:
    """Input tokens of a call as ``backbone`` counts them (``Backbone.count_prompt_tokens``),
    or, with no backbone (an agent we did not write), the tiktoken estimate."""

    def __init__(self, backbone: Backbone | None) -> None:
        self._backbone = backbone
        self._source = "estimate"

    def prompt(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> int:
        if self._backbone is None:
            return estimate_prompt_tokens(messages, tools)
        counted = self._backbone.count_prompt_tokens(list(messages), list(tools))
        self._source = counted.source
        return counted.tokens

    @property
    def name(self) -> str:
        """Who counted (after the first count)."""
        from runtime.backbones.litellm_backbone import LiteLLMBackbone

        if isinstance(self._backbone, LiteLLMBackbone):
            return "litellm's offline counter"
        if self._backbone is not None and self._source == "provider":
            return f"{self._backbone.model}'s tokenizer"
        return "tiktoken estimate"


def placeholder_text(tokens: int) -> str:
    """Filler prose of ``tokens`` cl100k tokens: a stand-in for a reply not generated yet."""
    from runtime.tokens import encoding

    sentence = encoding().encode(PLACEHOLDER)
    repeated = sentence * (tokens // len(sentence) + 1)
    return encoding().decode(repeated[:tokens])


@dataclass
class TrunkReplay:
    """The trunk's states and the model calls building it would make."""

    sessions: dict[str, Session] = field(default_factory=dict)
    turn_inputs: list[int] = field(default_factory=list)
    flush_inputs: list[int] = field(default_factory=list)
    summarized: list[int] = field(default_factory=list)
    chunk_plans: list[ChunkPlan] = field(default_factory=list)
    first_compacted: list[Message] = field(default_factory=list)
    turns: int = 0


class ReplayedTrunk:
    """The trunk at the token level, under the trunk driver (``harness.mirage.trunk.driver``) as the
    real trunk is: the same messages and the agent loop's prompt; the trunk's own compaction
    policy decides when it flushes and compacts and the compactor which tail it keeps; no
    model (its replies and summaries are stand-ins of their budgets)."""

    label = "the trunk (replayed without a model)"

    def __init__(
        self,
        run: ReplayedRun,
        trunk_backbone: Backbone | None,
        summarizer: Backbone,
        *,
        counted: bool = True,
    ) -> None:
        """``summarizer``: the primary format's (its output budget is the summaries' length,
        its window cuts them in chunks); ``counted``: tokens by the trunk model's own count
        (else the tiktoken estimate, which needs neither its tokenizer nor its worker)."""
        from harness.mirage.trunk.runner import ReplayBackbone, trunk_policy
        from memory_server import tools_specs
        from runtime.agent import Agent
        from runtime.factory import new_session
        from runtime.session import AgentConfig

        trunk = run.family.trunk_config()
        self.run, self.profile, self.generated = run, run.profile, trunk_backbone is not None
        replay = ReplayBackbone(trunk_backbone, context_window=self.profile.window)
        config = AgentConfig(
            model=replay.model,
            context_window=self.profile.window,
            max_output_tokens=trunk.max_output_tokens,
        )
        self.session = new_session(config, self.profile.window, run.workspace)
        self.tools = tools_specs()
        self.prefix = Agent(self.session, replay, OfferedTools(self.tools)).active_context()
        self.counter = PromptCounter(trunk_backbone if counted else None)
        self.base = self.counter.prompt(self.prefix, self.tools)
        self.added: list[int] = []
        self.policy = trunk_policy(trunk, self.profile, run.config.primary_format, None)
        self.budget = self.policy.config.budget(self.profile.window)
        self.reply = placeholder_text(trunk.max_output_tokens)
        self.summarizer = summarizer
        self.summary = placeholder_text(summary_output_tokens(summarizer))
        self.eit = 0
        self.position = 0
        self.result = TrunkReplay()

    @property
    def compactions(self) -> int:
        return self.session.compaction_count

    def _tokens_of(self, message: Message) -> int:
        return self.counter.prompt([*self.prefix, message], self.tools) - self.base

    def _append(self, message: Message) -> None:
        self.session.append(message)
        self.added.append(self._tokens_of(message))

    async def turn(self, turn: TrunkTurn) -> None:
        self._append(turn.message)
        self.eit = self.base + sum(self.added)
        if turn.scripted is None and self.generated:
            self.result.turn_inputs.append(self.eit)
        text = turn.scripted if turn.scripted is not None else self._unscripted_reply()
        self._append(AssistantMessage(content=text, raw=text))
        self.position += 1
        self._after_turn()

    def _unscripted_reply(self) -> str:
        from harness.mirage.trunk.runner import SCRIPTED_ACKNOWLEDGEMENT

        return self.reply if self.generated else SCRIPTED_ACKNOWLEDGEMENT

    def _after_turn(self) -> None:
        if self.policy.claim_flush(self.session, self.eit, self.budget):
            self.result.flush_inputs.append(self.eit)
        keep = self.policy.due_compaction(self.eit, self.budget)
        if keep is not None:
            self._compact(keep)

    def _compact(self, keep: int) -> None:
        from compaction.compactor import install_summary, summarized_span

        span = summarized_span(self.session, keep)
        if span is None:
            return  # the real policy logs NothingToCompact and goes on
        first, start = span
        compacted = self.session.messages[first:start]
        self.result.summarized.append(sum(self.session.message_tokens[first:start]))
        plan = self.policy.strategy.chunk_plan(compacted, self.summarizer, first_index=first)
        self.result.chunk_plans.append(plan)
        if not self.result.first_compacted:
            self.result.first_compacted = list(compacted)
        install_summary(self.session, self.summary, start)
        self.added = [self._tokens_of(self.session.messages[0]), *self.added[start:]]

    async def capture(self, spec: StateSpec) -> Session:
        return self.session.model_copy(
            update={
                "messages": list(self.session.messages),
                "message_tokens": list(self.session.message_tokens),
                "compaction": self.session.compaction.model_copy(deep=True),
            }
        )

    def replay(self) -> TrunkReplay:
        seed = self.run.family.trunk_config().seed
        driver = TrunkDriver(self, self.run.pack, self.profile, seed)
        self.result.sessions = run_without_loop(driver.run())
        self.result.turns = self.position
        return self.result


def replay_summaries(
    run: ReplayedRun, *, counted: bool = True
) -> tuple[TrunkReplay, list[SummaryPlan]]:
    """The trunk replayed at the token level, and each summary format's summary of its first
    compaction (``counted``: as ``ReplayedTrunk`` takes it)."""
    config = run.config
    trunk_backbone = None
    if config.trunk_model != SCRIPTED_TRUNK_MODEL:
        trunk_backbone = run.backbone(config.trunk_model, config.trunk_output_tokens)
    summarizers = {config.trunk_model: trunk_backbone} if trunk_backbone else {}
    for entry in config.summary_formats:
        model = config.arm(entry)[1]
        if model not in summarizers:
            summarizers[model] = run.backbone(model, SUMMARIZER_OUTPUT_TOKENS)
    primary = summarizers[config.arm(config.primary_format)[1]]
    replayed = ReplayedTrunk(run, trunk_backbone, primary, counted=counted).replay()
    first = replayed.summarized[0] if replayed.summarized else None
    plans = [
        summary_plan(entry, model, summarizers[model], replayed.first_compacted, first)
        for entry, model in ((e, config.arm(e)[1]) for e in config.summary_formats)
    ]
    return replayed, plans


def summarizer_notes(run: ReplayedRun) -> list[str]:
    """What a run says first about its summarizers: the dry run's lines (``summary_lines``),
    from a replay counted by tiktoken, which needs no model (milliseconds on the scaled
    profile, ~3 s on the paper one), when a summarizer is a model; nothing when the run builds
    no trunk (its family exists, or the agent's trunk is its own) or never compacts."""
    config = run.config
    if run.strategy.kind.builds_trunk or not run.compaction_states:
        return []
    if run.family.existing() is not None:
        return []
    arms = [(entry, config.arm(entry)[1]) for entry in config.summary_formats]
    if all(is_reference_summarizer(model) for _, model in arms):
        summarizers = (run.backbone(model, SUMMARIZER_OUTPUT_TOKENS) for _, model in arms)
        plans = [summary_plan(e, m, b) for (e, m), b in zip(arms, summarizers, strict=True)]
        return summary_lines(plans)
    return summary_lines(replay_summaries(run, counted=False)[1])
