"""An agent that answers in batches (the embedded model: its replies depend on their batch) is
probed in fixed groups cut from the plan, so a probe's batch partners are the same in a fresh
run, a resumed one and a retry, whatever ``--concurrency`` says."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from harness.kit.agents.base import AgentUnderTest, ProbeReply, RestorePoint
from harness.kit.results import RESULTS_FILE, read_records
from harness.mirage.probing.loop import ProbeTask, lockstep_groups, plan_probes, run_probes
from harness.mirage.probing.records import ProbeRecord
from harness.mirage.probing.retry import probe_target
from harness.mirage.scoring import Gold, KnownIdResolver, get_profile
from runtime.backbones.lockstep import current_member
from tests.harness.agents_support import make_checkpoint

GOLD = Gold(answerable="NO", artifact="chart_x", keywords=("Ferncliff",))


class BatchEchoAgent(AgentUnderTest):
    """Answers every probe with the tags of the batch its question went out in."""

    name = "batch-echo"
    probe_group_size = 3

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def send(self, tags: Sequence[object]) -> list[object]:
        self.batches.append([str(tag) for tag in tags])
        return [" ".join(str(t) for t in tags)] * len(tags)

    async def probe(self, checkpoint: RestorePoint, message: str, *, tag: str) -> ProbeReply:
        member = current_member()
        assert member is not None, "a batching agent is probed inside its group"
        await asyncio.sleep(0.001 * (hash(tag) % 7))  # arrivals in no particular order
        text = await member.submit(self.send, tag)
        return ProbeReply(text=f"ANSWERABLE=NO\nSOURCE=NONE\nANSWER={text}")


def plan(root: Path, questions: int) -> list[ProbeTask]:
    checkpoint = make_checkpoint(root)
    asked = [(f"q{n:02d}", f"Which town composted in {2000 + n}?", GOLD) for n in range(questions)]
    return list(plan_probes({"S2": checkpoint}, asked, ["C0", "Cm"], 1))


async def probe(folder: Path, tasks: list[ProbeTask], *, keep: int | None = None) -> BatchEchoAgent:
    """One ``mirage run`` pass over ``tasks``; ``keep``: stop after that many probes ran (as a
    killed run would) by handing only the first ones over."""
    agent = BatchEchoAgent()
    with probe_target(folder, False, {task.key for task in tasks}) as target:
        wanted = [task for task in tasks if target.wanted(task.key)][:keep]
        await run_probes(
            agent, wanted, target.log, KnownIdResolver([]), get_profile(), concurrency=8, plan=tasks
        )
    return agent


def answers(folder: Path) -> dict[str, str]:
    return {
        ".".join(map(str, r.key)): r.raw_output or ""
        for r in read_records(folder / RESULTS_FILE, ProbeRecord)
    }


def test_groups_follow_the_plan_and_a_larger_limit_only_adds_groups(tmp_path: Path) -> None:
    five = lockstep_groups(plan(tmp_path / "a", 5), 3)
    seven = lockstep_groups(plan(tmp_path / "b", 7), 3)
    tags = [[task.tag for task in group] for group in five]
    assert tags == [
        ["S2.C0.q00.r0", "S2.C0.q01.r0", "S2.C0.q02.r0"],
        ["S2.C0.q03.r0", "S2.C0.q04.r0"],
        ["S2.Cm.q00.r0", "S2.Cm.q01.r0", "S2.Cm.q02.r0"],
        ["S2.Cm.q03.r0", "S2.Cm.q04.r0"],
    ]
    assert [t.tag for t in seven[0]] == tags[0]  # full groups stay as they were


async def test_a_resumed_run_asks_each_probe_in_the_batch_a_fresh_run_did(tmp_path: Path) -> None:
    tasks = plan(tmp_path / "family", 5)
    fresh, resumed = tmp_path / "fresh", tmp_path / "resumed"
    fresh.mkdir()
    resumed.mkdir()
    agent = await probe(fresh, tasks)
    assert agent.batches[0] == ["S2.C0.q00.r0", "S2.C0.q01.r0", "S2.C0.q02.r0"]
    assert len(agent.batches) == 4  # one batch per group, never mixed by timing
    written = [r.key for r in read_records(fresh / RESULTS_FILE, ProbeRecord)]
    assert written == [task.key for task in tasks]  # in plan order, whatever finished first

    await probe(resumed, tasks, keep=4)  # killed after four probes: q03 ran without its partner
    assert len(answers(resumed)) == 4
    second = await probe(resumed, tasks)
    assert answers(resumed) == answers(fresh)
    # the partly recorded group was asked whole again; only its missing probe was recorded
    assert ["S2.C0.q03.r0", "S2.C0.q04.r0"] in second.batches
    assert len(read_records(resumed / RESULTS_FILE, ProbeRecord)) == len(tasks)
