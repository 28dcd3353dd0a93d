"""``CompactionPolicy``: the runtime's ``ContextPolicy`` — when to flush memory and compact.

Above: the agent loop, which calls ``after_turn`` after every normal turn and ``on_overflow``
when the backbone reports a context-length error (retrying the call when it returns True, at
most ``runtime.agent.MAX_OVERFLOW_RETRIES`` times). Below: ``memory_flush`` and ``compact``.

After a turn, with EIT the input tokens of the turn's last backbone call (the ledger's
``current_eit``) and the budgets of ``CompactionConfig.budget``:

1. EIT > flush threshold, flush enabled, not yet flushed in this cycle → one silent flush turn;
2. EIT > threshold → compact, keeping ``keep_recent`` tokens verbatim.

The two decisions are asked one by one (``claim_flush``, ``due_compaction``) by anything that
must follow them without an agent loop: the dry run's token-level trunk
(``harness.mirage.run.replay``) asks them, and the compactor's ``summarized_span`` and
``install_summary``, rather than re-deriving them. A compaction ends the cycle (``flushed_in_cycle``
is reset). On overflow the policy compacts with the normal tail, then half of it, then a quarter on
consecutive overflows of the same call. A failed compaction is logged and recorded in
``tool_state["compaction_failures"]``; it never fails the user's turn (the next turn tries again).
"""

from __future__ import annotations

import structlog

from compaction.compactor import Reason, compact
from compaction.config import CompactionBudget, CompactionConfig
from compaction.errors import CompactionError
from compaction.flush import FLUSH_PROMPT, FlushRecord, memory_flush
from compaction.references import NoteWriter
from compaction.strategies import CompactionStrategy, get_strategy
from compaction.strategies.base import ChunkProgress
from runtime.agent import Agent
from runtime.backbones.base import Backbone, ProviderError
from runtime.session import CompactionRecord, Session

log = structlog.get_logger(__name__)

FAILURES_STATE_KEY = "compaction_failures"


class CompactionPolicy:
    def __init__(
        self,
        config: CompactionConfig | None = None,
        *,
        strategy: CompactionStrategy | str | None = None,
        summarizer: Backbone | None = None,
        flush_prompt: str = FLUSH_PROMPT,
        on_chunk: ChunkProgress | None = None,
        notes_date: str | None = None,
    ) -> None:
        """``on_chunk`` hears each summary's progress (chunks done, in all); ``notes_date``
        (ISO) is the day the memory flush's prompt names (default today), which should be the
        memory server's note date."""
        self.config = config or CompactionConfig()
        self.on_chunk = on_chunk
        chosen = strategy if strategy is not None else self.config.format
        self.strategy = get_strategy(chosen) if isinstance(chosen, str) else chosen
        self.flush_prompt = flush_prompt
        self.notes_date = notes_date
        self._summarizer = summarizer
        self._flushing = False
        self._overflow_streak = 0
        self._calls_after_overflow = -1

    def budget(self, agent: Agent) -> CompactionBudget:
        return self.config.budget(agent.context_window)

    def summarizer(self, agent: Agent) -> Backbone:
        """The explicit summarizer, else ``config.summarizer_model``, else the agent's own."""
        if self._summarizer is None and self.config.summarizer_model:
            from compaction.references import make_summarizer

            self._summarizer = make_summarizer(self.config.summarizer_model)
        return self._summarizer or agent.backbone

    async def after_turn(self, agent: Agent) -> None:
        if not self.config.enabled:
            return
        session = agent.session
        eit = session.ledger.current_eit
        budget = self.budget(agent)
        if self.claim_flush(session, eit, budget):
            self._flushing = True
            try:
                await self.flush(agent, eit)
            finally:
                self._flushing = False
        keep = self.due_compaction(eit, budget)
        if keep is not None:
            await self.compact(agent, reason="threshold", keep_recent_tokens=keep)

    async def flush(self, agent: Agent, eit: int) -> FlushRecord:
        """The memory flush: a model turn, or the notes of a summarizer that writes its own
        (a reference summarizer, ``compaction.references.NoteWriter``)."""
        summarizer = self.summarizer(agent)
        writer = summarizer if isinstance(summarizer, NoteWriter) else None
        return await memory_flush(agent, eit, self.flush_prompt, writer, self.notes_date)

    def claim_flush(self, session: Session, eit: int, budget: CompactionBudget) -> bool:
        """Whether a turn that ended at ``eit`` is followed by the memory flush (flush on, not
        yet flushed in this cycle, past the flush threshold); marks the cycle flushed if so."""
        if not (self.config.enabled and self.config.memory_flush):
            return False
        if session.compaction.flushed_in_cycle or eit <= budget.flush_threshold:
            return False
        session.compaction.flushed_in_cycle = True
        return True

    def due_compaction(self, eit: int, budget: CompactionBudget) -> int | None:
        """The verbatim tail (tokens) of the threshold compaction that follows a turn that
        ended at ``eit``, or None when none is due."""
        if self.config.enabled and eit > budget.threshold:
            return budget.keep_recent
        return None

    async def on_overflow(self, agent: Agent, error: ProviderError) -> bool:
        if self._flushing or not self.config.enabled:
            return False
        ledger_length = len(agent.session.ledger.calls)
        if ledger_length != self._calls_after_overflow:
            self._overflow_streak = 0
        keep = self.budget(agent).keep_recent >> self._overflow_streak
        self._overflow_streak += 1
        log.info(
            "context_overflow", detail=error.detail, keep_recent=keep, attempt=self._overflow_streak
        )
        record = await self.compact(agent, reason="overflow", keep_recent_tokens=keep)
        self._calls_after_overflow = len(agent.session.ledger.calls)
        return record is not None

    async def compact(
        self,
        agent: Agent,
        *,
        reason: Reason = "manual",
        keep_recent_tokens: int | None = None,
        focus: str | None = None,
    ) -> CompactionRecord | None:
        """Compact now; None (logged and recorded) if it could not be done."""
        keep = (
            keep_recent_tokens
            if keep_recent_tokens is not None
            else (self.budget(agent).keep_recent)
        )
        try:
            return await compact(
                agent,
                self.strategy,
                self.summarizer(agent),
                focus=focus,
                keep_recent_tokens=keep,
                reason=reason,
                on_chunk=self.on_chunk,
            )
        except (CompactionError, ProviderError) as error:
            log.warning("compaction_failed", reason=reason, error=str(error))
            agent.session.tool_state.setdefault(FAILURES_STATE_KEY, []).append(
                {"reason": reason, "error": str(error), "eit": agent.session.ledger.current_eit}
            )
            return None
