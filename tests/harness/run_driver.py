"""A real ``mirage run`` in its own process, for kill and crash tests: the bundled pack, a
scripted trunk and summarizer, and the oracle answerer of ``test_run_e2e`` slowed down so a
signal can land in the middle of the probe phase.

    python -m tests.harness.run_driver OUT [--delay S] [--crash summarizer|answerer]
                                           [--crash-after N]

``--fill-disk-after N`` fills the disk holding OUT's parent (a file ``ballast`` there) at the
N-th answerer call; ``--cli`` reports a failure as ``mirage run`` does (one line, its exit code).
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
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import typer

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


def filling(
    reply: Callable[[Sequence[Message], Sequence[ToolSpec]], str], after: int | None, ballast: Path
) -> Callable[[Sequence[Message], Sequence[ToolSpec]], str]:
    """``reply``, filling the disk ``ballast`` is on (until ENOSPC) at the ``after``-th call."""
    calls = {"n": 0}

    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        calls["n"] += 1
        if after is not None and calls["n"] == after:
            with open(ballast, "ab") as handle:
                try:
                    while True:
                        handle.write(b"\0" * 4096)
                        handle.flush()
                except OSError:
                    pass
        return reply(messages, tools)

    return answer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--crash", choices=["summarizer", "answerer"], default=None)
    parser.add_argument("--crash-after", type=int, default=1)
    parser.add_argument("--fill-disk-after", type=int, default=None)
    parser.add_argument("--cli", action="store_true", help="report errors as `mirage run` does")
    args = parser.parse_args()
    configure_logging()
    after = {args.crash: args.crash_after} if args.crash else {}
    answer = crashing(oracle, after.get("answerer"), args.delay)
    answer = filling(answer, args.fill_disk_after, args.out.parent / "ballast")
    summarize = crashing(lambda messages, tools: summary(messages), after.get("summarizer"))
    backbones = {
        "oracle": FunctionBackbone(answer, model="oracle", context_window=8192),
        "summarizer": FunctionBackbone(summarize, model="summarizer"),
    }
    if args.cli:
        from mirage.cli.run import _execute

        try:
            _execute(config(args.out), None, backbones)
        except typer.Exit as exc:
            sys.exit(exc.exit_code)
        return
    asyncio.run(MirageRun(config(args.out), backbones=backbones).execute())


if __name__ == "__main__":
    main()
