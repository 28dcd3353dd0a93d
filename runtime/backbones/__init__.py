"""Backbones behind the ``Backbone`` seam, chosen by model string.

``make_backbone(None)`` or ``make_backbone("local/smollm2-135m")`` gives the embedded SmolLM2
model (offline, in a llama.cpp worker process); any other string is a litellm model
(``openai/...`` with ``api_base``, ``anthropic/...``, ``hosted_vllm/...``, ``ollama/...``);
``openai/...`` and ``hosted_vllm/...`` with an ``api_base`` are served OpenAI-compatible
endpoints, called without litellm's per-call processing (``runtime.backbones.served``).
Heavy libraries (litellm, llama_cpp) load only when a backbone is used.
"""

from __future__ import annotations

from typing import Any

from runtime.backbones.base import (
    LOCAL_PREFIX,
    RETRYABLE_KINDS,
    Backbone,
    Completion,
    ProviderError,
    ProviderErrorKind,
    ToolMode,
)
from runtime.backbones.litellm_backbone import DEFAULT_TIMEOUT_S, LiteLLMBackbone, RetryPolicy
from runtime.backbones.llama.backbone import SMOLLM2_MODEL, EmbeddedBackbone
from runtime.backbones.scripted import (
    FunctionBackbone,
    RecordedCall,
    ScriptedBackbone,
    ScriptedReply,
    ScriptExhausted,
)
from runtime.backbones.served import ServedBackbone, is_served

DEFAULT_MODEL = SMOLLM2_MODEL
LOCAL_MODELS: tuple[str, ...] = (SMOLLM2_MODEL,)

_LITELLM_OPTIONS = frozenset(
    {
        "api_base",
        "api_key",
        "tool_mode",
        "context_window",
        "max_output_tokens",
        "temperature",
        "timeout_s",
        "max_retries",
        "base_delay_s",
        "max_delay_s",
        "profile",
        "extra_params",
        "cache_markers",
    }
)
_LOCAL_OPTIONS = frozenset(
    {
        "tool_mode",
        "context_window",
        "max_output_tokens",
        "temperature",
        "profile",
        "model_path",
        "seed",
        "n_threads",
        "default_system",
    }
)

_IGNORED_LOCAL_OPTIONS = frozenset({"timeout_s", "max_retries"})
"""Accepted for every model so callers can pass one option set; the embedded model has no
network to time out or retry."""


def make_backbone(model: str | None = None, **options: Any) -> Backbone:
    """The backbone for ``model`` (default: the embedded SmolLM2). Options: api_base, api_key,
    tool_mode, context_window, max_output_tokens, temperature, timeout_s, max_retries
    (plus base_delay_s, max_delay_s, profile, extra_params, cache_markers for litellm;
    model_path, seed, n_threads, default_system for the embedded model). ``None`` values are
    ignored."""
    if model is not None and not model.strip():
        raise ValueError("model must be a non-empty model string or None (the default model)")
    chosen = model or DEFAULT_MODEL
    given = {key: value for key, value in options.items() if value is not None}
    if chosen.startswith(LOCAL_PREFIX):
        return _make_local(chosen, given)
    return _make_litellm(chosen, given)


def check_model(model: str, api_base: str | None = None) -> None:
    """Raise ``ValueError`` (one line) when no backbone can be made for ``model``: an unknown
    embedded model, or a string from which litellm cannot tell the provider — before any work,
    instead of a provider error on every call."""
    if model.startswith(LOCAL_PREFIX):
        _local_model_known(model)
        return
    from runtime.backbones.names import provider_known

    known = provider_known(model, api_base)  # litellm's own files, without importing it
    if known is None:
        known = _litellm_knows(model, api_base)
    if not known:
        raise ValueError(
            f"unknown model {model!r}: litellm cannot tell its provider; use provider/name "
            f"(e.g. openai/gpt-4o-mini, anthropic/claude-3-5-haiku-latest, hosted_vllm/NAME "
            f"with --api-base) or an embedded model ({', '.join(LOCAL_MODELS)})"
        )


def _litellm_knows(model: str, api_base: str | None) -> bool:
    """litellm's own answer (importing it: seconds)."""
    from runtime.offline import quiet_litellm

    try:
        quiet_litellm().get_llm_provider(model, api_base=api_base)
    except Exception:  # litellm raises a BadRequestError subclass for these
        return False
    return True


def _local_model_known(model: str) -> None:
    if model not in LOCAL_MODELS:
        raise ValueError(
            f"unknown local model {model!r}; embedded models: {', '.join(LOCAL_MODELS)} "
            f"(for a served model use a litellm string such as 'hosted_vllm/NAME' or "
            f"'ollama/NAME' with api_base)"
        )


def _check_options(model: str, given: dict[str, Any], allowed: frozenset[str]) -> None:
    unknown = sorted(set(given) - allowed)
    if unknown:
        raise ValueError(
            f"unknown backbone option(s) for {model!r}: {', '.join(unknown)} "
            f"(allowed: {', '.join(sorted(allowed))})"
        )


def _make_local(model: str, given: dict[str, Any]) -> EmbeddedBackbone:
    _local_model_known(model)
    _check_options(model, given, _LOCAL_OPTIONS | _IGNORED_LOCAL_OPTIONS)
    for key in _IGNORED_LOCAL_OPTIONS:
        given.pop(key, None)
    if given.pop("tool_mode", "text") != "text":
        raise ValueError(f"{model} supports only tool_mode='text' (it has no native tool calls)")
    return EmbeddedBackbone(model, **given)


def _make_litellm(model: str, given: dict[str, Any]) -> LiteLLMBackbone:
    """A litellm backbone; for a served OpenAI-compatible endpoint, the one that sends its
    requests itself (``runtime.backbones.served``)."""
    _check_options(model, given, _LITELLM_OPTIONS)
    retry_fields = ("max_retries", "base_delay_s", "max_delay_s")
    retry = RetryPolicy(**{key: given.pop(key) for key in retry_fields if key in given})
    tool_mode = given.pop("tool_mode", None)
    if tool_mode not in (None, "native", "text"):
        raise ValueError(f"tool_mode must be 'native' or 'text', got {tool_mode!r}")
    kind = ServedBackbone if is_served(model, given.get("api_base")) else LiteLLMBackbone
    return kind(model, tool_mode=tool_mode, retry=retry, **given)


__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_TIMEOUT_S",
    "RETRYABLE_KINDS",
    "Backbone",
    "Completion",
    "EmbeddedBackbone",
    "FunctionBackbone",
    "LiteLLMBackbone",
    "ProviderError",
    "ProviderErrorKind",
    "RecordedCall",
    "RetryPolicy",
    "ScriptExhausted",
    "ScriptedBackbone",
    "ScriptedReply",
    "ServedBackbone",
    "ToolMode",
    "check_model",
    "make_backbone",
]
