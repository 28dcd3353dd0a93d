"""What a run says about its compaction summarizer (issue 45, item 3): its first lines name
the summarizer and warn when the first compaction exceeds what one of its calls holds, and a
summary written in several chunks shows ``compaction summary: chunk 3/14`` with an ETA from the
chunks done — in the plain lines of a log (``PlainProgress``) as on the rich bars."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from rich.console import Console
from rich.progress import Progress

from compaction.compactor import compact
from harness.mirage.config import RunConfig
from harness.mirage.run import MirageRun
from harness.mirage.run.progress import RunProgress
from mirage.cli.run import EtaColumn, PlainProgress
from runtime.backbones.scripted import FunctionBackbone
from runtime.messages import Message
from tests.compaction.helpers import conversation, session_with


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _small_summarizer(
    clock: Clock | None = None, seconds_per_call: float = 0.0
) -> FunctionBackbone:
    def summarize(messages: Sequence[Message]) -> str:
        if clock is not None:
            clock.now += seconds_per_call
        return "## Goal\nHelp the user.\n## Progress\nTurns summarised so far."

    summarizer = FunctionBackbone(summarize, model="small-window", context_window=2048)
    summarizer.max_output_tokens = 128
    return summarizer


async def test_a_chunked_summary_is_a_phase_of_plain_lines_with_an_eta() -> None:
    clock, lines = Clock(), []
    display = PlainProgress(lines.append, interval_s=0.0, heartbeat_s=3600.0, clock=clock)
    summarizer = _small_summarizer(clock, seconds_per_call=10.0)
    session = session_with(conversation(30, tokens_per_message=150))
    with display:
        on_chunk = RunProgress(display).summary_chunks()
        await compact(session, "verbatim", summarizer, keep_recent_tokens=400, on_chunk=on_chunk)
    calls = len(summarizer.calls)
    first = re.fullmatch(r"\[0:00\] compaction summary: chunk 1/(\d+): 0/(\d+) \(0%\)", lines[0])
    assert first and first[1] == first[2] and int(first[1]) >= calls > 3
    third = next(line for line in lines if "chunk 3/" in line)
    total = int(third.split("chunk 3/")[1].split(":")[0])  # counted again after each chunk
    assert third == (  # two chunks of 10 s done: the ETA is 10 s for each chunk left
        f"[0:20] compaction summary: chunk 3/{total}: 2/{total} ({200 / total:.0f}%), "
        f"ETA {_clock(10 * (total - 2))}"
    )
    assert lines[-1] == (
        f"[{_clock(10 * calls)}] compaction summary: {calls} chunks written: {calls}/{calls} "
        f"(100%), done in {_clock(10 * calls)}"
    )


def _clock(seconds: int) -> str:
    return f"{seconds // 60}:{seconds % 60:02d}"


async def test_a_summary_in_one_call_shows_no_bar() -> None:
    lines: list[str] = []
    with PlainProgress(lines.append, interval_s=0.0) as display:
        summarizer = FunctionBackbone(lambda messages: "## Goal\nHelp.", model="big")
        session = session_with(conversation(10, tokens_per_message=100))
        on_chunk = RunProgress(display).summary_chunks()
        await compact(session, "verbatim", summarizer, keep_recent_tokens=200, on_chunk=on_chunk)
    assert lines == []


def test_the_rich_bars_show_the_same_eta() -> None:
    clock = Clock()
    console = Console(record=True, width=100)
    with Progress("{task.description}", EtaColumn(), console=console, get_time=clock) as bars:
        task = bars.add_task("compaction summary: chunk 1/14", total=14)
        assert str(EtaColumn().render(bars.tasks[0])) == ""  # nothing done: no rate yet
        clock.now = 20.0
        bars.update(task, completed=2, description="compaction summary: chunk 3/14")
        assert str(EtaColumn().render(bars.tasks[0])) == "ETA 2:00"  # 12 chunks at 10 s


@pytest.mark.slow
async def test_a_run_names_its_summarizer_and_counts_its_chunks(tmp_path: Path) -> None:
    lines: list[str] = []
    summarizer = _small_summarizer()
    config = RunConfig(
        models=["reference/retriever"],
        trunk_model="scripted",
        summarizer_model="small-window",
        references=False,
        limit=2,
        out=tmp_path / "run",
    )
    with PlainProgress(lines.append, interval_s=0.0) as display:
        run = MirageRun(config, display, {"small-window": summarizer})
        [folder] = await run.execute()
    report = (folder / "report.md").read_text()
    assert "summarizer small-window (backbone given by the caller)" in report
    calls = len(summarizer.calls)
    assert calls > 1
    assert re.fullmatch(
        r"summarizer small-window \(window 2,048\) writes the verbatim summary; its first "
        r"compaction summarises ~[\d,]+ tokens",
        lines[0],
    )
    warned = re.fullmatch(
        r"warning: that is more than one call of small-window holds: its verbatim summary "
        r"takes ~(\d+) chunks, one call each; --summarizer with a larger window writes it in one",
        lines[1],
    )
    assert warned and int(warned[1]) >= calls
    chunked = [line for line in lines if "] compaction summary: " in line]
    assert any(": chunk 2/" in line for line in chunked)
    assert (
        chunked[-1]
        .split("] ", 1)[1]
        .startswith(f"compaction summary: {calls} chunks written: {calls}/{calls} (100%), done in")
    )
