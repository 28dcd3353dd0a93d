"""make_backbone: model string → backbone, with clear errors for bad names and options."""

from __future__ import annotations

import pytest

from runtime.backbones import (
    DEFAULT_MODEL,
    EmbeddedBackbone,
    LiteLLMBackbone,
    make_backbone,
)


def test_no_model_means_the_embedded_default() -> None:
    backbone = make_backbone()
    assert isinstance(backbone, EmbeddedBackbone)
    assert backbone.model == DEFAULT_MODEL == "local/smollm2-135m"
    assert backbone.tool_mode == "text" and backbone.context_window == 8192
    assert backbone.profile.name == "smollm"


def test_local_options_are_applied() -> None:
    backbone = make_backbone(
        "local/smollm2-135m", max_output_tokens=32, temperature=None, timeout_s=5, max_retries=1
    )
    assert isinstance(backbone, EmbeddedBackbone) and backbone.max_output_tokens == 32
    with pytest.raises(ValueError, match=r"unknown backbone option\(s\).*: api_base"):
        make_backbone("local/smollm2-135m", api_base="http://127.0.0.1:1/v1")


def test_unknown_local_model_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"unknown local model 'local/llama-70b'.*smollm2-135m"):
        make_backbone("local/llama-70b")


def test_local_model_refuses_native_tool_mode() -> None:
    with pytest.raises(ValueError, match="only tool_mode='text'"):
        make_backbone(None, tool_mode="native")


def test_blank_model_is_refused() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        make_backbone("  ")


def test_other_strings_go_to_litellm_with_options() -> None:
    backbone = make_backbone(
        "hosted_vllm/Qwen2.5-7B-Instruct",
        api_base="http://127.0.0.1:9/v1",
        context_window=32_000,
        max_retries=5,
        timeout_s=7.0,
    )
    assert isinstance(backbone, LiteLLMBackbone)
    assert backbone.tool_mode == "text" and backbone.profile.name == "qwen"
    assert backbone.context_window == 32_000
    assert backbone.retry.max_retries == 5 and backbone.timeout_s == 7.0
    assert backbone.api_base == "http://127.0.0.1:9/v1"


def test_native_profiles_default_to_native_and_can_be_overridden() -> None:
    assert make_backbone("anthropic/claude-3-5-haiku-latest").tool_mode == "native"
    assert make_backbone("openai/gpt-4o", tool_mode="text").tool_mode == "text"


def test_unknown_options_and_tool_modes_are_refused() -> None:
    with pytest.raises(ValueError, match=r"unknown backbone option\(s\).*: colour"):
        make_backbone("openai/gpt-4o", colour="blue")
    with pytest.raises(ValueError, match="tool_mode must be"):
        make_backbone("openai/gpt-4o", tool_mode="telepathy")
