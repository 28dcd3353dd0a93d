"""The probe loop of Algorithm 1: for every state × condition × question × repeat, one fresh
restore, one probe turn, one scored record appended to ``results.jsonl``, its retrieval path
classified (``records.path_fields``) from what the agent reports the probe had
(``ProbeReply.context``) and the turn's calls.

Order is state-major (then condition, question, repeat) so a local model's KV cache keeps the
checkpoint's prefix between consecutive probes; ``concurrency`` workers take probes in that
order. Keys already in the log are skipped, which is how a killed run resumes. An agent whose
backbone decodes calls in batches (the embedded model) is probed in fixed groups instead
(``lockstep_groups``): its replies depend on their batch, and the groups come from the plan,
so they are the same whatever ran before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import structlog

from harness.kit.agents.base import AgentUnderTest, ProbeReply
from harness.kit.results import ResultsLog
from harness.mirage.probing.records import (
    ProbeRecord,
    RecordKey,
    build_record,
    path_fields,
    provider_error_record,
)
from harness.mirage.protocol import Condition
from harness.mirage.scoring import Gold, ScoringProfile, SourceResolver
from harness.mirage.trunk.checkpoints import Checkpoint
from runtime.backbones.lockstep import LockstepGroup

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class ProbeTask:
    key: RecordKey
    checkpoint: Checkpoint
    question: str
    gold: Gold
    condition: Condition

    @property
    def tag(self) -> str:
        state, condition, question_id, repeat = self.key
        return f"{state}.{condition}.{question_id}.r{repeat}"


def plan_probes(
    checkpoints: dict[str, Checkpoint],
    questions: Sequence[tuple[str, str, Gold]],
    conditions: Sequence[Condition],
    repeats: int,
) -> Iterator[ProbeTask]:
    """Every probe in state-major order; ``questions`` holds (id, text, gold)."""
    for state, checkpoint in checkpoints.items():
        for condition in conditions:
            for question_id, text, gold in questions:
                for repeat in range(repeats):
                    key = RecordKey(state, condition, question_id, repeat)
                    yield ProbeTask(key, checkpoint, text, gold, condition)


def record_for(
    task: ProbeTask,
    reply: ProbeReply,
    resolver: SourceResolver | None,
    model: str,
    profile: ScoringProfile,
) -> ProbeRecord:
    extra = {
        "prompt_template": profile.template(task.condition),
        "model": model,
        "latency_s": reply.latency_s,
        "usage": reply.usage,
        "finish_reason": reply.finish_reason,
        "checkpoint_sha256": task.checkpoint.manifest.snapshot_sha256,
        "restored_sha256": reply.restored_sha256,
        "state_eit": task.checkpoint.manifest.eit,
        "summary_format": task.checkpoint.manifest.summary_format,
        "tag": task.tag,
        "trace": reply.trace,
        "declared_path": reply.trace.get("declared_path"),
    }
    if reply.error is not None:  # no turn: its path is what its context alone gave
        paths = path_fields(task.gold, [], reply.context)
        return provider_error_record(task.key, task.gold, reply.error, profile, **extra, **paths)
    calls = [call.model_dump() for call in reply.tool_calls]
    return build_record(
        task.key,
        reply.text,
        task.gold,
        resolver,
        profile,
        context=reply.context,
        tool_calls=calls,
        **extra,
    )


async def run_probes(
    agent: AgentUnderTest,
    tasks: Sequence[ProbeTask],
    results: ResultsLog,
    resolver: SourceResolver | None,
    profile: ScoringProfile,
    *,
    concurrency: int = 1,
    on_done: Callable[[ProbeRecord], None] | None = None,
    plan: Sequence[ProbeTask] | None = None,
) -> int:
    """Run every task whose key is not yet in ``results``, asking and scoring each probe the
    way ``profile`` does; returns how many ran. An agent that answers in batches
    (``probe_group_size``) is probed in the fixed groups ``lockstep_groups`` cuts from ``plan``
    (every planned probe of these states; default ``tasks``), whatever ``concurrency``."""
    pending = [task for task in tasks if task.key not in results]
    wanted = {task.key for task in pending}

    async def ask(task: ProbeTask) -> ProbeRecord:
        message = profile.prompt(task.question, task.condition)
        reply = await agent.probe(task.checkpoint, message, tag=task.tag)
        return record_for(task, reply, resolver, agent.name, profile)

    async def keep(record: ProbeRecord) -> None:
        await asyncio.to_thread(results.append, record)  # its fsync: off the event loop
        if on_done is not None:
            on_done(record)

    async def ask_as_member(task: ProbeTask, lockstep: LockstepGroup) -> ProbeRecord:
        with lockstep.member(task.tag):
            return await ask(task)

    width = agent.probe_group_size
    if width is not None:
        for group in lockstep_groups(plan if plan is not None else tasks, width):
            if any(task.key in wanted for task in group):
                lockstep = LockstepGroup(task.tag for task in group)
                answered = await asyncio.gather(*(ask_as_member(t, lockstep) for t in group))
                for record in answered:  # in plan order; partners asked again are not kept
                    if record.key in wanted:
                        await keep(record)
    else:
        queue: asyncio.Queue[ProbeTask] = asyncio.Queue()
        for task in pending:
            queue.put_nowait(task)

        async def worker() -> None:
            while not queue.empty():
                await keep(await ask(queue.get_nowait()))

        await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
    log.info("probes_done", ran=len(pending), skipped=len(tasks) - len(pending))
    return len(pending)


def lockstep_groups(tasks: Sequence[ProbeTask], width: int) -> list[list[ProbeTask]]:
    """``tasks`` cut into the fixed groups a batching agent answers together: per state,
    condition and repeat, consecutive questions, at most ``width`` at a time. A larger
    ``--limit`` only adds groups (questions come in pack order), so a group is the same in a
    fresh run, a resumed one or a retry, and so are the batches its replies came from."""
    lanes: dict[tuple[str, str, int], list[ProbeTask]] = {}
    for task in tasks:
        state, condition, _, repeat = task.key
        lanes.setdefault((state, condition, repeat), []).append(task)
    return [lane[i : i + width] for lane in lanes.values() for i in range(0, len(lane), width)]
