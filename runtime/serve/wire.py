"""The OpenAI chat-completions wire format: validated requests in, mirage messages out, and the
response/chunk bodies back.

Above: the endpoint (``runtime.serve.app``). Below: ``runtime.messages`` and the backbones'
``CallOptions``. Requests are validated with pydantic; a bad field becomes ``RequestError``
naming it (``messages.2.tool_call_id: Field required``). Every top-level field is acted on:
the endpoint's own (messages, tools, stream, ...), the sampling settings and output constraints
that become ``CallOptions`` (``call_options``), the fields that cannot change a reply
(``NO_EFFECT_FIELDS``), the ones refused with a reason (``REFUSED_FIELDS``); any other field is
handed to the backbone as a provider field, which passes it on or refuses it. Incoming
assistant ``tool_calls`` (arguments must be a JSON object) and ``tool`` results become mirage
``AssistantMessage.tool_calls`` and ``ToolResultMessage``; images must be ``data:`` URLs (the
server never downloads).
"""

from __future__ import annotations

import binascii
import json
import time
import uuid
from collections.abc import Sequence
from typing import Annotated, Any, Literal

import jsonschema
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from runtime.backbones.base import CallOptions, JsonReply
from runtime.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from runtime.messages import Usage as MirageUsage


class RequestError(Exception):
    """A request the endpoint refuses (HTTP 400): ``param`` names the offending field."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


class _Wire(BaseModel):
    model_config = ConfigDict(extra="allow")


class TextContent(_Wire):
    type: Literal["text"]
    text: str


class ImageURL(_Wire):
    url: str
    detail: str | None = None


class ImageContent(_Wire):
    type: Literal["image_url"]
    image_url: ImageURL


UserContentPart = Annotated[TextContent | ImageContent, Field(discriminator="type")]


class FunctionCall(_Wire):
    name: str
    arguments: str | dict[str, Any] = "{}"


class WireToolCall(_Wire):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class SystemParam(_Wire):
    role: Literal["system", "developer"]
    content: str | list[TextContent]


class UserParam(_Wire):
    role: Literal["user"]
    content: str | list[UserContentPart]


class AssistantParam(_Wire):
    role: Literal["assistant"]
    content: str | list[TextContent] | None = None
    tool_calls: list[WireToolCall] | None = None


class ToolParam(_Wire):
    role: Literal["tool"]
    tool_call_id: str
    content: str | list[TextContent]


MessageParam = Annotated[
    SystemParam | UserParam | AssistantParam | ToolParam, Field(discriminator="role")
]


class FunctionDefinition(_Wire):
    name: str = Field(min_length=1)
    description: str = ""
    parameters: dict[str, Any] | None = None


class ToolDefinition(_Wire):
    type: Literal["function"]
    function: FunctionDefinition


class StreamOptions(_Wire):
    include_usage: bool = False


class NamedFunction(_Wire):
    name: str


class NamedToolChoice(_Wire):
    type: Literal["function"]
    function: NamedFunction


TOOL_CHOICES = ("none", "auto", "required")


class TextFormat(_Wire):
    type: Literal["text"]


class JsonObjectFormat(_Wire):
    type: Literal["json_object"]


class JsonSchemaSpec(_Wire):
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str | None = None
    json_schema: dict[str, Any] = Field(alias="schema")
    strict: bool | None = None

    @field_validator("json_schema")
    @classmethod
    def _valid_schema(cls, schema: dict[str, Any]) -> dict[str, Any]:
        try:
            jsonschema.validators.validator_for(schema).check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise PydanticCustomError(
                "json_schema", "not a valid JSON schema: {problem}", {"problem": exc.message}
            ) from None
        return schema


class JsonSchemaFormat(_Wire):
    type: Literal["json_schema"]
    json_schema: JsonSchemaSpec


ResponseFormat = Annotated[
    TextFormat | JsonObjectFormat | JsonSchemaFormat, Field(discriminator="type")
]

MAX_STOP_SEQUENCES = 4

NO_EFFECT_FIELDS: dict[str, str] = {
    "user": "an end-user id for the provider's abuse monitoring",
    "metadata": "tags for stored completions",
    "service_tier": "the provider's latency tier",
    "prompt_cache_key": "a provider cache hint (the embedded model caches every prefix)",
    "prompt_cache_retention": "a provider cache hint",
    "safety_identifier": "an end-user id for the provider's abuse monitoring",
}
"""Accepted, and they cannot change a reply: bookkeeping for OpenAI's own platform."""

