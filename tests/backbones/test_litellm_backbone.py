"""LiteLLMBackbone through real litellm, and ServedBackbone (the same backbone sending its
requests itself), against a local fault-injecting OpenAI server: every behaviour alike."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from typing import Any

import pytest

from runtime.backbones import LiteLLMBackbone, ProviderError, RetryPolicy, ServedBackbone
from runtime.backbones.base import CallOptions
from runtime.backbones.litellm_backbone import RAW_ARGUMENTS_KEY
from runtime.messages import AssistantMessage, Message, SystemMessage, ToolSpec, Usage, UserMessage
from tests.fakes.openai_server import (
    FakeOpenAIServer,
    JsonHandler,
    content_filtered,
    context_length_exceeded,
    error,
    hang,
    malformed_json,
    no_choices,
    rate_limited,
    refused,
    reply,
    server_error,
    tool_call_reply,
    unused_port,
    usage_body,
)

RECALL = ToolSpec(
    name="artifact_recall",
    description="Recall an artifact by id.",
    parameters={
        "type": "object",
        "properties": {"artifact_id": {"type": "string"}},
        "required": ["artifact_id"],
    },
)
MESSAGES: list[Message] = [SystemMessage(content="Be brief."), UserMessage.text("What is in a1?")]
FAST_RETRY = RetryPolicy(max_retries=3, base_delay_s=0.01, max_delay_s=0.05)


BACKBONES = {"litellm": LiteLLMBackbone, "served": ServedBackbone}


@pytest.fixture(params=sorted(BACKBONES))
def server(request: pytest.FixtureRequest) -> Iterator[FakeOpenAIServer]:
    """The fake server; ``backbone_for`` makes the backbone kind the test is run with."""
    with FakeOpenAIServer() as running:
        running.backbone_kind = BACKBONES[request.param]  # type: ignore[attr-defined]
        yield running


def backbone_for(server: FakeOpenAIServer, **options: Any) -> LiteLLMBackbone:
    options.setdefault("retry", FAST_RETRY)
    options.setdefault("timeout_s", 5.0)
    kind: type[LiteLLMBackbone] = server.backbone_kind  # type: ignore[attr-defined]
    return kind("openai/fake-model", api_base=server.api_base, api_key="test-key", **options)


async def test_a_normal_reply_with_provider_usage(server: FakeOpenAIServer) -> None:
    server.push(reply("42 apples", usage=usage_body(120, 8, cached=64)))
    completion = await backbone_for(server, tool_mode="text").complete(MESSAGES, [])
    assert completion.text == "42 apples"
    assert completion.finish_reason == "stop"
    assert completion.usage == Usage(
        input_tokens=120, output_tokens=8, cached_tokens=64, source="provider"
    )
    assert completion.latency_s > 0


async def test_usage_is_estimated_when_the_provider_reports_none(
    server: FakeOpenAIServer,
) -> None:
    server.push(reply("three short words", usage={}))
    completion = await backbone_for(server, tool_mode="text").complete(MESSAGES, [])
    assert completion.usage.source == "estimate"
    assert completion.usage.input_tokens > 5 and completion.usage.output_tokens == 3


async def test_rate_limit_and_5xx_are_retried_then_succeed(server: FakeOpenAIServer) -> None:
    server.push(rate_limited(), server_error(503), server_error(500), reply("finally"))
    completion = await backbone_for(server).complete(MESSAGES, [])
    assert completion.text == "finally"
    assert len(server.requests) == 4


async def test_retries_exhausted_raise_the_kind_and_attempt_count(
    server: FakeOpenAIServer,
) -> None:
    server.push(*(server_error(500) for _ in range(4)), reply("never reached"))
    with pytest.raises(ProviderError) as caught:
        await backbone_for(server).complete(MESSAGES, [])
    assert caught.value.kind == "server_error"
    assert caught.value.attempts == 4
    assert len(server.requests) == 4 and server.pending == 1


async def test_persistent_rate_limit_surfaces_as_rate_limit(server: FakeOpenAIServer) -> None:
    server.push(*(rate_limited() for _ in range(2)))
    retry = RetryPolicy(max_retries=1, base_delay_s=0.01, max_delay_s=0.05)
    with pytest.raises(ProviderError) as caught:
        await backbone_for(server, retry=retry).complete(MESSAGES, [])
    assert (caught.value.kind, caught.value.attempts, caught.value.retryable) == (
        "rate_limit",
        2,
        True,
    )


async def test_retry_after_header_is_honoured_up_to_the_cap(server: FakeOpenAIServer) -> None:
    server.push(rate_limited(retry_after_s=0.3), reply("ok"))
    retry = RetryPolicy(max_retries=2, base_delay_s=0.01, max_delay_s=1.0)
    await backbone_for(server, retry=retry).complete(MESSAGES, [])
    gap = server.requests[1].received_at - server.requests[0].received_at
    assert gap >= 0.3


async def test_context_length_error_is_not_retried(server: FakeOpenAIServer) -> None:
    server.push(context_length_exceeded(), reply("never reached"))
    with pytest.raises(ProviderError) as caught:
        await backbone_for(server).complete(MESSAGES, [])
    assert caught.value.kind == "context_length" and caught.value.attempts == 1
    assert not caught.value.retryable
    assert len(server.requests) == 1


@pytest.mark.parametrize(("status", "kind"), [(401, "auth"), (400, "bad_request")])
async def test_auth_and_bad_request_are_not_retried(
    server: FakeOpenAIServer, status: int, kind: str
) -> None:
    server.push(error(status, "nope", error_type="invalid_request_error"), reply("unused"))
    with pytest.raises(ProviderError) as caught:
        await backbone_for(server).complete(MESSAGES, [])
    assert caught.value.kind == kind and caught.value.attempts == 1


@pytest.mark.parametrize(
    ("answer", "detail"),
    [
        (content_filtered(), "finish_reason content_filter (no content, 0 tool call(s))"),
        (content_filtered("The first half of"), "content_filter (content kept"),
        (refused("I can't help with that."), "refusal with no content: \"I can't help"),
    ],
)
async def test_a_provider_refusal_is_a_provider_error_not_retried(
    server: FakeOpenAIServer, answer: Any, detail: str
) -> None:
    """HTTP 200 is not an answer when the provider's filter withheld or cut it, or it carries
    only a refusal: ``provider_refusal``, raised at once (the same request would be refused)."""
    server.push(answer, reply("never reached"))
    with pytest.raises(ProviderError) as caught:
        await backbone_for(server).complete(MESSAGES, [])
    assert (caught.value.kind, caught.value.attempts) == ("provider_refusal", 1)
    assert detail in caught.value.detail and not caught.value.retryable
    assert caught.value.finish_reason == ("content_filter" if "filter" in detail else "stop")
    assert len(server.requests) == 1


async def test_a_refusal_beside_content_is_the_models_answer(server: FakeOpenAIServer) -> None:
    server.push(refused("partly refused", content="ANSWERABLE=NO"))
    completion = await backbone_for(server).complete(MESSAGES, [])
    assert (completion.text, completion.finish_reason) == ("ANSWERABLE=NO", "stop")


class _AnthropicRefusal(JsonHandler):
    """``POST /v1/messages``: Anthropic's reply when its classifiers stop the model."""

    def do_POST(self) -> None:
        body = self.read_json()
        self.send_json(
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": [],
                "stop_reason": "refusal",
                "usage": {"input_tokens": 40, "output_tokens": 0},
            }
        )


