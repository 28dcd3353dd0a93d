"""mirage's model endpoint as OpenClaw's one model provider, and what it observed.

Above: the OpenClaw trunk driver and probe adapter. Below: ``runtime.serve`` (``create_app``,
``ModelTable``, ``BackgroundServer``). OpenClaw names the model of every request (see
``config``): ``trunk`` requests get the current trunk turn's scripted reply (the pack's reply
for a planting turn, the scripted acknowledgement for a filler turn) with the prompt counted
by the answering model's tokenizer, so OpenClaw's compaction sees realistic usage;
``answer`` (probes) and ``housekeeping`` (compaction summaries, memory flush) go to the real
answering model. Every call is kept in memory for the driver (EIT per trunk turn, each probe's
requests and tool calls) and written to a request log without prompt text.

OpenClaw appends a ``Runtime:`` line naming the session (key and id) to the first user message
of every session, so each probe fork's prompt differs from the previous probe's right after the
system prompt and the answering model re-reads the whole history. ``TrunkRuntimeLine`` rewrites
those per-fork fields of a probe request to the trunk session's own, so every probe of a state
sends the prompt the trunk session would have sent, and the model's prefix (KV) cache covers
everything but the question (docs/openclaw.md, "Departures").
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.kit.agents.openclaw.config import ANSWER_MODEL, HOUSEKEEPING_MODEL, TRUNK_MODEL
from harness.kit.agents.openclaw.errors import OpenClawError
from harness.kit.agents.openclaw.state import RUNTIME_LINE
from runtime.backbones.base import Backbone, Completion, PromptCount
from runtime.messages import Message, SystemMessage, ToolSpec
from runtime.serve import BackgroundServer, ModelTable, RequestLog, RequestRecord, create_app
from runtime.serve.wire import ChatRequest, TextContent, UserParam
from runtime.tokens import estimate_usage

SUMMARY_SYSTEM_PROMPT = "You are a context summarization assistant."
PER_FORK_FIELDS = ("session", "sessionId")
"""The fields of the ``Runtime:`` line that differ between forks of one session."""


def is_summary_request(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> bool:
    """OpenClaw's compaction summary call: its summarizer system prompt and no tools."""
    first = messages[0] if messages else None
    return (
        not tools
        and isinstance(first, SystemMessage)
        and first.content.startswith(SUMMARY_SYSTEM_PROMPT)
    )


@dataclass(frozen=True)
class SessionIdentity:
    """The per-fork values of a session's ``Runtime:`` line."""

    session: str
    """The full session key (``agent:main:trunk``)."""
    session_id: str

    def fields(self) -> dict[str, str]:
        return {"session": self.session, "sessionId": self.session_id}


def with_identity(line: str, identity: SessionIdentity) -> str:
    """``line`` (a ``Runtime:`` line) with its per-fork fields set to ``identity``'s; every
    other field and the order are kept."""
    values = identity.fields()
    fields = line.removeprefix("Runtime: ").split(" | ")
    for index, field in enumerate(fields):
        name, _, _ = field.partition("=")
        if name in values:
            fields[index] = f"{name}={values[name]}"
    return "Runtime: " + " | ".join(fields)


class TrunkRuntimeLine:
    """The endpoint's ``RequestRewrite``: in a probe request (model ``answer``), the
    ``Runtime:`` line of the first user message gets the trunk session's key and id instead of
    the probe fork's. Nothing else in the request changes; the note names both values."""

    def __init__(self) -> None:
        self.trunk: SessionIdentity | None = None
        """Set by the probe adapter once the trunk exists; until then nothing is rewritten."""

    def __call__(self, chat: ChatRequest) -> tuple[ChatRequest, str] | None:
        if chat.model != ANSWER_MODEL or self.trunk is None:
            return None
        users = ((i, m) for i, m in enumerate(chat.messages) if isinstance(m, UserParam))
        first_user = next(users, None)
        if first_user is None:
            return None
        position, first = first_user
        changed = self._rewritten(first, self.trunk)
        if changed is None:
            return None
        message, before, after = changed
        messages = [*chat.messages[:position], message, *chat.messages[position + 1 :]]
        note = f"messages.{position} {before!r} -> {after!r}"
        return chat.model_copy(update={"messages": messages}), note

    @staticmethod
    def _rewritten(message: UserParam, trunk: SessionIdentity) -> tuple[UserParam, str, str] | None:
        """The message with its ``Runtime:`` line rewritten, and the line's per-fork fields
        before and after; None when it has no such line or the line already names the trunk."""
        if isinstance(message.content, str):
            changed = rewrite_runtime_line(message.content, trunk)
            if changed is None:
                return None
            text, before, after = changed
            return message.model_copy(update={"content": text}), before, after
        parts = list(message.content)
        for index, part in enumerate(parts):
            if isinstance(part, TextContent) and (
                changed := rewrite_runtime_line(part.text, trunk)
            ):
                text, before, after = changed
                parts[index] = part.model_copy(update={"text": text})
                return message.model_copy(update={"content": parts}), before, after
        return None


