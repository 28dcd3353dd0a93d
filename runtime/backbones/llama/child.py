"""The embedded model's worker process: its main loop and what it does with one loaded model.

Above: the parent's ``LlamaWorker`` (``runtime/backbones/llama/worker.py``), which starts this
process with ``python -c`` calling ``serve_fd`` and speaks to it with the messages of
``runtime/backbones/llama/wire.py`` over a socket pair. Below: the model loaded by
``open_llama`` (``runtime/backbones/llama/load.py``) and the kept KV copies
(``runtime/backbones/llama/kv_snapshots.py``), reached through ``LlamaKV``.

The runner keeps its KV cache between calls, so a prompt sharing a prefix with the previous one
is not prefilled again (``cached_tokens`` reports the reused prefix), and keeps copies of caches
that a call would discard, so a prompt sharing a long prefix with an earlier one, not only the
last, starts from that copy. It evaluates each prompt itself, as ``prefill`` says, and drops a
reply's cache entries once the reply is returned, so the cache holds only prompt tokens and a
reply is the one a cold prefill of its prompt gives, whatever calls came before.
"""

from __future__ import annotations

import ctypes
import signal
import time
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from runtime.backbones.base import ProviderErrorKind
from runtime.backbones.llama.grammar import GrammarError, gbnf
from runtime.backbones.llama.kv_snapshots import KVSnapshot, KVSnapshots, common_prefix_length
from runtime.backbones.llama.load import open_llama
from runtime.backbones.llama.prefill import batch_spans, reusable_prefix
from runtime.backbones.llama.wire import (
    CHATML_END,
    BuildInfo,
    Failure,
    Generated,
    GenerateRequest,
    ModelSpec,
    Request,
    TokenizeRequest,
)

if TYPE_CHECKING:
    from llama_cpp import Llama, LlamaGrammar


class LlamaKV:
    """The live KV cache of sequence 0, for ``KVSnapshots``."""

    def __init__(self, llama: Llama) -> None:
        self.llama = llama

    def held_tokens(self) -> list[int]:
        return list(self.llama.input_ids[: self.llama.n_tokens].tolist())

    def save(self) -> KVSnapshot | None:
        from llama_cpp import llama_cpp as low_level

        ctx = self.llama.ctx
        size = low_level.llama_state_seq_get_size(ctx, 0)
        buffer = (ctypes.c_uint8 * size)()
        written = low_level.llama_state_seq_get_data(ctx, buffer, size, 0)
        if written == 0:
            return None
        return KVSnapshot(tuple(self.held_tokens()), ctypes.string_at(buffer, written))

    def restore(self, snapshot: KVSnapshot) -> bool:
        from llama_cpp import llama_cpp as low_level

        count = len(snapshot.tokens)
        buffer = (ctypes.c_uint8 * len(snapshot.state)).from_buffer_copy(snapshot.state)
        if low_level.llama_state_seq_set_data(self.llama.ctx, buffer, len(buffer), 0) == 0:
            self.llama.reset()  # the sequence may be half written: prefill from scratch
            return False
        self.llama.input_ids[:count] = snapshot.tokens
        self.llama.n_tokens = count
        self.llama._requires_eval = True  # the logits are not this state's: decode once more
        return True


