"""``mirage run --dry-run``: what a run will send and what it will cost, before anything runs.

Above: the ``mirage run`` command (same options as a real run). Below: the run's own
configuration (``harness.mirage.run.MirageRun``: pack, depth profile, trunk configuration, answerer
backbones), the checkpoints of an earlier run when they exist, and ``harness.mirage.costs`` (prices
from litellm's local map). Nothing is materialised, indexed, built, probed or written.

Per state, the input of a probe's first call is counted the way the answerer's backbone counts
it (its own tokenizer when it has one: the embedded model's; litellm's offline counter for
hosted models; the tiktoken estimate scripted backbones report) over exactly what a probe
sends: the system prompt, the memory server's tool descriptions, the restored history and the
probe question. The history comes from

- the checkpoints, when a finished family of this trunk configuration exists (``checkpoint``);
- otherwise a token-level replay of the trunk (``estimate``): the pack's planting turns, the
  seeded filler, the trunk's replies (the scripted acknowledgement, or for a model trunk a
  reply that fills its output budget) and a summary that fills the summarizer's output budget,
  walked by the trunk's own driver (``harness.mirage.driver``: the same turns, the same capture
  rules) with the trunk's own compaction policy deciding when it flushes and compacts and the
  compactor which tail it keeps (asked, not re-derived).

Calls per probe are an assumption (printed): one under C0, two under Cm (one retrieval round
adding ``TOOL_ROUND_TOKENS`` of call and result). Output is counted at the full budget (an upper
bound). With prompt caching, every call of a state after the first ``concurrency`` probes reads
the state's prefix (system, tools, restored history); providers with explicit markers write it
once per concurrent worker, providers that cache automatically charge nothing to write.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from harness.mirage.checkpoints import SCRIPTED_TRUNK_MODEL
from harness.mirage.costs import Cost, TokenTally, cost_of, prices_for
from harness.mirage.driver import TrunkDriver, TrunkTurn, run_without_loop
from harness.mirage.references import is_reference
from harness.mirage.run import MirageRun, bad_files_reported
from harness.mirage.states import StateSpec
from runtime.backbones.base import LOCAL_PREFIX, Backbone
from runtime.messages import AssistantMessage, Message, ToolSpec, UserMessage
from runtime.session import Session
from runtime.tokens import estimate_prompt_tokens
from runtime.toolset import ToolOutcome, Toolset

TOOL_ROUND_TOKENS = 800
"""Assumed input a retrieval round adds to a probe's second call: the call and the recall
result (five hits of a ~320-character snippet with their citations)."""
CALLS_PER_PROBE: dict[str, int] = {"C0": 1, "Cm": 2}
MIN_CACHED_PREFIX = 1024
"""Providers cache nothing shorter (OpenAI: 1,024 tokens; Anthropic: 1,024 to 4,096)."""
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

StateSource = Literal["checkpoint", "estimate"]
CachingMode = Literal["explicit", "automatic", "none", "local"]


class StatePlan(BaseModel):
    state: str
    source: StateSource
    probes: int
    probe_input: float = Field(description="mean input tokens of a probe's first call")
    prefix: int = Field(description="tokens before the question: what a prompt cache holds")
    checkpoint_eit: int | None = Field(default=None, description="the trunk's EIT at capture")


class CallGroup(BaseModel):
    """Some backbone calls of one model and what they cost."""

    what: str
    model: str
    tokens: TokenTally
    cost: Cost
    cost_without_cache: Cost


class AnswererPlan(BaseModel):
    model: str
    probes: int
    output_budget: int
    caching: CachingMode
    counted_by: str
    states: list[StatePlan]
    calls: CallGroup


class TrunkPlan(BaseModel):
    family: str
    reused: bool
    turns: int | None = None
    groups: list[CallGroup] = Field(default_factory=list)


class RunPlan(BaseModel):
    pack: str
    profile: str
    window: int
    questions: int
    conditions: list[str]
    repeats: int
    concurrency: int
    trunk: TrunkPlan
    answerers: list[AnswererPlan]
    assumptions: list[str]


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


# -- the trunk, replayed at the token level ------------------------------------------------


@dataclass
class TrunkReplay:
    """The trunk's states and the model calls building it would make."""

    sessions: dict[str, Session] = field(default_factory=dict)
    turn_inputs: list[int] = field(default_factory=list)
    flush_inputs: list[int] = field(default_factory=list)
    summarized: list[int] = field(default_factory=list)
    turns: int = 0


