"""The policy's decisions and the compactor's span, asked one by one (as the dry run does)
rather than through the agent loop: they match what a real turn and compaction do."""

from __future__ import annotations

from compaction.compactor import install_summary, summarized_span
from compaction.config import CompactionConfig
from compaction.policy import CompactionPolicy
from compaction.transcript import previous_summary, tail_start
from tests.compaction.helpers import conversation, session_with

WINDOW = 32_768  # threshold 12,768; flush threshold 9,576; keep 6,384


def test_a_flush_is_claimed_once_per_cycle_past_its_threshold() -> None:
    policy = CompactionPolicy(CompactionConfig())
    budget = policy.config.budget(WINDOW)
    session = session_with(conversation(turns=4), WINDOW)
    assert not policy.claim_flush(session, budget.flush_threshold, budget)
    assert policy.claim_flush(session, budget.flush_threshold + 1, budget)
    assert not policy.claim_flush(session, budget.threshold + 1, budget)  # flushed this cycle
    off = CompactionPolicy(CompactionConfig(memory_flush=False))
    assert not off.claim_flush(session_with([], WINDOW), budget.threshold + 1, budget)


def test_a_compaction_is_due_past_the_threshold_with_the_budgets_tail() -> None:
    policy = CompactionPolicy(CompactionConfig())
    budget = policy.config.budget(WINDOW)
    assert policy.due_compaction(budget.threshold, budget) is None
    assert policy.due_compaction(budget.threshold + 1, budget) == budget.keep_recent
    disabled = CompactionPolicy(CompactionConfig(enabled=False))
    assert disabled.due_compaction(budget.threshold + 1, budget) is None


def test_the_span_and_the_summary_are_the_compactions_own() -> None:
    session = session_with(conversation(turns=40), WINDOW)
    keep = 6_384
    span = summarized_span(session, keep)
    assert span == (0, tail_start(session.message_tokens, session.messages, keep))
    tail = session.messages[span[1] :]
    session.compaction.flushed_in_cycle = True
    install_summary(session, "what happened", span[1])
    assert previous_summary(session.messages[0]) == "what happened"
    assert session.messages[1:] == tail
    assert session.compaction.count == 1 and not session.compaction.flushed_in_cycle
    first, _ = summarized_span(session, 100) or (None, None)
    assert first == 1  # the earlier summary is folded in, not summarised again
    assert summarized_span(session, 10**9) is None
