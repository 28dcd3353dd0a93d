"""The embedded SmolLM2 behind the endpoint, driven by the real ``openai`` client: a required or
named tool call and a JSON reply are enforced by a llama.cpp grammar, and the sampling settings
reach llama.cpp (slow: the real model)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from openai import OpenAI

from runtime.backbones import EmbeddedBackbone
from runtime.serve import BackgroundServer, RequestLog, create_app, read_request_log
from tests.serve.support import RECALL_TOOL, WEATHER_TOOL
from tests.serve.test_request_options import USER, Rent

pytestmark = pytest.mark.slow

MODEL = "local/smollm2-135m"
TOOLS = [RECALL_TOOL, WEATHER_TOOL]
SCHEMAS = {tool["function"]["name"]: tool["function"]["parameters"] for tool in TOOLS}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[OpenAI, Path]]:
    log_path = tmp_path_factory.mktemp("log") / "requests.jsonl"
    app = create_app(EmbeddedBackbone(max_output_tokens=128), request_log=RequestLog(log_path))
    with BackgroundServer(app) as server:
        yield OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=600), log_path


def _calls(response: Any) -> list[tuple[str, dict[str, Any]]]:
    calls = response.choices[0].message.tool_calls or []
    return [(call.function.name, json.loads(call.function.arguments)) for call in calls]


def _last_record(log_path: Path) -> Any:
    return read_request_log(log_path)[-1]


def test_a_required_call_is_a_schema_valid_call_of_an_offered_tool(
    served: tuple[OpenAI, Path],
) -> None:
    client, log_path = served
    messages = [{"role": "user", "content": "Say hello to me."}]  # no call without the grammar
    response = client.chat.completions.create(
        model=MODEL,
        messages=messages,
        tools=TOOLS,
        tool_choice="required",
    )
    assert response.choices[0].finish_reason == "tool_calls"
    calls = _calls(response)
    assert calls
    for name, arguments in calls:
        jsonschema.validate(arguments, SCHEMAS[name])
    record = _last_record(log_path)
    assert (record.constraint, record.parse_outcome) == ("tool_call", "ok")


def test_a_named_call_is_a_schema_valid_call_of_that_tool_and_only_one(
    served: tuple[OpenAI, Path],
) -> None:
    client, log_path = served
    response = client.chat.completions.create(
        model=MODEL,
        messages=USER,
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        parallel_tool_calls=False,
    )
    [(name, arguments)] = _calls(response)
    assert name == "get_weather"
    jsonschema.validate(arguments, SCHEMAS["get_weather"])
    assert _last_record(log_path).constraint == "named_tool"


def test_a_json_schema_reply_through_parse_validates(served: tuple[OpenAI, Path]) -> None:
    client, log_path = served
    completion = client.beta.chat.completions.parse(
        model=MODEL,
        messages=USER,
        response_format=Rent,
    )
    content = completion.choices[0].message.content or ""
    jsonschema.validate(json.loads(content), Rent.model_json_schema())
    assert isinstance(completion.choices[0].message.parsed, Rent)
    assert _last_record(log_path).constraint == "json_schema"


def test_a_json_object_reply_is_a_json_object(served: tuple[OpenAI, Path]) -> None:
    """As with OpenAI's JSON mode the prompt should ask for JSON: the grammar forces the
    syntax, not the content (asked about rent, SmolLM2 nests objects until the budget ends)."""
    client, _ = served
    response = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Reply in JSON: what is the capital of France?"}],
        response_format={"type": "json_object"},
    )
    assert response.choices[0].finish_reason == "stop"
    assert isinstance(json.loads(response.choices[0].message.content or ""), dict)


def test_tools_and_a_json_schema_give_a_call_or_the_json(served: tuple[OpenAI, Path]) -> None:
    client, _ = served
    schema = Rent.model_json_schema()
    response = client.chat.completions.create(
        model=MODEL,
        messages=USER,
        tools=TOOLS,
        response_format={"type": "json_schema", "json_schema": {"name": "rent", "schema": schema}},
    )
    calls = _calls(response)
    if calls:
        for name, arguments in calls:
            jsonschema.validate(arguments, SCHEMAS[name])
    else:
        jsonschema.validate(json.loads(response.choices[0].message.content or ""), schema)


def test_seed_temperature_and_stop_reach_llama_cpp(served: tuple[OpenAI, Path]) -> None:
    client, log_path = served
    story = [{"role": "user", "content": "Tell me a short story about a cat."}]

    def text(**options: Any) -> str:
        response = client.chat.completions.create(
            model=MODEL,
            messages=story,
            max_tokens=40,
            **options,
        )
        return response.choices[0].message.content or ""

    hot = [text(temperature=1.5, seed=seed) for seed in (1, 1, 2, 3)]
    assert hot[0] == hot[1]  # the request's seed drives llama.cpp's sampler
    assert len(set(hot)) > 1  # and the request's temperature makes seeds matter
    greedy = text()
    words = greedy.split()
    assert len(words) > 4
    stop_word = words[3]
    cut = text(stop=[stop_word])
    assert stop_word not in cut and greedy.startswith(cut.rstrip())
    assert _last_record(log_path).options == ["stop"]
