"""The OpenAI-compatible model endpoint over any mirage backbone (``mirage serve-model``).

Above: any OpenAI client (the ``openai`` package, litellm, an agent such as OpenClaw). Below: a
``Router`` (``runtime.serve.routing``) that picks the backbone per request, the backbone's
model profile and mirage's per-model tool-call parser; in front of every route the request
guard (``runtime.serve.guard``: loopback Host and Origin, the key, a JSON content type).

One request: read the body (413 above the size limit, 400 when it nests more than
``MAX_JSON_DEPTH`` levels) and validate it (400 naming the field)
→ the app's optional ``RequestRewrite`` (a client-specific change, noted in the request log) →
OpenAI messages and tools to mirage messages, sampling settings and output constraints to
``CallOptions`` → the router's backbone (404 for a model it does not serve), applying the
options or refusing one (400 naming the field) → in text tool mode the profile writes the tools
(and its few-shot example turns) into the prompt → the backbone answers (provider failures
become 429/5xx, context overflow a 400 ``context_length_exceeded``, a provider's refusal a 400
``content_filter``) → the profile's parser turns the reply text into OpenAI ``tool_calls``
(only the first with ``parallel_tool_calls: false``) → a JSON body, or SSE chunks ending
``data: [DONE]`` when ``stream`` is set. The backbone is not streamed: the whole answer is
computed first, then written as chunks. Every call is appended to the request log (EIT, cached
tokens, output tokens, latency, parse outcome label, the constraint applied, tool calls; never
prompt text unless asked for). A client that goes away before its request is read is one
warning line, not a traceback.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import structlog
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from runtime.asgi import check_binding
from runtime.backbones.base import (
    Backbone,
    CallOptions,
    Completion,
    ProviderError,
    UnsupportedOption,
)
from runtime.messages import Message, SystemMessage, ToolCall, ToolSpec
from runtime.parsers import ParseResult, parse_reply
from runtime.serve.guard import RequestGuard
from runtime.serve.requestlog import LoggedCall, RequestLog, RequestRecord
from runtime.serve.routing import (
    Router,
    ServedRequest,
    UnknownModel,
    as_router,
    with_output_budget,
)
from runtime.serve.wire import (
    ChatRequest,
    FinishReason,
    Reply,
    RequestError,
    call_options,
    completion_body,
    error_body,
    new_call_id,
    new_reply_id,
    now,
    parse_request,
    stream_chunks,
    to_messages,
    to_tool_specs,
)

log = structlog.get_logger(__name__)

PARSE_OUTCOME_HEADER = "x-mirage-parse-outcome"
DEFAULT_MAX_REQUEST_BYTES = 16 << 20
"""The largest request body read (16 MiB: a long context with a few images); larger is 413."""
MAX_JSON_DEPTH = 100
"""The deepest nesting of arrays and objects a request body may have (a tool's JSON schema
rarely needs 20); deeper is a 400, not a ``RecursionError`` in whatever walks it."""
CLIENT_CLOSED_STATUS = 499  # nginx's "client closed request": logged, never sent
_PROVIDER_STATUS: dict[str, tuple[int, str, str | None]] = {
    "rate_limit": (429, "rate_limit_error", "rate_limit_exceeded"),
    "context_length": (400, "invalid_request_error", "context_length_exceeded"),
    "bad_request": (400, "invalid_request_error", "upstream_bad_request"),
    "auth": (502, "server_error", "upstream_auth_failed"),
    "timeout": (504, "server_error", "upstream_timeout"),
    "server_error": (502, "server_error", "upstream_server_error"),
    "malformed_response": (502, "server_error", "upstream_malformed_response"),
    "connection": (502, "server_error", "upstream_unreachable"),
    "provider_refusal": (400, "invalid_request_error", "content_filter"),
    "unknown": (500, "server_error", None),
}


RequestRewrite = Callable[[ChatRequest], tuple[ChatRequest, str] | None]
"""Changes a validated request before it is served: the new request and a one-line note of what
changed (kept in the request log as ``rewrite``), or None to serve it as it came."""


class _Refusal(Exception):
    """An error response with its log line."""

    def __init__(self, response: JSONResponse, error: str) -> None:
        super().__init__(error)
        self.response = response
        self.error = error


def error_response(
    status: int,
    message: str,
    kind: str,
    *,
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body = error_body(message, kind, param=param, code=code)
    return JSONResponse(body, status_code=status, headers=headers)


class ChatEndpoint:
    def __init__(
        self,
        router: Router,
        request_log: RequestLog | None,
        *,
        adapters: bool = False,
        rewrite: RequestRewrite | None = None,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    ) -> None:
        self.router = router
        self.request_log = request_log
        self.adapters = adapters
        self.rewrite = rewrite
        self.max_request_bytes = max_request_bytes

    async def handle(self, request: Request) -> Response:
        started = time.perf_counter()
        record = RequestRecord(request_id=new_reply_id(), model="")
        try:
            response = await self._answer(request, record)
        except _Refusal as refusal:
            record.status, record.error = refusal.response.status_code, refusal.error
            response = refusal.response
        except ClientDisconnect:
            log.warning("serve.client_disconnected", request_id=record.request_id)
            record.status, record.error = CLIENT_CLOSED_STATUS, "client_disconnected"
            response = Response(status_code=CLIENT_CLOSED_STATUS)
        except Exception as exc:  # a bug or a backbone failing outside ProviderError
            log.exception("serve.failed", request_id=record.request_id)
            message = f"internal error: {type(exc).__name__}: {exc}"[:500]
            record.status, record.error = 500, message
            response = error_response(500, message, "server_error")
        record.latency_s = round(time.perf_counter() - started, 4)
        self._log(record)
        return response

    async def _answer(self, request: Request, record: RequestRecord) -> Response:
        chat = await _read_request(request, self.max_request_bytes)
        if self.rewrite is not None and (rewritten := self.rewrite(chat)) is not None:
            chat, record.rewrite = rewritten
        record.model, record.stream = chat.model, chat.stream
        served, options = _served_request(chat, request)
        record.messages, record.tools = len(served.messages), len(served.tools)
        backbone = self._choose(served)
        record.backbone = backbone.model
        completion = await _complete(backbone, served, chat.output_budget, options)
        record.constraint, record.options = options.constraint, options.requested()
        parsed = parse_reply(
            completion.text,
            served.tools,
            family=backbone.profile.parser,
            adapters=self.adapters,
            truncated=completion.truncated,
            native_calls=completion.native_tool_calls,
        )
        reply = build_reply(
            chat.model,
            completion,
            parsed,
            reply_id=record.request_id,
            parallel_tool_calls=options.parallel_tool_calls,
        )
        _record_reply(record, completion, parsed, reply)
        if self.request_log is not None and self.request_log.with_content:
            record.request_messages = [m.model_dump(mode="json") for m in chat.messages]
            record.reply_text = completion.text
        headers = {PARSE_OUTCOME_HEADER: parsed.overall, "x-request-id": reply.id}
        if chat.stream:
            return _stream(reply, chat.include_usage, headers)
        return JSONResponse(completion_body(reply), headers=headers)

    def _choose(self, served: ServedRequest) -> Backbone:
        try:
            return self.router.choose(served)
        except UnknownModel as exc:
            response = error_response(
                404, str(exc), "invalid_request_error", param="model", code="model_not_found"
            )
            raise _Refusal(response, "model_not_found") from exc

    def _log(self, record: RequestRecord) -> None:
        log.info(
            "serve.request",
            request_id=record.request_id,
            status=record.status,
            backbone=record.backbone,
            eit=record.eit,
            parse_outcome=record.parse_outcome,
            constraint=record.constraint,
            latency_s=record.latency_s,
            rewritten=record.rewrite is not None,
        )
        if self.request_log is not None:
            self.request_log.write(record)


async def _read_request(request: Request, limit: int) -> ChatRequest:
    try:
        body = json.loads(await _body(request, limit))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        message = f"the request body is not valid JSON: {exc}"
        raise _Refusal(error_response(400, message, "invalid_request_error"), "bad_json") from exc
    except RecursionError as exc:  # deeper than Python's decoder goes
        raise _too_deep() from exc
    if nested_deeper(body, MAX_JSON_DEPTH):
        raise _too_deep()
    try:
        return parse_request(body)
    except RequestError as exc:
        raise _refused_request(exc) from exc


async def _body(request: Request, limit: int) -> bytes:
    """The body, refused (413) as soon as it is known to exceed ``limit`` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    received = 0
    async for chunk in request.stream():
        received += len(chunk)
        if received > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def nested_deeper(value: Any, limit: int) -> bool:
    """Whether JSON ``value`` nests arrays and objects more than ``limit`` levels deep (walked
    without recursion, so no depth can exhaust the stack)."""
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _too_deep() -> _Refusal:
    message = f"the request body nests arrays and objects more than {MAX_JSON_DEPTH} levels deep"
    response = error_response(400, message, "invalid_request_error", code="request_too_deep")
    return _Refusal(response, "request_too_deep")


