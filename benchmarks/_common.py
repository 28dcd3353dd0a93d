"""Shared helpers for the benchmark scripts: timing statistics and the JSON result file."""

from __future__ import annotations

import json
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"


def time_calls(function: Callable[[], object], repeats: int) -> dict[str, float]:
    """Run ``function`` ``repeats`` times; p50/p95/mean in milliseconds."""
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return {
        "p50_ms": round(statistics.median(samples), 3),
        "p95_ms": round(samples[min(len(samples) - 1, int(0.95 * len(samples)))], 3),
        "mean_ms": round(statistics.fmean(samples), 3),
        "n": repeats,
    }


def write_results(name: str, data: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    payload = {
        "benchmark": name,
        "machine": platform.machine(),
        "python": platform.python_version(),
        **data,
    }
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path
