"""Where the default ``mirage run`` spends its time: wall and CPU seconds per phase (workspace
index build, model load, the trunk's planting and filler turns, the memory flush + compaction
turn, each state's probes, the report), with the embedded model's calls, prompt tokens, tokens
prefilled (not taken from a KV cache) and generated per phase, and the embedded model's probe
phase as a whole (``probe_phase``: tokens generated per second, calls and the batches they went
out in; with ``--compare`` against a run from before batching, alone against batched).

CPU is this process plus its descendants (the llama.cpp worker, read from ``/proc``), which
depends much less on other load than wall time does: the 1-minute load is recorded at each
phase boundary. The run is the default one (``RunConfig()``: bundled pack, embedded SmolLM2
trunk, summarizer and answerer, 4 states x 2 conditions x 12 questions, then the three reference
agents, one row each) into a fresh folder, nothing reused; ``first_result_s`` is when each
answerer's first probe record was written (time to first result). Timing hooks wrap a few
functions (trunk turn, memory flush, compaction, probe, report, worker call); they only
observe. It also writes a digest of every probe's raw output, every checkpoint's snapshot hash,
the compaction summaries (``summaries.json``) and every embedded-model call in order (the hash
of its prompt and of its reply), so two runs (before/after a change, or two fresh runs) can be
compared for identical outputs (``--compare OTHER.json``: which outputs, checkpoints and
summaries differ, and the first model call whose prompt or reply differs).

Run: ``python benchmarks/bench_default_run.py [--limit N] [--trunk-model scripted] [--name N]``;
writes ``results/default_run.json`` (or ``results/<name>.json``). Takes the full run's time.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _common import RESULTS, write_results

import compaction.compactor as compactor_module
import compaction.policy as policy_module
import harness.mirage.report as report_module
from harness.kit.agents.builtin import BuiltinAgent
from harness.kit.results import ResultsLog
from harness.mirage.config import RunConfig
from harness.mirage.run import MirageRun
from harness.mirage.run.probing import Probing
from harness.mirage.trunk.runner import TrunkRunner
from runtime.backbones.llama.wire import BatchRequest, Generated, GenerateRequest
from runtime.backbones.llama.worker import LlamaWorker
from runtime.snapshot import load_snapshot, session_hash

TICKS = os.sysconf("SC_CLK_TCK")


def _descendant_cpu() -> float:
    """CPU seconds of every live descendant of this process (``/proc``), plus reaped ones."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        parents[int(entry.name)] = int(fields[1])
        cpu[int(entry.name)] = (int(fields[11]) + int(fields[12])) / TICKS
    me = os.getpid()
    total = 0.0
    for pid in cpu:
        ancestor = parents.get(pid)
        while ancestor and ancestor != me:
            ancestor = parents.get(ancestor)
        if ancestor == me:
            total += cpu[pid]
    reaped = os.times()
    return total + reaped.children_user + reaped.children_system


def _sample() -> tuple[float, float, float]:
    """Wall clock, this process's CPU, its descendants' CPU (seconds)."""
    return time.perf_counter(), time.process_time(), _descendant_cpu()


class Phases:
    """Wall/CPU per phase stack (innermost phase gets the time), plus model-call counters."""

    def __init__(self) -> None:
        self.stack: list[str] = []
        self.wall: dict[tuple[str, ...], float] = defaultdict(float)
        self.cpu: dict[tuple[str, ...], float] = defaultdict(float)
        self.worker_cpu: dict[tuple[str, ...], float] = defaultdict(float)
        self.counts: dict[tuple[str, ...], dict[str, float]] = defaultdict(
            lambda: defaultdict(float)
        )
        self.load: dict[tuple[str, ...], list[float]] = defaultdict(list)
        self._last = _sample()

    def _account(self) -> None:
        now = _sample()
        key = tuple(self.stack)
        self.wall[key] += now[0] - self._last[0]
        self.cpu[key] += now[1] - self._last[1] + now[2] - self._last[2]
        self.worker_cpu[key] += now[2] - self._last[2]
        self.load[key].append(os.getloadavg()[0])
        self._last = _sample()  # the /proc walk itself is not charged to the next phase

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self._account()
        self.stack.append(name)
        try:
            yield
        finally:
            self._account()
            self.stack.pop()

    def count(self, **values: float) -> None:
        bucket = self.counts[tuple(self.stack)]
        for name, value in values.items():
            bucket[name] += value