REFUSED_FIELDS: dict[str, str] = {
    "logprobs": "log probabilities are not returned by this server",
    "top_logprobs": "log probabilities are not returned by this server",
    "functions": "the legacy field is not supported; send tools",
    "function_call": "the legacy field is not supported; send tool_choice",
    "audio": "audio output is not supported",
    "prediction": "predicted outputs are not supported",
    "web_search_options": "web search is not supported",
    "store": "this server stores no completions",
    "modalities": "only text output is supported",
}
"""Refused (HTTP 400) with these reasons when set to anything but an empty value (false, null,
``["text"]`` for ``modalities``)."""


class ChatRequest(_Wire):
    """A chat-completions request. The declared fields are the endpoint's own and those that
    become ``CallOptions``; ``provider_fields`` are the rest, for the backbone."""

    model: str = Field(min_length=1)
    messages: list[MessageParam] = Field(min_length=1)
    tools: list[ToolDefinition] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = Field(default=None, strict=True)
    response_format: ResponseFormat | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    n: Literal[1] = 1
    temperature: float | None = Field(default=None, ge=0, le=2, strict=True)
    top_p: float | None = Field(default=None, ge=0, le=1, strict=True)
    seed: int | None = Field(default=None, strict=True)
    stop: str | list[str] | None = Field(default=None, max_length=MAX_STOP_SEQUENCES)

    @field_validator("tool_choice", mode="before")
    @classmethod
    def _readable_tool_choice(cls, value: Any) -> Any:
        if value is None or value in TOOL_CHOICES or isinstance(value, dict):
            return value
        allowed = '"none", "auto", "required" or {"type": "function", "function": {"name": NAME}}'
        message = f"must be {allowed}; got {json.dumps(value)[:100]}"
        raise PydanticCustomError("tool_choice", "{message}", {"message": message})

    @field_validator("stop")
    @classmethod
    def _non_empty_stops(cls, value: str | list[str] | None) -> str | list[str] | None:
        stops = [value] if isinstance(value, str) else value or []
        if any(not stop for stop in stops):
            raise PydanticCustomError("stop", "a stop sequence must not be empty")
        return value

    @property
    def provider_fields(self) -> dict[str, Any]:
        """Fields the endpoint does not act on, refuse or know to be without effect (a refused
        field left at its empty value, ``store: false`` say, is without effect too)."""
        extra = self.model_extra or {}
        handled = NO_EFFECT_FIELDS.keys() | REFUSED_FIELDS.keys()  # refused ones are unset here
        return {key: value for key, value in extra.items() if key not in handled}

    @property
    def output_budget(self) -> int | None:
        """``max_completion_tokens`` (OpenAI's current name) wins over ``max_tokens``."""
        return self.max_completion_tokens or self.max_tokens

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage


def parse_request(body: Any) -> ChatRequest:
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    for field, reason in REFUSED_FIELDS.items():
        if _is_set(field, body.get(field)):
            raise RequestError(f"{field}: {reason}", param=field)
    try:
        return ChatRequest.model_validate(body)
    except ValidationError as exc:
        errors = [(_field_path(error["loc"]), error["msg"]) for error in exc.errors()]
        where, message = max(errors, key=lambda item: item[0].count("."))
        raise RequestError(f"{where}: {message}", param=where) from None


def _is_set(field: str, value: Any) -> bool:
    if field == "modalities":
        return value not in (None, ["text"])
    return value not in (None, False, [], {})


