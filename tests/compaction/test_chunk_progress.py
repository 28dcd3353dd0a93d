"""A compaction summary written in several chunks says how far it is: (chunks done, chunks in
all) before the first call and after each, the total counted ahead never short of the calls
really made and exact at the end (issue 45, item 3)."""

from __future__ import annotations

from collections.abc import Sequence

from compaction.compactor import compact
from compaction.strategies import get_strategy
from runtime.backbones.scripted import FunctionBackbone
from runtime.messages import Message
from tests.compaction.helpers import conversation, session_with


def _small_summarizer(window: int = 2048) -> FunctionBackbone:
    def summarize(messages: Sequence[Message]) -> str:
        return "## Goal\nHelp the user.\n## Progress\nTurns summarised so far."

    summarizer = FunctionBackbone(summarize, model="small-window", context_window=window)
    summarizer.max_output_tokens = 128
    return summarizer


async def test_each_chunk_is_reported_with_a_total_that_ends_exact() -> None:
    summarizer = _small_summarizer()
    session = session_with(conversation(30, tokens_per_message=150))
    reports: list[tuple[int, int]] = []
    record = await compact(
        session,
        "verbatim",
        summarizer,
        keep_recent_tokens=400,
        on_chunk=lambda done, total: reports.append((done, total)),
    )
    calls = len(summarizer.calls)
    assert calls >= 4 and record.summary  # a real multi-chunk summary
    assert reports[0][0] == 0 and reports[0][1] >= calls  # announced before the first call
    assert [done for done, _ in reports] == [*range(calls), calls]  # once per chunk, then done
    assert reports[-1] == (calls, calls)
    assert all(total >= calls for _, total in reports)  # counted ahead: never short


async def test_the_plan_counts_the_chunks_before_any_call() -> None:
    summarizer = _small_summarizer()
    messages = conversation(30, tokens_per_message=150)
    plan = get_strategy("verbatim").chunk_plan(messages, summarizer)
    assert not summarizer.calls
    session = session_with(list(messages))
    await compact(session, "verbatim", summarizer, keep_recent_tokens=1)
    assert plan.chunks >= len(summarizer.calls) > 1
    assert plan.input_tokens > 150 * len(messages)  # the transcript, and each call's prompt


async def test_a_summary_in_one_call_reports_one_chunk() -> None:
    summarizer = _small_summarizer(window=32_768)
    session = session_with(conversation(10, tokens_per_message=100))
    reports: list[tuple[int, int]] = []
    await compact(
        session,
        "verbatim",
        summarizer,
        keep_recent_tokens=200,
        on_chunk=lambda *r: reports.append(r),
    )
    assert reports == [(0, 1), (1, 1)]
