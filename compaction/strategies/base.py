"""The ``CompactionStrategy`` seam: one summary format per strategy.

Above: the compactor, which hands over the messages to replace (plus focus instructions and
the previous summary, if the session was compacted before) and a summarizer ``Backbone``.
Below: the summarizer backbone, which may differ from the agent's.

``PromptStrategy`` implements the summarizing loop shared by all formats; a format only
supplies its system instructions and a user prompt template with the placeholders of
``PLACEHOLDERS``. Small summarizers are supported by a *rolling* summary: when the rendered
transcript does not fit the summarizer's window, it is cut into consecutive chunks at message
boundaries; chunk *i* is summarised together with the summary of chunks < *i* (passed as
``previous_summary``), and the last call's output is the summary. A single message larger
than a chunk is shortened in its middle with an explicit omission note. A context-length
error from the summarizer halves the chunk budget and retries (at most ``MAX_SHRINKS`` times).

How many chunks a summary takes is known only as it goes (each budget depends on the running
summary): ``chunk_plan`` counts them ahead with every running summary at the summarizer's full
output budget (an upper bound, short of a shrink), and ``summarize`` reports its progress as
(chunks done, chunks in all) to an ``on_chunk`` callback: before the first call, then after
each, the total counted again from what is left, so it is exact when the last chunk is done.
"""

from __future__ import annotations

import string
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

import structlog
from pydantic import BaseModel, ConfigDict, Field

from compaction.errors import CompactionError, TemplateError
from compaction.transcript import render_message
from runtime.backbones.base import Backbone, Completion, ProviderError
from runtime.messages import Message, SystemMessage, UserMessage
from runtime.tokens import count_message_tokens, count_tokens, encoding

log = structlog.get_logger(__name__)

PLACEHOLDERS: dict[str, str] = {
    "transcript": "the numbered messages to summarise (required)",
    "focus": "the user's focus instructions, or an empty string",
    "previous_summary": "the summary being folded in (earlier compaction or chunk), or ''",
    "first_index": "session index of the first message in {transcript}",
    "last_index": "session index of the last message in {transcript}",
    "message_count": "number of messages in {transcript}",
}
DEFAULT_OUTPUT_TOKENS = 1024
TOKEN_SAFETY_FACTOR = 1.25
MIN_CHUNK_TOKENS = 48
MAX_SHRINKS = 3

ChunkProgress = Callable[[int, int], None]
"""What a summary reports as it goes: (chunks done, chunks in all)."""


class SummaryRequest(BaseModel):
    """What one summarizer call sees."""

    model_config = ConfigDict(frozen=True)

    transcript: str
    focus: str | None = None
    previous_summary: str | None = None
    first_index: int = 0
    last_index: int = 0
    message_count: int = 0

    def fields(self) -> dict[str, str | int]:
        return {
            "transcript": self.transcript,
            "focus": self.focus or "",
            "previous_summary": self.previous_summary or "",
            "first_index": self.first_index,
            "last_index": self.last_index,
            "message_count": self.message_count,
        }


class SummaryResult(BaseModel):
    summary: str
    completions: list[Completion] = Field(default_factory=list)
    chunks: int = 1
    shortened_messages: int = 0


class ChunkPlan(BaseModel):
    """The calls a summary will take: how many, and their input tokens (the transcript and,
    per call, the format's prompt and the running summary; by tiktoken, as chunks are cut)."""

    chunks: int
    input_tokens: int


class CompactionStrategy(ABC):
    """One summary format: ``name`` (what ``--summary-format`` and ``get_strategy`` take),
    ``build_prompt`` (one summarizer call's messages) and ``summarize`` (the whole summary of
    ``messages``, however many calls it takes)."""

    name: str

    @abstractmethod
    def build_prompt(self, request: SummaryRequest) -> list[Message]:
        """The messages of one summarizer call for ``request``."""

    @abstractmethod
    async def summarize(
        self,
        messages: Sequence[Message],
        summarizer: Backbone,
        *,
        first_index: int = 0,
        focus: str | None = None,
        previous_summary: str | None = None,
        on_chunk: ChunkProgress | None = None,
    ) -> SummaryResult:
        """The summary of ``messages`` (session indexes from ``first_index``), folding in
        ``previous_summary``, its progress reported to ``on_chunk``; raises
        ``CompactionError`` when no summary can be made."""

    def chunk_plan(
        self, messages: Sequence[Message], summarizer: Backbone, *, first_index: int = 0
    ) -> ChunkPlan:
        """The calls ``summarize`` would make for ``messages`` (a strategy that does not cut
        its input: one, with the transcript)."""
        rendered = "\n\n".join(render_message(message) for message in messages)
        return ChunkPlan(chunks=1, input_tokens=count_tokens(rendered))


