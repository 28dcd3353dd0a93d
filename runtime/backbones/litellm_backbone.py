"""Any hosted or served model through litellm (OpenAI, Anthropic, hosted vLLM, Ollama, ...).

Above: the agent loop, through the ``Backbone`` seam. Below: ``litellm.acompletion``, with
litellm's own retries switched off: this module retries rate limits, 5xx, timeouts, connection
errors and malformed responses itself with bounded exponential backoff and jitter, and raises
``ProviderError`` (with the attempt count) when they persist. Context-length, auth and
bad-request errors are raised at once, and so is a provider's refusal (``provider_refusal``): a
reply whose ``finish_reason`` is ``content_filter`` (litellm's name for OpenAI's and Azure's
filter, Anthropic's ``refusal`` stop reason and Gemini's safety stops), a reply carrying a
``refusal`` and no content, or a request refused by the provider's content policy (litellm's
``ContentPolicyViolationError``, or a 400 with OpenAI's or Azure's content-policy code).
``completion_cost`` is never called (it raises for models missing from the price map).

Prompt caching: for providers that cache only at explicit markers (Anthropic, Claude on
Bedrock or Vertex) the request marks the end of the system prompt and of the stable prefix
(``runtime.backbones.prompt_cache``); other providers get the same bytes for the same prefix,
which is what their automatic caching needs. Cache reads and writes come back in ``Usage``.

Tool modes: ``native`` sends ``tools=[...]`` and returns the provider's structured calls as
``native_tool_calls``; ``text`` writes the tools into the system prompt and returns the raw
text for the runtime's parser.

Per-call options (``with_call_options``) are passed to the provider: temperature, top_p, seed
and stop over the backbone's own settings, ``tool_choice`` and ``parallel_tool_calls`` (native
mode: a text-mode backbone cannot force a call and refuses them), ``response_format``, and any
other field as it came. A field that litellm does not pass to the model's provider
(``litellm.get_supported_openai_params``) is refused rather than dropped.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, Field

from runtime.backbones.base import (
    Backbone,
    CallOptions,
    Completion,
    PromptCount,
    ProviderError,
    ProviderErrorKind,
    ToolMode,
    UnsupportedOption,
    refusal_reason,
)
from runtime.backbones.openai_format import to_openai_messages, to_openai_tools
from runtime.backbones.prompt_cache import mark_cache_prefix, needs_cache_markers
from runtime.messages import RAW_ARGUMENTS_KEY, Message, ToolCall, ToolSpec, Usage
from runtime.offline import quiet_litellm
from runtime.profiles import ModelProfile, resolve_profile
from runtime.tokens import estimate_usage

log = structlog.get_logger(__name__)

DEFAULT_CONTEXT_WINDOW = 8192
"""Used when neither the config nor litellm's model table knows the window: small enough
that the context guard errs on the safe side for unknown served models."""

CONTENT_POLICY_CODES = frozenset({"content_policy_violation", "content_filter"})
"""Error codes of a request refused by a provider's content policy (OpenAI, Azure)."""

PLACEHOLDER_API_KEY = "sk-no-key-required"
"""The key sent to a local OpenAI-compatible server, which ignores it (``_placeholder_key``)."""

DEFAULT_TIMEOUT_S = 120.0
"""How long one provider call may take before it fails as a ``timeout`` (and is retried):
``--request-timeout`` of ``mirage run``, ``compliance`` and ``serve-model``."""


class RetryPolicy(BaseModel):
    model_config = ConfigDict(frozen=True)

    max_retries: int = Field(default=3, ge=0)
    base_delay_s: float = Field(default=0.5, ge=0)
    max_delay_s: float = Field(default=8.0, ge=0)

    def delay(self, retry_number: int, retry_after_s: float | None = None) -> float:
        """Backoff before retry ``retry_number`` (1-based): exponential with jitter in
        [50 %, 100 %], raised to a server's Retry-After, never above ``max_delay_s``."""
        exponential = self.base_delay_s * 2 ** (retry_number - 1)
        delay = exponential * random.uniform(0.5, 1.0)
        if retry_after_s is not None:
            delay = max(delay, retry_after_s)
        return min(delay, self.max_delay_s)