class _ReplayedTrunk:
    """The trunk at the token level, under the trunk driver (``harness.mirage.driver``) as the
    real trunk is: the same messages and the agent loop's prompt; the trunk's own compaction
    policy decides when it flushes and compacts and the compactor which tail it keeps; no
    model (its replies and summaries are stand-ins of their budgets)."""

    label = "the trunk (replayed without a model)"

    def __init__(
        self, run: MirageRun, trunk_backbone: Backbone | None, summary_tokens: int
    ) -> None:
        from harness.mirage.trunk import ReplayBackbone, trunk_policy
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
        self.counter = PromptCounter(trunk_backbone)
        self.base = self.counter.prompt(self.prefix, self.tools)
        self.added: list[int] = []
        self.policy = trunk_policy(trunk, self.profile, run.config.primary_format, None)
        self.budget = self.policy.config.budget(self.profile.window)
        self.reply = placeholder_text(trunk.max_output_tokens)
        self.summary = placeholder_text(summary_tokens)
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
        from harness.mirage.trunk import SCRIPTED_ACKNOWLEDGEMENT

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
        self.result.summarized.append(sum(self.session.message_tokens[first:start]))
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


# -- planning ------------------------------------------------------------------------------


def plan_run(run: MirageRun) -> RunPlan:
    """The plan of ``run``; raises what the real run would raise for a bad pack, checkpoint or
    unreachable state."""
    from runtime.snapshot import load_snapshot

    family = run.family.trunk_config().family_id()
    with bad_files_reported():
        existing = run.family.existing()
    if existing is not None:
        sessions = {state: load_snapshot(cp.snapshot_path) for state, cp in existing.items()}
        eits: dict[str, int | None] = {s: cp.manifest.eit for s, cp in existing.items()}
        trunk_plan = TrunkPlan(family=family, reused=True)
        source: StateSource = "checkpoint"
    else:
        replayed, trunk_plan = _replay_trunk(run, family)
        sessions = {key: replayed.sessions[state] for key, state, _ in run.state_keys()}
        eits, source = {}, "estimate"
    answerers = [
        _answerer_plan(run, model, sessions, eits, source)
        for model in run.strategy.priced_answerers()
    ]
    config = run.config
    return RunPlan(
        pack=run.pack.name,
        profile=run.profile.name,
        window=run.profile.window,
        questions=len(run.questions()),
        conditions=list(config.conditions),
        repeats=config.repeats,
        concurrency=config.concurrency,
        trunk=trunk_plan,
        answerers=answerers,
        assumptions=_assumptions(source, run),
    )


def _replay_trunk(run: MirageRun, family: str) -> tuple[TrunkReplay, TrunkPlan]:
    from compaction.strategies.base import DEFAULT_OUTPUT_TOKENS

    config = run.config
    scripted = config.trunk_model == SCRIPTED_TRUNK_MODEL
    trunk_backbone = (
        None if scripted else run.backbone(config.trunk_model, config.trunk_output_tokens)
    )
    summarizer = (
        trunk_backbone
        if config.summarizer == config.trunk_model
        else run.backbone(config.summarizer, 512)
    )
    summary_tokens = (summarizer.max_output_tokens if summarizer else None) or DEFAULT_OUTPUT_TOKENS
    replayed = _ReplayedTrunk(run, trunk_backbone, summary_tokens).replay()
    groups = []
    if not scripted:
        turns = _growing_conversation(replayed.turn_inputs, config.trunk_output_tokens)
        groups.append(_group("trunk turns", config.trunk_model, turns, cache=True))
        if replayed.flush_inputs:
            flush = TokenTally(
                input=sum(replayed.flush_inputs),
                output=len(replayed.flush_inputs) * config.trunk_output_tokens,
                calls=len(replayed.flush_inputs),
            )
            groups.append(_group("memory flush", config.trunk_model, flush, cache=False))
    if replayed.summarized:  # every other summary format compacts the first compaction again
        summarized = replayed.summarized + replayed.summarized[:1] * (
            len(config.summary_formats) - 1
        )
        summaries = TokenTally(
            input=sum(summarized), output=len(summarized) * summary_tokens, calls=len(summarized)
        )
        groups.append(_group("compaction summary", config.summarizer, summaries, cache=False))
    return replayed, TrunkPlan(family=family, reused=False, turns=replayed.turns, groups=groups)


def _growing_conversation(inputs: list[int], output_budget: int) -> TokenTally:
    """Calls of one conversation: with caching each reads the prefix the previous one sent
    (and, with explicit markers, writes what it adds)."""
    read = sum(min(previous, current) for previous, current in itertools.pairwise(inputs))
    return TokenTally(
        input=sum(inputs),
        cached_read=read,
        cache_write=sum(inputs) - read,
        output=len(inputs) * output_budget,
        calls=len(inputs),
    )


def _group(what: str, model: str, tokens: TokenTally, *, cache: bool) -> CallGroup:
    mode = _caching_mode(model, None) if cache else "none"
    cached = {
        "explicit": tokens,
        "automatic": tokens.model_copy(update={"cache_write": 0}),
    }.get(mode, tokens.uncached)
    return CallGroup(
        what=what,
        model=model,
        tokens=cached,
        cost=cost_of(model, cached),
        cost_without_cache=cost_of(model, tokens.uncached),
    )


