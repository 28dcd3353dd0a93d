"""How the embedded model evaluates a prompt so that its numbers are a function of the prompt
alone, whatever the worker's cache held before the call.

Above: ``LlamaRunner.generate`` (``runtime/backbones/llama/child.py``), which asks how much of
its cache a prompt may take and then evaluates the rest batch by batch. Below: nothing (token
counts in, token counts out).

llama.cpp computes a batch of one token (its matrix-vector kernels) with other rounding than a
batch of two or more (its matrix-matrix kernels); batches of two or more tokens give the same
bits whatever their length and wherever they start (SmolLM2-135M Q4_1 on a 2-core AMD EPYC,
llama-cpp-python 0.3.36: a 1,400-token prompt with a middle batch of 1 token or a last batch of
1 token gave other logits than one cold prefill; middle batches of 2-64 tokens, last batches
of 2-16, and splits at tokens 1,000, 1,024, 1,500, 2,048 and 2,200 gave the same bits, also
after a longer cache was trimmed or a kept copy restored). A reply is decoded one token at a
time, so its cache entries are not what a prompt holding that reply would compute. Hence the
rule: a call reuses cache entries only of tokens that were evaluated as part of a prompt (the
runner drops a reply's entries once it is returned), always evaluates at least its last
``MIN_BATCH_TOKENS`` tokens itself, and cuts what it evaluates into batches of at least that
many tokens. Every entry and the logits the first reply token is sampled from are then the ones
a cold prefill of the same prompt computes, so a reply does not depend on which calls came
before it (a resumed run, a shard, kept KV copies or none).
"""

from __future__ import annotations

MIN_BATCH_TOKENS = 2


def reusable_prefix(shared: int, prompt_length: int) -> int:
    """Cache tokens a prompt of ``prompt_length`` tokens takes when it shares ``shared``
    leading tokens with what the cache holds: all but the last ``MIN_BATCH_TOKENS``."""
    return max(0, min(shared, prompt_length - MIN_BATCH_TOKENS))


def batch_spans(start: int, end: int, n_batch: int) -> list[tuple[int, int]]:
    """Tokens ``[start, end)`` as consecutive batches of at most ``n_batch`` tokens, none of
    fewer than ``MIN_BATCH_TOKENS`` unless the whole span is shorter."""
    if n_batch <= MIN_BATCH_TOKENS:
        raise ValueError(f"n_batch must be above {MIN_BATCH_TOKENS}, got {n_batch}")
    spans: list[tuple[int, int]] = []
    while start < end:
        size = min(n_batch, end - start)
        if 0 < end - start - size < MIN_BATCH_TOKENS:
            size -= MIN_BATCH_TOKENS - (end - start - size)
        spans.append((start, start + size))
        start += size
    return spans
