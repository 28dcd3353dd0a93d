"""Parse throughput per tool-call parser family, in replies per second.

Replies are realistic: 500–3000 characters of prose around one to three calls written in the
family's own format (as its profile asks the model to), plus some malformed and truncated
ones. Two extra rows time the pseudo-tool path: detection only, and detection + adapters.

    python benchmarks/bench_parsers.py [--replies 300] [--seconds 2]

Writes benchmarks/results/parsers.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import time
from pathlib import Path
from typing import Any

from mirage.wiring import default_tools
from runtime.parsers import parse_reply
from runtime.profiles import STYLE_OF_PARSER, ToolPromptStyle, render_tool_call

DEFAULT_TOOLS = default_tools()

WORDS = [
    "the",
    "quarterly",
    "report",
    "shows",
    "revenue",
    "growth",
    "in",
    "the",
    "northern",
    "region",
    "while",
    "costs",
    "stayed",
    "flat",
    "and",
    "the",
    "team",
    "expects",
    "the",
    "new",
    "contract",
    "to",
    "close",
    "before",
    "the",
    "end",
    "of",
    "the",
    "month",
    "so",
    "I",
    "will",
    "look",
    "up",
    "the",
    "exact",
    "figures",
    "in",
    "the",
    "documents",
    "you",
    "shared",
    "earlier",
    "today",
]
OUT = Path(__file__).parent / "results" / "parsers.json"


def prose(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    while sum(len(word) + 1 for word in words) < chars:
        words.append(rng.choice(WORDS))
    return " ".join(words).capitalize() + "."


def random_call(rng: random.Random) -> tuple[str, dict[str, Any]]:
    if rng.random() < 0.6:
        return "artifact_recall", {"query": prose(rng, rng.randint(15, 80)), "k": rng.randint(1, 9)}
    return "artifact_get", {
        "ref": f"doc-{rng.randint(1, 999)}.pdf",
        "start_line": rng.randint(1, 50),
    }


def reply(rng: random.Random, style: ToolPromptStyle) -> str:
    calls = [render_tool_call(style, *random_call(rng)) for _ in range(rng.randint(1, 3))]
    if style == "mistral" and len(calls) > 1:
        calls = [calls[0]]
    text = prose(rng, rng.randint(400, 2400)) + "\n" + "\n".join(calls)
    roll = rng.random()
    if roll < 0.1:
        return text[: len(text) - rng.randint(5, 30)]
    if roll < 0.15:
        return text.replace('"', "", 1)
    return text


def pseudo_reply(rng: random.Random) -> str:
    name, arguments = random_call(rng)
    body = ", ".join(f"{key}={json.dumps(value)}" for key, value in arguments.items())
    return f"{prose(rng, rng.randint(400, 2400))}\n<|im_start|>tool\n{name}({body})"


def throughput(replies: list[str], family: str, *, adapters: bool, seconds: float) -> float:
    """Median replies/s over three timed passes of at least ``seconds`` / 3 each."""
    rates = []
    for _ in range(3):
        done, started = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - started) < seconds / 3:
            for text in replies:
                parse_reply(text, DEFAULT_TOOLS, family=family, adapters=adapters)
            done += len(replies)
        rates.append(done / elapsed)
    return statistics.median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replies", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    rng = random.Random(7)
    rows = []
    cases = [
        (family, [reply(rng, style) for _ in range(args.replies)], False)
        for family, style in STYLE_OF_PARSER.items()
    ]
    pseudo = [pseudo_reply(rng) for _ in range(args.replies)]
    cases += [("hermes+pseudo-detect", pseudo, False), ("hermes+pseudo-adapt", pseudo, True)]
    for name, replies, adapters in cases:
        family = name.split("+")[0]
        rate = throughput(replies, family, adapters=adapters, seconds=args.seconds)
        mean_chars = statistics.mean(len(text) for text in replies)
        rows.append(
            {
                "parser": name,
                "replies_per_s": round(rate, 1),
                "mean_reply_chars": round(mean_chars),
                "replies": len(replies),
            }
        )
        print(f"{name:22s} {rate:10.0f} replies/s  (mean {mean_chars:.0f} chars)")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        json.dumps(
            {
                "machine": platform.processor() or platform.machine(),
                "python": platform.python_version(),
                "results": rows,
            },
            indent=1,
        )
    )
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
