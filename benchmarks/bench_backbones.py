"""Backbone benchmarks: the embedded model's KV prefix reuse, its kept KV copies, its worker
process's per-call overhead, llama.cpp's extra buffer types on vs off, the OpenMP wait policy
and how long its threads spin before sleeping, the cost of a grammar per generated token,
litellm retries, and probes decoded one at a time against together.

    python benchmarks/bench_backbones.py [--prefix-tokens 500 2000 4000] [--probes 3]
        [--repeats 5] [--snapshot-tokens 2000 6000] [--batch-widths 4 12 15]
        [--sections embedded snapshots worker bufts omp spin grammar retries batch draft]

Embedded: for each prefix size, one cold call on a fresh prefix, then probes that share the
prefix and differ in the last question (the "restore one checkpoint, many probes" pattern).
Snapshots: a long prompt, an unrelated prompt, then the long prefix again with another question
(a shallower state's probe after the trunk moved on), in process with kept KV copies
(``kv_snapshots``) and without; plus the time to keep and to restore one copy, and its size.
Worker: the same requests (a tokenize, a fully cached 1-token generation) answered by a model
loaded in this process and by the worker process; the difference is the pipe round trip.
Bufts: prefill and decode speed (llama.cpp's own counters) with ``use_extra_bufts`` off (what
mirage uses) and on; on a CPU without AMX, on only adds CPU_REPACK, which SmolLM2's Q4_1/Q8_0
tensors cannot use. Omp: the same speeds with OpenMP threads spinning (ACTIVE; unset, libgomp
spins a while first) or sleeping (PASSIVE) at barriers, at 2 and 1 threads. Spin: probe-like
calls (a 2,000-token prefix, then 64-token replies to new questions on it) with the threads
sleeping at once (PASSIVE, the worker's default on a busy machine), spinning 1k (its default
on an idle one)/10k/100k/300k (libgomp's ``GOMP_SPINCOUNT``; 300k is its default) iterations
first, or always (ACTIVE), on the machine as it is and with two CPU-burning processes beside
it. Grammar: milliseconds per generated
token (the call's time after prefill, over its output tokens) for free text, a forced Hermes
tool call (any of two tools) and a JSON-schema reply, in process; the part of it outside
llama.cpp's model evaluation (sampling, where a grammar works; less swayed by the machine's
load than the whole); and the time to build each grammar (``llama_grammar.gbnf``). Litellm:
against the local fault-injecting OpenAI server — a clean call,
retry-then-success after 429 + 503, a hang detected by the client timeout, retries exhausted.
Batch: probe-like greedy calls (a ~4,000-token shared history, 64-token replies) one at a time
and as one ``BatchRequest`` of each width, in the worker process: tokens per second alone and
together, and how many of the batch's replies equal the ones given alone.
Draft: in process over the same ~4,000-token history, what one decode step costs by the tokens
it evaluates (1 to 24: why ``batch.STEP_TOKENS`` keeps drafts to small steps), then a reply
that copies its context (64 tokens) with prompt-lookup drafts off and on: decode tokens/s,
draft tokens kept of those checked, and whether the two replies are the same.
Prints a table and writes ``benchmarks/results/bench_backbones.json`` (sections not run keep
their earlier numbers).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # for tests.fakes (the fault-injecting server)

from runtime.backbones import (  # noqa: E402
    EmbeddedBackbone,
    LiteLLMBackbone,
    ProviderError,
    RetryPolicy,
)
from runtime.backbones.llama.backbone import default_thread_count, smollm2_gguf_path  # noqa: E402
from runtime.backbones.llama.batch import DRAFT_TOKENS  # noqa: E402
from runtime.backbones.llama.child import LlamaKV, LlamaRunner  # noqa: E402
from runtime.backbones.llama.grammar import gbnf  # noqa: E402
from runtime.backbones.llama.kv_snapshots import DEFAULT_CAPACITY_BYTES  # noqa: E402
from runtime.backbones.llama.load import open_llama  # noqa: E402
from runtime.backbones.llama.wire import (  # noqa: E402
    BatchRequest,
    Generated,
    GenerateRequest,
    ModelSpec,
    Request,
    TokenizeRequest,
)
from runtime.backbones.llama.worker import LlamaWorker  # noqa: E402
from runtime.messages import Message, SystemMessage, ToolSpec, UserMessage  # noqa: E402
from runtime.profiles.structured import json_segment, tool_call_segment  # noqa: E402
from tests.fakes.openai_server import (  # noqa: E402
    FakeOpenAIServer,
    hang,
    rate_limited,
    reply,
    server_error,
)

RESULTS = ROOT / "benchmarks" / "results" / "bench_backbones.json"
QUESTIONS = (
    "Which crate has the most marbles?",
    "How many marbles in K-37?",
    "Name one crate.",
    "Is any crate empty?",
    "Count the crates.",
)


def _prefix_messages(tag: str, target_tokens: int, question: str) -> list[Message]:
    # ~42 tokens per fact line for the SmolLM2 tokenizer
    lines = [
        f"Fact {tag}-{i}: the crate labelled K-{i * 37 % 1000} holds {i % 9 + 1} marbles."
        for i in range(max(1, target_tokens // 42))
    ]
    return [SystemMessage(content="Inventory:\n" + "\n".join(lines)), UserMessage.text(question)]


async def bench_embedded(sizes: list[int], probes: int) -> list[dict[str, Any]]:
    backbone = EmbeddedBackbone(max_output_tokens=8)
    started = time.perf_counter()
    backbone.load()
    load_s = time.perf_counter() - started
    rows = []
    for size in sizes:
        tag = f"s{size}-{time.time_ns()}"
        cold = await backbone.complete(_prefix_messages(tag, size, QUESTIONS[0]), [])
        warm = [
            await backbone.complete(_prefix_messages(tag, size, QUESTIONS[1 + i % 4]), [])
            for i in range(probes)
        ]
        rows.append(
            {
                "prefix_tokens": cold.usage.input_tokens,
                "cold_latency_s": round(cold.latency_s, 3),
                "cold_cached_tokens": cold.usage.cached_tokens,
                "reuse_latency_s_median": round(statistics.median(w.latency_s for w in warm), 3),
                "reuse_cached_tokens_min": min(w.usage.cached_tokens for w in warm),
                "speedup": round(cold.latency_s / statistics.median(w.latency_s for w in warm), 1),
                "model_load_s": round(load_s, 3),
                "n_threads": backbone.n_threads,
            }
        )
    return rows


def _generate_s(runner: LlamaRunner, prompt: str) -> tuple[float, int]:
    started = time.perf_counter()
    result = runner.handle(GenerateRequest(prompt, 8, 0.0, 1))
    assert isinstance(result, Generated), result
    return time.perf_counter() - started, result.cached_tokens


def bench_snapshots(sizes: list[int]) -> list[dict[str, Any]]:
    """Long prompt, unrelated prompt, the long prefix again: with kept KV copies and without."""
    backbone = EmbeddedBackbone(max_output_tokens=8)
    spec = ModelSpec(str(backbone.worker().spec.path), 8192, backbone.n_threads)
    llama, _ = open_llama(spec)
    rows = []
    for size in sizes:
        row: dict[str, Any] = {"n_threads": backbone.n_threads}
        for label, budget in (("kept", DEFAULT_CAPACITY_BYTES), ("not_kept", 0)):
            llama.reset()
            runner = LlamaRunner(llama, spec.n_ctx, budget)
            tag = f"k{size}-{label}-{time.time_ns()}"
            first, again = (
                backbone.render_prompt(_prefix_messages(tag, size, question), [])
                for question in QUESTIONS[:2]
            )
            row["prefix_tokens"] = len(llama.tokenize(first.encode(), special=True))
            cold_s, _ = _generate_s(runner, first)
            other_s, _ = _generate_s(runner, backbone.render_prompt([UserMessage.text("Hi.")], []))
            again_s, again_cached = _generate_s(runner, again)
            row[label] = {
                "cold_s": round(cold_s, 3),
                "unrelated_s": round(other_s, 3),
                "again_s": round(again_s, 3),
                "again_cached_tokens": again_cached,
            }
        kv = LlamaKV(llama)
        started = time.perf_counter()
        snapshot = kv.save()
        keep_s = time.perf_counter() - started
        assert snapshot is not None
        started = time.perf_counter()
        kv.restore(snapshot)
        row["keep_s"] = round(keep_s, 3)
        row["restore_s"] = round(time.perf_counter() - started, 3)
        row["snapshot_mb"] = round(len(snapshot.state) / 2**20, 1)
        row["speedup_again"] = round(row["not_kept"]["again_s"] / row["kept"]["again_s"], 1)
        rows.append(row)
    llama.close()
    return rows


def _median_ms(call: Any, request: Request, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        call(request)
        samples.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(samples), 3)


def bench_worker_overhead(repeats: int, long_tokens: int) -> dict[str, Any]:
    """The same requests in process and through the worker process."""
    backbone = EmbeddedBackbone(max_output_tokens=1)
    spec = ModelSpec(str(backbone.worker().spec.path), 8192, backbone.n_threads)
    long_prompt = backbone.render_prompt(_prefix_messages("overhead", long_tokens, "Hi?"), [])
    requests: dict[str, Request] = {
        "tokenize_short": TokenizeRequest("Say hello."),
        "tokenize_long": TokenizeRequest(long_prompt),
        "generate_1_token_cached_long": GenerateRequest(long_prompt, 1, 0.0, 1),
    }
    llama, _ = open_llama(spec)
    runner = LlamaRunner(llama, spec.n_ctx)
    worker = LlamaWorker(spec)
    started = time.perf_counter()
    worker.start()
    rows: dict[str, Any] = {"worker_start_and_load_s": round(time.perf_counter() - started, 3)}
    for name, request in requests.items():
        runner.handle(request)  # warm: the long prefix is now in both KV caches
        worker.call(request)
        in_process = _median_ms(runner.handle, request, repeats)
        through_worker = _median_ms(worker.call, request, repeats)
        rows[name] = {
            "in_process_ms": in_process,
            "worker_ms": through_worker,
            "overhead_ms": round(through_worker - in_process, 3),
        }
    worker.close()
    llama.close()
    return rows


def bench_extra_buffer_types(repeats: int, prompt_tokens: int = 1000) -> dict[str, Any]:
    """Prefill of a fresh ~1000-token prompt and a 64-token decode, extra buffer types off/on."""
    backbone = EmbeddedBackbone()
    results: dict[str, Any] = {}
    for label, extra in (("off", False), ("on", True)):
        spec = ModelSpec(str(backbone.worker().spec.path), 4096, backbone.n_threads, extra)
        worker = LlamaWorker(spec)
        info = worker.start()
        runs: list[Generated] = []
        for repeat in range(repeats):  # a new first line each time: nothing comes from the cache
            messages = _prefix_messages(f"bufts-{label}-{repeat}", prompt_tokens, QUESTIONS[2])
            request = GenerateRequest(backbone.render_prompt(messages, []), 64, 0.0, 1)
            runs.append(worker.call(request))
        worker.close()
        results[label] = {
            "weights": [line for line in info.load.buffer_lines if "model buffer" in line],
            "prefill_tokens": runs[0].prefill_tokens,
            "prefill_tok_s": round(statistics.median(r.prefill_tokens / r.prefill_s for r in runs)),
            "decode_tok_s": round(
                statistics.median(r.decode_tokens / r.decode_s for r in runs if r.decode_s)
            ),
        }
    return results


def bench_wait_policy(repeats: int, prompt_tokens: int = 500) -> dict[str, Any]:
    """Prefill/decode speed with OpenMP threads spinning (ACTIVE) or sleeping (PASSIVE, what
    the worker sets on a busy machine) at barriers, at 2 and 1 threads. Meaningful only with
    the load quoted."""
    backbone = EmbeddedBackbone()
    path = str(backbone.worker().spec.path)
    results: dict[str, Any] = {}
    for policy, threads in (("ACTIVE", 2), ("PASSIVE", 2), ("ACTIVE", 1), ("PASSIVE", 1)):
        os.environ["OMP_WAIT_POLICY"] = policy  # read by _spawn for the next worker
        worker = LlamaWorker(ModelSpec(path, 2048, threads))
        worker.start()
        runs = []
        for repeat in range(repeats):
            messages = _prefix_messages(f"omp-{policy}-{threads}-{repeat}", prompt_tokens, "Hi?")
            prompt = backbone.render_prompt(messages, [])
            runs.append(worker.call(GenerateRequest(prompt, 32, 0.0, 1)))
        worker.close()
        results[f"{policy.lower()}_{threads}_threads"] = {
            "prefill_tok_s": round(statistics.median(r.prefill_tokens / r.prefill_s for r in runs)),
            "decode_tok_s": round(
                statistics.median(r.decode_tokens / r.decode_s for r in runs if r.decode_s)
            ),
        }
    del os.environ["OMP_WAIT_POLICY"]
    return results


SPIN_SETTINGS: dict[str, dict[str, str]] = {
    "passive": {"OMP_WAIT_POLICY": "PASSIVE"},
    "spin_1k": {"GOMP_SPINCOUNT": "1000"},
    "spin_10k": {"GOMP_SPINCOUNT": "10000"},
    "spin_100k": {"GOMP_SPINCOUNT": "100000"},
    "unset_300k": {},
    "active": {"OMP_WAIT_POLICY": "ACTIVE"},
}


def _probe_like_calls(path: str, env: dict[str, str], tag: str, probes: int) -> dict[str, float]:
    """A fresh worker under ``env``: a prefix prefilled once, then ``probes`` probe-like calls
    on it (a new question, a 64-token reply), as a state's probes run in ``mirage run``."""
    backbone = EmbeddedBackbone()
    saved = {name: os.environ.pop(name, None) for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    os.environ.update(env)
    try:
        worker = LlamaWorker(ModelSpec(path, 4096, 2))
        worker.start()
    finally:
        for name, value in saved.items():
            os.environ.pop(name, None)
            if value is not None:
                os.environ[name] = value
    try:
        render = backbone.render_prompt
        first = worker.call(
            GenerateRequest(render(_prefix_messages(tag, 2000, "Hi?"), []), 1, 0.0, 1)
        )
        calls = []
        for question in QUESTIONS[:probes]:
            started = time.perf_counter()
            prompt = render(_prefix_messages(tag, 2000, question), [])
            reply = worker.call(GenerateRequest(prompt, 64, 0.0, 1))
            calls.append((time.perf_counter() - started, reply))
    finally:
        worker.close()
    assert isinstance(first, Generated)
    return {
        "prefill_tok_s": first.prefill_tokens / first.prefill_s,
        "probe_s": statistics.median(seconds for seconds, _ in calls),
        "decode_tok_s": statistics.median(r.decode_tokens / r.decode_s for _, r in calls),
    }


def bench_spin(repeats: int, probes: int = 3) -> dict[str, Any]:
    """Probe-like calls (a 2,000-token prefix prefilled once, then 64-token replies to new
    questions on it) under each OpenMP wait setting, on the machine as it is and with two
    CPU-burning processes beside it (a busy 2-core machine). Settings interleave per repeat,
    so a change of the machine's load hits them alike."""
    import llama_cpp  # noqa: F401  (the worker's module; fails early when missing)

    import runtime.backbones.llama.worker as worker_module

    path = str(EmbeddedBackbone().worker().spec.path)
    chooses = worker_module.worker_environment
    worker_module.worker_environment = lambda environ, load: dict(environ)  # each setting alone
    results: dict[str, Any] = {}
    try:
        for condition in ("as_is", "busy_2_burners"):
            burners = _burners(2) if condition == "busy_2_burners" else []
            rows: dict[str, list[dict[str, float]]] = {name: [] for name in SPIN_SETTINGS}
            try:
                for repeat in range(repeats):
                    for name, env in SPIN_SETTINGS.items():
                        tag = f"spin-{condition}-{name}-{repeat}-{time.time_ns()}"
                        rows[name].append(_probe_like_calls(path, env, tag, probes))
            finally:
                for burner in burners:
                    burner.kill()
            results[condition] = {
                name: {
                    key: round(statistics.median(row[key] for row in runs), 3) for key in runs[0]
                }
                | {"load_1min": round(os.getloadavg()[0], 2)}
                for name, runs in rows.items()
            }
    finally:
        worker_module.worker_environment = chooses
    return results


def _burners(count: int) -> list[Any]:
    import subprocess

    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def bench_grammar(repeats: int) -> dict[str, Any]:
    """Per-token cost of a grammar: free text vs a forced call vs a JSON-schema reply."""
    backbone = EmbeddedBackbone()
    spec = ModelSpec(str(backbone.worker().spec.path), 4096, backbone.n_threads)
    llama, _ = open_llama(spec)
    runner = LlamaRunner(llama, spec.n_ctx)
    tools = [
        ToolSpec(name="artifact_recall", parameters=_object_schema({"query": "string"})),
        ToolSpec(name="get_weather", parameters=_object_schema({"city": "string"})),
    ]
    rent = _object_schema({"city": "string", "median_eur": "integer"})
    cases = {
        "free_text": ((), "Tell me a short story about a cat."),
        "forced_tool_call": ((tool_call_segment("hermes", tools),), "Say hello to me."),
        "json_schema": ((json_segment(rent),), "What was the median rent in Berlin?"),
    }
    prompts = {
        name: backbone.render_prompt([UserMessage.text(question)], tools if segments else [])
        for name, (segments, question) in cases.items()
    }
    runs: dict[str, list[Generated]] = {name: [] for name in cases}
    for repeat in range(repeats):  # cases interleaved: a change in load hits each alike
        for name, (segments, _) in cases.items():
            result = runner.handle(
                GenerateRequest(prompts[name], 96, 0.0, repeat, grammar=segments)
            )
            assert isinstance(result, Generated), result
            runs[name].append(result)
    results: dict[str, Any] = {}
    for name, (segments, _) in cases.items():
        per_token = [
            (r.latency_s - r.prefill_s) * 1000 / max(r.output_tokens, 1) for r in runs[name]
        ]
        outside_eval = [
            (r.latency_s - r.prefill_s - r.decode_s) * 1000 / max(r.output_tokens, 1)
            for r in runs[name]
        ]
        results[name] = {
            "output_tokens": statistics.median(r.output_tokens for r in runs[name]),
            "ms_per_token": round(statistics.median(per_token), 2),
            "sampling_ms_per_token": round(statistics.median(outside_eval), 2),
        }
        if segments:
            started = time.perf_counter()
            gbnf(segments)
            results[name]["grammar_build_ms"] = round((time.perf_counter() - started) * 1000, 2)
    llama.close()
    free = results["free_text"]["ms_per_token"]
    free_sampling = results["free_text"]["sampling_ms_per_token"]
    for name in ("forced_tool_call", "json_schema"):
        results[name]["extra_ms_per_token"] = round(results[name]["ms_per_token"] - free, 2)
        extra = results[name]["sampling_ms_per_token"] - free_sampling
        results[name]["extra_sampling_ms_per_token"] = round(extra, 2)
    results["load_average_1m"] = round(os.getloadavg()[0], 2)
    return results


def _object_schema(fields: dict[str, str]) -> dict[str, Any]:
    properties = {key: {"type": kind} for key, kind in fields.items()}
    return {"type": "object", "properties": properties, "required": list(fields)}


async def _timed(backbone: LiteLLMBackbone) -> tuple[float, str]:
    started = time.perf_counter()
    try:
        await backbone.complete([UserMessage.text("hi")], [])
        outcome = "ok"
    except ProviderError as error:
        outcome = f"{error.kind} after {error.attempts}"
    return time.perf_counter() - started, outcome


async def bench_retries() -> dict[str, Any]:
    policy = RetryPolicy(max_retries=3, base_delay_s=0.05, max_delay_s=0.4)
    results: dict[str, Any] = {"retry_policy": policy.model_dump()}
    with FakeOpenAIServer() as server:
        backbone = LiteLLMBackbone(
            "openai/fake", api_base=server.api_base, api_key="k", retry=policy, timeout_s=0.5
        )
        server.push(reply("warm-up"))
        await _timed(backbone)
        clean = []
        for _ in range(20):
            server.push(reply("ok"))
            clean.append((await _timed(backbone))[0])
        results["clean_call_p50_s"] = round(statistics.median(clean), 4)
        server.push(rate_limited(), server_error(503), reply("ok"))
        results["429_503_then_ok_s"] = round((await _timed(backbone))[0], 3)
        server.push(hang(30), reply("ok"))
        results["hang_then_ok_timeout_0.5s_s"] = round((await _timed(backbone))[0], 3)
        server.push(*(server_error(500) for _ in range(4)))
        elapsed, outcome = await _timed(backbone)
        results["4x500_exhausted_s"] = round(elapsed, 3)
        results["4x500_outcome"] = outcome
    return results


def _print_embedded(rows: list[dict[str, Any]]) -> None:
    print("embedded SmolLM2-135M, KV prefix reuse (8 output tokens):")
    for row in rows:
        print(
            f"  prefix {row['prefix_tokens']:>5} tok: cold {row['cold_latency_s']:.3f} s, "
            f"reused {row['reuse_latency_s_median']:.3f} s "
            f"(cached {row['reuse_cached_tokens_min']}), x{row['speedup']}"
        )


def _print_snapshots(rows: list[dict[str, Any]]) -> None:
    print("embedded SmolLM2-135M, kept KV copies (long, unrelated, long again):")
    for row in rows:
        print(
            f"  prefix {row['prefix_tokens']:>5} tok: again {row['kept']['again_s']:.3f} s "
            f"kept vs {row['not_kept']['again_s']:.3f} s not (x{row['speedup_again']}); "
            f"unrelated {row['kept']['unrelated_s']:.3f} vs "
            f"{row['not_kept']['unrelated_s']:.3f} s; "
            f"keep {row['keep_s']:.3f} s, restore {row['restore_s']:.3f} s, "
            f"{row['snapshot_mb']} MB"
        )


def _print_mapping(title: str, mapping: dict[str, Any]) -> None:
    print(title)
    for key, value in mapping.items():
        print(f"  {key}: {value}")


def bench_batch(widths: list[int], prefix_tokens: int, reply_tokens: int) -> dict[str, Any]:
    """Probe-like greedy calls over one shared prefix (a state's history), answered one at a
    time and as one ``BatchRequest`` (``runtime/backbones/llama/batch.py``), in the worker
    process: tokens per second, the speed-up, and how many replies the batch left unchanged."""
    backbone = EmbeddedBackbone()
    worker = backbone.worker()
    words = " ".join(f"crate{n} holds {n % 9} marbles;" for n in range(prefix_tokens // 6))
    history = f"<|im_start|>system\nAn inventory: {words}<|im_end|>\n"
    results: dict[str, Any] = {"prefix_tokens": prefix_tokens, "reply_tokens": reply_tokens}
    try:
        for width in widths:
            requests = [
                GenerateRequest(
                    f"{history}<|im_start|>user\nQuestion {n}: how many marbles does crate{n * 7}"
                    " hold, and which crates hold as many? Explain.<|im_end|>\n"
                    "<|im_start|>assistant\n",
                    reply_tokens,
                    0.0,
                    1,
                )
                for n in range(width)
            ]
            worker.call(requests[0])  # the prefix, once: both ways start from it
            started = time.perf_counter()
            alone = [worker.call(request) for request in requests]
            alone_s = time.perf_counter() - started
            started = time.perf_counter()
            together = worker.call(BatchRequest(tuple(requests)))
            batch_s = time.perf_counter() - started
            tokens = sum(reply.output_tokens for reply in alone)
            batched_tokens = sum(reply.output_tokens for reply in together)
            results[f"width_{width}"] = {
                "alone_tok_s": round(tokens / alone_s, 1),
                "batched_tok_s": round(batched_tokens / batch_s, 1),
                "speedup": round(alone_s / batch_s, 2),
                "replies_unchanged": sum(
                    a.text == b.text for a, b in zip(alone, together, strict=True)
                ),
                "load_1min": round(os.getloadavg()[0], 2),
            }
    finally:
        worker.close()
    return results


def bench_draft(prefix_tokens: int, reply_tokens: int, repeats: int) -> dict[str, Any]:
    spec = ModelSpec(str(smollm2_gguf_path()), 8192, default_thread_count())
    llama, _ = open_llama(spec)
    words = " ".join(f"crate{n} holds {n % 9} marbles;" for n in range(prefix_tokens // 6))
    history = f"<|im_start|>system\nAn inventory: {words}<|im_end|>\n"
    tokens = llama.tokenize(history.encode(), add_bos=True, special=True)
    results: dict[str, Any] = {"prefix_tokens": len(tokens)}
    try:
        llama.eval(tokens)
        filler = llama.tokenize(words.encode(), add_bos=False)
        for width in (1, 2, 4, 8, 12, 16, 24):
            times = []
            for _ in range(repeats):
                llama.n_tokens = len(tokens)
                llama._ctx.kv_cache_seq_rm(-1, len(tokens), -1)
                started = time.perf_counter()
                llama.eval(filler[:width])
                times.append(time.perf_counter() - started)
            step_ms = statistics.median(times) * 1000
            results[f"step_{width}_tokens_ms"] = round(step_ms, 1)
            results[f"step_{width}_ms_per_token"] = round(step_ms / width, 1)
        llama.n_tokens = len(tokens)
        llama._ctx.kv_cache_seq_rm(-1, len(tokens), -1)
        prompt = f"{history}<|im_start|>user\nCopy the inventory word for word.<|im_end|>\n"
        request = GenerateRequest(f"{prompt}<|im_start|>assistant\n", reply_tokens, 0.0, 1)
        replies = {}
        for drafts in (0, DRAFT_TOKENS):
            runner = LlamaRunner(llama, spec.n_ctx, draft_tokens=drafts)
            reply = runner.handle(request)
            runner.close()
            assert isinstance(reply, Generated)
            replies[drafts] = reply
            speed = reply.decode_tokens / reply.decode_s
            results[f"drafts_{drafts}_decode_tok_s"] = round(speed, 1)
            results[f"drafts_{drafts}_kept_of_checked"] = (
                f"{reply.accepted_tokens}/{reply.drafted_tokens}"
            )
        results["same_reply"] = replies[0].text == replies[DRAFT_TOKENS].text
        results["load_1min"] = round(os.getloadavg()[0], 2)
    finally:
        llama.close()
    return results


SECTIONS = (
    "embedded",
    "snapshots",
    "worker",
    "bufts",
    "omp",
    "spin",
    "grammar",
    "retries",
    "batch",
    "draft",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefix-tokens", type=int, nargs="+", default=[500, 2000, 4000])
    parser.add_argument("--probes", type=int, default=3)
    parser.add_argument("--snapshot-tokens", type=int, nargs="+", default=[2000, 6000])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument("--overhead-tokens", type=int, default=6000, help="long prompt (worker)")
    parser.add_argument("--batch-widths", type=int, nargs="+", default=[4, 12, 15])
    args = parser.parse_args()
    payload: dict[str, Any] = {}
    if "embedded" in args.sections:
        payload["embedded"] = asyncio.run(bench_embedded(args.prefix_tokens, args.probes))
        _print_embedded(payload["embedded"])
    if "snapshots" in args.sections:
        payload["kv_snapshots"] = bench_snapshots(args.snapshot_tokens)
        _print_snapshots(payload["kv_snapshots"])
    if "worker" in args.sections:
        payload["worker_overhead"] = bench_worker_overhead(args.repeats, args.overhead_tokens)
        _print_mapping("worker process vs in process (median ms):", payload["worker_overhead"])
    if "bufts" in args.sections:
        payload["extra_buffer_types"] = bench_extra_buffer_types(args.repeats)
        _print_mapping("llama.cpp extra buffer types:", payload["extra_buffer_types"])
    if "omp" in args.sections:
        payload["omp_wait_policy"] = bench_wait_policy(args.repeats)
        _print_mapping("OpenMP wait policy (tok/s):", payload["omp_wait_policy"])
    if "spin" in args.sections:
        payload["omp_spin"] = bench_spin(args.repeats)
        for condition, rows in payload["omp_spin"].items():
            _print_mapping(f"OpenMP spin before sleeping, {condition}:", rows)
    if "grammar" in args.sections:
        payload["grammar"] = bench_grammar(args.repeats)
        _print_mapping("llama.cpp grammar, SmolLM2 (ms per generated token):", payload["grammar"])
    if "retries" in args.sections:
        payload["retries"] = asyncio.run(bench_retries())
        _print_mapping("litellm retries against the fault-injecting server:", payload["retries"])
    if "batch" in args.sections:
        payload["batch"] = bench_batch(args.batch_widths, 4000, 64)
        _print_mapping("probes alone vs decoded together (tokens/s):", payload["batch"])
    if "draft" in args.sections:
        payload["draft"] = bench_draft(4000, 64, args.repeats)
        _print_mapping("decode steps by width, and prompt-lookup drafts:", payload["draft"])
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    machine = {
        "cpus": os.cpu_count(),
        "load_average_1m_at_end": round(os.getloadavg()[0], 2),
        "cpu_flags": sorted(_interesting_cpu_flags()),
    }
    earlier = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    RESULTS.write_text(json.dumps({**earlier, "machine": machine, **payload}, indent=2))
    print(f"machine: {machine}")
    print(f"wrote {RESULTS.relative_to(ROOT)}")


def _interesting_cpu_flags() -> set[str]:
    from runtime.backbones.doctor import CPUINFO, SHOWN_CPU_FLAGS, cpu_flags

    flags = cpu_flags(CPUINFO.read_text()) if CPUINFO.is_file() else frozenset()
    return set(flags & set(SHOWN_CPU_FLAGS))


if __name__ == "__main__":
    main()
