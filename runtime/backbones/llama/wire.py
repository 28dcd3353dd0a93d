"""The messages between the embedded model's parent process and its llama.cpp worker.

Above: ``LlamaWorker`` (``runtime/backbones/llama/worker.py``, the parent side), which sends a
``ModelSpec`` first and then ``Request`` values. Below: the worker's main loop
(``runtime/backbones/llama/child.py``), which answers ``BuildInfo`` once llama.cpp is imported,
a ``LoadReport`` (or a ``Failure``) once the model is loaded, and one reply per request: a token
count, a ``Generated`` or a ``Failure`` (a tuple of them for a ``BatchRequest``). Both sides
import these classes from this module, so they unpickle under the same names in both processes.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime.backbones.base import ProviderErrorKind
from runtime.profiles.structured import JsonSegment

CHATML_END = "<|im_end|>"
"""The end of a ChatML turn: rendered after every message, and where a generation stops."""


@dataclass(frozen=True)
class ModelSpec:
    """What a worker loads. ``extra_buffer_types`` is llama.cpp's ``use_extra_bufts``: off
    everywhere except in the benchmark that measures what turning it off costs.
    ``kv_snapshot_bytes`` bounds the kept copies of the KV cache (``kv_snapshots``; 0: none;
    ``EmbeddedBackbone`` sets it from ``MIRAGE_KV_SNAPSHOT_MB``). ``draft_tokens`` bounds the
    prompt-lookup draft a greedy reply checks per step (``batch``; None: its default, 0: none;
    ``EmbeddedBackbone`` sets it from ``MIRAGE_LLAMA_DRAFT_TOKENS``)."""

    path: str
    n_ctx: int
    n_threads: int
    extra_buffer_types: bool = False
    kv_snapshot_bytes: int = 0
    draft_tokens: int | None = None


@dataclass(frozen=True)
class TokenizeRequest:
    prompt: str


LLAMA_CPP_TOP_P = 0.95
"""llama-cpp-python's own default for ``top_p`` (it matters only when temperature is above 0)."""


@dataclass(frozen=True)
class GenerateRequest:
    """One generation. ``stop`` adds stop strings to the end of a ChatML turn; ``grammar``
    constrains the reply to one of its segments (empty: free text)."""

    prompt: str
    max_output_tokens: int
    temperature: float
    seed: int
    top_p: float = LLAMA_CPP_TOP_P
    stop: tuple[str, ...] = ()
    grammar: tuple[JsonSegment, ...] = ()


@dataclass(frozen=True)
class BatchRequest:
    """Generations decoded together (``batch``); the reply is a tuple of ``Generated`` or
    ``Failure``, one per request, in order. Greedy unconstrained requests share the batch;
    others are served one at a time after it."""

    requests: tuple[GenerateRequest, ...]


@dataclass(frozen=True)
class Generated:
    text: str
    finish_reason: str
    prompt_tokens: int
    output_tokens: int
    cached_tokens: int
    latency_s: float
    prefill_tokens: int  # llama.cpp's own counters for this call
    prefill_s: float
    decode_tokens: int
    decode_s: float
    drafted_tokens: int = 0  # prompt-lookup draft tokens checked (``batch``), and those kept
    accepted_tokens: int = 0


@dataclass(frozen=True)
class Failure:
    """A call that failed; ``param`` names the request field at fault (a grammar's schema)."""

    kind: ProviderErrorKind
    message: str
    param: str | None = None


@dataclass(frozen=True)
class BuildInfo:
    """Sent as soon as llama.cpp is imported, before the model loads."""

    llama_cpp_version: str
    system_info: str


@dataclass(frozen=True)
class LoadReport:
    seconds: float
    use_extra_bufts: bool
    buffer_lines: tuple[str, ...]  # llama.cpp's "... buffer size = N MiB" log lines


@dataclass(frozen=True)
class WorkerInfo:
    pid: int
    build: BuildInfo
    load: LoadReport


Request = TokenizeRequest | GenerateRequest | BatchRequest
