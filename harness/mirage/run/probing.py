"""Probing: for each answerer, every state × condition × question × repeat on a fresh restore,
the memory server pinned to the checkpoint's workspace version, records appended to
``<out>/<answerer>/results.jsonl`` (resumable; with ``--retry-errors`` only the failed ones);
beside them the states' compaction summaries (``summaries.json``) and visibility map
(``visibility.json``) for the report.

Above: ``MirageRun`` and the strategies (which make the agent). Below: the probe plan and loop
(``harness.mirage.probing.loop``), the retry target, the memory endpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.kit.memory import memory_endpoint
from harness.mirage.probing.records import ProbeRecord, RecordKey
from harness.mirage.trunk.checkpoints import Checkpoint

if TYPE_CHECKING:
    from harness.kit.agents.base import AgentUnderTest
    from harness.mirage.run.layout import RunLayout
    from harness.mirage.strategies.base import RunStages


class Probing:
    """The probes of ``run``'s answerers."""

    def __init__(self, run: RunLayout, stages: RunStages) -> None:
        """``stages``: the whole run, as its strategy sees it (``run`` itself)."""
        self.run = run
        self.stages = stages

    async def probe_model(self, model: str, checkpoints: dict[str, Checkpoint], index: Any) -> Path:
        """Every unfinished probe of one answerer (``model``: a model string, a reference agent,
        or the agent under test as ``answerers`` names it), end to end; its result folder."""
        own = {key for key, _, _ in self.run.state_keys(model)}
        mine = {key: cp for key, cp in checkpoints.items() if key in own}
        return await self.run.strategy.probe(self.stages, model, mine, index)

    async def probe_agent(
        self, agent: AgentUnderTest, model_dir: Path, checkpoints: dict[str, Checkpoint], index: Any
    ) -> Path:
        """Every probe of ``agent`` in state-major order, the memory server pinned per state;
        the compaction summaries of the states go to ``summaries.json`` and the visibility map
        of the checkpoints to ``visibility.json``, for the report."""
        from harness.mirage.probing.visibility import write_run_visibility
        from harness.mirage.report.formats import collect_summaries, write_summaries

        run = self.run
        with memory_endpoint(
            run.workspace,
            index,
            model_dir / "calls.jsonl",
            url=run.config.memory_url,
            token=run.config.memory_token,
        ) as memory:
            agent.bind_memory(memory.tagged_url)
            model_dir.mkdir(parents=True, exist_ok=True)
            write_summaries(model_dir, collect_summaries(checkpoints))
            write_run_visibility(model_dir, checkpoints, run.workspace, run.pack)
            try:
                await self.probe_states(agent, model_dir, checkpoints, memory)
            finally:
                await agent.aclose()  # its connections to the memory server, before it stops
        return model_dir

    def pending_probes(self, model_dir: Path, checkpoints: dict[str, Checkpoint]) -> int:
        """How many probes of ``checkpoints`` this run would still run in ``model_dir``: those
        of its shard with no record yet, or with ``--retry-errors`` the failed ones."""
        from harness.mirage.probing.retry import pending_keys

        planned = self.planned_keys(checkpoints)
        return len(pending_keys(model_dir, planned, self.run.config.retry_errors))

    def planned_keys(self, checkpoints: dict[str, Checkpoint]) -> list[RecordKey]:
        """The keys of every probe of this run's shard (the whole plan when unsharded)."""
        from harness.mirage.probing.loop import plan_probes
        from harness.mirage.run.shards import shard_keys

        config = self.run.config
        tasks = plan_probes(checkpoints, self.run.questions(), config.conditions, config.repeats)
        return shard_keys(tasks, config.shard)

    async def probe_states(
        self,
        agent: AgentUnderTest,
        model_dir: Path,
        checkpoints: dict[str, Checkpoint],
        memory: Any,
    ) -> None:
        """Every unfinished probe of ``agent``, state by state, ``memory`` pinned per state."""
        from harness.kit.rundir import write_workspace_link
        from harness.mirage.probing.loop import plan_probes, run_probes
        from harness.mirage.probing.retry import probe_target

        run, config = self.run, self.run.config
        questions = run.questions()
        model_dir.mkdir(parents=True, exist_ok=True)
        write_workspace_link(model_dir, run.workspace)
        planned = set(self.planned_keys(checkpoints))
        with probe_target(model_dir, config.retry_errors, planned) as target:
            for state, checkpoint in checkpoints.items():
                tasks = [
                    task
                    for task in plan_probes(
                        {state: checkpoint}, questions, config.conditions, config.repeats
                    )
                    if target.wanted(task.key)
                ]
                if not tasks:
                    continue
                memory.pin(checkpoint.workspace_version)
                await run_probes(
                    agent,
                    tasks,
                    target.log,
                    run.resolver(checkpoint.workspace_version),
                    run.scoring,
                    concurrency=config.concurrency,
                    on_done=run.progress.probes(agent.name, state, len(tasks)),
                )

    def tally(self) -> tuple[int, int]:
        """(probes kept, probes planned) over this run's result folders, as the results logs
        hold them now: what an interrupted run says it kept (checkpoints not needed)."""
        from harness.kit.results import RESULTS_FILE, read_records
        from harness.mirage.run.shards import shard_slice

        run, config = self.run, self.run.config
        questions = run.questions()
        kept = total = 0
        for answerer in run.strategy.answerers():
            keys = [
                RecordKey(state, condition, question_id, repeat)
                for state, _, _ in run.state_keys(answerer)
                for condition in config.conditions
                for question_id, _, _ in questions
                for repeat in range(config.repeats)
            ]
            planned = set(shard_slice(keys, config.shard))
            folder = run.strategy.result_dir(run.out, answerer)
            total += len(planned)
            if (folder / RESULTS_FILE).is_file():
                kept += len({r.key for r in read_records(folder, ProbeRecord)} & planned)
        return kept, total
