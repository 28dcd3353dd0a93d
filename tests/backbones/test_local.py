"""EmbeddedBackbone: real SmolLM2-135M generations through llama-cpp-python in its worker
process (the tests that load the model are slow), a real native crash of that worker, and the
ChatML rendering (fast)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from runtime.backbones import EmbeddedBackbone, ProviderError
from runtime.backbones.llama.backbone import render_chatml
from runtime.backbones.llama.worker import WorkerCrashed, describe_exit
from runtime.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)

FACTS = "\n".join(
    f"Fact {index}: the crate labelled K-{index * 37 % 1000} holds {index % 9 + 1} blue marbles."
    for index in range(1, 28)
)
RECALL = ToolSpec(name="artifact_recall", description="Recall an artifact by id.")


@pytest.fixture(scope="module")
def backbone() -> EmbeddedBackbone:
    loaded = EmbeddedBackbone(max_output_tokens=4)
    loaded.load()
    return loaded


def probe(question: str) -> list[Message]:
    return [
        SystemMessage(content=f"You answer from this inventory (kv-reuse test).\n{FACTS}"),
        UserMessage.text(question),
    ]


@pytest.mark.slow
async def test_one_real_generation(backbone: EmbeddedBackbone) -> None:
    completion = await backbone.complete([UserMessage.text("Say hello.")], [])
    assert completion.text.strip()
    assert completion.model == "local/smollm2-135m"
    assert completion.usage.source == "provider"
    assert completion.usage.input_tokens > 10
    assert 1 <= completion.usage.output_tokens <= 4
    assert completion.finish_reason in ("stop", "length")


@pytest.mark.slow
async def test_hitting_max_tokens_reports_length(backbone: EmbeddedBackbone) -> None:
    completion = await backbone.complete(
        [UserMessage.text("Write a long story about a lighthouse keeper.")], []
    )
    assert completion.usage.output_tokens == 4
    assert completion.finish_reason == "length" and completion.truncated


@pytest.mark.slow
async def test_shared_prefix_is_not_prefilled_again(backbone: EmbeddedBackbone) -> None:
    first = await backbone.complete(probe("Which crate holds the most marbles?"), [])
    prompt_tokens = first.usage.input_tokens
    assert prompt_tokens > 500
    assert first.usage.cached_tokens < 20
    later = [
        await backbone.complete(probe(question), [])
        for question in ("How many marbles are in K-37?", "Name one crate.")
    ]
    for completion in later:  # timing is measured in benchmarks/bench_backbones.py
        assert completion.usage.cached_tokens > prompt_tokens - 30


@pytest.mark.slow
async def test_a_prefix_from_before_the_last_call_is_restored_not_prefilled(
    backbone: EmbeddedBackbone,
) -> None:
    first = await backbone.complete(probe("Which crate holds the most marbles?"), [])
    unrelated = await backbone.complete([UserMessage.text("Name a colour.")], [])
    assert unrelated.usage.cached_tokens < 20  # the inventory left the live cache
    again = await backbone.complete(probe("Which crate holds the most marbles?"), [])
    assert again.usage.cached_tokens == first.usage.input_tokens - 2  # prefill.MIN_BATCH_TOKENS
    assert again.text == first.text


@pytest.mark.slow
async def test_with_no_snapshot_budget_an_older_prefix_is_prefilled_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MIRAGE_KV_SNAPSHOT_MB", "0")
    unkept = EmbeddedBackbone(max_output_tokens=4)
    await unkept.complete(probe("Which crate holds the most marbles?"), [])
    await unkept.complete([UserMessage.text("Name a colour.")], [])
    again = await unkept.complete(probe("Which crate holds the most marbles?"), [])
    assert again.usage.cached_tokens < 20


@pytest.mark.slow
async def test_repeating_a_prompt_is_deterministic(backbone: EmbeddedBackbone) -> None:
    messages = [UserMessage.text("Name a colour.")]
    first = await backbone.complete(messages, [])
    await backbone.complete([UserMessage.text("Something else entirely.")], [])
    assert (await backbone.complete(messages, [])).text == first.text


@pytest.mark.slow
@pytest.mark.slow
async def test_a_prompt_beyond_the_window_is_a_context_length_error(
    backbone: EmbeddedBackbone,
) -> None:
    huge = [UserMessage.text("marble " * 9000)]
    with pytest.raises(ProviderError) as caught:
        await backbone.complete(huge, [])
    assert caught.value.kind == "context_length" and not caught.value.retryable


@pytest.mark.slow
async def test_concurrent_callers_are_serialised(backbone: EmbeddedBackbone) -> None:
    questions = ("Say one.", "Say two.")
    results = await asyncio.gather(
        *(backbone.complete([UserMessage.text(question)], []) for question in questions)
    )
    assert all(result.usage.output_tokens >= 1 for result in results)


@pytest.mark.slow
@pytest.mark.slow
async def test_tools_and_tool_results_are_rendered_in_text_mode(
    backbone: EmbeddedBackbone,
) -> None:
    messages: list[Message] = [
        SystemMessage(content="Use tools."),
        UserMessage.text("Recall a1."),
        AssistantMessage(raw='<tool_call>\n{"name": "artifact_recall"}\n</tool_call>'),
        ToolResultMessage(tool_call_id="c1", name="artifact_recall", content="a1: apples"),
    ]
    prompt = backbone.render_prompt(messages, [RECALL])
    assert prompt.startswith("<|im_start|>system\nUse tools.\n\n")
    assert "<tools>" in prompt
    assert "<|im_start|>user\n<tool_response>\na1: apples\n</tool_response><|im_end|>" in prompt
    assert prompt.endswith("<|im_start|>assistant\n")
    assert (await backbone.complete(messages, [RECALL])).usage.output_tokens >= 1


def test_chatml_adds_the_default_system_prompt_only_when_missing() -> None:
    rendered = render_chatml([{"role": "user", "content": "hi"}], default_system="Be kind.")
    assert rendered == (
        "<|im_start|>system\nBe kind.<|im_end|>\n"
        "<|im_start|>user\nhi<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    own = render_chatml([{"role": "system", "content": "Mine."}], default_system="Be kind.")
    assert own.count("<|im_start|>system") == 1 and "Mine." in own


def test_image_parts_cannot_reach_the_chatml_renderer() -> None:
    with pytest.raises(ValueError, match="text-only"):
        render_chatml(
            [{"role": "user", "content": [{"type": "text", "text": "x"}]}], default_system=None
        )


def test_thread_count_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MIRAGE_LLAMA_THREADS", "1")
    assert EmbeddedBackbone().n_threads == 1
    monkeypatch.delenv("MIRAGE_LLAMA_THREADS")
    assert EmbeddedBackbone().n_threads == 2
    monkeypatch.setenv("MIRAGE_LLAMA_THREADS", "many")
    with pytest.raises(ValueError, match="MIRAGE_LLAMA_THREADS must be a positive integer"):
        EmbeddedBackbone()


def test_kv_snapshot_budget_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MIRAGE_KV_SNAPSHOT_MB", raising=False)
    assert EmbeddedBackbone().kv_snapshot_bytes == 1 << 30
    monkeypatch.setenv("MIRAGE_KV_SNAPSHOT_MB", "0")
    assert EmbeddedBackbone().kv_snapshot_bytes == 0
    monkeypatch.setenv("MIRAGE_KV_SNAPSHOT_MB", "256")
    assert EmbeddedBackbone().kv_snapshot_bytes == 256 << 20
    monkeypatch.setenv("MIRAGE_KV_SNAPSHOT_MB", "-1")
    with pytest.raises(ValueError, match="MIRAGE_KV_SNAPSHOT_MB must be a whole number"):
        EmbeddedBackbone()


@pytest.mark.slow
async def test_prompt_token_count_matches_a_real_call(backbone: EmbeddedBackbone) -> None:
    messages = [UserMessage.text("Count these tokens, please.")]
    completion = await backbone.complete(messages, [])
    assert backbone.count_prompt_tokens(messages, []) == (completion.usage.input_tokens, "provider")


def test_exit_statuses_are_named() -> None:
    assert describe_exit(-signal.SIGILL) == "SIGILL (Illegal instruction)"
    assert describe_exit(-signal.SIGSEGV) == "SIGSEGV (Segmentation fault)"
    assert describe_exit(1) == "exit code 1"


@pytest.mark.slow
def test_the_model_loads_without_llama_cpps_extra_buffer_types(
    backbone: EmbeddedBackbone,
) -> None:
    """Extra buffer types hold the AMX tile kernels that die with SIGILL on machines that
    advertise AMX they cannot run; the weights must sit in plain CPU buffers."""
    info = backbone.worker().start()
    assert info.load.use_extra_bufts is False
    weights = [line for line in info.load.buffer_lines if "model buffer size" in line]
    assert weights and all(line.split()[1] in ("CPU", "CPU_Mapped") for line in weights)
    assert "AVX2 = 1" in info.build.system_info  # llama.cpp's own compile-feature line
    environment = Path(f"/proc/{info.pid}/environ").read_bytes().split(b"\0")
    if not {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"} & os.environ.keys():  # chosen by the load
        assert b"GOMP_SPINCOUNT=1000" in environment or b"OMP_WAIT_POLICY=PASSIVE" in environment


@pytest.mark.slow
def test_the_extra_buffer_type_switch_reaches_llama_cpp() -> None:
    from runtime.backbones.llama.backbone import smollm2_gguf_path
    from runtime.backbones.llama.wire import ModelSpec
    from runtime.backbones.llama.worker import LlamaWorker

    worker = LlamaWorker(ModelSpec(str(smollm2_gguf_path()), 256, 1, extra_buffer_types=True))
    try:
        assert worker.start().load.use_extra_bufts is True
    finally:
        worker.close()


def _kill_when_busy(backbone: EmbeddedBackbone, delay_s: float) -> threading.Thread:
    pid = backbone.worker().pid
    assert pid is not None

    def kill() -> None:
        time.sleep(delay_s)
        os.kill(pid, signal.SIGILL)

    thread = threading.Thread(target=kill)
    thread.start()
    return thread


@pytest.mark.slow
async def test_a_native_crash_mid_call_is_a_provider_error_and_the_model_comes_back() -> None:
    crashing = EmbeddedBackbone(context_window=4096, max_output_tokens=400, n_threads=1)
    crashing.load()
    killer = _kill_when_busy(crashing, delay_s=0.5)  # prefill + 400 tokens take seconds
    with pytest.raises(WorkerCrashed) as caught:
        await crashing.complete(probe("Tell me about every crate, one by one."), [])
    killer.join()
    assert caught.value.signal_name == "SIGILL" and caught.value.kind == "unknown"
    assert "SIGILL (Illegal instruction)" in str(caught.value)
    assert "mirage doctor" in str(caught.value)

    crashing.max_output_tokens = 4
    first = await crashing.complete(probe("Which crate holds the most marbles?"), [])
    again = await crashing.complete(probe("Name one crate."), [])
    assert first.usage.output_tokens >= 1
    assert again.usage.cached_tokens > first.usage.input_tokens - 30  # KV reuse after restart
    crashing.worker().close()


@pytest.mark.slow
async def test_a_worker_that_keeps_crashing_is_not_restarted_forever() -> None:
    crashing = EmbeddedBackbone(context_window=1024, max_output_tokens=2, n_threads=1)
    worker = crashing.worker()
    for _ in range(3):
        worker.start()
        pid = worker.pid
        assert pid is not None
        os.kill(pid, signal.SIGSEGV)
        time.sleep(0.5)
    with pytest.raises(WorkerCrashed, match="3 times in a row; not starting it again"):
        await crashing.complete([UserMessage.text("hi")], [])
    worker.close()


@pytest.mark.parametrize(
    ("user", "load", "expected"),
    [
        ({}, 0.1, {"GOMP_SPINCOUNT": "1000"}),  # idle: a short spin, then sleep
        ({}, 2.0, {"OMP_WAIT_POLICY": "PASSIVE"}),  # busy: sleep at once
        ({"OMP_WAIT_POLICY": "ACTIVE"}, 0.1, {"OMP_WAIT_POLICY": "ACTIVE"}),
        ({"OMP_WAIT_POLICY": "PASSIVE"}, 0.1, {"OMP_WAIT_POLICY": "PASSIVE"}),
        ({"GOMP_SPINCOUNT": "0"}, 2.0, {"GOMP_SPINCOUNT": "0"}),
    ],
)
def test_the_worker_waits_by_the_machines_load_unless_the_user_chose(
    user: dict[str, str], load: float, expected: dict[str, str]
) -> None:
    from runtime.backbones.llama.worker import worker_environment

    environment = worker_environment({"PATH": "/usr/bin", **user}, load)
    assert {k: v for k, v in environment.items() if "OMP" in k} == expected
    assert environment["PATH"] == "/usr/bin"


def test_busy_now_counts_other_processes_and_not_this_one() -> None:
    """The wait is chosen by what other processes do now, not by the 1-minute average (which
    stays high for a minute after `pip install` compiled llama.cpp) nor by this process's own
    work (the run's indexing just before the worker starts)."""
    import subprocess
    import sys

    from runtime.backbones.llama.worker import load_per_cpu, usable_cpus

    if not Path("/proc/stat").exists():
        pytest.skip("measured from /proc/stat (Linux)")
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            pass

    own = threading.Thread(target=spin)
    own.start()
    try:
        assert load_per_cpu(0.3) < 0.45
    finally:
        stop.set()
        own.join()
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in usable_cpus()]
    try:
        time.sleep(0.2)  # past the interpreters' start
        assert load_per_cpu(0.3) > 0.6
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