def _caching_mode(model: str, backbone: Backbone | None) -> CachingMode:
    if model.startswith(LOCAL_PREFIX):
        return "local"
    if backbone is not None:
        markers = backbone.cache_markers
    else:
        from runtime.backbones.prompt_cache import needs_cache_markers

        markers = needs_cache_markers(model)
    if markers:
        return "explicit"
    prices = prices_for(model)
    if not isinstance(prices, str) and prices.caches_prompts:
        return "automatic"
    return "none"


def _answerer_plan(
    run: MirageRun,
    model: str,
    sessions: dict[str, Session],
    eits: dict[str, int | None],
    source: StateSource,
) -> AnswererPlan:
    config = run.config
    budget = config.probe_output_tokens(model)
    backbone = None if run.strategy.own_prompt else run.backbone(model, budget)
    counter = PromptCounter(backbone)
    messages = _probe_messages(run)
    states = []
    for state, restored in sessions.items():
        context, tools = _probe_context(restored, backbone, budget, config.adapters)
        states.append(
            _state_plan(state, source, context, tools, counter, messages, eits.get(state))
        )
    mode = "none" if backbone is None else _caching_mode(model, backbone)
    tokens = _probe_tokens(states, config.conditions, budget)
    cached = _with_caching(tokens, states, config.concurrency, mode)
    return AnswererPlan(
        model=model,
        probes=sum(s.probes for s in states),
        output_budget=budget,
        caching=mode,
        counted_by=counter.name,
        states=states,
        calls=CallGroup(
            what="probes",
            model=model,
            tokens=cached,
            cost=cost_of(model, cached),
            cost_without_cache=cost_of(model, tokens),
        ),
    )


def _probe_messages(run: MirageRun) -> list[UserMessage]:
    """The probe message of every condition, question and repeat, in that order."""
    config = run.config
    questions = run.questions()
    return [
        UserMessage.text(run.scoring.prompt(text, condition))
        for condition in config.conditions
        for _, text, _ in questions
        for _ in range(config.repeats)
    ]


def _probe_context(
    restored: Session, backbone: Backbone | None, budget: int, adapters: bool
) -> tuple[list[Message], list[ToolSpec]]:
    """What a probe of a state sends before its question, on a copy of the restored session:
    the answerer's active context and the memory server's tools; for an agent we did not
    write (no backbone), the restored history alone."""
    from harness.kit.agents.builtin import as_answerer
    from memory_server import tools_specs
    from runtime.agent import Agent

    session = restored.fork()
    if backbone is None:  # an agent we did not write: its prompt is its own
        return list(session.messages), []
    as_answerer(session, backbone.model, budget, adapters)
    tools = tools_specs()
    return Agent(session, backbone, OfferedTools(tools)).active_context(), tools


def _state_plan(
    state: str,
    source: StateSource,
    context: list[Message],
    tools: list[ToolSpec],
    counter: PromptCounter,
    messages: list[UserMessage],
    eit: int | None,
) -> StatePlan:
    """One state's probes: the prefix they share and the mean input of a probe's first call
    (the first probe's whole prompt, its question's tokens swapped for the mean question's)."""
    prefix = counter.prompt(context, tools)
    first = counter.prompt([*context, messages[0]], tools)
    alone = _question_tokens(counter, messages)
    mean = first + sum(alone) / len(alone) - alone[0]
    return StatePlan(
        state=state,
        source=source,
        probes=len(messages),
        probe_input=round(mean, 1),
        prefix=prefix,
        checkpoint_eit=eit,
    )


def _question_tokens(counter: PromptCounter, messages: list[UserMessage]) -> list[int]:
    """Each probe message's own tokens (the rest of a probe's prompt is the same for all)."""
    empty = counter.prompt([], [])
    seen: dict[str, int] = {}
    tokens = []
    for message in messages:
        text = message.plain_text
        if text not in seen:
            seen[text] = counter.prompt([message], []) - empty
        tokens.append(seen[text])
    return tokens


def _probe_tokens(states: list[StatePlan], conditions: Sequence[str], budget: int) -> TokenTally:
    total = TokenTally()
    for state in states:
        per_condition = state.probes // max(1, len(conditions))
        for condition in conditions:
            calls = CALLS_PER_PROBE.get(condition, 1)
            extra = TOOL_ROUND_TOKENS * calls * (calls - 1) // 2
            total += TokenTally(
                input=round(per_condition * (calls * state.probe_input + extra)),
                output=per_condition * calls * budget,
                calls=per_condition * calls,
            )
    return total


