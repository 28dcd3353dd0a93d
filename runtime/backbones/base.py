"""The ``Backbone`` seam.

Above: the agent loop, which sends the active context (typed messages) and the offered tools.
Below: litellm (any hosted or served model), the embedded local model, and scripted backbones
for tests. A backbone returns the raw completion text, any provider-native tool calls, and a
usage record; it never parses text-mode tool calls itself (the loop's parser does).

Provider trouble (rate limits, 5xx, timeouts, context overflow, malformed responses) surfaces
as ``ProviderError`` after bounded retries — never as model output.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict

from runtime.messages import Message, ToolCall, ToolSpec, Usage
from runtime.profiles import ModelProfile

ToolMode = Literal["native", "text"]
ProviderErrorKind = Literal[
    "rate_limit",
    "server_error",
    "timeout",
    "context_length",
    "malformed_response",
    "auth",
    "bad_request",
    "connection",
    "unknown",
]
RETRYABLE_KINDS: frozenset[str] = frozenset(
    {"rate_limit", "server_error", "timeout", "malformed_response", "connection"}
)


class ProviderError(Exception):
    """A backbone call failed for a reason that is not the model's output."""

    def __init__(
        self,
        kind: ProviderErrorKind,
        message: str,
        *,
        attempts: int = 1,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(f"{kind}: {message} (after {attempts} attempt(s))")
        self.kind: ProviderErrorKind = kind
        self.detail = message
        self.attempts = attempts
        self.retry_after_s = retry_after_s  # the server's Retry-After hint, when it sent one

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE_KINDS


class Completion(BaseModel):
    model_config = ConfigDict(frozen=True)

    text: str
    native_tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage
    finish_reason: str | None = None
    model: str
    latency_s: float = 0.0

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"


class Backbone(Protocol):
    model: str
    context_window: int
    tool_mode: ToolMode
    profile: ModelProfile

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> Completion: ...
