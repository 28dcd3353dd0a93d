"""Probing: for each answerer, every state × condition × question × repeat on a fresh restore,
the memory server pinned to the checkpoint's workspace version, records appended to
``<out>/<answerer>/results.jsonl`` (resumable; with ``--retry-errors`` only the failed ones);
beside them the states' compaction summaries (``summaries.json``) and visibility map
(``visibility.json``) for the report.

Above: ``MirageRun``, which hands it what its strategy answered (``Probes``: the checkpoints and
how each answerer answers). Below: the probe plan and loop (``harness.mirage.probing.loop``), the
retry target, the memory endpoint, the visibility map and the summaries' file.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from harness.kit.memory import MemoryEndpoint, memory_endpoint
from harness.mirage.probing.records import ProbeRecord, RecordKey
from harness.mirage.trunk.checkpoints import Checkpoint

if TYPE_CHECKING:
    from harness.kit.agents.base import AgentUnderTest
    from harness.mirage.run.layout import RunLayout
    from harness.mirage.strategies import Answering, Probes
    from memory_server.index import HybridIndex


class Probing:
    """The probes of ``run``'s answerers."""

    def __init__(self, run: RunLayout) -> None:
        self.run = run

    async def probe_model(
        self, model: str, folder: Path, probes: Probes, index: HybridIndex
    ) -> Path:
        """Every unfinished probe of one answerer (``model``: a model string, a reference agent,
        or the agent under test as its strategy names it) into ``folder``, answered as
        ``probes`` says, end to end; its result folder."""
        answering = probes.answering(model, folder)
        if answering is None:  # nothing left to probe
            return folder
        own = {key for key, _, _ in self.run.state_keys(model)}
        mine = {key: cp for key, cp in probes.checkpoints.items() if key in own}
        with ExitStack() as stack:
            memory = answering.memory
            if memory is None:  # the run's own, for this answerer
                memory = self._memory(stack, answering, folder, index)
            self._write_states(answering, folder, mine)
            try:
                await self.probe_states(answering.agent, folder, mine, memory)
            finally:
                if answering.memory is None:  # its connections to the memory server, first
                    await answering.agent.aclose()
        return folder

    def _memory(
        self, stack: ExitStack, answering: Answering, folder: Path, index: HybridIndex
    ) -> MemoryEndpoint:
        """A memory server for one answerer's probes, the agent bound to it."""
        run = self.run
        memory = stack.enter_context(
            memory_endpoint(
                run.workspace,
                index,
                folder / "calls.jsonl",
                url=run.config.memory_url,
                token=run.config.memory_token,
            )
        )
        answering.agent.bind_memory(memory.tagged_url)
        return memory

    def _write_states(
        self, answering: Answering, folder: Path, checkpoints: dict[str, Checkpoint]
    ) -> None:
        """For the report: the compaction summaries of the states (``summaries.json``; none
        when the agent keeps its context in its own store) and the visibility map of the
        checkpoints (``visibility.json``)."""
        from harness.mirage.probing.visibility import snapshot_error, write_run_visibility
        from harness.mirage.report.formats import collect_summaries, write_summaries

        run, reason = self.run, answering.own_context
        folder.mkdir(parents=True, exist_ok=True)
        if reason is None:
            write_summaries(folder, collect_summaries(checkpoints))
        unreadable = snapshot_error if reason is None else reason
        write_run_visibility(folder, checkpoints, run.workspace, run.pack, unreadable)

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
        memory: MemoryEndpoint,
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
                plan = list(
                    plan_probes({state: checkpoint}, questions, config.conditions, config.repeats)
                )
                tasks = [task for task in plan if target.wanted(task.key)]
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
                    plan=plan,
                )

    def planned(self, answerer: str) -> list[RecordKey]:
        """The keys of every probe of ``answerer`` in this run's shard, in plan order (state
        major, as ``plan_probes`` orders them), whether or not its checkpoints exist yet."""
        from harness.mirage.run.shards import shard_slice

        run, config = self.run, self.run.config
        questions = run.questions()
        keys = [
            RecordKey(state, condition, question_id, repeat)
            for state, _, _ in run.state_keys(answerer)
            for condition in config.conditions
            for question_id, _, _ in questions
            for repeat in range(config.repeats)
        ]
        return shard_slice(keys, config.shard)

    def tally(self) -> tuple[int, int]:
        """(probes kept, probes planned) over this run's result folders, as the results logs
        hold them now: what an interrupted run says it kept (checkpoints not needed)."""
        from harness.kit.results import RESULTS_FILE, read_records

        kept = total = 0
        for answerer, folder in self.run.answerers().items():
            planned = set(self.planned(answerer))
            total += len(planned)
            if (folder / RESULTS_FILE).is_file():
                kept += len({r.key for r in read_records(folder, ProbeRecord)} & planned)
        return kept, total
