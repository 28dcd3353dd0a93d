"""Who writes a run's compaction summaries and what that will take, said before anything runs:
per summary format, its summarizer, the summarizer's window, the tokens the first compaction
hands it and, when they exceed what one call holds, the chunks (one call each) its summary
takes and, for the embedded model, about how long. ``mirage run --dry-run`` prints these lines
in its plan and a real run says them first, both from the dry run's token-level replay of the
trunk (``harness.mirage.run.replay``): the chunks are counted by the summary format's own cutter
(``CompactionStrategy.chunk_plan``) on the messages the replay's first compaction summarises.

Above: the dry run's plan, the replay's ``summarizer_notes`` (a run's first lines).
Below: the summary formats (``compaction.strategies``), the run's backbones.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from compaction.config import split_format
from compaction.references import is_reference_summarizer
from compaction.strategies import get_strategy
from compaction.strategies.base import DEFAULT_OUTPUT_TOKENS
from runtime.backbones.base import LOCAL_PREFIX, Backbone
from runtime.messages import Message

SUMMARIZER_OUTPUT_TOKENS = 512
"""The output budget a run gives a summarizer that is not its trunk model."""


class TokenSpeed(BaseModel):
    """Tokens per second of a model on this class of machine."""

    prefill_per_s: float
    decode_per_s: float


EMBEDDED_SPEED = TokenSpeed(prefill_per_s=250.0, decode_per_s=48.0)
"""SmolLM2-135M on 2 idle cores at a 6k-token context (llama.cpp, /work/shared/OFFLINE-NOTES.md)."""
EMBEDDED_BUSY_SPEED = TokenSpeed(prefill_per_s=30.0, decode_per_s=10.0)
"""The same on 2 busy cores (load ~4): a paper-profile summary's first chunk (~6k tokens in,
at most 512 out) took 222 s beside another llama.cpp process (issue 45)."""


class SummaryPlan(BaseModel):
    """One summary format's compaction summary as the replay expects it."""

    summary_format: str
    model: str
    window: int | None = Field(description="the summarizer's window; None: no model")
    compaction_input: int | None = Field(
        default=None, description="tokens the first compaction summarises (the replay's count)"
    )
    chunks: int = 1
    input_tokens: int = 0
    output_tokens: int = Field(default=0, description="the summary's budget per call")
    minutes: tuple[float, float] | None = Field(
        default=None, description="(idle, busy) minutes; embedded models only"
    )


def summary_output_tokens(summarizer: Backbone) -> int:
    """What one summary call may write: the summarizer's output budget."""
    return summarizer.max_output_tokens or DEFAULT_OUTPUT_TOKENS


def summary_plan(
    entry: str,
    model: str,
    summarizer: Backbone,
    compacted: Sequence[Message] | None = None,
    compaction_input: int | None = None,
) -> SummaryPlan:
    """The plan of ``entry``'s summary (``FORMAT`` or ``FORMAT~SUMMARIZER``) written by
    ``summarizer`` (named ``model``) of the messages ``compacted``, ``compaction_input`` tokens
    by the replay's count (None: not replayed; one call assumed)."""
    plain = split_format(entry)[0]
    if is_reference_summarizer(model):
        return SummaryPlan(summary_format=plain, model=model, window=None)
    output = summary_output_tokens(summarizer)
    plan = SummaryPlan(
        summary_format=plain, model=model, window=summarizer.context_window, output_tokens=output
    )
    if not compacted:
        return plan
    chunks = get_strategy(plain).chunk_plan(compacted, summarizer)
    minutes = None
    if model.startswith(LOCAL_PREFIX):
        idle, busy = (
            chunks.input_tokens / speed.prefill_per_s + chunks.chunks * output / speed.decode_per_s
            for speed in (EMBEDDED_SPEED, EMBEDDED_BUSY_SPEED)
        )
        minutes = (idle / 60, busy / 60)
    return plan.model_copy(
        update={
            "compaction_input": compaction_input,
            "chunks": chunks.chunks,
            "input_tokens": chunks.input_tokens,
            "minutes": minutes,
        }
    )


def summary_lines(plans: Sequence[SummaryPlan]) -> list[str]:
    """What the dry run and a run's first lines say of each summary format's summarizer: who
    writes it and, when the first compaction's input exceeds its window, a warning with the
    chunks and (embedded models) the time."""
    lines: list[str] = []
    for plan in plans:
        if plan.window is None:
            lines.append(
                f"summarizer {plan.model} writes the {plan.summary_format} summary: a reference "
                "summarizer, no model, milliseconds (its retention declared: docs/references.md)"
            )
            continue
        given = (
            ""
            if plan.compaction_input is None
            else (f"; its first compaction summarises ~{plan.compaction_input:,} tokens")
        )
        lines.append(
            f"summarizer {plan.model} (window {plan.window:,}) writes the {plan.summary_format} "
            f"summary{given}"
        )
        if plan.chunks > 1:
            lines.append(_chunk_warning(plan))
    return lines


def _chunk_warning(plan: SummaryPlan) -> str:
    took = ""
    if plan.minutes is not None:
        idle, busy = (max(1, round(minutes)) for minutes in plan.minutes)
        took = f", about {idle} min on 2 idle cores, {busy} on busy ones"
    return (
        f"warning: that is more than one call of {plan.model} holds: its {plan.summary_format} "
        f"summary takes ~{plan.chunks} chunks, one call each{took}; --summarizer with a larger "
        "window writes it in one"
    )
