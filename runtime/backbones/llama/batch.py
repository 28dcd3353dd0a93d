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
``llama_decode`` per step then advances every live sequence. Afterwards every sequence but 0
is removed, so between calls the cache holds sequence 0's prompt tokens alone, compact, as a
single call leaves it.

Drafts (prompt lookup, as llama.cpp's lookup decoding and its server's n-gram drafts): while a
step stays small (``STEP_TOKENS``: a batch of one or a few replies), a reply's last token goes
in with up to ``draft_limit`` tokens that followed the latest earlier occurrence of its last
three (or two) tokens in its prompt or reply (``NgramIndex``), each with logits. The reply
keeps its greedy token at each position while it matches the draft, plus the first that does
not, and the cells of the draft it did not keep are removed: the reply is the greedy one,
several tokens per step where the model copies its context (SmolLM2 repeats earlier turns
verbatim). A draft token is evaluated in a batch of several tokens, a plain step's token alone;
in the default run the two gave the same replies, checkpoints and summaries
(``benchmarks/bench_default_run.py --compare``), and both are a function of the prompt.
Wider steps (a group of probes) take no drafts: they are compute-bound, so a draft token costs
what it saves.

What a reply depends on: with one prompt the layout is the one a single call has always had
(sequence 0's cells, then the tail and the reply), so a reply alone is a function of its prompt.
Several prompts' tails and replies interleave in the shared cache, and llama.cpp's attention
sums over KV cells in SIMD groups, so a reply in a batch can differ in low bits from the same
prompt alone (and from the same prompt in another batch or order: measured in
``benchmarks/bench_backbones.py --sections batch``). It is a function of the batch, in order:
the harness makes the batch a fixed group of the plan (``runtime/backbones/lockstep.py``), so a
run's replies are still reproducible. llama.cpp's flash attention was 1.3-2x slower on an
AVX2-only EPYC and, on a Zen 4 EPYC, as fast but not order-invariant either (2 of 12 replies
changed with a batch reversed); non-unified KV (a stream per sequence) is invariant but reads
every sequence's own copy of the prefix, and gained 10% over one call at a time at 3.8k tokens
of context.
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

DRAFT_TOKENS = 8
"""Prompt-lookup draft tokens a reply may check per step at most (0: one token per step)."""

STEP_TOKENS = 12
"""Tokens one decode step may evaluate with drafts: a step of a few tokens costs little more
than one token's (the weights are read once), a wider one is compute-bound and a draft token
costs what it would save (``benchmarks/bench_backbones.py --sections draft``)."""

NGRAM_SIZES = (3, 2)
"""Suffix lengths a draft is looked up by, longest first."""

MIN_DRAFT_TOKENS = 2
"""Shorter drafts are not checked: a step of two tokens costs about two steps of one (the
attention's f16 kernels), from three tokens on a token costs a fraction of a step."""


class NgramIndex:
    """Where each n-gram of a token list last ended, for prompt-lookup drafts: the tokens that
    followed the latest earlier occurrence of a sequence's last n tokens. ``base`` holds the
    positions of a shared prefix; this index adds the positions after it."""

    def __init__(self, tokens: list[int], base: NgramIndex | None = None) -> None:
        self.tokens = tokens
        self.base = base
        self.ends: dict[tuple[int, ...], int] = {}
        self.indexed: int = base.indexed if base is not None else 0
        self.catch_up()

    def catch_up(self) -> None:
        """Index every n-gram that ends before the last token (the suffix a draft continues
        must not find itself)."""
        tokens = self.tokens
        for end in range(max(self.indexed, 1), len(tokens)):
            for size in NGRAM_SIZES:
                if end >= size:
                    self.ends[tuple(tokens[end - size : end])] = end
        self.indexed = max(self.indexed, len(tokens))

    def draft(self, limit: int) -> list[int]:
        """Up to ``limit`` tokens that followed the latest earlier occurrence of the longest
        suffix found (none if no suffix occurred before)."""
        if limit <= 0:
            return []
        self.catch_up()
        tokens = self.tokens
        for size in NGRAM_SIZES:
            if len(tokens) <= size:
                continue
            key = tuple(tokens[-size:])
            end = self.ends.get(key)
            if end is None and self.base is not None:
                end = self.base.ends.get(key)
            if end is not None:
                return tokens[end : end + limit]
        return []


@dataclass
class _Sequence:
    """One prompt of a batch while its reply is decoded."""

    seq_id: int
    request: GenerateRequest
    tokens: list[int]
    budget: int  # reply tokens it may still produce
    started: float
    lookup: NgramIndex
    draft_limit: int  # grows while drafts are kept whole, shrinks when one is cut short
    generated: list[int] = field(default_factory=list)
    text: bytes = b""
    finish_reason: str | None = None
    prefill_tokens: int = 0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    drafted_tokens: int = 0
    accepted_tokens: int = 0
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

    def __init__(self, llama: Llama, draft_tokens: int = DRAFT_TOKENS) -> None:
        from llama_cpp import llama_cpp as low_level

        self.llama = llama
        self.draft_tokens = draft_tokens
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
        prefix = NgramIndex(prompts[0][:shared])
        sequences = [
            _Sequence(
                seq_id=index + 1,
                request=request,
                tokens=tokens,
                budget=budget,
                started=started,
                lookup=NgramIndex(list(tokens), prefix),
                draft_limit=(self.draft_tokens + 1) // 2,
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
        """Advance every live reply by one ``llama_decode`` per step: its last token and the
        draft that lookup proposes after it, each with logits. A reply keeps its greedy tokens
        while they match the draft (plus the first that does not), and the cells of the
        drafted tokens it did not keep are removed."""
        live = [s for s in sequences if s.finish_reason is None]
        while live:
            clock = time.perf_counter()
            per_sequence = STEP_TOKENS // len(live) - 1  # under MIN_DRAFT_TOKENS: no drafts
            entries: list[tuple[int, int, int, bool]] = []
            drafts: list[tuple[_Sequence, int, list[int]]] = []
            for s in live:
                position = len(s.tokens) + len(s.generated) - 1
                room = s.budget - len(s.generated) - 1
                draft = s.lookup.draft(min(per_sequence, s.draft_limit, room))
                if len(draft) < MIN_DRAFT_TOKENS:
                    draft = []
                drafts.append((s, len(entries), draft))
                entries.append((s.generated[-1], position, s.seq_id, True))
                entries += [(t, position + 1 + i, s.seq_id, True) for i, t in enumerate(draft)]
            self._decode(entries)
            for sequence, first, draft in drafts:
                kept = self._verify(sequence, first, draft)
                sequence.drafted_tokens += len(draft)
                sequence.accepted_tokens += kept
                if draft:
                    whole = kept == len(draft)
                    limit = sequence.draft_limit + 2 if whole else sequence.draft_limit - 1
                    sequence.draft_limit = max(MIN_DRAFT_TOKENS, min(self.draft_tokens, limit))
                if kept < len(draft):
                    position = len(sequence.tokens) + len(sequence.generated) - 1
                    self._low.llama_memory_seq_rm(self._memory, sequence.seq_id, position, -1)
            elapsed = time.perf_counter() - clock
            for sequence in live:
                sequence.decode_s += elapsed
            live = [s for s in live if s.finish_reason is None]

    def _verify(self, sequence: _Sequence, first: int, draft: list[int]) -> int:
        """Accept the greedy tokens at batch entries ``first``… (the reply's last token, then
        its draft) while they match the draft; returns the draft tokens kept."""
        for kept in range(len(draft) + 1):
            token = self._argmax(first + kept)
            self._accept(sequence, token)
            if sequence.finish_reason is not None or kept == len(draft) or token != draft[kept]:
                return kept
        return len(draft)

    def _accept(self, sequence: _Sequence, token: int) -> None:
        """Take ``token`` as the sequence's next reply token, or end the reply."""
        if self._low.llama_vocab_is_eog(self._vocab, token):
            self._finish(sequence, "stop")
            return
        sequence.generated.append(token)
        sequence.lookup.tokens.append(token)
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
            drafted_tokens=sequence.drafted_tokens,
            accepted_tokens=sequence.accepted_tokens,
        )
