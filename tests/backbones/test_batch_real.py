"""With the real SmolLM2 in llama.cpp: replies decoded together over a shared prefix
(``runtime/backbones/llama/batch.py``) are a function of the batch, a batch of one is the reply
a single call always gave, and a batch leaves the cache as a single call does."""

from __future__ import annotations

import pytest

from runtime.backbones.llama.backbone import smollm2_gguf_path
from runtime.backbones.llama.child import LlamaRunner
from runtime.backbones.llama.load import open_llama
from runtime.backbones.llama.wire import (
    CHATML_END,
    BatchRequest,
    Failure,
    Generated,
    GenerateRequest,
    ModelSpec,
)

pytestmark = pytest.mark.slow

FACTS = "\n".join(
    f"Fact {index}: the crate labelled K-{index * 37 % 1000} holds {index % 9 + 1} blue marbles."
    for index in range(1, 40)
)
SYSTEM = f"<|im_start|>system\nYou answer from this inventory.\n{FACTS}{CHATML_END}\n"
QUESTIONS = (
    "Which crate holds the most marbles?",
    "How many marbles are in crate K-37?",
    "List three crates with one marble.",
    "Which crates hold nine marbles?",
)


def ask(question: str, history: str = SYSTEM) -> str:
    return f"{history}<|im_start|>user\n{question}{CHATML_END}\n<|im_start|>assistant\n"


def greedy(prompt: str, tokens: int = 24, stop: tuple[str, ...] = ()) -> GenerateRequest:
    return GenerateRequest(prompt, max_output_tokens=tokens, temperature=0.0, seed=1, stop=stop)


@pytest.fixture(scope="module")
def runner() -> LlamaRunner:
    spec = ModelSpec(str(smollm2_gguf_path()), 2048, 2)
    llama, _ = open_llama(spec)
    return LlamaRunner(llama, spec.n_ctx, kv_snapshot_bytes=1 << 28)


def replies(runner: LlamaRunner, requests: list[GenerateRequest]) -> list[Generated]:
    answered = runner.handle(BatchRequest(tuple(requests)))
    assert isinstance(answered, tuple)
    assert all(isinstance(reply, Generated) for reply in answered)
    return [reply for reply in answered if isinstance(reply, Generated)]


def test_a_batch_of_one_is_the_reply_a_single_call_gives(runner: LlamaRunner) -> None:
    for question in QUESTIONS[:2]:
        alone = runner.generate(greedy(ask(question)))  # llama-cpp-python's own completion
        assert isinstance(alone, Generated)
        assert replies(runner, [greedy(ask(question))])[0].text == alone.text


def test_a_batch_gives_the_same_replies_whatever_ran_before(runner: LlamaRunner) -> None:
    batch = [greedy(ask(question)) for question in QUESTIONS]
    first = replies(runner, batch)
    runner.handle(greedy(ask("Something else entirely.", history="<|im_start|>system\nHi.\n")))
    replies(runner, list(reversed(batch)))  # another batch over the same prefix
    again = replies(runner, batch)
    assert [r.text for r in again] == [r.text for r in first]
    assert all(r.output_tokens > 0 and r.prompt_tokens > 0 for r in first)
    # the shared prefix was evaluated once, for the first prompt of the batch
    assert first[1].prefill_tokens < 40 and first[1].cached_tokens > 400


def test_the_cache_holds_prompt_tokens_alone_after_a_batch(runner: LlamaRunner) -> None:
    replies(runner, [greedy(ask(question)) for question in QUESTIONS])
    held = runner.llama.n_tokens
    prompt_tokens = len(runner.llama.tokenize(ask(QUESTIONS[0]).encode(), special=True))
    assert held < prompt_tokens  # the shared prefix, not a reply nor another prompt's tail
    follow_up = runner.generate(greedy(ask(QUESTIONS[0])))
    assert isinstance(follow_up, Generated)
    assert follow_up.cached_tokens == held


def test_stops_budgets_and_failures_are_per_request(runner: LlamaRunner) -> None:
    too_long = greedy(ask("x " * 3000))
    constrained = GenerateRequest(ask(QUESTIONS[0]), max_output_tokens=8, temperature=0.7, seed=3)
    answered = runner.handle(
        BatchRequest(
            (
                greedy(ask(QUESTIONS[0]), tokens=3),
                too_long,
                greedy(ask(QUESTIONS[1]), tokens=48, stop=("K-",)),
                constrained,
            )
        )
    )
    assert isinstance(answered, tuple)
    short, failed, stopped, sampled = answered
    assert isinstance(short, Generated) and short.output_tokens == 3
    assert short.finish_reason == "length"
    assert isinstance(failed, Failure) and failed.kind == "context_length"
    assert isinstance(stopped, Generated) and "K-" not in stopped.text
    assert isinstance(sampled, Generated) and sampled.output_tokens <= 8


def test_drafts_copy_the_context_and_leave_the_reply_greedy(runner: LlamaRunner) -> None:
    """A reply that copies its context takes several tokens per step from prompt-lookup
    drafts, and is the reply decoding one token per step gives."""
    plain = LlamaRunner(runner.llama, runner.n_ctx, draft_tokens=0)
    asked = greedy(ask("Repeat facts 1 to 6 word for word."), tokens=64)
    drafted = runner.handle(asked)
    one_by_one = plain.handle(asked)
    plain.close()
    assert isinstance(drafted, Generated) and isinstance(one_by_one, Generated)
    assert drafted.text == one_by_one.text
    assert one_by_one.drafted_tokens == 0
    assert drafted.accepted_tokens >= drafted.output_tokens // 3
    assert "crate labelled K-" in drafted.text  # it did copy the inventory