def _too_large(limit: int) -> _Refusal:
    message = (
        f"the request body is larger than this server's limit of {limit:,} bytes "
        "(mirage serve-model --max-request-mb raises it)"
    )
    response = error_response(413, message, "invalid_request_error", code="request_too_large")
    return _Refusal(response, "request_too_large")


def _refused_request(exc: RequestError) -> _Refusal:
    response = error_response(400, exc.message, "invalid_request_error", param=exc.param)
    return _Refusal(response, f"bad_request: {exc.message}")


def _served_request(chat: ChatRequest, request: Request) -> tuple[ServedRequest, CallOptions]:
    tools = to_tool_specs(chat)
    try:
        messages = to_messages(chat.messages)
        options = call_options(chat, tools)
    except RequestError as exc:
        raise _refused_request(exc) from exc
    headers = {key.lower(): value for key, value in request.headers.items()}
    served = ServedRequest(
        model=chat.model, messages=tuple(messages), tools=tuple(tools), headers=headers
    )
    return served, options


async def _complete(
    backbone: Backbone, served: ServedRequest, budget: int | None, options: CallOptions
) -> Completion:
    prompt = prompt_messages(backbone, served.messages, served.tools)
    try:
        applied = with_output_budget(backbone, budget).with_call_options(options)
        return await applied.complete(prompt, served.tools)
    except ProviderError as error:
        raise _provider_refusal(error, backbone) from error
    except UnsupportedOption as error:
        response = error_response(400, str(error), "invalid_request_error", param=error.param)
        raise _Refusal(response, f"unsupported_option: {error}") from error
    except ValueError as error:  # a message the backbone cannot take (e.g. images, text-only)
        response = error_response(400, str(error), "invalid_request_error", param="messages")
        raise _Refusal(response, f"bad_request: {error}") from error


