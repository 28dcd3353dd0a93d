"""One compaction: older messages → one summary message, the recent tail kept verbatim.

Above: ``CompactionPolicy`` (threshold and overflow compactions), manual compaction from code
(``compact``) and the ``mirage compact`` command. Below: a ``CompactionStrategy`` (the summary
format) and a summarizer ``Backbone``.

Compaction touches only the session's active messages, its ledger (summary calls, purpose
``summary``) and its compaction state; it never reads or writes workspace files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import structlog

from compaction.config import CompactionConfig
from compaction.errors import NothingToCompact
from compaction.strategies import CompactionStrategy, get_strategy
from compaction.strategies.base import ChunkProgress
from compaction.transcript import previous_summary, summary_message, tail_start
from runtime.agent import Agent
from runtime.backbones.base import Backbone
from runtime.messages import SystemMessage
from runtime.session import CompactionRecord, Session
from runtime.snapshot import load_snapshot, save_snapshot
from runtime.tokens import count_message_tokens

log = structlog.get_logger(__name__)

Reason = Literal["threshold", "overflow", "manual"]


def fixed_prompt_tokens(target: Agent | Session) -> int:
    """Tokens of the part of the context compaction cannot shrink: the system prompt (and, for
    an agent, the rendered tool descriptions)."""
    if isinstance(target, Agent):
        return target.estimated_eit() - target.session.history_tokens
    config = target.config
    system = "\n\n".join(part for part in (config.system_prompt, config.workspace_hint) if part)
    return count_message_tokens(SystemMessage(content=system))


async def compact(
    target: Agent | Session,
    strategy: CompactionStrategy | str,
    summarizer: Backbone,
    *,
    focus: str | None = None,
    keep_recent_tokens: int | None = None,
    reason: Reason = "manual",
    on_chunk: ChunkProgress | None = None,
) -> CompactionRecord:
    """Compact an agent's (or a bare session's) history in place and return the record.

    ``keep_recent_tokens`` defaults to the budget ``CompactionConfig().budget(window)`` gives
    for the session's window; ``on_chunk`` hears the summary's progress (chunks done, in all).
    Raises ``NothingToCompact`` when the whole history already fits in the tail,
    ``CompactionError`` when no summary could be written."""
    session = target.session if isinstance(target, Agent) else target
    chosen = get_strategy(strategy) if isinstance(strategy, str) else strategy
    keep = keep_recent_tokens
    if keep is None:
        keep = CompactionConfig().budget(session.ledger.context_window).keep_recent
    return await compact_session(
        session,
        chosen,
        summarizer,
        keep_recent_tokens=keep,
        focus=focus,
        reason=reason,
        fixed_tokens=fixed_prompt_tokens(target),
        on_chunk=on_chunk,
    )


def summarized_span(session: Session, keep_recent_tokens: int) -> tuple[int, int] | None:
    """``(first, start)``: a compaction keeping ``keep_recent_tokens`` verbatim summarises the
    messages ``[first:start]`` (``first`` is 1 when the history starts with an earlier summary,
    which is folded into the new one); None when the whole history fits in the tail."""
    messages = session.messages
    start = tail_start(session.message_tokens, messages, keep_recent_tokens)
    first = 1 if messages and previous_summary(messages[0]) is not None else 0
    return (first, start) if start > first else None


def install_summary(session: Session, summary: str, start: int) -> None:
    """The messages before ``start`` replaced by the summary message; the compaction cycle ends
    (one more compaction, and the next cycle may flush again)."""
    session.replace_messages([summary_message(summary), *session.messages[start:]])
    session.compaction.count += 1
    session.compaction.flushed_in_cycle = False


async def compact_session(
    session: Session,
    strategy: CompactionStrategy,
    summarizer: Backbone,
    *,
    keep_recent_tokens: int,
    focus: str | None = None,
    reason: Reason = "manual",
    fixed_tokens: int = 0,
    on_chunk: ChunkProgress | None = None,
) -> CompactionRecord:
    messages = list(session.messages)
    span = summarized_span(session, keep_recent_tokens)
    if span is None:
        raise NothingToCompact(
            f"nothing to compact: all {len(messages)} messages fit in the "
            f"{keep_recent_tokens}-token verbatim tail"
        )
    first, start = span
    earlier = previous_summary(messages[0]) if first else None
    tokens_before = fixed_tokens + session.history_tokens
    result = await strategy.summarize(
        messages[first:start],
        summarizer,
        first_index=first,
        focus=focus,
        previous_summary=earlier,
        on_chunk=on_chunk,
    )
    for completion in result.completions:
        session.ledger.record(
            completion.usage,
            model=completion.model,
            purpose="summary",
            latency_s=completion.latency_s,
        )
    install_summary(session, result.summary, start)
    record = CompactionRecord(
        summary=result.summary,
        first_kept_index=start,
        first_kept_message=messages[start] if start < len(messages) else None,
        tokens_before=tokens_before,
        tokens_after=fixed_tokens + session.history_tokens,
        format=strategy.name,
        summarizer_model=summarizer.model,
        focus=focus,
        reason=reason,
    )
    session.compaction.records.append(record)
    log.info(
        "compacted",
        reason=reason,
        format=strategy.name,
        summarizer=summarizer.model,
        tokens_before=record.tokens_before,
        tokens_after=record.tokens_after,
        first_kept_index=start,
        chunks=result.chunks,
        count=session.compaction.count,
    )
    return record


async def compact_snapshot(
    source: Path,
    out_dir: Path,
    strategy: CompactionStrategy | str,
    summarizer: Backbone,
    *,
    focus: str | None = None,
    keep_recent_tokens: int | None = None,
) -> tuple[Path, CompactionRecord]:
    """Load a session snapshot, compact it and save the result as a new snapshot under
    ``out_dir``; the source file is only read. Returns the new path and the record."""
    session = load_snapshot(source)
    record = await compact(
        session,
        strategy,
        summarizer,
        focus=focus,
        keep_recent_tokens=keep_recent_tokens,
        reason="manual",
    )
    return save_snapshot(session, out_dir), record
