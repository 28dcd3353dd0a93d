"""Compact one session with the embedded SmolLM2-135M as summarizer, once per summary format.

    python examples/compaction/run_example.py [--out examples/compaction/output]

Writes the pre-compaction snapshot, one compacted snapshot per format (the same as
``mirage compact SNAPSHOT --summary-format F --summarizer local/smollm2-135m --out DIR``), the
summaries as ``<format>.md`` and the token counts and timings as ``results.json``. Runs
offline on a laptop CPU in about a minute.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from session import example_session  # noqa: E402

from compaction.compactor import compact_snapshot  # noqa: E402
from runtime.backbones import make_backbone  # noqa: E402
from runtime.snapshot import save_snapshot  # noqa: E402

FORMATS = (
    "verbatim",
    "free-form",
    "per-fact-citations",
    f"template:{HERE / 'summary_template.txt'}",
)
KEEP_RECENT_TOKENS = 300
FOCUS = "the rent chart and the invoice"


def _file_name(summary_format: str) -> str:
    return "template" if summary_format.startswith("template:") else summary_format


async def run(out: Path) -> list[dict[str, object]]:
    snapshots = out / "snapshots"
    source = save_snapshot(example_session(), snapshots)
    summarizer = make_backbone(
        "local/smollm2-135m", max_output_tokens=200, context_window=4_096, n_threads=1
    )
    results: list[dict[str, object]] = []
    for summary_format in FORMATS:
        started = time.perf_counter()
        path, record = await compact_snapshot(
            source,
            snapshots,
            summary_format,
            summarizer,
            focus=FOCUS,
            keep_recent_tokens=KEEP_RECENT_TOKENS,
        )
        seconds = round(time.perf_counter() - started, 2)
        name = _file_name(summary_format)
        (out / f"{name}.md").write_text(
            f"<!-- format: {name}; summarizer: {record.summarizer_model}; tokens "
            f"{record.tokens_before} -> {record.tokens_after}; {seconds} s -->\n\n"
            f"{record.summary}\n",
            encoding="utf-8",
        )
        results.append(
            {
                "format": name,
                "snapshot": path.name,
                "source": source.name,
                "tokens_before": record.tokens_before,
                "tokens_after": record.tokens_after,
                "first_kept_index": record.first_kept_index,
                "seconds": seconds,
            }
        )
        print(
            f"{name:20s} {record.tokens_before:6d} -> {record.tokens_after:5d} tokens "
            f"in {seconds:6.2f} s  {path}"
        )
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "output")
    asyncio.run(run(parser.parse_args().out))


if __name__ == "__main__":
    main()
