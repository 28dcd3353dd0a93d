"""Whether a litellm model can be called, asked without calling it: the provider key read as
``litellm.validate_environment`` reads it (without importing litellm), and the endpoint's
TCP answer."""

from __future__ import annotations

import os
import socket
import time

import pytest

from runtime.backbones.access import (
    AMBIENT_CREDENTIALS,
    endpoint_problem,
    key_rules,
    missing_key,
)
from runtime.offline import quiet_litellm
from tests.fakes.openai_server import unused_port


def _credential_names() -> set[str]:
    rules = key_rules()
    assert rules is not None, "litellm's validate_environment moved: update access.py"
    names = {name for rule in rules.values() for name in rule.missing}
    return names | {"ANTHROPIC_AUTH_TOKEN", "FIREWORKS_API_KEY", "DASHSCOPE_API_KEY"}


@pytest.fixture
def bare_environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in _credential_names():
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _litellm_says(model: str) -> str | None:
    """``validate_environment``'s missing credentials (names with KEY or TOKEN) not set."""
    missing = quiet_litellm().validate_environment(model)["missing_keys"]
    unset = [n for n in missing if ("KEY" in n or "TOKEN" in n) and n not in os.environ]
    return " or ".join(unset) or None


def test_missing_keys_agree_with_litellms_validate_environment(
    bare_environment: pytest.MonkeyPatch,
) -> None:
    rules = key_rules()
    assert rules is not None and len(rules) >= 30  # the chain was read, not a stub of it
    checked = 0
    for provider, rule in sorted(rules.items()):
        if provider in AMBIENT_CREDENTIALS:
            continue
        model = f"{provider}/some-model"
        assert missing_key(model, None) == _litellm_says(model), provider
        for name in rule.missing:  # each name the branch reports, set alone
            bare_environment.setenv(name, "x")
            assert missing_key(model, None) == _litellm_says(model), (provider, name)
            bare_environment.delenv(name)
        checked += 1
    assert checked >= 30


def test_names_the_key_and_leaves_served_and_ambient_models_alone(
    bare_environment: pytest.MonkeyPatch,
) -> None:
    assert missing_key("openai/gpt-4o-mini", None) == "OPENAI_API_KEY"
    assert missing_key("gpt-4o-mini", None) == "OPENAI_API_KEY"  # by litellm's model map
    assert missing_key("anthropic/claude-haiku-4-5", None) == "ANTHROPIC_API_KEY"
    assert missing_key("gemini/gemini-2.0-flash", None) == "GOOGLE_API_KEY or GEMINI_API_KEY"
    # a served OpenAI-compatible model gets a placeholder key; these need none, or read a file
    assert missing_key("openai/my-model", "http://127.0.0.1:8000/v1") is None
    assert missing_key("hosted_vllm/Qwen3-8B", "http://127.0.0.1:8000/v1") is None
    assert missing_key("ollama/llama3", None) is None  # OLLAMA_API_BASE has a default
    assert missing_key("bedrock/anthropic.claude-v2", None) is None
    assert missing_key("nosuch/x", None) is None  # unknown: check_model says so, not this
    bare_environment.setenv("ANTHROPIC_AUTH_TOKEN", "t")
    assert missing_key("anthropic/claude-haiku-4-5", None) is None


def test_an_endpoint_is_asked_for_a_tcp_answer_only() -> None:
    started = time.perf_counter()
    assert endpoint_problem(f"http://127.0.0.1:{unused_port()}/v1") == "connection refused"
    assert time.perf_counter() - started < 1.0
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        assert endpoint_problem(f"http://127.0.0.1:{port}/v1") is None
    assert endpoint_problem("127.0.0.1:8000/v1") == "not an http(s) URL"
    assert endpoint_problem("http://no-such-host.invalid/v1") == (
        "host no-such-host.invalid not found"
    )


def test_a_proxy_the_client_would_use_is_what_must_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    proxy = f"http://127.0.0.1:{unused_port()}"
    monkeypatch.setenv("HTTP_PROXY", proxy)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    problem = endpoint_problem("http://example.com:8000/v1")
    assert problem == f"connection refused at the proxy {proxy}"
