"""Provider prompt caching through real litellm against a local provider that caches the way
Anthropic and OpenAI document it (``tests.fakes.caching_provider``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from runtime.backbones import LiteLLMBackbone
from runtime.backbones.prompt_cache import needs_cache_markers, stable_prefix_end
from runtime.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from tests.fakes.caching_provider import CachingProvider

RECALL = ToolSpec(
    name="artifact_recall",
    description="Search the workspace.",
    parameters={"type": "object", "properties": {"query": {"type": "string"}}},
)
PARAGRAPH = "The loader streams shards lazily and keeps the shuffle buffer bounded. " * 12


def checkpoint_history(turns: int = 12) -> list[Message]:
    """System prompt and a restored conversation of a few thousand tokens."""
    history: list[Message] = [SystemMessage(content="You are a personal assistant.")]
    for number in range(turns):
        history.append(UserMessage.text(f"Task {number}: {PARAGRAPH}"))
        history.append(AssistantMessage(content=f"Done with task {number}. {PARAGRAPH}"))
    return history


def probe(question: str) -> list[Message]:
    return [*checkpoint_history(), UserMessage.text(question)]


@pytest.fixture
def provider() -> Iterator[CachingProvider]:
    with CachingProvider() as running:
        yield running


def anthropic(provider: CachingProvider, **options: object) -> LiteLLMBackbone:
    return LiteLLMBackbone(
        "anthropic/claude-haiku-4-5",
        api_base=provider.anthropic_base,
        api_key="test-key",
        **options,  # type: ignore[arg-type]
    )


async def test_claude_marks_the_checkpoint_end_so_every_probe_reads_one_prefix(
    provider: CachingProvider,
) -> None:
    backbone = anthropic(provider)
    assert backbone.cache_markers
    usages = [(await backbone.complete(probe(q), [])).usage for q in ("Q one?", "Q two?", "Q six?")]

    history_blocks = len(checkpoint_history())  # system block + one block per message
    for request in provider.requests:
        assert request.breakpoints == [0, history_blocks - 1]  # system, last restored message
        last, question = request.body["messages"][-2:]
        assert last["content"][-1]["cache_control"] == {"type": "ephemeral"}
        assert "cache_control" not in question["content"][-1]
    first, *later = usages
    prefix = first.cache_write_tokens
    assert prefix > 2000 and first.cached_tokens == 0
    for usage in later:
        assert (usage.cached_tokens, usage.cache_write_tokens) == (prefix, 0)
        assert usage.input_tokens == first.input_tokens  # cache reads count as input
        assert usage.cached_tokens / usage.input_tokens > 0.95


async def test_the_marker_stays_at_the_checkpoint_end_in_a_tool_round(
    provider: CachingProvider,
) -> None:
    call = ToolCall(id="call_1", name="artifact_recall", arguments={"query": "shards"})
    round_two = [
        *probe("Which shard?"),
        AssistantMessage(content="", tool_calls=(call,)),
        ToolResultMessage(tool_call_id="call_1", name="artifact_recall", content="hit: s-17"),
    ]
    backbone = anthropic(provider)
    await backbone.complete(probe("Which shard?"), [RECALL])
    usage = (await backbone.complete(round_two, [RECALL])).usage
    request = provider.requests[-1]
    assert len(request.body["tools"]) == 1  # tools come first in the cached prefix
    assert request.breakpoints == [1, len(checkpoint_history())]
    assert usage.cached_tokens == provider.requests[0].usage["cache_creation_input_tokens"]


async def test_markers_can_be_switched_off(provider: CachingProvider) -> None:
    backbone = anthropic(provider, cache_markers=False)
    for question in ("Q one?", "Q two?"):
        usage = (await backbone.complete(probe(question), [])).usage
        assert (usage.cached_tokens, usage.cache_write_tokens) == (0, 0)
    assert all(request.breakpoints == [] for request in provider.requests)


async def test_automatic_caching_sees_byte_identical_prefixes(provider: CachingProvider) -> None:
    backbone = LiteLLMBackbone(
        "openai/fake-model", api_base=provider.openai_base, api_key="k", tool_mode="text"
    )
    assert not backbone.cache_markers
    first = await backbone.complete(probe("What is the shard size?"), [])
    second = await backbone.complete(probe("Which buffer is bounded?"), [])
    one, two = (request.raw for request in provider.requests)
    shared = next(i for i, (a, b) in enumerate(zip(one, two, strict=False)) if a != b)
    question_at = one.index(b"What is the shard size?")
    assert one[:question_at] == two[:question_at]  # every byte before the question
    assert shared >= question_at
    assert b"cache_control" not in one  # OpenAI would reject the field
    assert first.usage.cached_tokens == 0
    assert second.usage.cached_tokens >= second.usage.input_tokens - 128 - 20


def test_which_models_need_explicit_markers() -> None:
    explicit = [
        "anthropic/claude-haiku-4-5",
        "claude-haiku-4-5",
        "bedrock/anthropic.claude-3-5-haiku-20241022-v1:0",
        "vertex_ai/claude-3-5-haiku",
    ]
    automatic = ["gpt-5", "openai/gpt-4o", "deepseek/deepseek-chat", "gemini/gemini-2.5-flash"]
    assert all(needs_cache_markers(model) for model in explicit)
    assert not any(needs_cache_markers(model) for model in automatic)
    assert not needs_cache_markers("hosted_vllm/qwen3-vl-8b", "http://127.0.0.1:9/v1")


def test_stable_prefix_ends_before_the_current_user_turn() -> None:
    history = checkpoint_history(2)
    assert stable_prefix_end([*history, UserMessage.text("q")]) == len(history) - 1
    result = ToolResultMessage(tool_call_id="c", name="t", content="r")
    assert stable_prefix_end([*history, UserMessage.text("q"), result]) == len(history) - 1
    assert stable_prefix_end([UserMessage.text("first")]) is None