def template_fields(template: str) -> set[str]:
    """The placeholder names in a ``str.format`` template; raises ``TemplateError`` on
    anything but plain named placeholders from ``PLACEHOLDERS``."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise TemplateError(
            f"malformed template: {exc} (write literal braces as '{{{{' and '}}}}')"
        ) from exc
    names: set[str] = set()
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if name not in PLACEHOLDERS:
            allowed = ", ".join("{" + key + "}" for key in PLACEHOLDERS)
            shown = "{" + name + "}" if name else "{}"
            raise TemplateError(f"unknown placeholder {shown}; allowed: {allowed}")
        if spec or conversion:
            raise TemplateError(f"placeholder {{{name}}} takes no format spec or conversion")
        names.add(name)
    return names


def shorten_middle(text: str, max_tokens: int) -> str:
    """``text`` cut to about ``max_tokens`` tokens, keeping its head and tail."""
    tokens = encoding().encode(text, disallowed_special=())
    if len(tokens) <= max_tokens:
        return text
    keep = max(max_tokens - 16, 2)
    head, tail = tokens[: keep // 2], tokens[len(tokens) - keep // 2 :]
    omitted = len(tokens) - len(head) - len(tail)
    note = f"\n[… {omitted} tokens omitted to fit the summarizer's window …]\n"
    return encoding().decode(head) + note + encoding().decode(tail)


class PromptStrategy(CompactionStrategy):
    """A summary format given by a system prompt and a user prompt template."""

    def __init__(self, name: str, system_prompt: str, user_template: str) -> None:
        fields = template_fields(user_template)
        if "transcript" not in fields:
            raise TemplateError("the template must contain the {transcript} placeholder")
        self.name = name
        self.system_prompt = system_prompt
        self.user_template = user_template

    def build_prompt(self, request: SummaryRequest) -> list[Message]:
        user = self.user_template.format(**request.fields())
        return [SystemMessage(content=self.system_prompt), UserMessage.text(user)]

    async def summarize(
        self,
        messages: Sequence[Message],
        summarizer: Backbone,
        *,
        first_index: int = 0,
        focus: str | None = None,
        previous_summary: str | None = None,
        on_chunk: ChunkProgress | None = None,
    ) -> SummaryResult:
        if not messages:
            raise CompactionError("no messages to summarise")
        rendered = _rendered(messages, first_index)
        result = SummaryResult(summary=previous_summary or "", chunks=0)
        position = 0
        while position < len(rendered):
            if on_chunk is not None:
                left = self._chunks_left(rendered, position, summarizer, focus, result.summary)
                on_chunk(result.chunks, result.chunks + left.chunks)
            position = await self._summarize_next_chunk(
                rendered, position, first_index, summarizer, focus, result
            )
        if on_chunk is not None:
            on_chunk(result.chunks, result.chunks)
        if not result.summary.strip():
            raise CompactionError(f"the summarizer {summarizer.model} returned an empty summary")
        return result

    def chunk_plan(
        self, messages: Sequence[Message], summarizer: Backbone, *, first_index: int = 0
    ) -> ChunkPlan:
        return self._chunks_left(_rendered(messages, first_index), 0, summarizer, None, "")

    def _chunks_left(
        self,
        rendered: list[str],
        position: int,
        summarizer: Backbone,
        focus: str | None,
        running: str,
    ) -> ChunkPlan:
        """The calls left from ``position``: the next with the running summary as it is, each
        later one with a running summary of the summarizer's full output budget (a chunk of at
        least ``MIN_CHUNK_TOKENS`` when that budget leaves less)."""
        capacity = self._capacity(summarizer)
        budget = capacity - self._overhead(summarizer, focus, running)
        later = capacity - self._overhead(summarizer, focus, running, full_summary=True)
        chunks = tokens = 0
        while position < len(rendered) and budget >= MIN_CHUNK_TOKENS:
            end, pieces, _ = _take_chunk(rendered, position, budget)
            tokens += capacity - budget + sum(count_tokens(piece) + 2 for piece in pieces)
            chunks, position, budget = chunks + 1, end, max(later, MIN_CHUNK_TOKENS)
        return ChunkPlan(chunks=max(chunks, 1), input_tokens=tokens)

    async def _summarize_next_chunk(
        self,
        rendered: list[str],
        position: int,
        first_index: int,
        summarizer: Backbone,
        focus: str | None,
        result: SummaryResult,
    ) -> int:
        """Summarise the next chunk starting at ``position``; returns the next position."""
        shrink = 1.0
        rejected: ProviderError | None = None
        for _ in range(MAX_SHRINKS + 1):
            budget = int(self._transcript_budget(summarizer, focus, result.summary) * shrink)
            if budget < MIN_CHUNK_TOKENS:
                break
            end, pieces, shortened = _take_chunk(rendered, position, budget)
            request = SummaryRequest(
                transcript="\n\n".join(pieces),
                focus=focus,
                previous_summary=result.summary or None,
                first_index=first_index + position,
                last_index=first_index + end - 1,
                message_count=end - position,
            )
            try:
                completion = await summarizer.complete(self.build_prompt(request), [])
            except ProviderError as error:
                if error.kind != "context_length":
                    raise
                log.info("summary_chunk_too_large", budget=budget, model=summarizer.model)
                rejected = error
                shrink /= 2
                continue
            result.completions.append(completion)
            result.summary = completion.text.strip()
            result.chunks += 1
            result.shortened_messages += shortened
            return end
        if rejected is not None:
            raise CompactionError(
                f"the summarizer {summarizer.model} rejected every chunk size down to "
                f"{budget} transcript tokens as too long (last error: {rejected})"
            )
        raise CompactionError(
            f"the summarizer {summarizer.model} (window {summarizer.context_window} tokens) "
            f"cannot hold the {self.name} prompt plus a chunk of at least {MIN_CHUNK_TOKENS} "
            f"transcript tokens; use a summarizer with a larger window"
        )

    def _transcript_budget(self, summarizer: Backbone, focus: str | None, running: str) -> int:
        return self._capacity(summarizer) - self._overhead(summarizer, focus, running)

    @staticmethod
    def _output_tokens(summarizer: Backbone) -> int:
        window = summarizer.context_window
        return min(summarizer.max_output_tokens or DEFAULT_OUTPUT_TOKENS, window // 2)

    def _capacity(self, summarizer: Backbone) -> int:
        """What one call's prompt may hold: the window less the output budget, less the margin
        for tokenizers that count more than tiktoken."""
        window = summarizer.context_window
        return int((window - self._output_tokens(summarizer)) / TOKEN_SAFETY_FACTOR)

    def _overhead(
        self, summarizer: Backbone, focus: str | None, running: str, *, full_summary: bool = False
    ) -> int:
        """A call's prompt without its transcript; with ``full_summary``, a running summary of
        the summarizer's full output budget in place of ``running``."""
        previous = "…" if full_summary else running or None
        empty = SummaryRequest(transcript="", focus=focus, previous_summary=previous)
        prompt = sum(count_message_tokens(message) for message in self.build_prompt(empty))
        return prompt + (self._output_tokens(summarizer) if full_summary else 0)


def _rendered(messages: Sequence[Message], first_index: int) -> list[str]:
    """Each message as the transcript numbers it (``[i] ROLE: …``)."""
    return [
        f"[{first_index + offset}] {render_message(message)}"
        for offset, message in enumerate(messages)
    ]


def _take_chunk(rendered: list[str], position: int, budget: int) -> tuple[int, list[str], int]:
    """Messages from ``position`` whose rendered text fits ``budget`` tokens (at least one,
    shortened if it alone is too large); returns (end, pieces, number shortened)."""
    pieces: list[str] = []
    used = 0
    end = position
    while end < len(rendered):
        cost = count_tokens(rendered[end]) + 2
        if used + cost > budget:
            break
        pieces.append(rendered[end])
        used += cost
        end += 1
    if pieces:
        return end, pieces, 0
    return position + 1, [shorten_middle(rendered[position], budget - 2)], 1
