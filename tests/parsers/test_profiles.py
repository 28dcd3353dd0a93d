"""The model-string → profile table, pinned so any change to resolution is visible."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from mirage.wiring import default_tools
from runtime.messages import AssistantMessage, ToolCall, UserMessage
from runtime.parsers import parse_reply
from runtime.profiles import resolve_profile

DEFAULT_TOOLS = default_tools()

# model string -> (profile name, parser, tool prompt, tool result role, vision)
TABLE: dict[str, tuple[str, str, str, str, bool]] = {
    "local/smollm2-135m": ("smollm", "hermes", "hermes", "user", False),
    "HuggingFaceTB/SmolLM2-1.7B-Instruct": ("smollm", "hermes", "hermes", "user", False),
    "hosted_vllm/Qwen/Qwen3-VL-8B-Instruct": ("qwen-vl", "hermes", "hermes", "tool", True),
    "openai/Qwen2.5-VL-7B-Instruct": ("qwen-vl", "hermes", "hermes", "tool", True),
    "ollama/qwen3:4b": ("qwen", "hermes", "hermes", "tool", False),
    "Qwen/Qwen3-Coder-30B-A3B-Instruct": ("qwen3-coder", "qwen3_xml", "qwen3_xml", "tool", False),
    "NousResearch/Hermes-3-Llama-3.1-8B": ("hermes", "hermes", "hermes", "tool", False),
    "OpenGVLab/InternVL3_5-20B": ("internvl", "hermes", "hermes", "tool", True),
    "internlm/internlm2_5-7b-chat": ("internlm", "internlm", "internlm", "tool", False),
    "google/gemma-3-27b-it": ("gemma-3", "pythonic", "pythonic", "user", True),
    "ollama/gemma3:27b": ("gemma-3", "pythonic", "pythonic", "user", True),
    "google/gemma-3-1b-it": ("gemma-3-text", "pythonic", "pythonic", "user", False),
    "google/gemma-2-9b-it": ("gemma", "pythonic", "pythonic", "user", False),
    "meta-llama/Llama-3.1-8B-Instruct": ("llama-3", "json", "json_schema", "tool", False),
    "meta-llama/Llama-3.2-3B-Instruct": ("llama-3.2", "pythonic", "pythonic", "tool", False),
    "meta-llama/Llama-3.2-11B-Vision-Instruct": (
        "llama-3.2-vision",
        "json",
        "json_schema",
        "tool",
        True,
    ),
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": ("llama-4", "pythonic", "pythonic", "tool", True),
    "mistralai/Mistral-Small-3.2-24B-Instruct-2506": (
        "mistral",
        "mistral",
        "mistral",
        "tool",
        False,
    ),
    "mistralai/Pixtral-12B-2409": ("pixtral", "mistral", "mistral", "tool", True),
    "openai/gpt-4o-mini": ("openai", "native", "none", "tool", True),
    "gpt-3.5-turbo": ("openai", "native", "none", "tool", False),
    "openai/o3-mini": ("openai", "native", "none", "tool", True),
    "anthropic/claude-sonnet-4-5": ("anthropic", "native", "none", "tool", True),
    "gemini/gemini-2.5-flash": ("gemini", "native", "none", "tool", True),
    "some-unknown-model": ("default", "hermes", "hermes", "tool", False),
}


@pytest.mark.parametrize("model", list(TABLE))
def test_profile_table(model: str) -> None:
    profile = resolve_profile(model)
    actual = (
        profile.name,
        profile.parser,
        profile.tool_prompt,
        profile.tool_result_role,
        profile.vision,
    )
    assert actual == TABLE[model]


def test_overrides_apply_and_are_validated() -> None:
    profile = resolve_profile("google/gemma-3-27b-it", {"parser": "json", "vision": False})
    assert (profile.parser, profile.tool_prompt, profile.vision) == ("json", "pythonic", False)
    with pytest.raises(ValidationError, match="unknown parser family 'yaml'"):
        resolve_profile("qwen3", {"parser": "yaml"})
    with pytest.raises(ValidationError, match="tool_promt"):
        resolve_profile("qwen3", {"tool_promt": "hermes"})


def test_smollm_gets_its_few_shot_call_as_chat_turns_when_its_tool_is_offered() -> None:
    profile = resolve_profile("local/smollm2-135m")
    user, assistant = profile.example_turns(DEFAULT_TOOLS)
    assert isinstance(user, UserMessage) and isinstance(assistant, AssistantMessage)
    assert parse_reply(assistant.raw or "", DEFAULT_TOOLS, family="hermes").overall == "ok"
    assert "Example:" not in profile.render_tools(DEFAULT_TOOLS)
    assert profile.example_turns(DEFAULT_TOOLS[1:]) == []
    assert profile.example_turns([]) == []
    assert resolve_profile("qwen3").example_turns(DEFAULT_TOOLS) == []


def test_few_shot_in_the_system_prompt_on_request() -> None:
    profile = resolve_profile("local/smollm2-135m", {"few_shot": "system"})
    prompt = profile.render_tools(DEFAULT_TOOLS)
    assert "<tools>" in prompt and "Example:\nUser: " in prompt
    example = prompt.split("Assistant: ", 1)[1]
    assert parse_reply(example, DEFAULT_TOOLS, family="hermes").overall == "ok"
    assert profile.example_turns(DEFAULT_TOOLS) == []
    assert profile.render_tools([]) == ""


@pytest.mark.parametrize(
    "model", ["qwen3", "qwen3-coder", "gemma-3-27b", "llama-3.1-8b", "mistral-small", "internlm2"]
)
def test_each_text_profile_renders_calls_its_own_parser_accepts(model: str) -> None:
    profile = resolve_profile(model)
    call = ToolCall(id="c", name="artifact_recall", arguments={"query": 'Q3 "net" revenue', "k": 2})
    rendered = profile.render_call(call)
    result = parse_reply(rendered, DEFAULT_TOOLS, family=profile.parser)
    assert result.overall == "ok", (rendered, result.model_dump())
    assert result.calls[0].arguments == call.arguments
    assert "artifact_recall" in profile.render_tools(DEFAULT_TOOLS)


def test_pythonic_prompt_lists_signatures() -> None:
    prompt = resolve_profile("gemma-3-27b").render_tools(DEFAULT_TOOLS)
    assert "def artifact_recall(query: str, k: int = 5, artifact_id: str | None = None):" in prompt
    assert "def artifact_get(ref: str, start_line: int | None = None" in prompt


def test_native_profiles_render_no_text_prompt() -> None:
    assert resolve_profile("openai/gpt-4o").render_tools(DEFAULT_TOOLS) == ""
