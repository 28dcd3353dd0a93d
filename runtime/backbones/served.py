"""A served OpenAI-compatible endpoint (vLLM, SGLang, llama.cpp's server, a gateway), called over
HTTP directly: ``openai/NAME`` or ``hosted_vllm/NAME`` with an ``api_base``.

Above: the agent loop, through the ``Backbone`` seam; ``make_backbone`` picks this backbone for
those model strings. Below: one pooled aiohttp session per event loop, ``POST
{api_base}/chat/completions``.

It is the litellm backbone in every behaviour — the request fields, the retries and their
backoff, the error kinds, refusals, usage, tool modes, per-call options (it subclasses
``LiteLLMBackbone``) — but sends the Chat Completions request itself instead of through
``litellm.acompletion``, whose per-call processing copies, re-encodes and prices the whole
message list on every call (8 ms of CPU for a one-line prompt, 39 ms at 2,200 messages; a
bare aiohttp POST costs 0.4 and 0.8 ms). Each message is encoded to JSON once and the bytes
reused (messages are immutable, and every probe of a state shares its history's), so what a
call costs mirage hardly grows with the depth of the conversation, and a study runs at the
endpoint's speed (``benchmarks/bench_paper_scale.py``).

The request is what litellm sends such an endpoint: ``model`` (the served name, the string
after the provider), ``messages``, ``tools``, ``max_tokens``, ``temperature`` and the per-call
options, with ``Authorization: Bearer`` from ``api_key``, else ``OPENAI_API_KEY`` (``openai/``)
or ``HOSTED_VLLM_API_KEY`` (``hosted_vllm/``). HTTP statuses map to the error kinds litellm's
exceptions map to (``harness`` records and retries them alike): 400 ``bad_request`` (a context
overflow in its text ``context_length``, a content-policy code ``provider_refusal``), 401/403
``auth``, 404/422 ``bad_request``, 408 ``timeout``, 429 ``rate_limit`` (with ``Retry-After``),
5xx ``server_error``; a body that is not JSON ``malformed_response``; a refused or dropped
connection ``connection``.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections import OrderedDict
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from runtime.backbones.base import ProviderError, ProviderErrorKind
from runtime.backbones.litellm_backbone import CONTENT_POLICY_CODES, LiteLLMBackbone
from runtime.backbones.openai_format import convert_message, with_tool_prompt
from runtime.messages import Message, ToolSpec

if TYPE_CHECKING:
    import aiohttp

SERVED_PROVIDERS = {"openai": "OPENAI_API_KEY", "hosted_vllm": "HOSTED_VLLM_API_KEY"}
"""Providers whose models, given an ``api_base``, are OpenAI-compatible endpoints: the key's
environment variable of each."""
ENCODED_KEPT = 65_536
"""Messages whose JSON is kept (least recently used dropped first): a few states' histories."""
_OVERFLOW_MARKERS = ("context length", "context_length_exceeded", "context window")
_STATUS_KINDS: dict[int, ProviderErrorKind] = {
    400: "bad_request",
    401: "auth",
    403: "auth",
    404: "bad_request",
    408: "timeout",
    422: "bad_request",
    429: "rate_limit",
}


def is_served(model: str, api_base: str | None) -> bool:
    """Whether ``model`` at ``api_base`` is an OpenAI-compatible endpoint this backbone calls."""
    provider, _, name = model.partition("/")
    return api_base is not None and provider in SERVED_PROVIDERS and bool(name)


