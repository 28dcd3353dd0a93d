"""litellm as the client of the endpoint (``openai/NAME`` with ``api_base``): a tool call out,
its result back in, streaming and not."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from runtime.backbones import FunctionBackbone
from runtime.messages import Message, ToolResultMessage
from runtime.serve import BackgroundServer, create_app
from tests.serve.support import HERMES_CALL, RECALL_TOOL

QUESTION = {"role": "user", "content": "What was the median rent in Berlin?"}
ANSWER = "Berlin: 2110 EUR (chart_3f9a1c20)."


def answer(messages: list[Message]) -> str:
    """Calls the tool first; answers once a tool result is in the history."""
    if any(isinstance(message, ToolResultMessage) for message in messages):
        return ANSWER
    return HERMES_CALL


@pytest.fixture(scope="module")
def api_base() -> Iterator[str]:
    with BackgroundServer(create_app(FunctionBackbone(answer, model="mirage-fn"))) as server:
        yield server.base_url


def _complete(api_base: str, messages: list[dict[str, Any]], stream: bool) -> Any:
    import litellm

    return litellm.completion(
        model="openai/mirage-fn",
        api_base=api_base,
        api_key="unused",
        messages=messages,
        tools=[RECALL_TOOL],
        stream=stream,
        num_retries=0,
    )


def _assembled(api_base: str, messages: list[dict[str, Any]], stream: bool) -> Any:
    import litellm

    response = _complete(api_base, messages, stream)
    if not stream:
        return response.choices[0].message
    chunks = list(response)
    return litellm.stream_chunk_builder(chunks, messages=messages).choices[0].message


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_tool_call_round_trip_through_litellm(api_base: str, stream: bool) -> None:
    messages: list[dict[str, Any]] = [QUESTION]
    first = _assembled(api_base, messages, stream)
    [call] = first.tool_calls
    assert call.function.name == "artifact_recall"
    assert json.loads(call.function.arguments) == {"query": "rent"}

    messages += [
        {
            "role": "assistant",
            "content": first.content,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": "artifact_recall", "arguments": call.function.arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call.id, "content": "Berlin 2023: 2110"},
    ]
    second = _assembled(api_base, messages, stream)
    assert second.content == ANSWER
    assert not second.tool_calls


def test_litellm_reads_usage(api_base: str) -> None:
    response = _complete(api_base, [QUESTION], stream=False)
    assert response.usage.prompt_tokens > 0
    assert response.usage.completion_tokens > 0
