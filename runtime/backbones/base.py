"""The ``Backbone`` seam.

Above: the agent loop, which sends the active context (typed messages) and the offered tools.
Below: litellm (any hosted or served model), the embedded local model, and scripted backbones
for tests. A backbone returns the raw completion text, any provider-native tool calls, and a
usage record; it never parses text-mode tool calls itself (the loop's parser does).

Provider trouble (rate limits, 5xx, timeouts, context overflow, malformed responses) surfaces
as ``ProviderError`` after bounded retries — never as model output. So does a provider's refusal
(kind ``provider_refusal``: a reply withheld or cut by its content filter, ``finish_reason``
``content_filter``, or a ``refusal`` with no content): what the provider sent is not the
model's answer, and it is not retried inside the backbone (the same request would be refused
again).

The whole contract is the ``Backbone`` base class below: what every backbone must provide is
abstract, the optional capabilities have defaults (a tiktoken estimate of the prompt, nothing
to load, a copy with another reply budget, no per-call options). Every backbone subclasses it.

Per-call options (``CallOptions``: sampling settings and an output constraint, which
``mirage serve-model`` takes from a client's request) reach a backbone through
``with_call_options``, which returns a copy applying them or raises ``UnsupportedOption``
naming the request field it cannot apply: an option is applied or refused, never dropped.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, model_validator

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
    "provider_refusal",
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
        finish_reason: str | None = None,
    ) -> None:
        super().__init__(f"{kind}: {message} (after {attempts} attempt(s))")
        self.kind: ProviderErrorKind = kind
        self.detail = message
        self.attempts = attempts
        self.retry_after_s = retry_after_s  # the server's Retry-After hint, when it sent one
        self.finish_reason = finish_reason  # of the reply that failed, when one came back

    def after(self, attempts: int) -> ProviderError:
        """The same error, counted after ``attempts`` attempts."""
        return ProviderError(
            self.kind,
            self.detail,
            attempts=attempts,
            retry_after_s=self.retry_after_s,
            finish_reason=self.finish_reason,
        )

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE_KINDS


class UnsupportedOption(ValueError):
    """A backbone cannot apply a call option; ``param`` names the request field (HTTP 400)."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(f"{param}: {message}")
        self.param = param
        self.message = message


class JsonReply(BaseModel):
    """The reply must be one JSON object: valid against ``json_schema`` when given (OpenAI's
    ``response_format`` ``json_schema``), any object otherwise (``json_object``)."""

    model_config = ConfigDict(frozen=True)

    json_schema: dict[str, Any] | None = None
    name: str = "response"
    strict: bool | None = None


Constraint = Literal["none", "tool_call", "named_tool", "json_object", "json_schema"]


class CallOptions(BaseModel):
    """What one call asks of a backbone beyond its messages and tools. ``None`` or empty: the
    backbone's own setting. ``tool_call="required"`` makes the reply a call of an offered tool
    (of ``tool_name`` when set); ``json_reply`` makes it JSON (with ``tool_call="auto"`` and
    tools offered: a call or the JSON); ``parallel_tool_calls=False`` allows one call, which the
    reader of the reply enforces and native providers are told. ``provider_fields`` are request
    fields passed to a provider as they came (e.g. ``presence_penalty``); a backbone without a
    provider refuses them."""

    model_config = ConfigDict(frozen=True)

    temperature: float | None = Field(default=None, ge=0)
    top_p: float | None = Field(default=None, ge=0, le=1)
    seed: int | None = None
    stop: tuple[str, ...] = ()
    tool_call: Literal["auto", "required"] = "auto"
    tool_name: str | None = None
    parallel_tool_calls: bool = True
    json_reply: JsonReply | None = None
    provider_fields: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _named_tool_is_required(self) -> CallOptions:
        if self.tool_name is not None and self.tool_call != "required":
            raise ValueError("tool_name needs tool_call='required'")
        return self

    @property
    def constraint(self) -> Constraint:
        """The output constraint, as the request log names it."""
        if self.tool_name is not None:
            return "named_tool"
        if self.tool_call == "required":
            return "tool_call"
        if self.json_reply is not None:
            return "json_schema" if self.json_reply.json_schema is not None else "json_object"
        return "none"

    def requested(self) -> list[str]:
        """The request fields (OpenAI names) a backbone must apply; ``parallel_tool_calls``
        is not among them (the reader of the reply enforces it)."""
        sampling = ("temperature", "top_p", "seed")
        fields = [name for name in sampling if getattr(self, name) is not None]
        fields += ["stop"] if self.stop else []
        fields += ["tool_choice"] if self.tool_call != "auto" else []
        fields += ["response_format"] if self.json_reply is not None else []
        return fields + sorted(self.provider_fields)


NO_OPTIONS = CallOptions()


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


def refusal_reason(
    finish_reason: str | None, refusal: Any, text: str | None, tool_calls: int
) -> str | None:
    """Why a provider's reply is a refusal rather than the model's answer, or None: its
    ``finish_reason`` is ``content_filter`` (the provider withheld or cut the reply, whatever it
    kept), or it carries a ``refusal`` (OpenAI's field) and neither content nor tool calls."""
    content = bool(text and text.strip())
    if finish_reason == "content_filter":
        kept = "content kept" if content else "no content"
        return f"finish_reason content_filter ({kept}, {tool_calls} tool call(s))"
    if isinstance(refusal, str) and refusal.strip() and not content and not tool_calls:
        return f"refusal with no content: {refusal.strip()[:300]!r}"
    return None


class PromptCount(NamedTuple):
    """Input tokens of a call, and whether the model's own tokenizer counted them."""

    tokens: int
    source: Literal["provider", "estimate"]


class Backbone(ABC):
    """One model behind the agent loop.

    ``model`` is the model string, ``context_window`` the window in tokens, ``tool_mode`` how
    tools reach the model (``native`` provider tool calls, or ``text`` in the prompt, read back
    by ``profile.parser``), ``max_output_tokens`` the reply budget per call (None: the
    backbone has none, e.g. scripted replies, or leaves it to the provider). ``batch_width``
    is how many calls it decodes as one batch when they come from a lockstep group
    (``runtime/backbones/lockstep.py``), whose replies may depend on their batch: the harness
    then probes in fixed groups of that size (None: it does not batch)."""

    model: str
    context_window: int
    tool_mode: ToolMode
    profile: ModelProfile
    max_output_tokens: int | None = None
    cache_markers: bool = False  # marks the cacheable prefix for providers that need markers
    call_options: CallOptions = NO_OPTIONS
    batch_width: int | None = None

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

    async def aclose(self) -> None:
        """Close what this event loop's calls opened (connections); a later call opens them
        again. Default: nothing to close."""
        return None

    def with_output_budget(self, max_output_tokens: int) -> Backbone:
        """This backbone answering with at most ``max_output_tokens`` per call: a shallow copy,
        so any loaded model is shared."""
        budgeted = copy.copy(self)
        budgeted.max_output_tokens = max_output_tokens
        return budgeted

    def with_call_options(self, options: CallOptions) -> Backbone:
        """This backbone applying ``options`` to its calls (a shallow copy, so any loaded model
        is shared), or ``UnsupportedOption`` naming a field it cannot apply. Default: a backbone
        that applies no options refuses any that is set."""
        requested = options.requested()
        if not requested:
            return self
        raise UnsupportedOption(
            requested[0], f"the backbone {self.model} applies no per-call options"
        )

    def _with_options(self, options: CallOptions) -> Backbone:
        """A shallow copy carrying ``options`` (for overrides that accept them)."""
        applied = copy.copy(self)
        applied.call_options = options
        return applied
