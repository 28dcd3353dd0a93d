"""The embedded model's prefill policy (``runtime/backbones/llama/prefill.py``) and the runner's
use of it, against a stand-in for llama-cpp-python's ``Llama`` that records every batch (the
real model's numbers: tests/backbones/test_prefill_real.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.backbones.llama.child import LlamaRunner
from runtime.backbones.llama.prefill import MIN_BATCH_TOKENS, batch_spans, reusable_prefix


@given(
    start=st.integers(0, 3000),
    length=st.integers(0, 3000),
    n_batch=st.integers(MIN_BATCH_TOKENS + 1, 600),
)
def test_batches_cover_the_span_in_order_none_of_a_single_token(
    start: int, length: int, n_batch: int
) -> None:
    spans = batch_spans(start, start + length, n_batch)
    assert [a for a, _ in spans] == ([start, *(b for _, b in spans[:-1])] if spans else [])
    assert (spans[-1][1] if spans else start) == start + length
    assert all(b - a <= n_batch for a, b in spans)
    if length >= MIN_BATCH_TOKENS:
        assert all(b - a >= MIN_BATCH_TOKENS for a, b in spans)


def test_a_span_one_token_past_full_batches_ends_in_two_tokens() -> None:
    assert batch_spans(100, 613, 512) == [(100, 611), (611, 613)]
    assert batch_spans(0, 1024, 512) == [(0, 512), (512, 1024)]
    assert batch_spans(7, 8, 512) == [(7, 8)]  # a one-token prompt is one token cold too


def test_a_batch_size_that_cannot_avoid_single_tokens_is_refused() -> None:
    with pytest.raises(ValueError, match="n_batch"):
        batch_spans(0, 3, MIN_BATCH_TOKENS)


@given(shared=st.integers(0, 5000), length=st.integers(1, 5000))
def test_the_last_two_prompt_tokens_are_always_evaluated(shared: int, length: int) -> None:
    reused = reusable_prefix(min(shared, length), length)
    assert 0 <= reused <= max(0, length - MIN_BATCH_TOKENS)
    assert reused == max(0, min(shared, length - MIN_BATCH_TOKENS))


class _Context:
    def __init__(self, owner: RecordingLlama) -> None:
        self.owner = owner

    def kv_cache_seq_rm(self, seq_id: int, start: int, end: int) -> bool:
        self.owner.removed_from.append(start)
        return True


class RecordingLlama:
    """What ``LlamaRunner`` touches of a ``Llama``: the held tokens, ``eval`` (recorded as the
    batches llama-cpp-python would decode) and the cache's sequence removal."""

    def __init__(self, n_batch: int = 8) -> None:
        self.n_batch = n_batch
        self.input_ids = np.zeros(4096, dtype=np.intc)
        self.n_tokens = 0
        self._requires_eval = True
        self._ctx = _Context(self)
        self.batches: list[list[int]] = []
        self.removed_from: list[int] = []

    def eval(self, tokens: list[int]) -> None:
        for start in range(0, len(tokens), self.n_batch):
            batch = tokens[start : start + self.n_batch]
            self.batches.append(batch)
            self.input_ids[self.n_tokens : self.n_tokens + len(batch)] = batch
            self.n_tokens += len(batch)
        self._requires_eval = False

    def decode_reply(self, reply: list[int]) -> None:
        """What a generation leaves: each reply token decoded alone after the prompt."""
        for token in reply:
            self.eval([token])


def runner(llama: Any) -> LlamaRunner:
    return LlamaRunner(llama, n_ctx=4096)


def test_a_reply_is_not_reused_by_the_prompt_that_holds_it() -> None:
    llama = RecordingLlama()
    run = runner(llama)
    prompt = list(range(1, 30))
    assert run._prefill(prompt) == 0
    llama.decode_reply([900, 901, 902])
    run._keep_prompt_only(len(prompt))
    assert llama.n_tokens == len(prompt) and llama.removed_from[-1] == len(prompt)
    llama.batches.clear()
    follow_up = [*prompt, 900, 901, 902, 77, 78]
    assert run._prefill(follow_up) == len(prompt)
    assert llama.batches == [[900, 901, 902, 77, 78]]  # the reply evaluated again, in a batch


def test_a_prompt_the_cache_holds_whole_is_evaluated_again_from_its_last_two_tokens() -> None:
    llama = RecordingLlama()
    run = runner(llama)
    prompt = list(range(1, 20))
    run._prefill(prompt)
    run._keep_prompt_only(len(prompt))
    llama.batches.clear()
    assert run._prefill(prompt) == len(prompt) - 2
    assert llama.batches == [[18, 19]]


def test_no_batch_of_one_token_whatever_the_cache_held() -> None:
    llama = RecordingLlama(n_batch=8)
    run = runner(llama)
    base = list(range(1, 41))
    for shared, extra in [(0, 4), (31, 2), (39, 0), (16, 1), (23, 9), (40, 17), (40, 0)]:
        prompt = [*base[:shared], *range(500 + shared, 500 + shared + extra + 1)]
        run._prefill(prompt)
        run._keep_prompt_only(len(prompt))
        assert llama.input_ids[: llama.n_tokens].tolist() == prompt
    assert all(len(batch) >= MIN_BATCH_TOKENS for batch in llama.batches)