_UNION_TAGS = frozenset(
    {
        "system",
        "developer",
        "user",
        "assistant",
        "tool",
        "text",
        "image_url",
        "json_object",
        "json_schema",
    }
)


def _field_path(loc: tuple[int | str, ...]) -> str:
    """``messages.2.content`` from pydantic's location, without the union member labels it
    adds (``'str'``, ``'list[...]'``, a model's class name, and the tag chosen after a list
    index or for ``response_format``)."""
    parts: list[str] = []
    previous: int | str | None = None
    for part in loc:
        tagged = isinstance(previous, int) or previous == "response_format"
        union_label = isinstance(part, str) and (
            "[" in part or part == "str" or part[:1].isupper() or (tagged and part in _UNION_TAGS)
        )
        if not union_label:
            parts.append(str(part))
        previous = part
    return ".".join(parts)


def to_tool_specs(request: ChatRequest) -> list[ToolSpec]:
    """The offered tools; none when ``tool_choice`` is ``"none"``."""
    if request.tool_choice == "none" or not request.tools:
        return []
    return [
        ToolSpec(
            name=tool.function.name,
            description=tool.function.description,
            parameters=tool.function.parameters or {"type": "object", "properties": {}},
        )
        for tool in request.tools
    ]


def call_options(request: ChatRequest, tools: Sequence[ToolSpec]) -> CallOptions:
    """What the request asks of the backbone beyond messages and tools; ``RequestError`` for a
    tool choice that names no offered tool, or requires a call with none offered."""
    choice = request.tool_choice
    name = choice.function.name if isinstance(choice, NamedToolChoice) else None
    required = choice == "required" or name is not None
    if required and not tools:
        message = "tool_choice: a tool call is required but no tools are offered"
        raise RequestError(message, "tool_choice")
    offered = [tool.name for tool in tools]
    if name is not None and name not in offered:
        where = "tool_choice.function.name"
        listed = ", ".join(offered)
        raise RequestError(f"{where}: no offered tool is named {name!r} (offered: {listed})", where)
    stop = [request.stop] if isinstance(request.stop, str) else request.stop or []
    return CallOptions(
        temperature=request.temperature,
        top_p=request.top_p,
        seed=request.seed,
        stop=tuple(stop),
        tool_call="required" if required else "auto",
        tool_name=name,
        parallel_tool_calls=request.parallel_tool_calls is not False,
        json_reply=_json_reply(request.response_format),
        provider_fields=request.provider_fields,
    )


def _json_reply(response_format: BaseModel | None) -> JsonReply | None:
    if isinstance(response_format, JsonObjectFormat):
        return JsonReply()
    if isinstance(response_format, JsonSchemaFormat):
        spec = response_format.json_schema
        return JsonReply(json_schema=spec.json_schema, name=spec.name, strict=spec.strict)
    return None


def to_messages(params: Sequence[MessageParam]) -> list[Message]:
    """OpenAI chat messages as mirage messages. A ``tool`` result takes its tool name from the
    assistant call it answers (empty when no earlier call has its id)."""
    call_names: dict[str, str] = {}
    messages: list[Message] = []
    for index, param in enumerate(params):
        if isinstance(param, SystemParam):
            messages.append(SystemMessage(content=_text(param.content)))
        elif isinstance(param, UserParam):
            messages.append(_user_message(param, f"messages.{index}"))
        elif isinstance(param, AssistantParam):
            calls = tuple(
                _tool_call(call, f"messages.{index}.tool_calls.{number}.function.arguments")
                for number, call in enumerate(param.tool_calls or ())
            )
            call_names.update({call.id: call.name for call in calls})
            messages.append(AssistantMessage(content=_text(param.content), tool_calls=calls))
        else:
            messages.append(
                ToolResultMessage(
                    tool_call_id=param.tool_call_id,
                    name=call_names.get(param.tool_call_id, ""),
                    content=_text(param.content),
                )
            )
    return messages