async def test_anthropics_refusal_stop_reason_is_a_provider_refusal() -> None:
    """litellm names Anthropic's ``stop_reason: refusal`` ``content_filter``: a refusal too."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _AnthropicRefusal)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        backbone = LiteLLMBackbone(
            "anthropic/claude-haiku-4-5",
            api_base=f"http://127.0.0.1:{httpd.server_address[1]}",
            api_key="k",
            retry=FAST_RETRY,
        )
        with pytest.raises(ProviderError) as caught:
            await backbone.complete(MESSAGES, [])
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert (caught.value.kind, caught.value.finish_reason) == ("provider_refusal", "content_filter")
    assert caught.value.detail == "finish_reason content_filter (no content, 0 tool call(s))"


@pytest.mark.parametrize("code", ["content_policy_violation", "content_filter"])
async def test_a_request_refused_by_content_policy_is_a_provider_refusal(
    server: FakeOpenAIServer, code: str
) -> None:
    server.push(
        error(400, "rejected by our safety system", code=code, error_type="invalid_request_error")
    )
    with pytest.raises(ProviderError) as caught:
        await backbone_for(server).complete(MESSAGES, [])
    assert (caught.value.kind, caught.value.attempts) == ("provider_refusal", 1)
    assert "safety system" in caught.value.detail and caught.value.finish_reason is None


async def test_a_hang_times_out_and_is_retried(server: FakeOpenAIServer) -> None:
    server.push(hang(60), reply("after the hang"))
    completion = await backbone_for(server, timeout_s=0.5).complete(MESSAGES, [])
    assert completion.text == "after the hang"
    gave_up_after = server.requests[1].received_at - server.requests[0].received_at
    assert gave_up_after < 20  # the client timed out long before the 60 s hang ended


async def test_timeouts_exhausted_raise_timeout(server: FakeOpenAIServer) -> None:
    server.push(hang(60))
    retry = RetryPolicy(max_retries=0)
    with pytest.raises(ProviderError) as caught:
        await backbone_for(server, timeout_s=0.5, retry=retry).complete(MESSAGES, [])
    assert (caught.value.kind, caught.value.attempts) == ("timeout", 1)


@pytest.mark.parametrize("fault", [malformed_json, no_choices])
async def test_malformed_responses_are_retried(server: FakeOpenAIServer, fault: Any) -> None:
    server.push(fault(), reply("well formed"))
    completion = await backbone_for(server).complete(MESSAGES, [])
    assert completion.text == "well formed" and len(server.requests) == 2


@pytest.mark.parametrize("fault", [malformed_json, no_choices])
async def test_persistent_malformed_response_is_typed(server: FakeOpenAIServer, fault: Any) -> None:
    server.push(fault(), fault())
    retry = RetryPolicy(max_retries=1, base_delay_s=0.01, max_delay_s=0.02)
    with pytest.raises(ProviderError) as caught:
        await backbone_for(server, retry=retry).complete(MESSAGES, [])
    assert (caught.value.kind, caught.value.attempts) == ("malformed_response", 2)


@pytest.mark.parametrize("kind", BACKBONES.values(), ids=sorted(BACKBONES, reverse=True))
async def test_connection_refused_is_a_connection_error(kind: type[LiteLLMBackbone]) -> None:
    api_base = f"http://127.0.0.1:{unused_port()}/v1"
    backbone = kind(
        "openai/fake-model",
        api_base=api_base,
        api_key="k",
        retry=RetryPolicy(max_retries=1, base_delay_s=0.01),
    )
    with pytest.raises(ProviderError) as caught:
        await backbone.complete(MESSAGES, [])
    assert (caught.value.kind, caught.value.attempts) == ("connection", 2)


async def test_native_mode_sends_tools_and_returns_structured_calls(
    server: FakeOpenAIServer,
) -> None:
    server.push(tool_call_reply("artifact_recall", {"artifact_id": "a1"}, call_id="call_9"))
    completion = await backbone_for(server, tool_mode="native").complete(MESSAGES, [RECALL])
    (call,) = completion.native_tool_calls
    assert (call.id, call.name, call.arguments) == (
        "call_9",
        "artifact_recall",
        {"artifact_id": "a1"},
    )
    assert completion.finish_reason == "tool_calls"
    request = server.requests[0].body
    assert request["tools"] == [RECALL.to_openai()]
    assert "<tools>" not in request["messages"][0]["content"]


async def test_native_arguments_that_are_not_json_are_kept_verbatim(
    server: FakeOpenAIServer,
) -> None:
    server.push(tool_call_reply("artifact_recall", '{"artifact_id": "a1"'))
    completion = await backbone_for(server, tool_mode="native").complete(MESSAGES, [RECALL])
    assert completion.native_tool_calls[0].arguments == {RAW_ARGUMENTS_KEY: '{"artifact_id": "a1"'}


async def test_text_mode_puts_tools_in_the_system_prompt_and_returns_raw_text(
    server: FakeOpenAIServer,
) -> None:
    call = '{"name": "artifact_recall", "arguments": {"artifact_id": "a1"}}'
    raw = f"<tool_call>\n{call}\n</tool_call>"
    server.push(reply(raw))
    completion = await backbone_for(server, tool_mode="text").complete(MESSAGES, [RECALL])
    assert completion.text == raw and completion.native_tool_calls == ()
    request = server.requests[0].body
    assert "tools" not in request
    system = request["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("Be brief.")
    assert '"name": "artifact_recall"' in system["content"]


async def test_request_carries_model_temperature_and_max_tokens(
    server: FakeOpenAIServer,
) -> None:
    server.push(reply("ok"))
    await backbone_for(server, max_output_tokens=77, temperature=0.0).complete(MESSAGES, [])
    body = server.requests[0].body
    assert body["model"] == "fake-model"
    assert body["temperature"] == 0.0
    assert body.get("max_tokens", body.get("max_completion_tokens")) == 77
    assert json.dumps(body["messages"]).count("What is in a1?") == 1


def test_tool_mode_defaults_from_the_profile() -> None:
    assert LiteLLMBackbone("openai/gpt-4o-mini").tool_mode == "native"
    assert LiteLLMBackbone("hosted_vllm/Qwen2.5-7B-Instruct").tool_mode == "text"


def test_context_window_from_config_then_litellm_then_default() -> None:
    assert LiteLLMBackbone("openai/gpt-4o-mini", context_window=5000).context_window == 5000
    assert LiteLLMBackbone("openai/gpt-4o-mini").context_window == 128_000
    assert LiteLLMBackbone("hosted_vllm/my-own-model").context_window == 8192


def test_backoff_is_exponential_jittered_and_capped() -> None:
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=3.0)
    for _ in range(50):
        assert 0.5 <= policy.delay(1) <= 1.0
        assert 1.0 <= policy.delay(2) <= 2.0
        assert policy.delay(5) <= 3.0
    assert policy.delay(1, retry_after_s=2.5) == 2.5
    assert policy.delay(1, retry_after_s=60) == 3.0


async def test_a_local_openai_server_needs_no_api_key(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.push(reply("no key needed"))
    kind: type[LiteLLMBackbone] = server.backbone_kind  # type: ignore[attr-defined]
    backbone = kind("openai/fake-model", api_base=server.api_base, retry=FAST_RETRY)
    assert (await backbone.complete(MESSAGES, [])).text == "no key needed"


@pytest.mark.parametrize("tool_mode", ["native", "text"])
async def test_served_sends_the_request_litellm_sends(tool_mode: str) -> None:
    """The same call through litellm and sent by ``ServedBackbone`` itself: the same body
    (options, tools, messages), also when the history repeats (its messages encoded once)."""
    options = CallOptions(temperature=0.3, seed=7, stop=("END",), top_p=0.9)
    history: list[Message] = [*MESSAGES, AssistantMessage(content="a1 is a chart."), MESSAGES[1]]
    bodies = []
    for kind in (LiteLLMBackbone, ServedBackbone):
        with FakeOpenAIServer() as running:
            running.push(reply("ok"), reply("ok"))
            backbone = kind(
                "openai/fake-model",
                api_base=running.api_base,
                api_key="k",
                tool_mode=tool_mode,  # type: ignore[arg-type]
                max_output_tokens=50,
            ).with_call_options(options)
            await backbone.complete(history[:2], [RECALL])
            await backbone.complete(history, [RECALL])
            bodies.append([request.body for request in running.requests])
    assert bodies[0] == bodies[1]
