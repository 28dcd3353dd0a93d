"""What durability of ``results.jsonl`` costs per probe: one append of a real probe record with
no sync, ``fdatasync`` per record, ``fsync`` per record (what ``ResultsLog`` does) and ``fsync``
per batch of 8, on the disk that holds the temporary folder (or ``--dir``).

Run: ``python benchmarks/bench_results_log.py [--records N] [--dir D]``; writes
``results/results_log.json``. Compare with the harness overhead per probe
(``bench_harness.py``, ~50 ms at a 100k-token checkpoint) and a model call (seconds).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import write_results

from harness.kit.results import ResultsLog
from harness.mirage.probing.records import ProbeRecord, RecordKey, build_record
from harness.mirage.scoring import Gold, KnownIdResolver

GOLD = Gold(answerable="YES", source="chart_1", answer="42", answer_type="numeric")
REPLY = "ANSWERABLE=YES\nSOURCE=chart_1.png\nANSWER=about 42\n" + "reasoning " * 60


def record_lines(count: int) -> list[bytes]:
    resolver = KnownIdResolver(["chart_1"])
    records = [
        build_record(RecordKey("S1-d0", "C0", f"q{i}", 0), REPLY, GOLD, resolver, latency_s=1.0)
        for i in range(count)
    ]
    return [(record.model_dump_json() + "\n").encode() for record in records]


def per_append_ms(lines: list[bytes], folder: Path, sync: Callable[[int, int], None]) -> float:
    path = folder / f"raw-{time.perf_counter_ns()}.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    started = time.perf_counter()
    try:
        for index, line in enumerate(lines):
            os.write(fd, line)
            sync(fd, index)
    finally:
        os.close(fd)
    return 1000 * (time.perf_counter() - started) / len(lines)


def results_log_ms(count: int, folder: Path) -> float:
    resolver = KnownIdResolver(["chart_1"])
    records = [
        build_record(RecordKey("S1-d0", "C0", f"q{i}", 0), REPLY, GOLD, resolver, latency_s=1.0)
        for i in range(count)
    ]
    with ResultsLog(folder / "results.jsonl", ProbeRecord) as results:
        started = time.perf_counter()
        for record in records:
            results.append(record)
        return 1000 * (time.perf_counter() - started) / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=300)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    lines = record_lines(args.records)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        folder = Path(tmp)
        variants: dict[str, Callable[[int, int], None]] = {
            "no_sync": lambda fd, i: None,
            "fdatasync_each": lambda fd, i: os.fdatasync(fd),
            "fsync_each": lambda fd, i: os.fsync(fd),
            "fsync_every_8": lambda fd, i: os.fsync(fd) if i % 8 == 7 else None,
        }
        results = {name: round(per_append_ms(lines, folder, s), 3) for name, s in variants.items()}
        results["results_log_append"] = round(results_log_ms(args.records, folder), 3)
    load = os.getloadavg()
    data = {
        "records": args.records,
        "record_bytes": len(lines[0]),
        "ms_per_record": results,
        "load_avg_1m": round(load[0], 2),
    }
    print(data)
    write_results("results_log", data)


if __name__ == "__main__":
    main()
