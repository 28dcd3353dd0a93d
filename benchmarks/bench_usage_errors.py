"""How long ``mirage run`` takes to refuse a bad name (issue 34: under 2 s, nothing written).

Each case runs ``python -m mirage run ARGS --out TMP`` in a fresh process (imports included),
``--repeats`` times; prints the median wall seconds per case with the machine's 1-minute load,
and writes benchmarks/results/usage_errors.json.

    python benchmarks/bench_usage_errors.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASES = [
    ["--model", "nosuch/x"],
    ["--summarizer", "scripted"],
    ["--summarizer", "reference/nope"],
    ["--model", "reference/keep-charts"],
    ["--summary-format", "bogus"],
    ["--summary-format", "template:/no/such/file.md"],
]


def one(args: list[str]) -> tuple[float, int, bool]:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "run"
        started = time.perf_counter()
        result = subprocess.run(
            [sys.executable, "-m", "mirage", "run", *args, "--out", str(out)],
            capture_output=True,
            timeout=300,
        )
        return time.perf_counter() - started, result.returncode, out.exists()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    repeats = parser.parse_args().repeats
    rows = []
    for args in CASES:
        runs = [one(args) for _ in range(repeats)]
        row = {
            "args": " ".join(args),
            "median_s": round(statistics.median(r[0] for r in runs), 3),
            "exit_codes": sorted({r[1] for r in runs}),
            "wrote_out": any(r[2] for r in runs),
            "load_1min": round(os.getloadavg()[0], 2),
        }
        rows.append(row)
        print(
            f"{row['args']:<48} {row['median_s']:6.2f} s  exit {row['exit_codes']}  "
            f"wrote --out: {row['wrote_out']}  load {row['load_1min']}"
        )
    target = Path(__file__).parent / "results" / "usage_errors.json"
    target.write_text(json.dumps({"repeats": repeats, "cases": rows}, indent=2) + "\n")
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
