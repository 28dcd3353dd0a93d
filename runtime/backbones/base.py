"""The ``Backbone`` seam.

Above: the agent loop, which sends the active context (typed messages) and the offered tools.
Below: litellm (any hosted or served model), the embedded local model, and scripted backbones
for tests. A backbone returns the raw completion text, any provider-native tool calls, and a
usage record; it never parses text-mode tool calls itself (the loop's parser does).

Provider trouble (rate limits, 5xx, timeouts, context overflow, malformed responses) surfaces
as ``ProviderError`` after bounded retries — never as model output.

The whole contract is the ``Backbone`` base class below: what every backbone must provide is
abstract, the optional capabilities have defaults (a tiktoken estimate of the prompt, nothing
to load, a copy with another reply budget). Every backbone subclasses it.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict

from runtime.messages import Message, ToolCall, ToolSpec, Usage
from runtime.profiles import ModelProfile
from runtime.tokens import estimate_prompt_tokens

LOCAL_PREFIX = "local/"
"""Model strings with this prefix name an embedded model (no provider, no network)."""

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


class PromptCount(NamedTuple):
    """Input tokens of a call, and whether the model's own tokenizer counted them."""

    tokens: int
    source: Literal["provider", "estimate"]


class Backbone(ABC):
    """One model behind the agent loop.

    ``model`` is the model string, ``context_window`` the window in tokens, ``tool_mode`` how
    tools reach the model (``native`` provider tool calls, or ``text`` in the prompt, read back
    by ``profile.parser``), ``max_output_tokens`` the reply budget per call (None: the
    backbone has none, e.g. scripted replies, or leaves it to the provider)."""

    model: str
    context_window: int
    tool_mode: ToolMode
    profile: ModelProfile
    max_output_tokens: int | None = None
    cache_markers: bool = False  # marks the cacheable prefix for providers that need markers

    @abstractmethod
    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Completion:
        """One completion of ``messages`` with ``tools`` offered; ``ProviderError`` on failure."""

    def count_prompt_tokens(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> PromptCount:
        """Input tokens a call would have, without generating. Default: a tiktoken estimate;
        a backbone with its own tokenizer at hand counts exactly (source ``provider``)."""
        return PromptCount(estimate_prompt_tokens(messages, tools), "estimate")

    def load(self) -> None:
        """Load the model now rather than on the first call (default: nothing to load)."""
        return None

    def with_output_budget(self, max_output_tokens: int) -> Backbone:
        """This backbone answering with at most ``max_output_tokens`` per call: a shallow copy,
        so any loaded model is shared."""
        budgeted = copy.copy(self)
        budgeted.max_output_tokens = max_output_tokens
        return budgeted
