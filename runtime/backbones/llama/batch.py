"""Greedy replies to several prompts decoded together over one shared KV prefix (in the worker).

Above: ``LlamaRunner.generate_batch`` (``runtime/backbones/llama/child.py``), which hands over
the greedy, unconstrained requests of a ``BatchRequest``. Below: llama.cpp's low-level batch
API through llama-cpp-python's bindings (``llama_batch``, ``llama_decode``,
``llama_memory_seq_cp`` / ``_rm``) on the runner's own context, as llama.cpp's batched example
and its server's slots do.

Sequence 0 is the runner's live cache: it is extended, compactly and by the rule of
``prefill.py``, to the longest prefix every prompt of the batch shares (all but the last
``MIN_BATCH_TOKENS`` tokens of the shortest). Each prompt then gets a sequence of its own that
shares those cells (``seq_cp``: no copy in a unified cache) and evaluates its own tail; one
``llama_decode`` per step then advances every live sequence by one token. Afterwards every
sequence but 0 is removed, so between calls the cache holds sequence 0's prompt tokens alone,
compact, as a single call leaves it.

What a reply depends on: with one prompt the layout is the one a single call has always had
(sequence 0's cells, then the tail and the reply), so a reply alone is a function of its prompt.
Several prompts' tails and replies interleave in the shared cache, and llama.cpp's attention
sums over KV cells in SIMD groups, so a reply in a batch can differ in low bits from the same
prompt alone (and from the same prompt in another batch or order: measured in
``benchmarks/bench_backbones.py --sections batch``). It is a function of the batch, in order:
the harness makes the batch a fixed group of the plan (``runtime/backbones/lockstep.py``), so a
run's replies are still reproducible. llama.cpp's flash attention, which skips masked cells
one by one, is batch-invariant but 1.3-2x slower on this CPU class; non-unified KV (a stream
per sequence) is invariant too but reads every sequence's own copy of the prefix, and gained
10% over one call at a time at 3.8k tokens of context.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from runtime.backbones.llama.kv_snapshots import common_prefix_length
from runtime.backbones.llama.prefill import MIN_BATCH_TOKENS, batch_spans
from runtime.backbones.llama.wire import CHATML_END, Generated, GenerateRequest

if TYPE_CHECKING:
    from llama_cpp import Llama

MAX_SEQUENCES = 16
"""Sequences the worker's context is opened with: sequence 0 and up to 15 replies at once."""


@dataclass
class _Sequence:
    """One prompt of a batch while its reply is decoded."""

    seq_id: int
    request: GenerateRequest
    tokens: list[int]
    budget: int  # reply tokens it may still produce
    started: float
    generated: list[int] = field(default_factory=list)
    text: bytes = b""
    finish_reason: str | None = None
    prefill_tokens: int = 0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    finished_at: float = 0.0


def shared_prefix(prompts: list[list[int]]) -> int:
    """The tokens sequence 0 holds for a batch: the prefix every prompt shares, short of the
    last ``MIN_BATCH_TOKENS`` of each (which a prompt always evaluates itself)."""
    shared = min(len(tokens) for tokens in prompts) - MIN_BATCH_TOKENS
    first = prompts[0]
    for tokens in prompts[1:]:
        shared = min(shared, common_prefix_length(first, tokens))
    return max(0, shared)


def cells_needed(prompts: list[list[int]], budgets: list[int]) -> int:
    """KV cells a batch occupies at most: the shared prefix once, each tail and reply."""
    shared = shared_prefix(prompts)
    return shared + sum(len(t) - shared + b for t, b in zip(prompts, budgets, strict=True))