def _with_caching(
    tokens: TokenTally, states: list[StatePlan], workers: int, mode: CachingMode
) -> TokenTally:
    """``tokens`` with the reads (and writes) of each state's prefix: after the first probe of
    each concurrent worker, every call of the state reads it."""
    if mode in ("none", "local"):
        return tokens
    read = write = 0
    calls_per_probe = tokens.calls / max(1, sum(s.probes for s in states))
    for state in states:
        if state.prefix < MIN_CACHED_PREFIX:
            continue
        first_calls = min(workers, state.probes)
        calls = math.floor(state.probes * calls_per_probe)
        read += (calls - first_calls) * state.prefix
        write += first_calls * state.prefix if mode == "explicit" else 0
    return tokens.model_copy(update={"cached_read": read, "cache_write": write})


def _assumptions(source: StateSource, run: MirageRun) -> list[str]:
    notes = [
        "calls per probe: 1 under C0, 2 under Cm (one retrieval round adding "
        f"~{TOOL_ROUND_TOKENS} input tokens); output counted at the full budget (an upper bound)",
        "caching: each state's prefix is written once per concurrent worker (explicit markers) "
        "and read by every later call of the state; prompts under "
        f"{MIN_CACHED_PREFIX} tokens are not cached; Anthropic's cache lives 5 minutes, so a "
        "state whose probes are further apart pays more writes",
    ]
    if source == "estimate":
        trunk = run.config.trunk_model
        reply = "the scripted acknowledgement" if trunk == "scripted" else "full-budget replies"
        notes.append(
            f"states replayed from the pack without a model: trunk {trunk} with {reply}, "
            "summaries at the summarizer's full output budget; a trunk model's real replies "
            "move each depth state by up to one turn"
        )
    if run.strategy.own_prompt:
        notes.append("agent under test: its own prompt is unknown; history + question counted")
    references = [model for model in run.config.answerers if is_reference(model)]
    if references:
        notes.append(
            f"reference agents ({', '.join(references)}) call no model: no tokens, no cost "
            "(docs/references.md)"
        )
    return notes


# -- text ----------------------------------------------------------------------------------


def plan_text(plan: RunPlan) -> str:
    """The plan as ``mirage run --dry-run`` prints it."""
    probes_per_state = plan.questions * len(plan.conditions) * plan.repeats
    lines = [
        "mirage run --dry-run: nothing was built, run or written.",
        f"pack {plan.pack} · profile {plan.profile} (window {plan.window:,}) · "
        f"{plan.questions} questions × {len(plan.conditions)} conditions × {plan.repeats} "
        f"repeat(s) = {probes_per_state} probes per state · concurrency {plan.concurrency}",
        "",
        _trunk_text(plan.trunk),
    ]
    for answerer in plan.answerers:
        lines += ["", *_answerer_text(answerer)]
    lines += ["", "assumptions:", *(f"  - {note}" for note in plan.assumptions)]
    return "\n".join(lines)


def _trunk_text(trunk: TrunkPlan) -> str:
    if trunk.reused:
        return f"trunk: checkpoints of family {trunk.family} exist; reused, no model calls"
    lines = [
        f"trunk: family {trunk.family} not built yet; about {trunk.turns} turns "
        "(states estimated from the pack and the depth profile)"
    ]
    lines += [f"  {_group_text(group)}" for group in trunk.groups] or ["  no model calls"]
    return "\n".join(lines)


def _group_text(group: CallGroup) -> str:
    tokens = group.tokens
    return (
        f"{group.what} ({group.model}): {tokens.calls:,} calls, input {tokens.input:,} "
        f"(cached read {tokens.cached_read:,}, cache write {tokens.cache_write:,}), "
        f"output ≤ {tokens.output:,}; cost {group.cost.text()} with caching, "
        f"{group.cost_without_cache.text()} without"
    )


def _answerer_text(answerer: AnswererPlan) -> list[str]:
    modes = {
        "explicit": "cache markers at the end of each checkpoint",
        "automatic": "the provider caches repeated prefixes itself",
        "none": "no prompt caching known for this model",
        "local": "runs on this machine (its own KV cache)",
    }
    width = max([12, *(len(state.state) for state in answerer.states)])
    lines = [
        f"answerer {answerer.model}: {answerer.probes} probes, output budget "
        f"{answerer.output_budget} tokens per call; caching: {modes[answerer.caching]}; "
        f"tokens counted by {answerer.counted_by}",
        f"  {'state':<{width}} {'source':<11} {'probe input':>12} {'cached prefix':>14} "
        f"{'checkpoint EIT':>15}",
    ]
    for state in answerer.states:
        eit = f"{state.checkpoint_eit:,}" if state.checkpoint_eit is not None else "-"
        lines.append(
            f"  {state.state:<{width}} {state.source:<11} {state.probe_input:>12,.0f} "
            f"{state.prefix:>14,} {eit:>15}"
        )
    lines.append(f"  {_group_text(answerer.calls)}")
    return lines
