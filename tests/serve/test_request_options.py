"""What a client asks beyond messages and tools — sampling settings, tool_choice,
parallel_tool_calls, response_format, provider fields — through the real ``openai`` client
against a real endpoint: honoured, passed through, or refused with a 400 naming the field.

Scripted backbones record the options they were handed; a litellm backbone against a local
OpenAI-compatible server shows what reaches a provider; the embedded backbone's refusals come
before its model would load (its grammar-enforced replies are the slow tests in
``test_embedded_constraints.py``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI
from pydantic import BaseModel

from runtime.backbones import EmbeddedBackbone, LiteLLMBackbone, ScriptedBackbone
from runtime.backbones.base import CallOptions, JsonReply, ToolMode
from runtime.profiles import resolve_profile
from runtime.serve import BackgroundServer, RequestLog, create_app, read_request_log
from tests.fakes.openai_server import FakeOpenAIServer, reply, tool_call_reply
from tests.serve.support import HERMES_CALL, RECALL_TOOL, WEATHER_TOOL

USER = [{"role": "user", "content": "What was the median rent in Berlin?"}]


class Rent(BaseModel):
    city: str
    median_eur: int


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    """``serve(backbone, **create_app_options)`` → (OpenAI client, base URL)."""
    servers: list[BackgroundServer] = []

    def start(target: Any, **options: Any) -> tuple[OpenAI, str]:
        server = BackgroundServer(create_app(target, **options)).start()
        servers.append(server)
        return OpenAI(base_url=server.base_url, api_key="unused", max_retries=0), server.base_url

    yield start
    for server in servers:
        server.stop()


def _post(base_url: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{base_url}/chat/completions", json=body, timeout=30)


def _refused(response: httpx.Response, param: str, fragment: str, status: int = 400) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["param"] == param, error
    assert fragment in error["message"], error["message"]


def test_sampling_settings_reach_the_backbone_and_the_log(serve: Any, tmp_path: Path) -> None:
    backbone = ScriptedBackbone(["ok"])
    log_path = tmp_path / "requests.jsonl"
    client, _ = serve(backbone, request_log=RequestLog(log_path))
    client.chat.completions.create(
        model="scripted", messages=USER, temperature=0.7, top_p=0.9, seed=7, stop=["END", "##"]
    )
    [call] = backbone.calls
    assert call.options == CallOptions(temperature=0.7, top_p=0.9, seed=7, stop=("END", "##"))
    [record] = read_request_log(log_path)
    assert record.options == ["temperature", "top_p", "seed", "stop"]
    assert record.constraint == "none"


@pytest.mark.parametrize(
    ("choice", "expected", "constraint"),
    [
        ("required", CallOptions(tool_call="required"), "tool_call"),
        (
            {"type": "function", "function": {"name": "get_weather"}},
            CallOptions(tool_call="required", tool_name="get_weather"),
            "named_tool",
        ),
    ],
)
def test_a_required_or_named_call_reaches_the_backbone(
    serve: Any, tmp_path: Path, choice: Any, expected: CallOptions, constraint: str
) -> None:
    backbone = ScriptedBackbone([HERMES_CALL])
    log_path = tmp_path / "requests.jsonl"
    client, _ = serve(backbone, request_log=RequestLog(log_path))
    client.chat.completions.create(
        model="scripted", messages=USER, tools=[RECALL_TOOL, WEATHER_TOOL], tool_choice=choice
    )
    assert backbone.calls[0].options == expected
    assert read_request_log(log_path)[0].constraint == constraint


def test_an_unknown_tool_name_is_a_400_naming_the_field(serve: Any) -> None:
    client, _ = serve(ScriptedBackbone([]))
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="scripted",
            messages=USER,
            tools=[RECALL_TOOL],
            tool_choice={"type": "function", "function": {"name": "delete_everything"}},
        )
    assert caught.value.param == "tool_choice.function.name"
    assert "'delete_everything'" in caught.value.message
    assert "offered: artifact_recall" in caught.value.message


def test_a_required_call_without_tools_is_a_400(serve: Any) -> None:
    _, base_url = serve(ScriptedBackbone([]))
    body = {"model": "scripted", "messages": USER, "tool_choice": "required"}
    _refused(_post(base_url, body), "tool_choice", "no tools are offered")


def test_an_unknown_tool_choice_lists_the_allowed_values(serve: Any) -> None:
    _, base_url = serve(ScriptedBackbone([]))
    body = {"model": "scripted", "messages": USER, "tools": [RECALL_TOOL], "tool_choice": "always"}
    response = _post(base_url, body)
    _refused(response, "tool_choice", 'must be "none", "auto", "required" or {"type": "function"')
    assert response.json()["error"]["message"].endswith('got "always"')


@pytest.mark.parametrize(
    ("field", "value", "fragment"),
    [
        ("temperature", "hot", "valid number"),
        ("temperature", 5, "less than or equal to 2"),
        ("top_p", 1.5, "less than or equal to 1"),
        ("seed", "7", "valid integer"),
        ("stop", ["a", "b", "c", "d", "e"], "at most 4 items"),
        ("parallel_tool_calls", "no", "valid boolean"),
        ("logprobs", True, "log probabilities are not returned"),
        ("store", True, "stores no completions"),
        ("functions", [{"name": "f"}], "send tools"),
        ("response_format", {"type": "yaml"}, "does not match any of the expected tags"),
    ],
)
def test_bad_or_refused_fields_are_400s_naming_them(
    serve: Any, field: str, value: Any, fragment: str
) -> None:
    _, base_url = serve(ScriptedBackbone([]))
    body = {"model": "scripted", "messages": USER, field: value}
    _refused(_post(base_url, body), field, fragment)


def test_a_json_schema_that_is_no_schema_is_a_400(serve: Any) -> None:
    _, base_url = serve(ScriptedBackbone([]))
    response_format = {
        "type": "json_schema",
        "json_schema": {"name": "rent", "schema": {"type": "objekt"}},
    }
    body = {"model": "scripted", "messages": USER, "response_format": response_format}
    _refused(_post(base_url, body), "response_format.json_schema.schema", "not a valid JSON schema")


def test_bad_assistant_call_arguments_are_a_400_naming_the_field(serve: Any) -> None:
    _, base_url = serve(ScriptedBackbone([]))
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{bad"}}
    messages = [*USER, {"role": "assistant", "content": None, "tool_calls": [call]}]
    body = {"model": "scripted", "messages": messages}
    _refused(_post(base_url, body), "messages.1.tool_calls.0.function.arguments", "not valid JSON")


def test_parallel_tool_calls_false_returns_one_call(serve: Any) -> None:
    two_calls = f"{HERMES_CALL}\n{HERMES_CALL.replace('rent', 'deposit')}"
    client, _ = serve(ScriptedBackbone([two_calls, two_calls]))
    request: dict[str, Any] = {"model": "scripted", "messages": USER, "tools": [RECALL_TOOL]}
    both = client.chat.completions.create(**request)
    one = client.chat.completions.create(**request, parallel_tool_calls=False)
    assert len(both.choices[0].message.tool_calls or []) == 2
    [call] = one.choices[0].message.tool_calls or []
    assert json.loads(call.function.arguments) == {"query": "rent"}


def test_structured_output_through_the_sdks_parse(serve: Any, tmp_path: Path) -> None:
    backbone = ScriptedBackbone(['{"city": "Berlin", "median_eur": 1250}'])
    log_path = tmp_path / "requests.jsonl"
    client, _ = serve(backbone, request_log=RequestLog(log_path))
    completion = client.beta.chat.completions.parse(
        model="scripted", messages=USER, response_format=Rent
    )
    assert completion.choices[0].message.parsed == Rent(city="Berlin", median_eur=1250)
    json_reply = backbone.calls[0].options.json_reply
    assert json_reply is not None and json_reply.name == "Rent" and json_reply.strict is True
    assert json_reply.json_schema is not None
    assert json_reply.json_schema["required"] == ["city", "median_eur"]
    assert read_request_log(log_path)[0].constraint == "json_schema"


def test_json_object_reaches_the_backbone(serve: Any) -> None:
    backbone = ScriptedBackbone(["{}"])
    client, _ = serve(backbone)
    client.chat.completions.create(
        model="scripted", messages=USER, response_format={"type": "json_object"}
    )
    assert backbone.calls[0].options.json_reply == JsonReply()


def test_no_effect_fields_are_accepted_and_other_fields_go_to_the_backbone(serve: Any) -> None:
    backbone = ScriptedBackbone(["ok"])
    client, _ = serve(backbone)
    client.chat.completions.create(
        model="scripted",
        messages=USER,
        user="u-1",
        metadata={"run": "x"},
        store=False,
        logprobs=False,
        modalities=["text"],
        presence_penalty=0.5,
        extra_body={"top_k": 20},
    )
    assert backbone.calls[0].options.provider_fields == {"presence_penalty": 0.5, "top_k": 20}


def test_the_body_size_limit_is_a_413(serve: Any) -> None:
    _, base_url = serve(ScriptedBackbone([]), max_request_bytes=1 << 20)
    body = {"model": "scripted", "messages": USER, "padding": "x" * (5 << 20)}
    response = _post(base_url, body)
    assert response.status_code == 413
    message = response.json()["error"]["message"]
    assert "larger than this server's limit of 1,048,576 bytes" in message
    assert "--max-request-mb" in message


# ---------------------------------------------------------------- the embedded model refuses


def test_the_embedded_model_refuses_a_provider_field_before_loading(serve: Any) -> None:
    _, base_url = serve(EmbeddedBackbone())
    body = {"model": "local/smollm2-135m", "messages": USER, "padding": "x" * (5 << 20)}
    _refused(_post(base_url, body), "padding", "does not take this field")
    body = {"model": "local/smollm2-135m", "messages": USER, "presence_penalty": 0.5}
    _refused(_post(base_url, body), "presence_penalty", "applies temperature, top_p, seed")


def test_a_call_in_a_syntax_no_grammar_forces_is_refused(serve: Any) -> None:
    backbone = EmbeddedBackbone("local/gemma-3-1b", profile=resolve_profile("gemma-3-1b"))
    _, base_url = serve(backbone)
    body = {
        "model": "local/gemma-3-1b",
        "messages": USER,
        "tools": [RECALL_TOOL],
        "tool_choice": "required",
    }
    _refused(_post(base_url, body), "tool_choice", "pythonic syntax are not JSON")


# ---------------------------------------------------------------- litellm passes them through


@pytest.fixture
def upstream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as running:
        yield running


def _litellm(upstream: FakeOpenAIServer, tool_mode: ToolMode) -> LiteLLMBackbone:
    return LiteLLMBackbone(
        "openai/upstream", api_base=upstream.api_base, api_key="k", tool_mode=tool_mode
    )


def test_litellm_backbones_get_the_requests_values(serve: Any, upstream: FakeOpenAIServer) -> None:
    upstream.push(tool_call_reply("get_weather", {"city": "Berlin"}))
    client, _ = serve(_litellm(upstream, "native"), name="m")
    client.chat.completions.create(
        model="m",
        messages=USER,
        tools=[RECALL_TOOL, WEATHER_TOOL],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        parallel_tool_calls=False,
        temperature=0.7,
        top_p=0.5,
        seed=11,
        stop="END",
        max_completion_tokens=50,
        presence_penalty=0.25,
        response_format={"type": "json_object"},
    )
    sent = upstream.requests[0].body
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert sent["parallel_tool_calls"] is False
    sampling = (sent["temperature"], sent["top_p"], sent["seed"], sent["stop"])
    assert sampling == (0.7, 0.5, 11, ["END"])
    assert sent["presence_penalty"] == 0.25 and sent["response_format"] == {"type": "json_object"}
    assert sent.get("max_tokens", sent.get("max_completion_tokens")) == 50


def test_litellm_backbones_keep_their_own_settings_when_a_request_has_none(
    serve: Any, upstream: FakeOpenAIServer
) -> None:
    upstream.push(reply("ok"))
    client, _ = serve(_litellm(upstream, "text"), name="m")
    client.chat.completions.create(model="m", messages=USER)
    sent = upstream.requests[0].body
    assert sent["temperature"] == 0.0
    assert not {"top_p", "seed", "stop", "tool_choice", "response_format"} & set(sent)


def test_a_text_mode_litellm_backbone_refuses_a_forced_call(
    serve: Any, upstream: FakeOpenAIServer
) -> None:
    _, base_url = serve(_litellm(upstream, "text"), name="m")
    body = {"model": "m", "messages": USER, "tools": [RECALL_TOOL], "tool_choice": "required"}
    _refused(_post(base_url, body), "tool_choice", "--tool-mode native")
    assert upstream.requests == []


def test_a_field_litellm_does_not_pass_on_is_refused(
    serve: Any, upstream: FakeOpenAIServer
) -> None:
    _, base_url = serve(_litellm(upstream, "native"), name="m")
    body = {"model": "m", "messages": USER, "top_k": 20}
    _refused(_post(base_url, body), "top_k", "litellm does not pass this field")
    assert upstream.requests == []


def test_every_request_field_is_in_the_docs_table() -> None:
    from runtime.serve.wire import NO_EFFECT_FIELDS, REFUSED_FIELDS, ChatRequest

    table = (Path(__file__).parents[2] / "docs" / "serve_model.md").read_text(encoding="utf-8")
    table = table.split("## Request fields", 1)[1].split("###", 1)[0]
    fields = [*ChatRequest.model_fields, *NO_EFFECT_FIELDS, *REFUSED_FIELDS]
    assert [field for field in fields if f"`{field}" not in table] == []