class BatchDecoder:
    """Decodes greedy replies for up to ``MAX_SEQUENCES - 1`` prompts at once on ``llama``."""

    def __init__(self, llama: Llama) -> None:
        from llama_cpp import llama_cpp as low_level

        self.llama = llama
        self._low = low_level
        self._ctx = llama.ctx
        self._memory = low_level.llama_get_memory(llama.ctx)
        self._vocab = low_level.llama_model_get_vocab(llama.model)
        self._n_vocab = low_level.llama_vocab_n_tokens(self._vocab)
        self._batch = low_level.llama_batch_init(llama.n_batch, 0, MAX_SEQUENCES)
        self._piece = (low_level.ctypes.c_char * 256)()

    def close(self) -> None:
        self._low.llama_batch_free(self._batch)

    def extend_live_cache(self, tokens: list[int], length: int) -> int:
        """Make sequence 0 hold ``tokens[:length]``, evaluating only what it does not hold
        already (in batches of two tokens or more). Returns the tokens evaluated."""
        llama = self.llama
        held = llama.input_ids[: llama.n_tokens].tolist()
        kept = min(common_prefix_length(held, tokens), length)
        if 0 < length - kept < MIN_BATCH_TOKENS:
            kept = max(0, length - MIN_BATCH_TOKENS)
        self._low.llama_memory_seq_rm(self._memory, 0, kept, -1)
        for start, end in batch_spans(kept, length, llama.n_batch):
            self._decode([(tokens[i], i, 0, False) for i in range(start, end)])
        llama.input_ids[kept:length] = tokens[kept:length]
        llama.n_tokens = length
        return length - kept

    def run(
        self, requests: list[GenerateRequest], prompts: list[list[int]], budgets: list[int]
    ) -> list[Generated]:
        """Greedy replies to ``requests`` (their tokens ``prompts``, at most ``budgets`` reply
        tokens each), decoded together; sequence 0 must hold their shared prefix."""
        started = time.perf_counter()
        shared = self.llama.n_tokens
        sequences = [
            _Sequence(
                seq_id=index + 1, request=request, tokens=tokens, budget=budget, started=started
            )
            for index, (request, tokens, budget) in enumerate(
                zip(requests, prompts, budgets, strict=True)
            )
        ]
        try:
            for sequence in sequences:
                self._prefill_tail(sequence, shared)
            self._decode_together(sequences)
        finally:
            for sequence in sequences:
                self._low.llama_memory_seq_rm(self._memory, sequence.seq_id, -1, -1)
        return [self._generated(sequence, shared) for sequence in sequences]

    def _prefill_tail(self, sequence: _Sequence, shared: int) -> None:
        clock = time.perf_counter()
        self._low.llama_memory_seq_cp(self._memory, 0, sequence.seq_id, 0, shared)
        tokens = sequence.tokens
        for start, end in batch_spans(shared, len(tokens), self.llama.n_batch):
            last = end == len(tokens)
            self._decode(
                [(tokens[i], i, sequence.seq_id, last and i == end - 1) for i in range(start, end)]
            )
        sequence.prefill_tokens = len(tokens) - shared
        sequence.prefill_s = time.perf_counter() - clock
        self._accept(sequence, self._argmax(-1))

    def _decode_together(self, sequences: list[_Sequence]) -> None:
        live = [s for s in sequences if s.finish_reason is None]
        while live:
            clock = time.perf_counter()
            self._decode(
                [
                    (s.generated[-1], len(s.tokens) + len(s.generated) - 1, s.seq_id, True)
                    for s in live
                ]
            )
            for index, sequence in enumerate(live):
                self._accept(sequence, self._argmax(index))
            elapsed = time.perf_counter() - clock
            for sequence in live:
                sequence.decode_s += elapsed
            live = [s for s in live if s.finish_reason is None]

    def _accept(self, sequence: _Sequence, token: int) -> None:
        """Take ``token`` as the sequence's next reply token, or end the reply."""
        if self._low.llama_vocab_is_eog(self._vocab, token):
            self._finish(sequence, "stop")
            return
        sequence.generated.append(token)
        sequence.text += self._token_bytes(token)
        stops = (CHATML_END, *sequence.request.stop)
        text = sequence.text.decode("utf-8", errors="ignore")
        cut = min((i for i in (text.find(stop) for stop in stops if stop) if i >= 0), default=-1)
        if cut >= 0:
            sequence.text = text[:cut].encode("utf-8")
            self._finish(sequence, "stop")
        elif len(sequence.generated) >= sequence.budget:
            self._finish(sequence, "length")

    @staticmethod
    def _finish(sequence: _Sequence, reason: str) -> None:
        sequence.finish_reason = reason
        sequence.finished_at = time.perf_counter()

    def _token_bytes(self, token: int) -> bytes:
        size = self._low.llama_token_to_piece(
            self._vocab, token, self._piece, len(self._piece), 0, False
        )
        return self._piece.raw[: max(0, size)]

    def _argmax(self, index: int) -> int:
        import numpy as np

        logits = self._low.llama_get_logits_ith(self._ctx, index)
        return int(np.ctypeslib.as_array(logits, shape=(self._n_vocab,)).argmax())

    def _decode(self, entries: list[tuple[int, int, int, bool]]) -> None:
        """One ``llama_decode`` of (token, position, sequence, wants logits) entries."""
        batch = self._batch
        batch.n_tokens = len(entries)
        for i, (token, position, seq_id, logits) in enumerate(entries):
            batch.token[i] = token
            batch.pos[i] = position
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq_id
            batch.logits[i] = logits
        status = self._low.llama_decode(self._ctx, batch)
        if status != 0:
            raise RuntimeError(f"llama_decode failed with status {status} on {len(entries)} tokens")

    @staticmethod
    def _generated(sequence: _Sequence, shared: int) -> Generated:
        return Generated(
            text=sequence.text.decode("utf-8", errors="ignore"),
            finish_reason=sequence.finish_reason or "length",
            prompt_tokens=len(sequence.tokens),
            output_tokens=len(sequence.generated),
            cached_tokens=len(sequence.tokens) - sequence.prefill_tokens,
            latency_s=sequence.finished_at - sequence.started,
            prefill_tokens=sequence.prefill_tokens,
            prefill_s=sequence.prefill_s,
            decode_tokens=len(sequence.generated),
            decode_s=sequence.decode_s,
        )
