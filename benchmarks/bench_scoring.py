"""Harness scoring-side overhead per probe: parse + score under each scoring profile (SOURCE
canonicalised through a real workspace, as in a run), durable record append, aggregation,
report writing.

The probe replies are the 5,570 replies built to match the paper's Table 1 for seven models
(``tests/harness/paper_tables.py``), cycled to the requested count and spread over three runs.

    python benchmarks/bench_scoring.py [--probes 5000]

Prints a table and writes benchmarks/results/scoring.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from itertools import cycle, islice
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # for tests.harness.paper_tables

from harness.kit.results import ResultsLog, read_records  # noqa: E402
from harness.mirage.probing.records import ProbeRecord, RecordKey, build_record  # noqa: E402
from harness.mirage.protocol import PROFILE_NAMES  # noqa: E402
from harness.mirage.report import write_report  # noqa: E402
from harness.mirage.report.aggregate import aggregate  # noqa: E402
from harness.mirage.scoring import SourceResolver, get_profile, score_reply  # noqa: E402
from memory_server.workspace import Workspace  # noqa: E402
from tests.harness.paper_tables import ARTIFACTS, MODELS, Probe, build_probes  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "scoring.json"


def _probes(count: int) -> list[Probe]:
    everything = [probe for model in MODELS for probe in build_probes(model)]
    return list(islice(cycle(everything), count))


def _timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def _workspace(root: Path) -> Workspace:
    for artifact in ARTIFACTS:
        for path in (f"artifacts/{artifact}.png", f"derived/{artifact}.table.csv"):
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(artifact)
    return Workspace.open(root)


def _score_timings(probes: list[Probe], workspace: Workspace) -> dict[str, float]:
    timings: dict[str, float] = {}
    for name in PROFILE_NAMES:
        profile = get_profile(name)
        resolver = profile.source_resolver(workspace)
        samples = sorted(
            _timed(partial(score_reply, p.raw_output, p.gold, resolver, profile)) for p in probes
        )
        timings[f"{name}_parse_score_us_p50"] = 1e6 * statistics.median(samples)
        timings[f"{name}_parse_score_us_p95"] = 1e6 * samples[int(0.95 * len(samples))]
        timings[f"{name}_probes_per_s"] = len(samples) / sum(samples)
    return timings


def _log_timings(probes: list[Probe], resolver: SourceResolver, tmp: Path) -> dict[str, float]:
    path = tmp / "results.jsonl"
    append_times = []
    with ResultsLog(path, ProbeRecord) as results:
        for index, probe in enumerate(probes):  # three runs, as in the paper
            key = RecordKey(probe.state, "C0", f"{probe.question_id}.{index}", index % 3)
            record = build_record(key, probe.raw_output, probe.gold, resolver)
            append_times.append(_timed(partial(results.append, record)))
    records = read_records(path, ProbeRecord)
    return {
        "append_fsync_ms_p50": 1e3 * statistics.median(append_times),
        "append_fsync_ms_p95": 1e3 * sorted(append_times)[int(0.95 * len(append_times))],
        "read_all_s": _timed(lambda: read_records(path, ProbeRecord)),
        "resume_open_s": _timed(lambda: ResultsLog(path, ProbeRecord).close()),
        "aggregate_s": _timed(lambda: aggregate(records)),
        "report_with_figures_s": _timed(lambda: write_report(tmp, records)),
    }


def run(count: int) -> dict[str, float | int | str]:
    probes = _probes(count)
    with tempfile.TemporaryDirectory() as tmp:
        workspace = _workspace(Path(tmp) / "workspace")
        scoring = _score_timings(probes, workspace)
        logging = _log_timings(probes, get_profile().source_resolver(workspace), Path(tmp))
    return {
        "probes": count,
        **scoring,
        **logging,
        "machine": f"{platform.machine()} {platform.python_version()}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--probes", type=int, default=5000)
    result = run(parser.parse_args().probes)
    for name, value in result.items():
        print(f"{name:24} {value:.3f}" if isinstance(value, float) else f"{name:24} {value}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
