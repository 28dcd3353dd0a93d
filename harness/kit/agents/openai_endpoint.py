"""An agent behind an OpenAI-compatible ``/v1/chat/completions`` endpoint as the agent under test.

Above: ``AttributedAgent`` (harness.kit.attribution), which labels R_tool from the memory server's
log. Below: httpx and the user's agent. A restore is the checkpoint's transcript sent as the
message history (``harness.kit.agents.transcript``), followed by the probe message. The agent's own
tools are its business; it finds the memory server through the URL it was configured with or,
for exact attribution, the per-probe URL in the ``X-Mirage-Memory-Url`` header (also in the
body's ``metadata.mirage_memory_url``).

Transient failures (connection errors, HTTP 429 and 5xx) are retried a bounded number of times
with exponential backoff; a read timeout is not retried (the agent is slow, and a retry would
repeat its work). Every failure — timeout, HTTP error, a body that is not JSON, no ``choices``,
a provider's refusal (``finish_reason`` ``content_filter``, or a ``refusal`` with no content) —
comes back as ``ProbeReply.error``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import structlog

from harness.kit.agents.base import (
    AgentUnderTest,
    MemoryURL,
    ProbeReply,
    ProbeUsage,
    RestorePoint,
)
from harness.kit.agents.transcript import (
    MEMORY_URL_HEADER,
    TAG_HEADER,
    TranscriptSource,
    reported_call,
)
from runtime.backbones.base import refusal_reason

log = structlog.get_logger(__name__)

RETRY_STATUS = frozenset({408, 409, 429})


class AgentCallError(Exception):
    """The agent endpoint failed in a way recorded as the probe's error."""

    def __init__(
        self,
        kind: str,
        detail: str,
        retryable: bool = False,
        status: int | None = None,
        finish_reason: str | None = None,
    ) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.retryable = retryable
        self.status = status
        self.finish_reason = finish_reason


def chat_url(base_url: str) -> str:
    base = base_url.rstrip("/")
    return base if base.endswith("/chat/completions") else f"{base}/chat/completions"


