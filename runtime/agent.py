"""The agent loop.

Above: chat UIs, the harness (one probe = one turn on a restored session), compaction's
memory flush. Below: a ``Backbone`` (completion + usage), the parser family of the model's
profile (raw text → calls + outcome labels), the tool errors for calls it cannot run
(``runtime.tool_errors``), a ``Toolset`` (MCP), and an optional ``ContextPolicy`` (compaction)
consulted after every turn and on context overflow. A ``ProviderError`` (a provider's refusal
included) rolls the turn back and propagates: it is not model output.

A turn: append the user message → assemble the active context (system prompt with workspace
hints; in text mode the backbone adds the tool affordances) → backbone → parse → execute the
executable calls, and answer a call whose body does not decode or whose arguments fail the
tool's schema with a tool error (``runtime.tool_errors``) → feed results back → repeat up to
``max_tool_rounds`` → final reply. A round with no call to run or answer ends the turn, and so
does the last round (its calls are recorded, not run). Each ``ToolCallRecord`` says whether the
call ran (``executed``) or was answered with an error (``error_returned``, the text the model
saw in ``result``); ``TurnRecord.finish_reason`` is the provider's for the turn's last call.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Literal, Protocol

import structlog
from pydantic import BaseModel, Field

from runtime.backbones.base import Backbone, Completion, ProviderError
from runtime.ledger import CallPurpose
from runtime.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from runtime.parsers import OutcomeLabel, ParsedCall, ParseResult, parse_reply
from runtime.session import Session
from runtime.tokens import count_message_tokens, count_tokens
from runtime.tool_errors import returns_error, tool_error_message
from runtime.toolset import NoTools, Toolset

log = structlog.get_logger(__name__)

MIN_CONTEXT_WINDOW = 1024
MAX_OVERFLOW_RETRIES = 3


class ContextWindowTooSmall(ValueError):
    """The configured window cannot hold the fixed prompt plus a reply."""


class ToolCallRecord(BaseModel):
    round: int
    label: OutcomeLabel
    name: str | None = None
    arguments: dict[str, object] = Field(default_factory=dict)
    executed: bool = False
    result: str | None = None
    is_error: bool = False
    error: str | None = None
    error_returned: bool = False
    """Not run: the loop answered the call with a tool error (its text in ``result``)."""
    latency_s: float = 0.0


AnsweredCall = tuple[ParsedCall, ToolCall | None]
"""A parsed call and, when the loop runs it or answers it with an error, its message call."""


class TurnRecord(BaseModel):
    reply: str
    stop_reason: Literal["final", "max_rounds"]
    rounds: int
    finish_reason: str | None = None
    """The provider's ``finish_reason`` for the turn's last backbone call."""
    parse_outcomes: list[OutcomeLabel] = Field(default_factory=list)
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    usage: list[Usage] = Field(default_factory=list)
    backbone_s: float = 0.0
    tools_s: float = 0.0
    total_s: float = 0.0
    eit: int = 0
    compaction_count: int = 0

    @property
    def executed_tools(self) -> list[str]:
        return [call.name or "" for call in self.tool_calls if call.executed]


class ContextPolicy(Protocol):
    async def after_turn(self, agent: Agent) -> None: ...

    async def on_overflow(self, agent: Agent, error: ProviderError) -> bool:
        """Make room after a context-length error; True if the call should be retried."""
        ...


class Agent:
    def __init__(
        self,
        session: Session,
        backbone: Backbone,
        toolset: Toolset | None = None,
        policy: ContextPolicy | None = None,
    ) -> None:
        self.session = session
        self.backbone = backbone
        self.toolset: Toolset = toolset or NoTools()
        self.policy = policy
        self.parser_family = session.config.parser or backbone.profile.parser
        system = SystemMessage(content=self._system_text())
        text_mode = backbone.tool_mode == "text"
        examples = backbone.profile.example_turns(self.tools) if text_mode else []
        self._prefix: list[Message] = [system, *examples]
        self._system_tokens = sum(count_message_tokens(m) for m in self._prefix) + count_tokens(
            backbone.profile.render_tools(self.tools)
        )
        self.check_context_window()

    @property
    def tools(self) -> list[ToolSpec]:
        return self.toolset.specs()

    @property
    def context_window(self) -> int:
        return self.session.ledger.context_window

    def _system_text(self) -> str:
        config = self.session.config
        parts = [config.system_prompt]
        if config.workspace_hint:
            parts.append(config.workspace_hint)
        return "\n\n".join(parts)

    def check_context_window(self) -> None:
        fixed = self._system_tokens + self.session.config.max_output_tokens
        window = self.context_window
        if window < MIN_CONTEXT_WINDOW or fixed >= window // 2:
            raise ContextWindowTooSmall(
                f"context window of {window} tokens is too small: the system prompt and tool "
                f"descriptions ({self._system_tokens} tokens) plus the reply budget "
                f"({self.session.config.max_output_tokens}) must fit in half of it, and the "
                f"window must be at least {MIN_CONTEXT_WINDOW}"
            )

    def active_context(self) -> list[Message]:
        """System prompt, the profile's few-shot tool example turns (text mode), history."""
        return [*self._prefix, *self.session.messages]

    def estimated_eit(self) -> int:
        """Tokens the next call would send (estimate), without a backbone call."""
        return self._system_tokens + self.session.history_tokens

    async def turn(
        self,
        message: str | UserMessage,
        images: Sequence[ImagePart] = (),
        *,
        purpose: CallPurpose = "turn",
    ) -> TurnRecord:
        """Run one user turn (text plus images, or a ready ``UserMessage``). On
        ``ProviderError`` the session is rolled back to where it was before the turn and the
        error propagates (it is not model output)."""
        started = time.perf_counter()
        if isinstance(message, str):
            message = UserMessage.text(message, tuple(images))
        self.session.append(message)
        record = TurnRecord(reply="", stop_reason="final", rounds=0)
        try:
            await self._run_rounds(record, purpose)
        except ProviderError:
            self._roll_back_to(message)
            raise
        record.total_s = time.perf_counter() - started
        if self.policy is not None and purpose == "turn":
            await self.policy.after_turn(self)
        record.eit = self.session.ledger.current_eit
        record.compaction_count = self.session.compaction_count
        return record

    def _roll_back_to(self, message: UserMessage) -> None:
        """Drop ``message`` and everything after it (found by identity: an overflow compaction
        during the turn may have moved it)."""
        for index in range(len(self.session.messages) - 1, -1, -1):
            if self.session.messages[index] is message:
                self.session.truncate(index)
                return

    async def _run_rounds(self, record: TurnRecord, purpose: CallPurpose) -> None:
        tools = self.tools
        for round_index in range(self.session.config.max_tool_rounds + 1):
            completion = await self.complete(purpose, record)
            parsed = parse_reply(
                completion.text,
                tools,
                family=self.parser_family,
                adapters=self.session.config.adapters,
                truncated=completion.truncated,
                native_calls=completion.native_tool_calls,
            )
            record.rounds = round_index + 1
            record.parse_outcomes.append(parsed.overall)
            record.finish_reason = completion.finish_reason
            answered = answered_calls(parsed, f"call-{len(self.session.messages)}")
            calls = tuple(call for _, call in answered if call is not None)
            self.session.append(
                AssistantMessage(content=parsed.content, tool_calls=calls, raw=completion.text)
            )
            if not calls or round_index == self.session.config.max_tool_rounds:
                self._record_unexecuted(record, parsed, round_index)
                record.stop_reason = "max_rounds" if calls else "final"
                record.reply = parsed.content
                return
            await self._execute(record, answered, round_index)

    def _record_unexecuted(self, record: TurnRecord, parsed: ParseResult, round_index: int) -> None:
        for call in parsed.calls:
            record.tool_calls.append(
                ToolCallRecord(
                    round=round_index,
                    label=call.label,
                    name=call.name,
                    arguments=dict(call.arguments),
                    error=call.error,
                )
            )

    async def _execute(
        self, record: TurnRecord, answered: list[AnsweredCall], round_index: int
    ) -> None:
        """Run the executable calls and answer the others the loop answers, in order; every
        call of the round is recorded."""
        for call, tool_call in answered:
            entry = ToolCallRecord(
                round=round_index,
                label=call.label,
                name=call.name,
                arguments=dict(call.arguments),
                error=call.error,
            )
            if tool_call is not None and call.executable:
                await self._run_tool(entry, tool_call)
                record.tools_s += entry.latency_s
            elif tool_call is not None:
                self._return_error(entry, call, tool_call)
            record.tool_calls.append(entry)

    async def _run_tool(self, entry: ToolCallRecord, tool_call: ToolCall) -> None:
        started = time.perf_counter()
        outcome = await self.toolset.call(tool_call.name, dict(tool_call.arguments))
        entry.latency_s = time.perf_counter() - started
        entry.executed, entry.result, entry.is_error = True, outcome.text, outcome.is_error
        self.session.append(
            ToolResultMessage(
                tool_call_id=tool_call.id,
                name=tool_call.name,
                content=outcome.text,
                is_error=outcome.is_error,
            )
        )
        log.info(
            "tool_call",
            tool=tool_call.name,
            is_error=outcome.is_error,
            latency_s=round(entry.latency_s, 4),
        )

    def _return_error(self, entry: ToolCallRecord, call: ParsedCall, tool_call: ToolCall) -> None:
        """Answer a call the loop cannot run with the tool error that says why."""
        text = tool_error_message(call, self.parser_family)
        entry.result, entry.is_error, entry.error_returned = text, True, True
        self.session.append(
            ToolResultMessage(
                tool_call_id=tool_call.id, name=tool_call.name, content=text, is_error=True
            )
        )
        log.info("tool_call_error_returned", tool=call.name, label=call.label)

    async def complete(self, purpose: CallPurpose, record: TurnRecord | None = None) -> Completion:
        """One backbone call on the active context, with overflow recovery through the policy
        (at most ``MAX_OVERFLOW_RETRIES`` compactions)."""
        for attempt in range(MAX_OVERFLOW_RETRIES + 1):
            try:
                completion = await self.backbone.complete(self.active_context(), self.tools)
            except ProviderError as error:
                recoverable = error.kind == "context_length" and attempt < MAX_OVERFLOW_RETRIES
                if (
                    recoverable
                    and self.policy is not None
                    and await self.policy.on_overflow(self, error)
                ):
                    continue
                raise
            self.session.ledger.record(
                completion.usage,
                model=completion.model,
                purpose=purpose,
                latency_s=completion.latency_s,
            )
            if record is not None:
                record.usage.append(completion.usage)
                record.backbone_s += completion.latency_s
            return completion
        raise AssertionError("unreachable")  # pragma: no cover


def answered_calls(parsed: ParseResult, id_prefix: str) -> list[AnsweredCall]:
    """Each parsed call with the message call the loop runs or answers with an error (ids
    ``{id_prefix}-{index}``), or None for a call it neither runs nor answers."""
    return [
        (
            call,
            ToolCall(id=f"{id_prefix}-{index}", name=call.name or "", arguments=call.arguments)
            if call.executable or returns_error(call)
            else None,
        )
        for index, call in enumerate(parsed.calls)
    ]