def prompt_messages(
    backbone: Backbone, messages: Sequence[Message], tools: Sequence[ToolSpec]
) -> list[Message]:
    """In text tool mode, the profile's few-shot example turns go right after the leading
    system messages, as the agent loop places them."""
    examples = backbone.profile.example_turns(tools) if backbone.tool_mode == "text" else []
    if not examples:
        return list(messages)
    leading = next(
        (i for i, m in enumerate(messages) if not isinstance(m, SystemMessage)), len(messages)
    )
    return [*messages[:leading], *examples, *messages[leading:]]


def _provider_refusal(error: ProviderError, backbone: Backbone) -> _Refusal:
    status, kind, code = _PROVIDER_STATUS[error.kind]
    message = f"the backbone {backbone.model} failed: {error}"
    if error.kind == "context_length":
        message = (
            f"This model's maximum context length is {backbone.context_window} tokens; "
            f"{error.detail}. Please reduce the length of the messages."
        )
    headers = {}
    if error.retry_after_s is not None:
        headers["retry-after"] = str(max(1, round(error.retry_after_s)))
    response = error_response(status, message, kind, code=code, headers=headers)
    return _Refusal(response, f"provider_{error.kind}: {error.detail[:300]}")


def build_reply(
    model: str,
    completion: Completion,
    parsed: ParseResult,
    *,
    reply_id: str | None = None,
    parallel_tool_calls: bool = True,
) -> Reply:
    """Executable calls become ``tool_calls`` (only the first without ``parallel_tool_calls``).
    When the model attempted calls and none was executable, the raw text is returned as
    content, so the client sees what it wrote."""
    calls = tuple(
        ToolCall(id=new_call_id(), name=call.name or "", arguments=dict(call.arguments))
        for call in parsed.calls
        if call.executable
    )[: None if parallel_tool_calls else 1]
    finish: FinishReason = "tool_calls"
    if calls:
        content = parsed.content or None
    else:
        content = completion.text.strip() if parsed.calls else parsed.content
        finish = "length" if completion.truncated else "stop"
    return Reply(
        id=reply_id or new_reply_id(),
        created=now(),
        model=model,
        content=content,
        tool_calls=calls,
        finish_reason=finish,
        usage=completion.usage,
    )