class ServedBackbone(LiteLLMBackbone):
    """``LiteLLMBackbone`` sending its requests itself (see the module docstring)."""

    def __init__(self, model: str, **options: Any) -> None:
        super().__init__(model, **options)
        provider, _, self.served_name = model.partition("/")
        if self.api_base is None or provider not in SERVED_PROVIDERS:
            raise ValueError(f"{model!r} with api_base {self.api_base!r} is not a served model")
        self.url = self.api_base.rstrip("/") + "/chat/completions"
        key = self.api_key or os.environ.get(SERVED_PROVIDERS[provider])
        self.headers = {"content-type": "application/json"}
        if key:
            self.headers["authorization"] = f"Bearer {key}"
        self._encoded: OrderedDict[int, tuple[Message, bytes]] = OrderedDict()
        self._sessions: dict[asyncio.AbstractEventLoop, SessionHolder] = {}

    def _sender(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> Callable[[], Awaitable[Any]]:
        fields = {"model": self.served_name, **self.extra_params, **self._parameters(tools)}
        head = json.dumps(fields).encode()
        body = b'{"messages":[' + self._messages_json(messages, tools) + b"]," + head[1:]
        return lambda: self._post(body)

    def _messages_json(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> bytes:
        """The messages as ``to_openai_messages`` converts them, encoded (each one once)."""
        tool_prompt = self.profile.render_tools(tools) if self.tool_mode == "text" else ""
        if tool_prompt and messages:  # the tool prompt closes the system message: not kept
            first = convert_message(messages[0], self.profile, self.tool_mode)
            head = [json.dumps(m).encode() for m in with_tool_prompt([first], tool_prompt)]
            return b",".join([*head, *(self._encode(m) for m in messages[1:])])
        if tool_prompt:
            return json.dumps(with_tool_prompt([], tool_prompt)[0]).encode()
        return b",".join(self._encode(message) for message in messages)

    def _encode(self, message: Message) -> bytes:
        kept = self._encoded.get(id(message))
        if kept is not None and kept[0] is message:
            self._encoded.move_to_end(id(message))
            return kept[1]
        encoded = json.dumps(convert_message(message, self.profile, self.tool_mode)).encode()
        self._encoded[id(message)] = (message, encoded)
        if len(self._encoded) > ENCODED_KEPT:
            self._encoded.popitem(last=False)
        return encoded

    async def _post(self, body: bytes) -> Any:
        import aiohttp

        session = await self._session()
        try:
            async with session.post(self.url, data=body, headers=self.headers) as response:
                payload = await response.read()
                if response.status >= 400:
                    raise status_error(response.status, payload, response.headers)
        except TimeoutError as exc:
            raise ProviderError("timeout", f"no reply within {self.timeout_s} s") from exc
        except aiohttp.ClientError as exc:
            raise ProviderError("connection", f"{type(exc).__name__}: {exc}"[:2000]) from exc
        try:
            return _namespace(json.loads(payload))
        except ValueError as exc:
            raise ProviderError(
                "malformed_response", f"the response is not JSON: {payload[:200]!r}"
            ) from exc

    async def _session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        holder = self._sessions.get(loop)
        if holder is None:
            for stale in [other for other in self._sessions if other.is_closed()]:
                del self._sessions[stale]
            holder = self._sessions[loop] = await SessionHolder.open(self.timeout_s)
        return holder.session

    async def aclose(self) -> None:
        """Close this event loop's connections (a later call opens new ones)."""
        holder = self._sessions.pop(asyncio.get_running_loop(), None)
        if holder is not None:
            await holder.close()


class SessionHolder:
    """One event loop's pooled session. It is held open by an async generator, which
    ``asyncio.run`` finalises when its loop ends (``loop.shutdown_asyncgens``), so a session
    nobody closed explicitly is still closed with its loop, never left to warn at exit."""

    def __init__(self, session: aiohttp.ClientSession, keeper: AsyncGenerator[None, None]) -> None:
        self.session = session
        self._keeper = keeper

    @classmethod
    async def open(cls, timeout_s: float) -> SessionHolder:
        import aiohttp

        session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=timeout_s),
            connector=aiohttp.TCPConnector(limit=0),  # the caller bounds its concurrency
        )
        keeper = _kept_open(session)
        await keeper.__anext__()
        return cls(session, keeper)

    async def close(self) -> None:
        await self._keeper.aclose()


async def _kept_open(session: aiohttp.ClientSession) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        await session.close()


def status_error(status: int, payload: bytes, headers: Any) -> ProviderError:
    """The ``ProviderError`` of an HTTP error answer (kinds as litellm's exceptions map)."""
    message, code = _error_fields(payload)
    kind = _STATUS_KINDS.get(status, "server_error" if status >= 500 else "unknown")
    if kind in ("bad_request", "unknown") and any(m in message.lower() for m in _OVERFLOW_MARKERS):
        kind = "context_length"
    elif kind == "bad_request" and code in CONTENT_POLICY_CODES:
        kind = "provider_refusal"
    retry_after = headers.get("retry-after") if headers is not None else None
    try:
        retry_after_s = float(retry_after) if retry_after is not None else None
    except ValueError:
        retry_after_s = None
    return ProviderError(kind, f"HTTP {status}: {message}"[:2000], retry_after_s=retry_after_s)


def _error_fields(payload: bytes) -> tuple[str, object]:
    """(message, code) of an error body: OpenAI's ``{"error": {...}}`` or vLLM's flat one."""
    try:
        body = json.loads(payload)
    except ValueError:
        return payload[:500].decode("utf-8", "replace"), None
    error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, dict):
        return str(error.get("message") or error), error.get("code")
    return str(error), None


def _namespace(value: Any) -> Any:
    """A JSON response with attribute access, as the litellm backbone reads responses."""
    if isinstance(value, dict):
        return SimpleNamespace(**{key: _namespace(item) for key, item in value.items()})
    if isinstance(value, list):
        return [_namespace(item) for item in value]
    return value
