"""The endpoint served on loopback, driven by the real ``openai`` client, over scripted
backbones (deterministic replies; the endpoint's own conversion, parsing and wire format are
what is under test)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI

from runtime.backbones import FunctionBackbone, ProviderError, ScriptedBackbone, ScriptedReply
from runtime.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from runtime.profiles import resolve_profile
from runtime.serve import (
    BackgroundServer,
    ModelTable,
    RequestLog,
    RuleRouter,
    ServedRequest,
    create_app,
    read_request_log,
)
from tests.serve.support import HERMES_CALL, RECALL_TOOL, BudgetEcho

USER = [{"role": "user", "content": "What was the median rent in Berlin?"}]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    """``serve(backbone_or_router, **create_app_options)`` → an OpenAI client on it."""
    servers: list[BackgroundServer] = []

    def start(target: Any, **options: Any) -> OpenAI:
        server = BackgroundServer(create_app(target, **options)).start()
        servers.append(server)
        return OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)

    yield start
    for server in servers:
        server.stop()


def test_models_lists_the_served_name(serve: Any) -> None:
    client = serve(ScriptedBackbone([]), name="mirage-test")
    assert [model.id for model in client.models.list()] == ["mirage-test"]
    assert client.models.retrieve("mirage-test").owned_by == "mirage"


def test_plain_reply_with_usage_and_cached_tokens(serve: Any) -> None:
    usage = Usage(input_tokens=1200, output_tokens=9, cached_tokens=1100)
    client = serve(ScriptedBackbone([ScriptedReply(text="2110 EUR.", usage=usage)]))
    response = client.chat.completions.create(model="scripted", messages=USER)
    choice = response.choices[0]
    assert (choice.message.content, choice.finish_reason) == ("2110 EUR.", "stop")
    assert choice.message.tool_calls is None
    assert response.usage is not None
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (1200, 9)
    assert response.usage.total_tokens == 1209
    assert response.usage.prompt_tokens_details is not None
    assert response.usage.prompt_tokens_details.cached_tokens == 1100


def test_text_mode_reply_becomes_tool_calls(serve: Any) -> None:
    backbone = ScriptedBackbone([HERMES_CALL], model="scripted-hermes")
    client = serve(backbone)
    response = client.chat.completions.create(
        model="scripted-hermes",
        messages=USER,
        tools=[RECALL_TOOL],
    )
    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Let me look."
    assert choice.message.tool_calls is not None
    [call] = choice.message.tool_calls
    assert call.id.startswith("call_")
    assert call.function.name == "artifact_recall"
    assert json.loads(call.function.arguments) == {"query": "rent"}
    [recorded] = backbone.calls
    assert recorded.tools == (ToolSpec.from_openai(RECALL_TOOL),)
    assert recorded.messages == (UserMessage.text(USER[0]["content"]),)


def test_streamed_tool_call_deltas_reassemble(serve: Any) -> None:
    usage = Usage(input_tokens=300, output_tokens=20, cached_tokens=256)
    client = serve(ScriptedBackbone([ScriptedReply(text=HERMES_CALL, usage=usage)]))
    stream = client.chat.completions.create(
        model="scripted",
        messages=USER,
        tools=[RECALL_TOOL],
        stream=True,
        stream_options={"include_usage": True},
    )
    content, calls, finish, usage_seen = "", {}, None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage_seen = chunk.usage
        for choice in chunk.choices:
            content += choice.delta.content or ""
            finish = choice.finish_reason or finish
            for delta in choice.delta.tool_calls or []:
                entry = calls.setdefault(delta.index, {"id": None, "name": "", "arguments": ""})
                entry["id"] = delta.id or entry["id"]
                if delta.function is not None:
                    entry["name"] += delta.function.name or ""
                    entry["arguments"] += delta.function.arguments or ""
    assert content == "Let me look."
    assert finish == "tool_calls"
    assert list(calls) == [0]
    assert calls[0]["name"] == "artifact_recall"
    assert json.loads(calls[0]["arguments"]) == {"query": "rent"}
    assert calls[0]["id"].startswith("call_")
    assert usage_seen is not None
    assert usage_seen.prompt_tokens == 300
    assert usage_seen.prompt_tokens_details is not None
    assert usage_seen.prompt_tokens_details.cached_tokens == 256


def test_stream_without_include_usage_has_no_usage_chunk(tmp_path: Path) -> None:
    app = create_app(ScriptedBackbone(["hi"]))
    with BackgroundServer(app) as server:
        body = {"model": "scripted", "messages": USER, "stream": True}
        response = httpx.post(f"{server.base_url}/chat/completions", json=body)
    assert response.headers["content-type"].startswith("text/event-stream")
    events = [line.removeprefix("data: ") for line in response.text.splitlines() if line]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    assert all("usage" not in chunk for chunk in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_tool_round_trip_history_reaches_the_backbone_as_mirage_messages(serve: Any) -> None:
    seen: list[list[Message]] = []

    def answer(messages: list[Message]) -> str:
        seen.append(messages)
        return HERMES_CALL if len(seen) == 1 else "Berlin: 2110 EUR (chart_3f9a1c20)."

    client = serve(FunctionBackbone(answer, model="fn"))
    messages: list[Any] = [{"role": "system", "content": "Be brief."}, *USER]
    first = client.chat.completions.create(model="fn", messages=messages, tools=[RECALL_TOOL])
    [call] = first.choices[0].message.tool_calls or []
    messages += [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "chart_3f9a1c20: Berlin 2023 2110"},
    ]
    second = client.chat.completions.create(model="fn", messages=messages, tools=[RECALL_TOOL])

    assert second.choices[0].message.content == "Berlin: 2110 EUR (chart_3f9a1c20)."
    system, user, assistant, result = seen[1]
    assert system == SystemMessage(content="Be brief.")
    assert isinstance(user, UserMessage)
    assert assistant == AssistantMessage(
        content="Let me look.",
        tool_calls=(ToolCall(id=call.id, name="artifact_recall", arguments={"query": "rent"}),),
    )
    assert result == ToolResultMessage(
        tool_call_id=call.id, name="artifact_recall", content="chart_3f9a1c20: Berlin 2023 2110"
    )


def test_native_mode_backbone_calls_pass_through(serve: Any) -> None:
    call = ToolCall(id="prov-1", name="artifact_recall", arguments={"query": "rent", "k": 3})
    backbone = ScriptedBackbone(
        [ScriptedReply(native_tool_calls=(call,))],
        model="gpt-4o-mini",
        tool_mode="native",
        profile=resolve_profile("gpt-4o-mini"),
    )
    client = serve(backbone, name="gpt-4o-mini")
    response = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=USER,
        tools=[RECALL_TOOL],
    )
    [returned] = response.choices[0].message.tool_calls or []
    assert returned.function.name == "artifact_recall"
    assert json.loads(returned.function.arguments) == {"query": "rent", "k": 3}
    assert response.choices[0].message.content is None


def test_invalid_call_returns_the_raw_text_and_is_labelled(serve: Any, tmp_path: Path) -> None:
    bad = '<tool_call>\n{"name": "artifact_recall", "arguments": {}}\n</tool_call>'
    log_path = tmp_path / "requests.jsonl"
    client = serve(ScriptedBackbone([bad]), request_log=RequestLog(log_path))
    raw = client.chat.completions.with_raw_response.create(
        model="scripted",
        messages=USER,
        tools=[RECALL_TOOL],
    )
    response = raw.parse()
    assert raw.headers["x-mirage-parse-outcome"] == "missing_required"
    assert response.choices[0].message.content == bad
    assert response.choices[0].message.tool_calls is None
    [record] = read_request_log(log_path)
    assert record.parse_outcome == "missing_required"
    assert record.tool_calls == []


@pytest.mark.parametrize(
    ("options", "expected"),
    [({}, 77), ({"max_tokens": 12}, 12), ({"max_completion_tokens": 9, "max_tokens": 30}, 9)],
)
def test_output_budget_reaches_the_backbone(
    serve: Any, options: dict[str, int], expected: int
) -> None:
    backbone = BudgetEcho()
    client = serve(backbone)
    response = client.chat.completions.create(model="budget-echo", messages=USER, **options)
    assert response.choices[0].message.content == f"budget={expected}"
    assert backbone.max_output_tokens == 77  # the served backbone itself is never changed


def test_tool_choice_none_offers_no_tools(serve: Any) -> None:
    backbone = ScriptedBackbone(["plain"])
    client = serve(backbone)
    client.chat.completions.create(
        model="scripted",
        messages=USER,
        tools=[RECALL_TOOL],
        tool_choice="none",
    )
    assert backbone.calls[0].tools == ()


def test_text_mode_profile_few_shot_turns_follow_the_system_prompt(serve: Any) -> None:
    backbone = ScriptedBackbone(["ok"], model="smollm-scripted")  # the smollm profile
    client = serve(backbone)
    messages: list[Any] = [{"role": "system", "content": "Be brief."}, *USER]
    client.chat.completions.create(model="smollm-scripted", messages=messages, tools=[RECALL_TOOL])
    sent = backbone.calls[0].messages
    examples = backbone.profile.example_turns([ToolSpec.from_openai(RECALL_TOOL)])
    assert examples
    assert sent == (
        SystemMessage(content="Be brief."),
        *examples,
        UserMessage.text(USER[0]["content"]),
    )


def test_router_picks_the_backbone_per_request_and_logs_it(serve: Any, tmp_path: Path) -> None:
    replay = ScriptedBackbone(["scripted trunk reply"], model="replay")
    real = ScriptedBackbone([HERMES_CALL], model="real-model")

    def is_trunk_turn(request: ServedRequest) -> bool:
        last = request.messages[-1]
        return isinstance(last, UserMessage) and last.plain_text.startswith("[trunk]")

    log_path = tmp_path / "requests.jsonl"
    router = RuleRouter(real, [(is_trunk_turn, replay)], name="agent-model")
    client = serve(router, request_log=RequestLog(log_path))
    trunk = client.chat.completions.create(
        model="agent-model",
        messages=[{"role": "user", "content": "[trunk] I moved to Berlin."}],
        tools=[RECALL_TOOL],
    )
    probe = client.chat.completions.create(
        model="agent-model",
        messages=USER,
        tools=[RECALL_TOOL],
    )
    assert trunk.choices[0].message.content == "scripted trunk reply"
    assert probe.choices[0].finish_reason == "tool_calls"
    assert [record.backbone for record in read_request_log(log_path)] == ["replay", "real-model"]


def test_request_log_has_the_numbers_and_no_prompt_text(serve: Any, tmp_path: Path) -> None:
    log_path = tmp_path / "log" / "requests.jsonl"
    usage = Usage(input_tokens=500, output_tokens=30, cached_tokens=480)
    client = serve(
        ScriptedBackbone([ScriptedReply(text=HERMES_CALL, usage=usage)]),
        request_log=RequestLog(log_path),
    )
    secret = [{"role": "user", "content": "my secret passphrase is tangerine"}]
    client.chat.completions.create(
        model="scripted", messages=secret, tools=[RECALL_TOOL], stream=True
    )
    text = log_path.read_text()
    assert "tangerine" not in text and "Let me look" not in text
    [record] = read_request_log(log_path)
    assert (record.eit, record.cached_tokens, record.output_tokens) == (500, 480, 30)
    assert record.parse_outcome == "ok"
    assert record.stream and record.status == 200
    assert [call.name for call in record.tool_calls] == ["artifact_recall"]
    assert record.backbone == "scripted" and record.model == "scripted"
    assert record.latency_s >= 0


def test_request_log_with_content_keeps_messages_and_reply(serve: Any, tmp_path: Path) -> None:
    log_path = tmp_path / "requests.jsonl"
    client = serve(ScriptedBackbone(["hello"]), request_log=RequestLog(log_path, with_content=True))
    client.chat.completions.create(model="scripted", messages=USER)
    [record] = read_request_log(log_path)
    assert record.request_messages == [{"role": "user", "content": USER[0]["content"]}]
    assert record.reply_text == "hello"


def _post(url: str, body: Any) -> httpx.Response:
    return httpx.post(f"{url}/chat/completions", json=body)


@pytest.mark.parametrize(
    ("body", "param", "fragment"),
    [
        ({"model": "scripted", "messages": []}, "messages", "at least 1 item"),
        ({"messages": USER}, "model", "Field required"),
        (
            {"model": "scripted", "messages": [{"role": "tool", "content": "x"}]},
            "messages.0.tool_call_id",
            "Field required",
        ),
        ({"model": "scripted", "messages": USER, "n": 2}, "n", "Input should be 1"),
        ({"model": "scripted", "messages": USER, "max_tokens": 0}, "max_tokens", "greater than"),
        (
            {
                "model": "scripted",
                "messages": USER,
                "tools": [{"type": "function", "function": {}}],
            },
            "tools.0.function.name",
            "Field required",
        ),
        (
            {
                "model": "scripted",
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": "http://x/a.png"}}],
                    }
                ],
            },
            "messages.0.content.0.image_url.url",
            "only base64 data: URLs",
        ),
    ],
)
def test_bad_requests_are_400_naming_the_field(
    body: dict[str, Any], param: str, fragment: str, tmp_path: Path
) -> None:
    log_path = tmp_path / "requests.jsonl"
    app = create_app(ScriptedBackbone([]), request_log=RequestLog(log_path))
    with BackgroundServer(app) as server:
        response = _post(server.base_url, body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert error["message"].startswith(f"{param}: ")
    assert fragment in error["message"]
    [record] = read_request_log(log_path)
    assert record.status == 400 and record.error is not None


def test_a_body_that_is_not_json_is_400() -> None:
    with BackgroundServer(create_app(ScriptedBackbone([]))) as server:
        response = httpx.post(
            f"{server.base_url}/chat/completions",
            content=b"{not json",
            headers={"content-type": "application/json"},
        )
    assert response.status_code == 400
    assert "not valid JSON" in response.json()["error"]["message"]


def test_unknown_model_is_404_model_not_found(serve: Any) -> None:
    client = serve(ScriptedBackbone([]), name="served")
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="other", messages=USER)
    assert caught.value.code == "model_not_found"
    assert "served" in caught.value.message


@pytest.mark.parametrize(
    ("error", "exception", "status", "code"),
    [
        (
            ProviderError("rate_limit", "slow down", retry_after_s=7),
            openai.RateLimitError,
            429,
            "rate_limit_exceeded",
        ),
        (
            ProviderError("server_error", "upstream 503"),
            openai.InternalServerError,
            502,
            "upstream_server_error",
        ),
        (
            ProviderError("timeout", "no answer"),
            openai.InternalServerError,
            504,
            "upstream_timeout",
        ),
        (
            ProviderError("connection", "refused"),
            openai.InternalServerError,
            502,
            "upstream_unreachable",
        ),
        (
            ProviderError("context_length", "prompt of 9000 tokens"),
            openai.BadRequestError,
            400,
            "context_length_exceeded",
        ),
        (
            ProviderError("provider_refusal", "finish_reason content_filter (no content)"),
            openai.BadRequestError,
            400,
            "content_filter",
        ),
    ],
)
def test_provider_failures_are_mapped(
    serve: Any, error: ProviderError, exception: type[openai.APIStatusError], status: int, code: str
) -> None:
    client = serve(ScriptedBackbone([error]))
    with pytest.raises(exception) as caught:
        client.chat.completions.create(model="scripted", messages=USER)
    assert caught.value.status_code == status
    assert caught.value.code == code
    if error.kind == "rate_limit":
        assert caught.value.response.headers["retry-after"] == "7"
    if error.kind == "context_length":
        assert "maximum context length is 32768 tokens" in caught.value.message
    if error.kind == "provider_refusal":
        assert "finish_reason content_filter (no content)" in caught.value.message


def test_provider_failure_in_a_stream_request_is_an_http_error(serve: Any) -> None:
    client = serve(ScriptedBackbone([ProviderError("rate_limit", "busy")]))
    with pytest.raises(openai.RateLimitError):
        client.chat.completions.create(model="scripted", messages=USER, stream=True)


def test_a_backbone_bug_is_a_500_with_a_body(serve: Any) -> None:
    def broken(messages: list[Message]) -> str:
        raise RuntimeError("boom")

    client = serve(FunctionBackbone(broken, model="fn"))
    with pytest.raises(openai.InternalServerError) as caught:
        client.chat.completions.create(model="fn", messages=USER)
    assert "RuntimeError: boom" in caught.value.message


def test_api_key_is_required_when_configured() -> None:
    app = create_app(ScriptedBackbone(["ok"]), api_key="s3cret")
    with BackgroundServer(app) as server:
        refused = OpenAI(base_url=server.base_url, api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            refused.chat.completions.create(model="scripted", messages=USER)
        allowed = OpenAI(base_url=server.base_url, api_key="s3cret", max_retries=0)
        reply = allowed.chat.completions.create(model="scripted", messages=USER)
        assert reply.choices[0].message.content == "ok"
        assert httpx.get(server.base_url.removesuffix("/v1") + "/health").status_code == 200


def test_unknown_route_is_an_openai_style_404() -> None:
    with BackgroundServer(create_app(ScriptedBackbone([]))) as server:
        response = httpx.get(f"{server.base_url}/embeddings")
    assert response.status_code == 404
    assert response.json()["error"]["message"].startswith("GET /v1/embeddings")


def test_model_table_serves_each_backbone_under_its_name(serve: Any) -> None:
    trunk = ScriptedBackbone(["from trunk"], model="trunk")
    housekeeping = ScriptedBackbone(["from housekeeping"], model="housekeeping")
    client = serve(ModelTable({"trunk": trunk, "housekeeping": housekeeping}))
    assert [model.id for model in client.models.list()] == ["trunk", "housekeeping"]
    second = client.chat.completions.create(model="housekeeping", messages=USER)
    first = client.chat.completions.create(model="trunk", messages=USER)
    assert (first.choices[0].message.content, second.choices[0].message.content) == (
        "from trunk",
        "from housekeeping",
    )
    with pytest.raises(openai.NotFoundError, match="trunk, housekeeping"):
        client.chat.completions.create(model="other", messages=USER)


def test_a_busy_port_is_a_clear_error_at_once() -> None:
    with BackgroundServer(create_app(ScriptedBackbone([]))) as running:
        second = BackgroundServer(create_app(ScriptedBackbone([])), port=running.port)
        with pytest.raises(RuntimeError, match=rf"could not listen on 127\.0\.0\.1:{running.port}"):
            second.start(timeout=20)