def _record_reply(
    record: RequestRecord, completion: Completion, parsed: ParseResult, reply: Reply
) -> None:
    usage = completion.usage
    record.eit, record.cached_tokens = usage.input_tokens, usage.cached_tokens
    record.output_tokens, record.usage_source = usage.output_tokens, usage.source
    record.parse_outcome, record.finish_reason = parsed.overall, reply.finish_reason
    record.tool_calls = [LoggedCall(name=c.name, arguments=c.arguments) for c in reply.tool_calls]


def _stream(reply: Reply, include_usage: bool, headers: dict[str, str]) -> StreamingResponse:
    async def events() -> AsyncIterator[str]:
        for chunk in stream_chunks(reply, include_usage=include_usage):
            yield f"data: {json.dumps(chunk)}\n\n"
        yield "data: [DONE]\n\n"

    return StreamingResponse(
        events(),
        media_type="text/event-stream",
        headers={**headers, "cache-control": "no-cache"},
    )


def _models(router: Router) -> dict[str, Any]:
    data = [
        {"id": name, "object": "model", "created": 0, "owned_by": "mirage"}
        for name in router.model_names()
    ]
    return {"object": "list", "data": data}


def create_app(
    target: Backbone | Router,
    *,
    name: str | None = None,
    request_log: RequestLog | None = None,
    adapters: bool = False,
    api_key: str | None = None,
    host: str = "127.0.0.1",
    rewrite: RequestRewrite | None = None,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
) -> Starlette:
    """The ASGI app. ``target`` is one backbone (served as ``name``, default its model string)
    or a ``Router``; ``adapters`` lets the parser recover pseudo-tool calls; ``api_key``
    requires ``Authorization: Bearer <api_key>``; ``host`` is where it will listen (on
    loopback a foreign Host or Origin is refused; elsewhere a key is required:
    ``runtime.serve.guard``); ``rewrite`` changes requests before they are served (each change
    noted in the request log); a body above ``max_request_bytes`` is refused with 413.
    Raises ``ValueError`` for a blank key or a non-loopback host without one."""
    check_binding(host, api_key, token_option="api_key")
    router = as_router(target, name)
    endpoint = ChatEndpoint(
        router,
        request_log,
        adapters=adapters,
        rewrite=rewrite,
        max_request_bytes=max_request_bytes,
    )

    async def models(request: Request) -> Response:
        return JSONResponse(_models(router))

    async def model(request: Request) -> Response:
        wanted = request.path_params["model"]
        for entry in _models(router)["data"]:
            if entry["id"] == wanted:
                return JSONResponse(entry)
        message = f"The model `{wanted}` does not exist on this server"
        return error_response(404, message, "invalid_request_error", code="model_not_found")

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "models": router.model_names()})

    app = Starlette(
        routes=[
            Route("/v1/models", models, methods=["GET"]),
            Route("/v1/models/{model:path}", model, methods=["GET"]),
            Route("/v1/chat/completions", endpoint.handle, methods=["POST"]),
            Route("/health", health, methods=["GET"]),
        ],
        exception_handlers={HTTPException: _http_error},  # type: ignore[dict-item]
    )
    app.add_middleware(RequestGuard, host=host, api_key=api_key)
    return app


async def _http_error(request: Request, exc: HTTPException) -> Response:
    message = f"{request.method} {request.url.path}: {exc.detail}"
    return error_response(exc.status_code, message, "invalid_request_error")
