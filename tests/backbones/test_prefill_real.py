"""With the real SmolLM2 in llama.cpp: a reply and the KV cache its prompt leaves are the same
bits whatever the runner's cache held before — a prompt holding an earlier reply, one served
by a kept copy, one evaluated cold in a fresh model (``runtime/backbones/llama/prefill.py``).
Before the prefill policy the first two held entries of reply tokens decoded one at a time,
which differ from a batch's in their last bits."""

from __future__ import annotations

import pytest

from runtime.backbones.llama.backbone import smollm2_gguf_path
from runtime.backbones.llama.child import LlamaKV, LlamaRunner
from runtime.backbones.llama.kv_snapshots import KVSnapshot
from runtime.backbones.llama.load import open_llama
from runtime.backbones.llama.wire import CHATML_END, Generated, GenerateRequest, ModelSpec

pytestmark = pytest.mark.slow

FACTS = "\n".join(
    f"Fact {index}: the crate labelled K-{index * 37 % 1000} holds {index % 9 + 1} blue marbles."
    for index in range(1, 30)
)
SYSTEM = f"<|im_start|>system\nYou answer from this inventory.\n{FACTS}{CHATML_END}\n"


def turn(role: str, text: str) -> str:
    return f"<|im_start|>{role}\n{text}{CHATML_END}\n"


def ask(history: str, question: str) -> str:
    return f"{history}{turn('user', question)}<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def spec() -> ModelSpec:
    return ModelSpec(str(smollm2_gguf_path()), 2048, 2)


def generate(runner: LlamaRunner, prompt: str) -> Generated:
    reply = runner.generate(GenerateRequest(prompt, max_output_tokens=24, temperature=0.0, seed=1))
    assert isinstance(reply, Generated)
    return reply


def cache(runner: LlamaRunner) -> KVSnapshot:
    saved = LlamaKV(runner.llama).save()
    assert saved is not None
    return saved


def test_replies_and_caches_do_not_depend_on_the_calls_before(spec: ModelSpec) -> None:
    warm_llama, _ = open_llama(spec)
    cold_llama, _ = open_llama(spec)
    try:
        warm = LlamaRunner(warm_llama, spec.n_ctx, kv_snapshot_bytes=1 << 28)
        cold = LlamaRunner(cold_llama, spec.n_ctx, kv_snapshot_bytes=1 << 28)
        first = ask(SYSTEM, "Which crate holds the most marbles?")
        reply = generate(warm, first).text
        follow_up = ask(f"{first}{reply}{CHATML_END}\n", "And the fewest?")
        continued = generate(warm, follow_up)  # the cache held the first prompt and its reply
        assert continued.cached_tokens > 500
        fresh_reply = generate(cold, follow_up)
        assert continued.text == fresh_reply.text
        for call in (continued, fresh_reply):  # llama-cpp-python evaluated nothing again
            assert call.prefill_tokens == call.prompt_tokens - call.cached_tokens
        assert cache(warm) == cache(cold)  # every entry, bit for bit

        generate(warm, ask(turn("system", "Be brief."), "Name a colour."))  # keeps a copy
        probe = ask(f"{follow_up}{continued.text}{CHATML_END}\n", "Which crate is K-74?")
        restored = generate(warm, probe)
        assert restored.cached_tokens > continued.prompt_tokens - 10  # from the kept copy
        cold_llama.reset()  # nothing reused: the whole probe prefilled
        from_scratch = generate(cold, probe)
        assert from_scratch.cached_tokens == 0
        assert restored.text == from_scratch.text
        assert cache(warm) == cache(cold)
    finally:
        warm_llama.close()
        cold_llama.close()