class LlamaRunner:
    """The child's side: tokenize and generate on one loaded model, keeping copies of its KV
    cache that later prompts can start from (``kv_snapshots``)."""

    def __init__(self, llama: Llama, n_ctx: int, kv_snapshot_bytes: int = 0) -> None:
        self.llama = llama
        self.n_ctx = n_ctx
        self.snapshots = KVSnapshots(kv_snapshot_bytes)

    def handle(self, request: Request) -> int | Generated | Failure:
        if isinstance(request, TokenizeRequest):
            return len(self._tokens(request.prompt))
        return self.generate(request)

    def _tokens(self, prompt: str) -> list[int]:
        return list(self.llama.tokenize(prompt.encode("utf-8"), add_bos=True, special=True))

    def generate(self, request: GenerateRequest) -> Generated | Failure:
        from llama_cpp import llama_cpp as low_level

        started = time.perf_counter()
        tokens = self._tokens(request.prompt)
        room = self.n_ctx - len(tokens)
        if room < 1:
            return Failure(
                "context_length",
                f"prompt of {len(tokens)} tokens does not fit the embedded model's "
                f"{self.n_ctx}-token window",
            )
        try:
            grammar = _grammar(request)
        except GrammarError as exc:
            message = f"no llama.cpp grammar can enforce this schema ({exc})"
            return Failure("bad_request", message, param=exc.source)
        self.snapshots.prepare(LlamaKV(self.llama), tokens)
        low_level.llama_perf_context_reset(self.llama.ctx)
        try:
            cached = self._prefill(tokens)
            # the whole prompt is in the cache with fresh logits: llama-cpp-python samples the
            # first reply token from them without evaluating anything again
            result: Any = self.llama.create_completion(
                tokens,
                max_tokens=min(request.max_output_tokens, room),
                temperature=request.temperature,
                top_p=request.top_p,
                seed=request.seed,
                stop=[CHATML_END, *request.stop],
                grammar=grammar,
            )
        except (RuntimeError, ValueError) as exc:  # llama.cpp decode/eval failures
            kind: ProviderErrorKind = (
                "context_length" if "context window" in str(exc) else "unknown"
            )
            return Failure(kind, f"llama.cpp: {exc}")
        finally:
            self._keep_prompt_only(len(tokens))
        perf = low_level.llama_perf_context(self.llama.ctx)
        choice = result["choices"][0]
        return Generated(
            text=choice["text"],
            finish_reason=choice.get("finish_reason") or "stop",
            prompt_tokens=len(tokens),
            output_tokens=int(result["usage"]["completion_tokens"]),
            cached_tokens=cached,
            latency_s=time.perf_counter() - started,
            prefill_tokens=int(perf.n_p_eval),
            prefill_s=float(perf.t_p_eval_ms) / 1000,
            decode_tokens=int(perf.n_eval),
            decode_s=float(perf.t_eval_ms) / 1000,
        )

    def _prefill(self, tokens: list[int]) -> int:
        """Evaluate ``tokens`` into the cache as a cold prefill would (``prefill``): the held
        prefix it may reuse, the rest in batches of two tokens or more. Returns the tokens
        taken from the cache."""
        llama = self.llama
        held = llama.input_ids[: llama.n_tokens].tolist()
        reused = reusable_prefix(common_prefix_length(held, tokens), len(tokens))
        llama.n_tokens = reused  # eval() drops the cache's entries from here on
        for start, end in batch_spans(reused, len(tokens), llama.n_batch):
            llama.eval(tokens[start:end])
        return reused

    def _keep_prompt_only(self, prompt_length: int) -> None:
        """Drop the reply's cache entries (decoded one token at a time, they are not what a
        prompt holding the reply computes) and any a failed call left beyond the prompt."""
        llama = self.llama
        if llama.n_tokens > prompt_length:
            llama.n_tokens = prompt_length
            llama._ctx.kv_cache_seq_rm(-1, prompt_length, -1)
        llama._requires_eval = True  # the logits are the last reply token's, not the prompt's


def _grammar(request: GenerateRequest) -> LlamaGrammar | None:
    if not request.grammar:
        return None
    from llama_cpp import LlamaGrammar

    return LlamaGrammar.from_string(gbnf(request.grammar), verbose=False)


def serve_fd(fd: int) -> None:
    serve(Connection(fd))


def serve(conn: Connection) -> None:
    """The worker's main loop (runs in the child): the first message is the ``ModelSpec``;
    it ends when the parent sends ``None`` or goes away."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    spec: ModelSpec | None = _receive(conn)
    if spec is None:
        return
    import llama_cpp

    system_info = llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip()
    conn.send(BuildInfo(llama_cpp_version=llama_cpp.__version__, system_info=system_info))
    try:
        llama, report = open_llama(spec)
    except (RuntimeError, ValueError, OSError) as exc:
        conn.send(Failure("unknown", f"llama.cpp could not load {spec.path}: {exc}"))
        return
    runner = LlamaRunner(llama, spec.n_ctx, spec.kv_snapshot_bytes)
    try:
        conn.send(report)
        while (request := _receive(conn)) is not None:
            conn.send(runner.handle(request))
    except (BrokenPipeError, ConnectionResetError):
        pass  # the parent is gone (killed, say): nobody is left to answer
    finally:
        llama.close()


def _receive(conn: Connection) -> Any:
    try:
        return conn.recv()
    except EOFError:
        return None
