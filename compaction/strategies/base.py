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
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Protocol

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


class CompactionStrategy(Protocol):
    name: str

    def build_prompt(self, request: SummaryRequest) -> list[Message]: ...

    async def summarize(
        self,
        messages: Sequence[Message],
        summarizer: Backbone,
        *,
        first_index: int = 0,
        focus: str | None = None,
        previous_summary: str | None = None,
    ) -> SummaryResult: ...


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


class PromptStrategy:
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
    ) -> SummaryResult:
        if not messages:
            raise CompactionError("no messages to summarise")
        rendered = [
            f"[{first_index + offset}] {render_message(message)}"
            for offset, message in enumerate(messages)
        ]
        result = SummaryResult(summary=previous_summary or "", chunks=0)
        position = 0
        while position < len(rendered):
            position = await self._summarize_next_chunk(
                rendered, position, first_index, summarizer, focus, result
            )
        if not result.summary.strip():
            raise CompactionError(f"the summarizer {summarizer.model} returned an empty summary")
        return result

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
        window = summarizer.context_window
        output = summarizer.max_output_tokens or DEFAULT_OUTPUT_TOKENS
        output = min(output, window // 2)
        empty = SummaryRequest(transcript="", focus=focus, previous_summary=running or None)
        overhead = sum(count_message_tokens(message) for message in self.build_prompt(empty))
        return int((window - output) / TOKEN_SAFETY_FACTOR) - overhead


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
