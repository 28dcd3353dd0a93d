"""A real ``mirage run`` in its own process, for kill and crash tests: the bundled pack, a
scripted trunk and summarizer, and the oracle answerer of ``test_run_e2e`` slowed down so a
signal can land in the middle of the probe phase.

    python -m tests.harness.run_driver OUT [--delay S] [--crash summarizer|answerer]
                                           [--crash-after N]

``--crash`` makes the N-th call of that model (default the first) crash the process with a real
SIGSEGV in native code (a read of address 0 through ctypes), as a crash inside an embedded model
would: the summarizer is first called by the trunk's compaction, between checkpoints S1-d80k
and S2; the answerer in the probe phase.
The trunk configuration matches ``mirage run --model oracle --trunk-model scripted
--summarizer summarizer --limit 4``, so the command line resumes the same checkpoint family.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from harness.mirage.config import RunConfig
from harness.mirage.run import MirageRun
from mirage.cli.logs import configure_logging
from runtime.backbones.scripted import FunctionBackbone
from runtime.messages import Message, ToolSpec
from tests.harness.test_run_e2e import oracle, summary

LIMIT = 4


def config(out: Path) -> RunConfig:
    return RunConfig(
        models=["oracle"],
        trunk_model="scripted",
        summarizer_model="summarizer",
        limit=LIMIT,
        out=out,
    )


def crashing(
    reply: Callable[[Sequence[Message], Sequence[ToolSpec]], str],
    crash_after: int | None,
    delay_s: float = 0.0,
) -> Callable[[Sequence[Message], Sequence[ToolSpec]], str]:
    calls = {"n": 0}

    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        calls["n"] += 1
        if crash_after is not None and calls["n"] >= crash_after:
            ctypes.string_at(0)  # SIGSEGV inside native code
        time.sleep(delay_s)
        return reply(messages, tools)

    return answer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--crash", choices=["summarizer", "answerer"], default=None)
    parser.add_argument("--crash-after", type=int, default=1)
    args = parser.parse_args()
    configure_logging()
    after = {args.crash: args.crash_after} if args.crash else {}
    answer = crashing(oracle, after.get("answerer"), args.delay)
    summarize = crashing(lambda messages, tools: summary(messages), after.get("summarizer"))
    backbones = {
        "oracle": FunctionBackbone(answer, model="oracle", context_window=8192),
        "summarizer": FunctionBackbone(summarize, model="summarizer"),
    }
    asyncio.run(MirageRun(config(args.out), backbones=backbones).execute())


if __name__ == "__main__":
    main()
