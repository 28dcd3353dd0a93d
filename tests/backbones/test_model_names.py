"""The fast model-name check answers as litellm's ``get_llm_provider`` does."""

from __future__ import annotations

import random
import time

import pytest

from runtime.backbones import check_model
from runtime.backbones.names import litellm_names, model_map, provider_known
from runtime.offline import quiet_litellm

_NEEDS_MORE = {"chatgpt", "github_copilot", "ragflow"}
"""Providers whose ``get_llm_provider`` wants more than a name: a device login over the network
(refused offline) or a model path of their own; the provider is still known."""


def _litellm_verdict(model: str) -> bool:
    try:
        quiet_litellm().get_llm_provider(model)
    except Exception:
        return False
    return True


def _corpus() -> list[str]:
    names = litellm_names()
    assert names is not None, "litellm's provider enum or model map moved: update names.py"
    providers, models = names
    rng = random.Random(7)
    return [
        *(f"{provider}/some-model" for provider in sorted(providers - _NEEDS_MORE)),
        *rng.sample(sorted(m for m in models if m.partition("/")[0] not in _NEEDS_MORE), 300),
        "gpt-4o-mini",
        "openai/gpt-4o-mini",
        "hosted_vllm/Qwen3-8B",
        "ollama/llama3",
        "nosuch/x",
        "scripted",
        "summarizer",
        "smollm2",
        "not-a-provider/gpt-4o",
        "gpt-99-imaginary",
    ]


def test_known_and_unknown_names_agree_with_litellm() -> None:
    answered = [(model, provider_known(model)) for model in _corpus()]
    disagreements = [
        (model, fast, verdict)
        for model, fast in answered
        if fast is not None and fast != (verdict := _litellm_verdict(model))
    ]
    assert disagreements == []
    assert sum(fast is False for _, fast in answered) >= 5  # unknown names answered fast


def test_an_unknown_name_is_refused_without_importing_litellm() -> None:
    litellm_names.cache_clear()
    model_map.cache_clear()
    started = time.perf_counter()
    with pytest.raises(ValueError, match="unknown model 'nosuch/x'"):
        check_model("nosuch/x")
    check_model("openai/gpt-4o-mini")
    assert time.perf_counter() - started < 1.5  # litellm's import alone takes ~6 s


def test_an_api_base_leaves_the_unknown_to_litellm() -> None:
    assert provider_known("nosuch-model", api_base="http://127.0.0.1:9/v1") is None
    assert provider_known("openai/x", api_base="http://127.0.0.1:9/v1") is True