class LiteLLMBackbone(Backbone):
    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        tool_mode: ToolMode | None = None,
        profile: ModelProfile | None = None,
        context_window: int | None = None,
        max_output_tokens: int | None = 1024,
        temperature: float | None = 0.0,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        extra_params: dict[str, Any] | None = None,
        cache_markers: bool | None = None,
    ) -> None:
        """``cache_markers``: mark the cacheable prefix in every request; None decides by
        provider (``needs_cache_markers``)."""
        self.model = model
        self.profile = profile or resolve_profile(model)
        self.tool_mode: ToolMode = tool_mode or default_tool_mode(self.profile)
        self.api_base = api_base
        self.api_key = api_key or _placeholder_key(model, api_base)
        self.max_output_tokens = max_output_tokens
        self.temperature = temperature
        self.timeout_s = timeout_s
        self.retry = retry or RetryPolicy()
        self.extra_params = dict(extra_params or {})
        self.context_window = context_window or known_context_window(model)
        self.cache_markers = (
            needs_cache_markers(model, api_base) if cache_markers is None else cache_markers
        )

    def count_prompt_tokens(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> PromptCount:
        """Input tokens a call would have, by litellm's offline counter (tiktoken: the
        provider's own count may differ by a few percent), without calling the provider."""
        litellm = quiet_litellm()

        converted = to_openai_messages(messages, tools, self.profile, self.tool_mode)
        offered: Any = to_openai_tools(tools, self.tool_mode) or None
        counted = litellm.token_counter(model=self.model, messages=converted, tools=offered)
        return PromptCount(int(counted), "estimate")

    def with_call_options(self, options: CallOptions) -> Backbone:
        """A copy passing ``options`` to the provider; ``UnsupportedOption`` for a forced call
        in text mode or a field litellm does not pass to this provider."""
        if options.tool_call != "auto" and self.tool_mode == "text":
            raise UnsupportedOption(
                "tool_choice",
                f"the backbone {self.model} writes tools into the prompt (text tool mode) and "
                "cannot force a call; serve it with --tool-mode native",
            )
        wanted = options.requested()
        if not options.parallel_tool_calls and self.tool_mode == "native":
            wanted.append("parallel_tool_calls")
        supported = self._supported_params()
        for field in wanted:
            if field not in supported:
                raise UnsupportedOption(
                    field, f"litellm does not pass this field to {self.model}'s provider"
                )
        return self._with_options(options)

    def _supported_params(self) -> frozenset[str]:
        litellm = quiet_litellm()
        try:
            model, provider, *_ = litellm.get_llm_provider(self.model, api_base=self.api_base)
        except Exception:  # litellm raises a BadRequestError subclass for unknown providers
            return frozenset()
        listed = litellm.get_supported_openai_params(model=model, custom_llm_provider=provider)
        return frozenset(listed or ())

    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Completion:
        send = self._sender(messages, tools)
        attempt = 0
        while True:
            attempt += 1
            started = time.perf_counter()
            try:
                response = await send()
                return self._to_completion(response, messages, tools, started)
            except ProviderError as error:
                if not error.retryable or attempt > self.retry.max_retries:
                    raise error.after(attempt) from error
                delay = self.retry.delay(attempt, error.retry_after_s)
                log.warning(
                    "provider_retry",
                    model=self.model,
                    kind=error.kind,
                    attempt=attempt,
                    delay_s=round(delay, 3),
                )
                await asyncio.sleep(delay)

    def _sender(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> Callable[[], Awaitable[Any]]:
        """What sends the call (once per attempt) and returns the provider's response."""
        request = self._request(messages, tools)
        return lambda: self._call(request)

    def _request(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> dict[str, Any]:
        converted = to_openai_messages(messages, tools, self.profile, self.tool_mode)
        if self.cache_markers:
            converted = mark_cache_prefix(converted, messages)
        request: dict[str, Any] = {
            "model": self.model,
            "messages": converted,
            "timeout": self.timeout_s,
            "num_retries": 0,
            "max_retries": 0,
            "drop_params": True,  # drop sampling params a provider rejects instead of failing
            **self.extra_params,
        }
        connection = {"api_base": self.api_base, "api_key": self.api_key}
        request.update({key: value for key, value in connection.items() if value is not None})
        request.update(self._parameters(tools))
        return request

    def _parameters(self, tools: Sequence[ToolSpec]) -> dict[str, Any]:
        """The Chat Completions fields besides the model and the messages: the tools, the reply
        budget and sampling, the per-call options."""
        request: dict[str, Any] = {}
        openai_tools = to_openai_tools(tools, self.tool_mode)
        if openai_tools:
            request["tools"] = openai_tools
        options = self.call_options
        optional: dict[str, Any] = {
            "max_tokens": self.max_output_tokens,
            "temperature": self.temperature if options.temperature is None else options.temperature,
            "top_p": options.top_p,
            "seed": options.seed,
            "stop": list(options.stop) or None,
            "response_format": response_format(options),
        }
        if openai_tools:
            optional["tool_choice"] = tool_choice(options)
            optional["parallel_tool_calls"] = False if not options.parallel_tool_calls else None
        request.update({key: value for key, value in optional.items() if value is not None})
        request.update(options.provider_fields)
        return request

    async def _call(self, request: dict[str, Any]) -> Any:
        litellm = quiet_litellm()
        try:
            return await litellm.acompletion(**request)
        except Exception as exc:  # the provider boundary: every failure becomes typed
            raise provider_error_from(exc) from exc

    def _to_completion(
        self,
        response: Any,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        started: float,
    ) -> Completion:
        choices = getattr(response, "choices", None)
        if not choices:
            raise ProviderError("malformed_response", "the response has no choices")
        message = getattr(choices[0], "message", None)
        if message is None:
            raise ProviderError("malformed_response", "the first choice has no message")
        text = message.content if isinstance(message.content, str) else ""
        calls = tuple(_tool_call(raw) for raw in (getattr(message, "tool_calls", None) or ()))
        finish_reason = getattr(choices[0], "finish_reason", None)
        refused = refusal_reason(finish_reason, getattr(message, "refusal", None), text, len(calls))
        if refused is not None:
            raise ProviderError("provider_refusal", refused, finish_reason=finish_reason)
        usage = provider_usage(response) or estimate_usage(messages, tools, text, calls)
        return Completion(
            text=text,
            native_tool_calls=calls,
            usage=usage,
            finish_reason=finish_reason,
            model=str(getattr(response, "model", None) or self.model),
            latency_s=time.perf_counter() - started,
        )


def tool_choice(options: CallOptions) -> str | dict[str, Any] | None:
    """OpenAI's ``tool_choice`` for ``options`` (None: the provider's default, auto)."""
    if options.tool_name is not None:
        return {"type": "function", "function": {"name": options.tool_name}}
    return "required" if options.tool_call == "required" else None


def response_format(options: CallOptions) -> dict[str, Any] | None:
    """OpenAI's ``response_format`` for ``options`` (None: free text)."""
    reply = options.json_reply
    if reply is None:
        return None
    if reply.json_schema is None:
        return {"type": "json_object"}
    schema: dict[str, Any] = {"name": reply.name, "schema": reply.json_schema}
    if reply.strict is not None:
        schema["strict"] = reply.strict
    return {"type": "json_schema", "json_schema": schema}


def _placeholder_key(model: str, api_base: str | None) -> str | None:
    """The OpenAI client refuses to send a request without a key, even to a local
    OpenAI-compatible server that ignores it: give such servers a placeholder."""
    needs_key = model.startswith("openai/") and api_base is not None
    if needs_key and not os.environ.get("OPENAI_API_KEY"):
        return PLACEHOLDER_API_KEY
    return None


def default_tool_mode(profile: ModelProfile) -> ToolMode:
    return "native" if profile.parser == "native" else "text"


def known_context_window(model: str) -> int:
    """litellm's max input tokens for ``model`` when its table knows it, else the default."""
    litellm = quiet_litellm()

    try:
        info = litellm.get_model_info(model)
    except Exception:  # litellm raises a bare Exception for models it does not know
        return DEFAULT_CONTEXT_WINDOW
    window = info.get("max_input_tokens") or info.get("max_tokens")
    return int(window) if window else DEFAULT_CONTEXT_WINDOW


def provider_usage(response: Any) -> Usage | None:
    """The provider's usage record, or None when it reported none (all zeros counts as none).

    litellm (1.110) reports input tokens with cache reads and writes included, for OpenAI and
    Anthropic alike; reads as ``prompt_tokens_details.cached_tokens`` (Anthropic's also as
    ``cache_read_input_tokens``), writes (Anthropic only) as ``cache_creation_input_tokens``
    and ``prompt_tokens_details.cache_creation_tokens``."""
    usage = getattr(response, "usage", None)
    prompt = _count(usage, "prompt_tokens")
    output = _count(usage, "completion_tokens")
    if usage is None or (prompt == 0 and output == 0):
        return None
    details = getattr(usage, "prompt_tokens_details", None)
    read = _count(details, "cached_tokens") or _count(usage, "cache_read_input_tokens")
    written = _count(usage, "cache_creation_input_tokens") or _count(
        details, "cache_creation_tokens"
    )
    return Usage(
        input_tokens=prompt,
        output_tokens=output,
        cached_tokens=min(read, prompt),
        cache_write_tokens=min(written, prompt - min(read, prompt)),
    )


def _count(record: Any, field: str) -> int:
    value = getattr(record, field, None) if record is not None else None
    return int(value) if isinstance(value, int | float) and value > 0 else 0


def _tool_call(raw: Any) -> ToolCall:
    function = raw.function
    name = function.name or ""
    return ToolCall(id=raw.id or f"call_{name}", name=name, arguments=_arguments(function))


def _arguments(function: Any) -> dict[str, Any]:
    text = function.arguments or "{}"
    if isinstance(text, dict):
        return text
    try:
        arguments = json.loads(text)
    except json.JSONDecodeError:
        arguments = None
    return arguments if isinstance(arguments, dict) else {RAW_ARGUMENTS_KEY: text}


def provider_error_from(exc: BaseException) -> ProviderError:
    """Map a litellm (or transport) exception to a typed ``ProviderError``."""
    kind = _error_kind(exc)
    message = f"{type(exc).__name__}: {exc}"[:2000]
    return ProviderError(kind, message, retry_after_s=_retry_after_s(exc))


def _error_kind(exc: BaseException) -> ProviderErrorKind:
    litellm = quiet_litellm()

    ordered: list[tuple[type[BaseException], ProviderErrorKind]] = [
        (litellm.ContextWindowExceededError, "context_length"),
        (litellm.RateLimitError, "rate_limit"),
        (litellm.Timeout, "timeout"),
        (asyncio.TimeoutError, "timeout"),
        (litellm.AuthenticationError, "auth"),
        (litellm.PermissionDeniedError, "auth"),
        (litellm.APIResponseValidationError, "malformed_response"),
        (json.JSONDecodeError, "malformed_response"),
        (litellm.ContentPolicyViolationError, "provider_refusal"),
        (litellm.BadRequestError, "bad_request"),
        (litellm.NotFoundError, "bad_request"),
        (litellm.UnprocessableEntityError, "bad_request"),
        (litellm.InternalServerError, "server_error"),
        (litellm.ServiceUnavailableError, "server_error"),
        (litellm.BadGatewayError, "server_error"),
        (litellm.APIConnectionError, "connection"),
    ]
    for exc_type, kind in ordered:
        if isinstance(exc, exc_type):
            return _refine(exc, kind)
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and status >= 500:
        return "server_error"
    return _refine(exc, "unknown")


def _refine(exc: BaseException, kind: ProviderErrorKind) -> ProviderErrorKind:
    """litellm reports a body that is not JSON, and a refused or dropped connection, as a 500
    ``InternalServerError``; some providers report context overflow as a plain bad request, and
    OpenAI's and Azure's content filters as a bad request with the code
    ``content_policy_violation`` or ``content_filter``."""
    text = str(exc).lower()
    overflow_markers = ("context length", "context_length_exceeded", "context window")
    if kind in ("bad_request", "unknown") and any(marker in text for marker in overflow_markers):
        return "context_length"
    if kind == "bad_request" and getattr(exc, "code", None) in CONTENT_POLICY_CODES:
        return "provider_refusal"
    if "missing credentials" in text:
        return "auth"
    if kind in ("server_error", "unknown"):
        causes = list(_causes(exc))
        if any(isinstance(cause, json.JSONDecodeError) for cause in causes):
            return "malformed_response"
        if any(_is_connection_failure(cause) for cause in causes):
            return "connection"
        if "connection error" in text:
            return "connection"
    return kind


def _causes(exc: BaseException, limit: int = 10) -> Iterator[BaseException]:
    """The exception and the chain of causes/contexts beneath it."""
    seen: BaseException | None = exc
    for _ in range(limit):
        if seen is None:
            return
        yield seen
        seen = seen.__cause__ or seen.__context__


def _is_connection_failure(exc: BaseException) -> bool:
    import httpx
    import openai

    if isinstance(exc, openai.APITimeoutError | httpx.TimeoutException):
        return False
    return isinstance(exc, openai.APIConnectionError | httpx.TransportError)


def _retry_after_s(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    value = headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