def _text(content: str | list[TextContent] | None) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(part.text for part in content)


def _user_message(param: UserParam, where: str) -> UserMessage:
    if isinstance(param.content, str):
        return UserMessage.text(param.content)
    parts: list[TextPart | ImagePart] = []
    for index, part in enumerate(param.content):
        if isinstance(part, TextContent):
            parts.append(TextPart(text=part.text))
        else:
            parts.append(_image(part.image_url.url, f"{where}.content.{index}.image_url.url"))
    return UserMessage(content=tuple(parts))


def _image(url: str, where: str) -> ImagePart:
    header, comma, data = url.partition(",")
    if not url.startswith("data:") or not comma or not header.endswith(";base64"):
        raise RequestError(
            f"{where}: only base64 data: URLs are accepted (this server never downloads)", where
        )
    try:
        binascii.a2b_base64(data)
    except binascii.Error:
        raise RequestError(f"{where}: the image data is not valid base64", where) from None
    media_type = header.removeprefix("data:").removesuffix(";base64") or "image/png"
    return ImagePart(data_b64=data, media_type=media_type)


def _tool_call(call: WireToolCall, where: str) -> ToolCall:
    arguments = call.function.arguments
    if isinstance(arguments, str):
        try:
            decoded = json.loads(arguments or "{}")
        except json.JSONDecodeError as exc:
            raise RequestError(f"{where}: not valid JSON ({exc.msg})", where) from None
        if not isinstance(decoded, dict):
            raise RequestError(f"{where}: must be a JSON object", where)
        arguments = decoded
    return ToolCall(id=call.id, name=call.function.name, arguments=arguments)


FinishReason = Literal["stop", "length", "tool_calls"]


class Reply(BaseModel):
    """One answer, before it is written as a response body or as stream chunks."""

    model_config = ConfigDict(frozen=True)

    id: str
    created: int
    model: str
    content: str | None
    tool_calls: tuple[ToolCall, ...]
    finish_reason: FinishReason
    usage: MirageUsage


def new_reply_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def now() -> int:
    return int(time.time())


def usage_body(usage: MirageUsage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
    }


def _wire_call(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
    }


def completion_body(reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [_wire_call(call) for call in reply.tool_calls]
    return {
        "id": reply.id,
        "object": "chat.completion",
        "created": reply.created,
        "model": reply.model,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": reply.finish_reason}
        ],
        "usage": usage_body(reply.usage),
    }


def stream_chunks(reply: Reply, *, include_usage: bool) -> list[dict[str, Any]]:
    """The reply as OpenAI stream chunks: the role, the content, each tool call as a header
    delta (id, name, empty arguments) followed by its arguments, the finish reason, and (when
    asked for) a last chunk with the usage and no choices."""
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    if reply.content:
        deltas.append({"content": reply.content})
    for index, call in enumerate(reply.tool_calls):
        function = {"name": call.name, "arguments": ""}
        header = {"index": index, "id": call.id, "type": "function", "function": function}
        deltas.append({"tool_calls": [header]})
        arguments = {"arguments": json.dumps(call.arguments)}
        deltas.append({"tool_calls": [{"index": index, "function": arguments}]})
    choices: list[list[dict[str, Any]]] = [
        [{"index": 0, "delta": delta, "finish_reason": None}] for delta in deltas
    ]
    choices.append([{"index": 0, "delta": {}, "finish_reason": reply.finish_reason}])
    chunks = [_chunk(reply, choice, include_usage) for choice in choices]
    if include_usage:
        chunks.append({**_chunk(reply, [], include_usage), "usage": usage_body(reply.usage)})
    return chunks


def _chunk(reply: Reply, choices: list[dict[str, Any]], include_usage: bool) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": reply.id,
        "object": "chat.completion.chunk",
        "created": reply.created,
        "model": reply.model,
        "choices": choices,
    }
    if include_usage:
        chunk["usage"] = None
    return chunk


def error_body(
    message: str, kind: str, *, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}
