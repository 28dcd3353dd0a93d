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
- otherwise a token-level replay of the trunk (``estimate``, ``harness.mirage.run.replay``): the
  pack's planting turns, the seeded filler, the trunk's replies (the scripted acknowledgement, or
  for a model trunk a reply that fills its output budget) and a summary that fills the
  summarizer's output budget, walked by the trunk's own driver with the trunk's own compaction
  policy deciding when it flushes and compacts and the compactor which tail it keeps.

The same replay says who writes each summary format's compaction summary and, cut as the format
cuts it for the summarizer's window, how many calls it takes (``harness.mirage.trunk.summarizers``;
a warning when more than one); a real run says those lines first.

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
from typing import Literal

from pydantic import BaseModel, Field

from harness.mirage.costs import Cost, TokenTally, cost_of, prices_for
from harness.mirage.references import is_reference
from harness.mirage.run import MirageRun, bad_files_reported
from harness.mirage.run.replay import (
    OfferedTools,
    PromptCounter,
    TrunkReplay,
    replay_summaries,
)
from harness.mirage.trunk.checkpoints import SCRIPTED_TRUNK_MODEL
from harness.mirage.trunk.summarizers import SummaryPlan, summary_lines
from runtime.backbones.base import LOCAL_PREFIX, Backbone
from runtime.messages import Message, ToolSpec, UserMessage
from runtime.session import Session

TOOL_ROUND_TOKENS = 800
"""Assumed input a retrieval round adds to a probe's second call: the call and the recall
result (five hits of a ~320-character snippet with their citations)."""
CALLS_PER_PROBE: dict[str, int] = {"C0": 1, "Cm": 2}
MIN_CACHED_PREFIX = 1024
"""Providers cache nothing shorter (OpenAI: 1,024 tokens; Anthropic: 1,024 to 4,096)."""
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
    summaries: list[SummaryPlan] = Field(default_factory=list)


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
        _answerer_plan(run, model, sessions, eits, source) for model in run.strategy.kind.priced
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
    config = run.config
    replayed, summaries = replay_summaries(run)
    groups = []
    if config.trunk_model != SCRIPTED_TRUNK_MODEL:
        turns = _growing_conversation(replayed.turn_inputs, config.trunk_output_tokens)
        groups.append(_group("trunk turns", config.trunk_model, turns, cache=True))
        if replayed.flush_inputs:
            flush = TokenTally(
                input=sum(replayed.flush_inputs),
                output=len(replayed.flush_inputs) * config.trunk_output_tokens,
                calls=len(replayed.flush_inputs),
            )
            groups.append(_group("memory flush", config.trunk_model, flush, cache=False))
    groups += _summary_groups(replayed, summaries)
    plan = TrunkPlan(
        family=family, reused=False, turns=replayed.turns, groups=groups, summaries=summaries
    )
    return replayed, plan


def _summary_groups(replayed: TrunkReplay, summaries: list[SummaryPlan]) -> list[CallGroup]:
    """The summaries' calls, one group per summarizer: the primary format's summaries of every
    compaction, and each other format's of the first (its branch compacts it again)."""
    if not replayed.summarized:
        return []
    tallies: dict[str, TokenTally] = {}
    primary, *others = summaries
    for plan in replayed.chunk_plans:
        tallies[primary.model] = tallies.get(primary.model, TokenTally()) + _summary_tally(
            plan.chunks, plan.input_tokens, primary.output_tokens
        )
    for other in others:
        tallies[other.model] = tallies.get(other.model, TokenTally()) + _summary_tally(
            other.chunks, other.input_tokens, other.output_tokens
        )
    return [
        _group("compaction summary", model, tally, cache=False) for model, tally in tallies.items()
    ]


def _summary_tally(calls: int, input_tokens: int, output_tokens: int) -> TokenTally:
    return TokenTally(input=input_tokens, output=calls * output_tokens, calls=calls)


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
    backbone = None if run.strategy.kind.own_prompt else run.backbone(model, budget)
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
    if run.strategy.kind.own_prompt:
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
    lines += [f"  {line}" for line in summary_lines(trunk.summaries)]
    lines += [f"  {_group_text(group)}" for group in trunk.groups] or ["  no model calls"]
    return "\n".join(lines)


def _group_text(group: CallGroup) -> str:
    tokens = group.tokens
    if group.cost.no_model:
        return f"{group.what} ({group.model}): {tokens.calls:,} calls, no model, no cost"
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