PHASES = Phases()


def _wrap_async(owner: Any, name: str, label: Callable[..., str]) -> None:
    original = getattr(owner, name)

    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        with PHASES.phase(label(*args, **kwargs)):
            return await original(*args, **kwargs)

    setattr(owner, name, wrapped)


def _wrap_sync(owner: Any, name: str, label: Callable[..., str]) -> None:
    original = getattr(owner, name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with PHASES.phase(label(*args, **kwargs)):
            return original(*args, **kwargs)

    setattr(owner, name, wrapped)


ANSWERER = "answerer "  # one answerer's probes: the embedded model's by state, a reference whole
FIRST_RESULT: dict[str, float] = {}  # result folder -> when its first probe record was written
MODEL_CALLS: list[dict[str, Any]] = []  # every embedded-model generation, in order
COMPACTING_TURNS: set[str] = set()
SCRIPTED_TURNS: set[str] = set()


def _trunk_turn_label(runner: TrunkRunner, message: Any, scripted: str | None) -> str:
    label = f"trunk.turn#{runner.position}"
    if scripted is not None:
        SCRIPTED_TURNS.add(label)
    return label


def _install_hooks() -> None:
    original_turn = TrunkRunner._turn

    async def turn(runner: TrunkRunner, message: Any, scripted: str | None) -> None:
        label = _trunk_turn_label(runner, message, scripted)
        before = runner.agent.session.compaction_count
        with PHASES.phase(label):
            await original_turn(runner, message, scripted)
        if runner.agent.session.compaction_count != before:
            COMPACTING_TURNS.add(label)

    TrunkRunner._turn = turn  # type: ignore[assignment,method-assign]
    _wrap_async(policy_module, "memory_flush", lambda *a, **k: "memory_flush")
    _wrap_async(compactor_module, "compact_session", lambda *a, **k: "summarize")
    _wrap_async(BuiltinAgent, "probe", lambda agent, cp, msg, *, tag: f"probes.{tag.split('.')[0]}")
    _wrap_sync(report_module, "write_report", lambda *a, **k: "report")
    _wrap_sync(MirageRun, "prepare_workspace", lambda *a, **k: "workspace_index")
    _wrap_async(Probing, "probe_model", lambda probing, model, *a, **k: f"{ANSWERER}{model}")
    _wrap_sync(LlamaWorker, "_handshake", lambda *a, **k: "model_load")
    original_call = LlamaWorker.call

    def call(worker: LlamaWorker, request: Any) -> Any:
        reply = original_call(worker, request)
        if isinstance(request, BatchRequest):
            pairs = list(zip(request.requests, reply, strict=True))
            PHASES.count(batches=1, batched_calls=len(pairs))
        else:
            pairs = [(request, reply)]
        for asked, answered in pairs:
            if isinstance(asked, GenerateRequest) and isinstance(answered, Generated):
                _count_generation(asked, answered)
            elif not isinstance(asked, GenerateRequest):
                PHASES.count(tokenize_calls=1)
        return reply

    LlamaWorker.call = call  # type: ignore[assignment,method-assign]
    original_append = ResultsLog.append

    def append(log: ResultsLog[Any], record: Any) -> bool:
        written = original_append(log, record)
        FIRST_RESULT.setdefault(log.path.parent.name, time.perf_counter())
        return written

    ResultsLog.append = append  # type: ignore[assignment,method-assign]


def _count_generation(request: GenerateRequest, reply: Generated) -> None:
    MODEL_CALLS.append(
        {
            "phase": "/".join(dict.fromkeys(PHASES.stack)),  # a group's probes share a phase
            "prompt_sha256": _sha256(request.prompt),
            "reply_sha256": _sha256(reply.text),
            "prompt_tokens": reply.prompt_tokens,
            "cached_tokens": reply.cached_tokens,
        }
    )
    PHASES.count(
        calls=1,
        prompt_tokens=reply.prompt_tokens,
        cached_tokens=reply.cached_tokens,
        prefilled_tokens=reply.prefill_tokens,
        generated_tokens=reply.output_tokens,
        prefill_s=reply.prefill_s,
        decode_s=reply.decode_s,
        drafted_tokens=reply.drafted_tokens,
        accepted_tokens=reply.accepted_tokens,
    )


def _group(path: tuple[str, ...]) -> str:
    """A phase stack's row: trunk turns by kind, the flush/compaction turn split in two."""
    if not path:
        return "other (setup, checkpoint writes)"
    if "model_load" in path:
        return "model_load"
    head = path[0]
    if head.startswith(ANSWERER) and len(path) > 1:
        return _group(path[1:])
    if head.startswith("trunk.turn#"):
        if head in COMPACTING_TURNS:
            inner = path[1] if len(path) > 1 else "its own reply"
            return f"flush+compaction turn: {inner}"
        return "trunk: planting turns" if head in SCRIPTED_TURNS else "trunk: filler turns"
    return head


def phase_table() -> dict[str, dict[str, float]]:
    rows: dict[str, dict[str, Any]] = {}
    turns: dict[str, set[str]] = defaultdict(set)
    for path in set(PHASES.wall) | set(PHASES.counts):
        name = _group(path)
        row = rows.setdefault(name, defaultdict(float))
        row["wall_s"] += PHASES.wall.get(path, 0.0)
        row["cpu_s"] += PHASES.cpu.get(path, 0.0)
        row["children_cpu_s"] += PHASES.worker_cpu.get(path, 0.0)
        for key, value in PHASES.counts.get(path, {}).items():
            row[key] += value
        loads = PHASES.load.get(path, [])
        if loads:
            row.setdefault("_loads", []).extend(loads)
        if path and path[0].startswith("trunk.turn#"):
            turns[name].add(path[0])
    table = {}
    for name, row in sorted(rows.items()):
        loads = row.pop("_loads", [])
        out = {key: round(value, 3) for key, value in row.items()}
        if name in turns:
            out["turns"] = len(turns[name])
        if loads:
            out["load_1min_mean"] = round(sum(loads) / len(loads), 2)
        table[name] = out
    return table


def probe_phase(table: dict[str, dict[str, float]]) -> dict[str, float]:
    """The embedded model's probe phases together: wall time, tokens generated per second of
    it, and how many of its calls went out in how many batches (0: one call at a time)."""
    rows = [row for name, row in table.items() if name.startswith("probes.")]
    wall = sum(row["wall_s"] for row in rows)
    generated = sum(row.get("generated_tokens", 0) for row in rows)
    return {
        "wall_s": round(wall, 1),
        "generated_tokens": int(generated),
        "tok_s": round(generated / wall, 1) if wall else 0.0,
        "calls": int(sum(row.get("calls", 0) for row in rows)),
        "batches": int(sum(row.get("batches", 0) for row in rows)),
    }


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def output_digest(folder: Path, out: Path) -> dict[str, Any]:
    """Each probe's raw output (by record key), each checkpoint's snapshot hash, each state's
    compaction summary and the embedded model's calls."""
    outputs = {}
    for line in (folder / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        key = ".".join(str(record[k]) for k in ("state", "condition", "question_id", "repeat"))
        outputs[key] = record.get("raw_output")
    snapshots, contents = {}, {}
    for manifest in sorted(out.glob("checkpoints/*/*/manifest.json")):
        data = json.loads(manifest.read_text())
        snapshots[manifest.parent.name] = data.get("snapshot_sha256")
        contents[manifest.parent.name] = _content_hash(manifest.parent / data["snapshot"])
    joined = json.dumps(outputs, sort_keys=True).encode()
    summaries = {
        entry["state"]: _sha256(entry["text"])
        for entry in json.loads((folder / "summaries.json").read_text())
    }
    return {
        "raw_outputs": outputs,
        "raw_outputs_sha256": hashlib.sha256(joined).hexdigest(),
        "checkpoint_sha256": snapshots,
        "checkpoint_content_sha256": contents,
        "summaries_sha256": summaries,
        "model_calls": MODEL_CALLS,
    }


def _content_hash(snapshot: Path) -> str:
    """The session's hash with the ledger's per-call latencies zeroed: what two runs of one
    trunk share when their outputs are identical (wall-clock time is not an output)."""
    session = load_snapshot(snapshot)
    for call in session.ledger.calls:
        call.latency_s = 0.0
    return session_hash(session)


def _cpu_model() -> str | None:
    """``model name`` of /proc/cpuinfo (None elsewhere)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return None
    return next(
        (line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), None
    )


def compare(mine: dict[str, Any], other_path: Path) -> dict[str, Any]:
    other_run = json.loads(other_path.read_text())
    other = other_run["outputs"]
    differing = sorted(
        key
        for key in set(mine["raw_outputs"]) | set(other["raw_outputs"])
        if mine["raw_outputs"].get(key) != other["raw_outputs"].get(key)
    )
    field = (
        "checkpoint_content_sha256"
        if "checkpoint_content_sha256" in mine and "checkpoint_content_sha256" in other
        else "checkpoint_sha256"
    )
    checkpoints = sorted(
        state
        for state in set(mine[field]) | set(other[field])
        if mine[field].get(state) != other[field].get(state)
    )
    summaries = sorted(
        state
        for state in set(mine["summaries_sha256"]) | set(other.get("summaries_sha256", {}))
        if mine["summaries_sha256"].get(state) != other.get("summaries_sha256", {}).get(state)
    )
    return {
        "against": str(other_path),
        "probe_phase": other_run.get("probe_phase") or probe_phase(other_run.get("phases", {})),
        "checkpoints_compared_by": field,
        "outputs_differing": differing,
        "checkpoints_differing": checkpoints,
        "summaries_differing": summaries,
        "model_calls": _first_differing_call(mine["model_calls"], other.get("model_calls")),
    }


def _first_differing_call(
    mine: list[dict[str, Any]], other: list[dict[str, Any]] | None
) -> dict[str, Any] | None:
    """How many embedded-model calls each run made, and the first whose prompt or reply
    differs (its index, phase and which of the two) when both made as many (a probes-only
    ``--reuse`` run makes none of the trunk's); None when the other run has no calls."""
    if other is None:
        return None
    counts: dict[str, Any] = {"calls": len(mine), "other_calls": len(other)}
    if len(mine) == len(other):
        for index, (call, theirs) in enumerate(zip(mine, other, strict=True)):
            differs = [key for key in ("prompt_sha256", "reply_sha256") if call[key] != theirs[key]]
            if differs:
                where = {"index": index, "phase": call["phase"], "differs": differs}
                return {**counts, "first_differing": where}
    return {**counts, "first_differing": None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="questions (default: the run's)")
    parser.add_argument("--trunk-model", default=None)
    parser.add_argument("--name", default="default_run", help="results file name")
    parser.add_argument("--compare", type=Path, default=None, help="an earlier results file")
    parser.add_argument("--keep", type=Path, default=None, help="run folder to keep")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="with --keep: keep its workspace and checkpoints, re-run only the probes",
    )
    args = parser.parse_args()
    out = args.keep or Path(tempfile.mkdtemp(prefix="mirage-default-run-")) / "run"
    if args.reuse and args.keep:
        for results in out.glob("*/results.jsonl"):
            shutil.rmtree(results.parent)
    else:
        shutil.rmtree(out, ignore_errors=True)
    options: dict[str, Any] = {"out": out}
    if args.limit is not None:
        options["limit"] = args.limit
    if args.trunk_model is not None:
        options["trunk_model"] = args.trunk_model
    config = RunConfig(**options)
    _install_hooks()
    load_before = os.getloadavg()
    started_wall, *started_cpu = _sample()
    folder: Path | None = None
    try:
        folder = asyncio.run(MirageRun(config).execute())[0]  # the model's; references follow
    except KeyboardInterrupt:  # a run stopped midway still reports the phases it finished
        print("interrupted: the phases so far", file=sys.stderr)
    PHASES._account()
    total_wall, *total_cpu = _sample()
    table = phase_table()
    outputs = output_digest(folder, out) if folder is not None else None
    data: dict[str, Any] = {
        "interrupted": folder is None,
        "config": {k: v for k, v in options.items() if k != "out"},
        "total_wall_s": round(total_wall - started_wall, 1),
        "total_cpu_s": round(sum(total_cpu) - sum(started_cpu), 1),
        "total_children_cpu_s": round(total_cpu[1] - started_cpu[1], 1),
        "load_1min_before": round(load_before[0], 2),
        "load_1min_after": round(os.getloadavg()[0], 2),
        "nproc": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "threads_env": os.environ.get("MIRAGE_LLAMA_THREADS"),
        "first_result_s": {
            name: round(when - started_wall, 1) for name, when in FIRST_RESULT.items()
        },
        "phases": table,
        "probe_phase": probe_phase(table),
        "outputs": outputs,
    }
    if args.compare is not None and outputs is not None:
        data["comparison"] = compare(outputs, args.compare)
    header = ("phase", "wall s", "cpu s", "child", "load", "calls", "prefill", "gen")
    print(f"{header[0]:<44}", *(f"{name:>8}" for name in header[1:]))
    for name, row in table.items():
        print(
            f"{name:<44} {row['wall_s']:>8.1f} {row['cpu_s']:>8.1f} {row['children_cpu_s']:>8.1f} "
            f"{row.get('load_1min_mean', 0):>8.1f} {int(row.get('calls', 0)):>8} "
            f"{int(row.get('prefilled_tokens', 0)):>8} {int(row.get('generated_tokens', 0)):>8}"
        )
    print("first result:", ", ".join(f"{k} {v} s" for k, v in data["first_result_s"].items()))
    probes = data["probe_phase"]
    print(
        f"embedded model's probes: {probes['generated_tokens']} tokens in {probes['wall_s']} s = "
        f"{probes['tok_s']} tok/s, {probes['calls']} calls in {probes['batches']} batches"
    )
    print(
        f"total: {data['total_wall_s']} s wall, {data['total_cpu_s']} s CPU "
        f"(load {data['load_1min_before']} -> {data['load_1min_after']} on {os.cpu_count()} cores)"
    )
    if "comparison" in data:
        comparison = data["comparison"]
        theirs = comparison.get("probe_phase") or {}
        print(
            f"vs {args.compare}: its probes {theirs.get('tok_s')} tok/s in "
            f"{theirs.get('batches')} batches ({theirs.get('wall_s')} s)"
        )
        calls = comparison["model_calls"] or {}
        print(
            f"vs {args.compare}: {len(comparison['outputs_differing'])} raw outputs differ, "
            f"{len(comparison['checkpoints_differing'])} checkpoints differ, "
            f"{len(comparison['summaries_differing'])} summaries differ; model calls "
            f"{calls.get('calls')} vs {calls.get('other_calls')}, first differing: "
            f"{calls.get('first_differing')}"
        )
    print(f"wrote {write_results(args.name, data)}")


if __name__ == "__main__":
    assert RESULTS.parent.is_dir()
    main()
