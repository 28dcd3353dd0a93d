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
from dataclasses import replace
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from runtime.backbones.base import ProviderErrorKind
from runtime.backbones.llama.batch import (
    DRAFT_TOKENS,
    MAX_SEQUENCES,
    BatchDecoder,
    cells_needed,
    shared_prefix,
)
from runtime.backbones.llama.grammar import GrammarError, gbnf
from runtime.backbones.llama.kv_snapshots import KVSnapshot, KVSnapshots, common_prefix_length
from runtime.backbones.llama.load import open_llama
from runtime.backbones.llama.prefill import batch_spans, reusable_prefix
from runtime.backbones.llama.wire import (
    CHATML_END,
    BatchRequest,
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

    def __init__(
        self,
        llama: Llama,
        n_ctx: int,
        kv_snapshot_bytes: int = 0,
        draft_tokens: int = DRAFT_TOKENS,
    ) -> None:
        self.llama = llama
        self.n_ctx = n_ctx
        self.draft_tokens = draft_tokens
        self.snapshots = KVSnapshots(kv_snapshot_bytes)
        self._batch_decoder: BatchDecoder | None = None

    def handle(
        self, request: Request
    ) -> int | Generated | Failure | tuple[Generated | Failure, ...]:
        if isinstance(request, TokenizeRequest):
            return len(self._tokens(request.prompt))
        if isinstance(request, BatchRequest):
            return self.generate_batch(request.requests)
        if is_batchable(request):
            return self.generate_batch((request,))[0]
        return self.generate(request)

    def generate_batch(
        self, requests: tuple[GenerateRequest, ...]
    ) -> tuple[Generated | Failure, ...]:
        """Replies to ``requests`` in order: the greedy unconstrained ones decoded together
        (``batch``: in order, as many at once as the cache holds), the others one at a time."""
        replies: dict[int, Generated | Failure] = {}
        together: list[tuple[int, list[int], int]] = []  # (index, tokens, reply budget)
        for index, request in enumerate(requests):
            if not is_batchable(request):
                continue
            tokens = self._tokens(request.prompt)
            room = self.n_ctx - len(tokens)
            if room < 1:
                replies[index] = _too_long(len(tokens), self.n_ctx)
            else:
                together.append((index, tokens, min(request.max_output_tokens, room)))
        for group in self._fitting_groups(together):
            indices = [index for index, _, _ in group]
            generated: list[Generated | Failure]
            try:
                generated = self._decode_group(
                    [requests[i] for i in indices],
                    [tokens for _, tokens, _ in group],
                    [budget for _, _, budget in group],
                )
            except RuntimeError as exc:  # llama.cpp decode failures
                self.llama.reset()  # sequence 0 may be half written: prefill from scratch
                generated = [Failure("unknown", f"llama.cpp: {exc}")] * len(group)
            replies.update(zip(indices, generated, strict=True))
        for index, request in enumerate(requests):
            if index not in replies:
                replies[index] = self.generate(request)
        return tuple(replies[index] for index in range(len(requests)))

    def _fitting_groups(
        self, together: list[tuple[int, list[int], int]]
    ) -> list[list[tuple[int, list[int], int]]]:
        """``together`` cut, in order, into groups whose cells fit the cache and whose replies
        fit one sequence each."""
        capacity = self.llama.n_ctx()
        groups: list[list[tuple[int, list[int], int]]] = []
        for item in together:
            group = groups[-1] + [item] if groups else [item]
            fits = cells_needed([t for _, t, _ in group], [b for _, _, b in group]) <= capacity
            if groups and fits and len(group) < MAX_SEQUENCES:
                groups[-1] = group
            else:
                groups.append([item])
        return groups

    def _decode_group(
        self, requests: list[GenerateRequest], prompts: list[list[int]], budgets: list[int]
    ) -> list[Generated | Failure]:
        decoder = self._decoder()
        self.snapshots.prepare(LlamaKV(self.llama), prompts[0])
        self.llama._requires_eval = True  # sequence 0's logits are not kept across this call
        clock = time.perf_counter()
        evaluated = decoder.extend_live_cache(prompts[0], shared_prefix(prompts))
        shared_s = time.perf_counter() - clock
        generated: list[Generated | Failure] = list(decoder.run(requests, prompts, budgets))
        first = generated[0]
        assert isinstance(first, Generated)  # the shared prefix was evaluated for the first prompt
        generated[0] = replace(
            first,
            cached_tokens=first.cached_tokens - evaluated,
            prefill_tokens=first.prefill_tokens + evaluated,
            prefill_s=first.prefill_s + shared_s,
            latency_s=first.latency_s + shared_s,
        )
        return generated

    def close(self) -> None:
        """Free the batch decoder's buffers (the model is the caller's to close)."""
        if self._batch_decoder is not None:
            self._batch_decoder.close()
            self._batch_decoder = None

    def _decoder(self) -> BatchDecoder:
        if self._batch_decoder is None:
            self._batch_decoder = BatchDecoder(self.llama, self.draft_tokens)
        return self._batch_decoder

    def _tokens(self, prompt: str) -> list[int]:
        return list(self.llama.tokenize(prompt.encode("utf-8"), add_bos=True, special=True))

    def generate(self, request: GenerateRequest) -> Generated | Failure:
        from llama_cpp import llama_cpp as low_level

        started = time.perf_counter()
        tokens = self._tokens(request.prompt)
        room = self.n_ctx - len(tokens)
        if room < 1:
            return _too_long(len(tokens), self.n_ctx)
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


def is_batchable(request: GenerateRequest) -> bool:
    """Greedy and unconstrained: what ``batch`` decodes (others go through llama-cpp-python's
    sampler and grammar, one at a time)."""
    return request.temperature == 0 and not request.grammar


def _too_long(length: int, n_ctx: int) -> Failure:
    return Failure(
        "context_length",
        f"prompt of {length} tokens does not fit the embedded model's {n_ctx}-token window",
    )


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
    draft_tokens = DRAFT_TOKENS if spec.draft_tokens is None else spec.draft_tokens
    runner = LlamaRunner(llama, spec.n_ctx, spec.kv_snapshot_bytes, draft_tokens)
    try:
        conn.send(report)
        while (request := _receive(conn)) is not None:
            conn.send(runner.handle(request))
    except (BrokenPipeError, ConnectionResetError):
        pass  # the parent is gone (killed, say): nobody is left to answer
    finally:
        runner.close()
        llama.close()


def _receive(conn: Connection) -> Any:
    try:
        return conn.recv()
    except EOFError:
        return None