class OpenAIEndpointAgent(AgentUnderTest):
    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        api_key: str | None = None,
        memory_url: MemoryURL | None = None,
        timeout_s: float = 120.0,
        max_retries: int = 2,
        backoff_s: float = 0.5,
        max_output_tokens: int | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"agent endpoint must be an http(s) URL, got {base_url!r}")
        self.url = chat_url(base_url)
        self.model = model or "mirage-agent-under-test"
        self.name = model or f"openai:{base_url}"
        self.api_key = api_key
        self.memory_url = memory_url
        self.timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0))
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_output_tokens = max_output_tokens
        self.send_metadata = True
        self._transcripts = TranscriptSource()
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def request(
        self, messages: list[dict[str, Any]], tag: str
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """The body and headers of one probe's request."""
        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": 0}
        if self.max_output_tokens is not None:
            body["max_tokens"] = self.max_output_tokens
        headers = {TAG_HEADER: tag}
        metadata = {"mirage_tag": tag}
        if self.memory_url is not None:
            headers[MEMORY_URL_HEADER] = metadata["mirage_memory_url"] = self.memory_url(tag)
        if self.send_metadata:
            body["metadata"] = metadata
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return body, headers

    async def probe(self, checkpoint: RestorePoint, message: str, *, tag: str) -> ProbeReply:
        restored = self._transcripts.restore(checkpoint)
        messages = [*restored.messages, {"role": "user", "content": message}]
        body, headers = self.request(messages, tag)
        started = time.perf_counter()
        try:
            data = await self._post(body, headers)
            reply = parse_chat_reply(data)
        except AgentCallError as error:
            log.info("agent.probe_failed", tag=tag, kind=error.kind)
            reply = ProbeReply(error=f"agent_error: {error}", finish_reason=error.finish_reason)
        return reply.model_copy(
            update={
                "latency_s": time.perf_counter() - started,
                "restored_sha256": restored.restored_sha256,
                "context": restored.context,
            }
        )

    async def _post(self, body: dict[str, Any], headers: dict[str, str]) -> Any:
        attempt = 0
        while True:
            try:
                return await self._post_once(body, headers)
            except AgentCallError as error:
                if self._refuses_metadata(error, body):
                    body = {k: v for k, v in body.items() if k != "metadata"}
                    continue
                if not error.retryable or attempt >= self.max_retries:
                    raise
            await asyncio.sleep(self.backoff_s * 2**attempt)
            attempt += 1

    def _refuses_metadata(self, error: AgentCallError, body: dict[str, Any]) -> bool:
        """Strict servers reject the ``metadata`` field with HTTP 400; stop sending it (the
        per-probe URL still travels in the headers)."""
        refused = error.status == 400 and "metadata" in str(error) and "metadata" in body
        if refused and self.send_metadata:
            log.warning("agent.metadata_refused", url=self.url)
            self.send_metadata = False
        return refused

    async def _post_once(self, body: dict[str, Any], headers: dict[str, str]) -> Any:
        try:
            response = await self.client().post(self.url, json=body, headers=headers)
        except httpx.TimeoutException as exc:
            connect = isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout)
            raise AgentCallError(
                "timeout", f"{type(exc).__name__} after {self.timeout.read}s", retryable=connect
            ) from exc
        except httpx.TransportError as exc:
            raise AgentCallError("connection", f"{type(exc).__name__}: {exc}", True) from exc
        if response.status_code != 200:
            retry = response.status_code in RETRY_STATUS or response.status_code >= 500
            detail = f"HTTP {response.status_code}: {response.text[:200]!r}"
            raise AgentCallError("http", detail, retry, status=response.status_code)
        try:
            return response.json()
        except ValueError as exc:
            raise AgentCallError("garbage", f"body is not JSON: {response.text[:120]!r}") from exc

    def client(self) -> httpx.AsyncClient:
        """One pooled client per event loop (a run may span several ``asyncio.run``)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client = httpx.AsyncClient(timeout=self.timeout)
            self._client_loop = loop
        return self._client

    async def aclose(self) -> None:
        if self._client is not None and self._client_loop is asyncio.get_running_loop():
            await self._client.aclose()
        self._client = None


def parse_chat_reply(data: Any) -> ProbeReply:
    """The reply text, reported tool calls and usage of a chat-completions response body."""
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise AgentCallError("malformed", f"response has no choices: {str(data)[:120]!r}")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise AgentCallError("malformed", "choices[0] has no message object")
    finish = choices[0].get("finish_reason")
    finish_reason = finish if isinstance(finish, str) else None
    text = message_text(message.get("content"))
    raw_calls = message.get("tool_calls")
    # Many servers send "tool_calls": [] on every reply, so only a non-empty list is a report.
    calls = [reported_call(e) for e in raw_calls] if isinstance(raw_calls, list) else []
    refused = refusal_reason(finish_reason, message.get("refusal"), text, len(calls))
    if refused is not None:
        raise AgentCallError("provider_refusal", refused, finish_reason=finish_reason)
    if text is None and not calls:
        raise AgentCallError("malformed", "the message has neither content nor tool_calls")
    return ProbeReply(
        text=text,
        tool_calls=calls,
        usage=chat_usage(data.get("usage")),
        finish_reason=finish_reason,
        trace={"tool_calls_reported": bool(calls)},
    )


def message_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return "\n".join(t for t in texts if isinstance(t, str)) or None
    return None


def chat_usage(usage: Any) -> ProbeUsage:
    if not isinstance(usage, dict):
        return ProbeUsage()
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return ProbeUsage(
        eit=_int_or_none(usage.get("prompt_tokens")),
        cached_tokens=_int_or_none(cached),
        output_tokens=_int_or_none(usage.get("completion_tokens")),
    )


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
