"""Wall time of the default ``mirage cue run`` (bundled cue-en pack, full context, naive RAG,
the memory server; embedded SmolLM2) — the target is under 10 minutes on 2 cores.

Run: ``python benchmarks/bench_cue.py [--out DIR] [--config FILE]``; writes
``results/cue.json`` with the wall time, the load average before and after (timings on a shared
machine are noisy: quote them with the load), the time and tokens per condition, and the
summary table's numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import write_results

from harness.cue.config import load_run_config
from harness.cue.records import CueRecord
from harness.cue.report import summary_table
from harness.cue.run import CueRun
from harness.kit.results import read_records


def per_condition(records: list[CueRecord]) -> dict[str, dict[str, float]]:
    grouped: dict[str, list[CueRecord]] = defaultdict(list)
    for record in records:
        grouped[record.condition].append(record)
    return {
        name: {
            "questions": len(items),
            "answer_seconds": round(sum(r.latency_s or 0.0 for r in items), 1),
            "prompt_tokens": sum(r.usage.input_tokens or 0 for r in items),
            "cached_tokens": sum(r.usage.cached_tokens or 0 for r in items),
        }
        for name, items in grouped.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=None, help="keep the run here")
    parser.add_argument("--config", type=Path, default=None, help="run config (default run)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        out = args.out or Path(scratch) / "cue"
        config = load_run_config(args.config, out=out)
        load_before = os.getloadavg()
        started = time.perf_counter()
        files = asyncio.run(CueRun(config).execute())
        wall = time.perf_counter() - started
        load_after = os.getloadavg()
        records = read_records(files.summary.parent / "results.jsonl", CueRecord)
    table = summary_table(files.metrics)
    print(table)
    print(f"\nwall time {wall:.0f} s; load average before {load_before}, after {load_after}")
    path = write_results(
        "cue",
        {
            "wall_seconds": round(wall, 1),
            "target_seconds": 600,
            "cpus": os.cpu_count(),
            "load_before": load_before,
            "load_after": load_after,
            "conditions": per_condition(records),
            "memory_avg": {
                name: {str(k): v for k, v in m.memory_avg.items()} | {"ei_gap": m.ei_gap}
                for name, m in files.metrics.items()
            },
            "summary_table": table,
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
