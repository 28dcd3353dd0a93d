"""Deterministic backbones for tests of the logic above the ``Backbone`` seam.

``ScriptedBackbone`` plays a fixed list of replies in order and fails loudly on a call nobody
scripted; ``FunctionBackbone`` computes each reply from the messages. Both record every call
(messages, offered tools and call options) so a test can check what the agent loop or the
endpoint actually sent. They accept any ``CallOptions`` and apply none: the script decides the
reply. Usage is taken from the reply when given, otherwise estimated with ``runtime.tokens``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeAlias

from pydantic import BaseModel, ConfigDict

from runtime.backbones.base import (
    NO_OPTIONS,
    Backbone,
    CallOptions,
    Completion,
    ProviderError,
    ToolMode,
)
from runtime.messages import Message, ToolCall, ToolSpec, Usage
from runtime.profiles import ModelProfile, resolve_profile
from runtime.tokens import estimate_usage

DEFAULT_SCRIPTED_CONTEXT_WINDOW = 32_768


class ScriptExhausted(AssertionError):
    """The code under test called the backbone more often than the script allows."""


class ScriptedReply(BaseModel):
    """One scripted reply; ``usage=None`` means estimate it from the messages and text."""

    model_config = ConfigDict(frozen=True)

    text: str = ""
    native_tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None
    finish_reason: str = "stop"


class RecordedCall(BaseModel):
    model_config = ConfigDict(frozen=True)

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    options: CallOptions = NO_OPTIONS


ReplyValue: TypeAlias = str | ScriptedReply | Completion
ReplyFunction: TypeAlias = Callable[..., ReplyValue | Awaitable[ReplyValue]]
Reply: TypeAlias = ReplyValue | ProviderError | ReplyFunction


class _RecordingBackbone(Backbone):
    def __init__(
        self,
        *,
        model: str,
        tool_mode: ToolMode,
        profile: ModelProfile | None,
        context_window: int,
    ) -> None:
        self.model = model
        self.tool_mode: ToolMode = tool_mode
        self.profile = profile or resolve_profile(model)
        self.context_window = context_window
        self.calls: list[RecordedCall] = []

    def with_output_budget(self, max_output_tokens: int) -> Backbone:
        """Itself: a scripted reply has no budget to apply."""
        return self

    def with_call_options(self, options: CallOptions) -> Backbone:
        """A copy that records ``options`` with its calls (sharing the script and the record)."""
        return self._with_options(options)

    def _record(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> None:
        call = RecordedCall(messages=tuple(messages), tools=tuple(tools), options=self.call_options)
        self.calls.append(call)

    async def _resolve(
        self, reply: Reply, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> Completion:
        if isinstance(reply, ProviderError):
            raise reply
        if callable(reply) and not isinstance(reply, BaseModel):
            value = _call_reply_function(reply, messages, tools)
            reply = await value if inspect.isawaitable(value) else value
        return self._to_completion(reply, messages, tools)

    def _to_completion(
        self, reply: object, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> Completion:
        if isinstance(reply, Completion):
            return reply
        if isinstance(reply, str):
            reply = ScriptedReply(text=reply)
        if not isinstance(reply, ScriptedReply):
            raise TypeError(
                f"a scripted reply must be str, ScriptedReply, Completion, ProviderError or a "
                f"function returning one of the first three; got {type(reply).__name__}"
            )
        usage = reply.usage or estimate_usage(messages, tools, reply.text, reply.native_tool_calls)
        return Completion(
            text=reply.text,
            native_tool_calls=reply.native_tool_calls,
            usage=usage,
            finish_reason=reply.finish_reason,
            model=self.model,
        )


def _call_reply_function(
    function: ReplyFunction, messages: Sequence[Message], tools: Sequence[ToolSpec]
) -> Any:
    """Reply functions take ``(messages)`` or ``(messages, tools)``."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return function(list(messages), list(tools))
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    takes_varargs = any(p.kind is p.VAR_POSITIONAL for p in parameters)
    if len(positional) >= 2 or takes_varargs:
        return function(list(messages), list(tools))
    return function(list(messages))


class ScriptedBackbone(_RecordingBackbone):
    """Plays ``replies`` in order: strings, ``ScriptedReply``/``Completion`` objects,
    ``ProviderError`` instances (raised), or functions of the messages (and tools)."""

    def __init__(
        self,
        replies: Sequence[Reply],
        *,
        model: str = "scripted",
        tool_mode: ToolMode = "text",
        profile: ModelProfile | None = None,
        context_window: int = DEFAULT_SCRIPTED_CONTEXT_WINDOW,
    ) -> None:
        super().__init__(
            model=model, tool_mode=tool_mode, profile=profile, context_window=context_window
        )
        self._replies = list(replies)

    @property
    def remaining(self) -> int:
        return len(self._replies) - len(self.calls)

    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Completion:
        index = len(self.calls)
        self._record(messages, tools)
        if index >= len(self._replies):
            last = messages[-1].model_dump_json()[:200] if messages else "(no messages)"
            raise ScriptExhausted(
                f"unexpected backbone call #{index + 1}: the script has only "
                f"{len(self._replies)} repl(y/ies); last message: {last}"
            )
        return await self._resolve(self._replies[index], messages, tools)

    def assert_exhausted(self) -> None:
        if self.remaining:
            raise AssertionError(
                f"{self.remaining} scripted repl(y/ies) were never requested "
                f"(made {len(self.calls)} of {len(self._replies)} calls)"
            )


class FunctionBackbone(_RecordingBackbone):
    """Computes every reply with ``function(messages)`` or ``function(messages, tools)``;
    the function may be async and may raise ``ProviderError``."""

    def __init__(
        self,
        function: ReplyFunction,
        *,
        model: str = "function",
        tool_mode: ToolMode = "text",
        profile: ModelProfile | None = None,
        context_window: int = DEFAULT_SCRIPTED_CONTEXT_WINDOW,
    ) -> None:
        super().__init__(
            model=model, tool_mode=tool_mode, profile=profile, context_window=context_window
        )
        self._function = function

    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Completion:
        self._record(messages, tools)
        return await self._resolve(self._function, messages, tools)