def rewrite_runtime_line(text: str, trunk: SessionIdentity) -> tuple[str, str, str] | None:
    """``text`` with its ``Runtime:`` line naming ``trunk``, and that line's per-fork fields
    before and after; None without such a line or when it names ``trunk`` already."""
    found = RUNTIME_LINE.search(text)
    if found is None:
        return None
    line = with_identity(found.group(0), trunk)
    if line == found.group(0):
        return None
    rewritten = text[: found.start()] + line + text[found.end() :]
    return rewritten, per_fork_fields(found.group(0)), per_fork_fields(line)


def per_fork_fields(line: str) -> str:
    """The per-fork fields of a ``Runtime:`` line, e.g. ``session=… | sessionId=…``."""
    fields = line.removeprefix("Runtime: ").split(" | ")
    return " | ".join(f for f in fields if f.partition("=")[0] in PER_FORK_FIELDS)


class ScriptedTrunk(Backbone):
    """Model id ``trunk``: the current turn's scripted reply (``reply``, set by whoever drives
    the trunk session before each turn), to every request of that turn. OpenClaw 2026.9.6 sends
    the summary of a compaction that a trunk turn needed to the session's model rather than
    ``compaction.model``; those calls go to ``housekeeping``."""

    def __init__(self, counter: Backbone, housekeeping: Backbone) -> None:
        self.counter = counter
        self.housekeeping = housekeeping
        self.model = f"scripted-trunk({counter.model})"
        self.context_window = counter.context_window
        self.tool_mode = counter.tool_mode
        self.profile = counter.profile
        self.reply: str | None = None
        self.last_eit: int | None = None

    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Completion:
        if is_summary_request(messages, tools):
            return await self.housekeeping.complete(messages, tools)
        if self.reply is None:
            raise OpenClawError("the trunk model was asked before its scripted reply was set")
        counted = self.counter.count_prompt_tokens(messages, tools)
        usage = estimate_usage(messages, tools, self.reply).model_copy(
            update={"input_tokens": counted.tokens, "source": counted.source}
        )
        self.last_eit = counted.tokens
        return Completion(text=self.reply, usage=usage, model=self.model, finish_reason="stop")

    def count_prompt_tokens(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> PromptCount:
        return self.counter.count_prompt_tokens(messages, tools)

    def with_output_budget(self, max_output_tokens: int) -> Backbone:
        """Itself: a scripted reply has no budget, and the driver reads this object's EIT."""
        return self


class InFlight:
    """How many real-model calls are running (shared by every budgeted copy of a backbone)."""

    def __init__(self) -> None:
        self._count = 0
        self._lock = threading.Lock()

    def add(self, delta: int) -> None:
        with self._lock:
            self._count += delta

    @property
    def idle(self) -> bool:
        return self._count == 0


class WatchedBackbone(Backbone):
    """A real backbone whose calls in flight are counted (the trunk driver waits for
    OpenClaw's housekeeping to finish before it reads the compaction count)."""

    def __init__(self, inner: Backbone, in_flight: InFlight) -> None:
        self.inner = inner
        self.in_flight = in_flight
        self.model = inner.model
        self.context_window = inner.context_window
        self.tool_mode = inner.tool_mode
        self.profile = inner.profile
        self.max_output_tokens = inner.max_output_tokens

    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Completion:
        self.in_flight.add(1)
        try:
            return await self.inner.complete(messages, tools)
        finally:
            self.in_flight.add(-1)

    def count_prompt_tokens(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> PromptCount:
        return self.inner.count_prompt_tokens(messages, tools)

    def load(self) -> None:
        self.inner.load()

    def with_output_budget(self, max_output_tokens: int) -> Backbone:
        return WatchedBackbone(self.inner.with_output_budget(max_output_tokens), self.in_flight)


class ObservedRequests(RequestLog):
    """The request log (written without prompt text), plus every record with its content kept
    in memory for the driver."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, with_content=True)
        self.records: list[RequestRecord] = []
        self._records_lock = threading.Lock()

    def write(self, record: RequestRecord) -> None:
        with self._records_lock:
            self.records.append(record)
        super().write(record.model_copy(update={"request_messages": None, "reply_text": None}))

    def mark(self) -> int:
        with self._records_lock:
            return len(self.records)

    def since(self, mark: int, model: str) -> list[RequestRecord]:
        with self._records_lock:
            return [r for r in self.records[mark:] if r.model == model]


class ModelEndpoint:
    """The endpoint OpenClaw's provider ``mirage`` points at, on a free loopback port."""

    def __init__(self, answer: Backbone, housekeeping_budget: int, request_log: Path) -> None:
        self.in_flight = InFlight()
        housekeeping = WatchedBackbone(
            answer.with_output_budget(housekeeping_budget), self.in_flight
        )
        self.trunk = ScriptedTrunk(answer, housekeeping)
        self.requests = ObservedRequests(request_log)
        self.runtime_line = TrunkRuntimeLine()
        table = ModelTable(
            {
                TRUNK_MODEL: self.trunk,
                ANSWER_MODEL: WatchedBackbone(answer, self.in_flight),
                HOUSEKEEPING_MODEL: housekeeping,
            }
        )
        app = create_app(table, request_log=self.requests, rewrite=self.runtime_line)
        self._server = BackgroundServer(app)

    def start(self) -> str:
        """Serve; returns the OpenAI base URL (``http://127.0.0.1:PORT/v1``)."""
        self._server.start()
        return self._server.base_url

    def stop(self) -> None:
        self._server.stop()
        self.requests.close()
