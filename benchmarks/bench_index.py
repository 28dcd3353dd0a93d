"""Indexing and recall against the model's own floor, side by side in one run.

1. Indexing throughput: MiniLM alone encoding the chunk texts of a synthetic workspace (batch
   64, torch's default threads: every core), against ``HybridIndex.sync`` indexing the same
   workspace from an empty embedding cache (chunking, embedding, chroma, FTS5). Target: the
   index at >= 0.8x the model's own rate. The model is timed before and after the index run
   and averaged, so a load change during the run shows as a spread.
2. Recall at ``--recall-chunks`` chunks: ``artifact_recall`` over MCP streamable HTTP (one
   pooled connection, as probes use it) against the floor of the same query: MiniLM query
   embedding plus an exact numpy top-k over every stored vector. Target: p50 within 1.5x.
   Passages get deterministic random vectors (``bench_memory.seed_random_vectors``: the model
   is not run 100k times); queries are embedded by the model. Both sides use one torch thread,
   as ``mirage memory serve`` does.

The 100k workspace and its index are built once and kept in ``--scratch`` (default
``benchmarks/.scratch``, ignored by git); later runs reuse them. Run:
``python benchmarks/bench_index.py [--chunks N] [--recall-chunks N]``; writes
``results/index.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from _common import write_results
from bench_memory import CITIES, ITEMS, seed_random_vectors, synthetic_workspace

from memory_server.embedding import Embedder, EmbeddingCache, load_model, set_torch_threads
from memory_server.index import HybridIndex, IndexConfig
from memory_server.units import UnitCatalog, chunk_unit
from memory_server.workspace import Workspace

SCRATCH = Path(__file__).parent / ".scratch"
INDEX_TARGET = 0.8
RECALL_TARGET = 1.5


def chunk_texts(index: HybridIndex) -> list[str]:
    workspace = index.workspace
    units = UnitCatalog(workspace).of(workspace.manifest).values()
    return [f"{c.header}\n{c.text}" for unit in units for c in chunk_unit(workspace, unit, None)]


def model_rate(texts: list[str]) -> float:
    started = time.perf_counter()
    load_model(None).encode(texts, batch_size=64, normalize_embeddings=True)
    return len(texts) / (time.perf_counter() - started)


def indexing(chunks: int, scratch: Path) -> dict[str, Any]:
    root = scratch / f"throughput_{chunks}"
    shutil.rmtree(root, ignore_errors=True)
    synthetic_workspace(root, chunks, rows_per_file=200)
    index = HybridIndex(Workspace.open(root), IndexConfig(), embedder=Embedder())
    texts = chunk_texts(index)
    load_model(None).encode(texts[:64])  # warm up
    before = model_rate(texts)
    started = time.perf_counter()
    report = index.sync()
    index_rate = report.chunks_added / (time.perf_counter() - started)
    after = model_rate(texts)
    index.close()
    shutil.rmtree(root, ignore_errors=True)
    model = (before + after) / 2
    return {
        "chunks": report.chunks_added,
        "texts_embedded": report.texts_embedded,
        "model_alone_per_s": [round(before, 1), round(after, 1)],
        "index_per_s": round(index_rate, 1),
        "ratio": round(index_rate / model, 2),
        "target": INDEX_TARGET,
    }


def recall_index(chunks: int, scratch: Path, embedder: Embedder) -> tuple[HybridIndex, float]:
    """The big workspace's index, built on first use (seconds it took; 0 when reused)."""
    root = scratch / f"recall_{chunks}"
    cache = scratch / "recall_embeddings.sqlite"
    started = time.perf_counter()
    if not root.exists():
        synthetic_workspace(root, chunks)
        seed_random_vectors(root, cache, embedder)
    config = IndexConfig(embedding_cache=cache)
    index = HybridIndex(Workspace.open(root), config, embedder=embedder)
    report = index.sync()
    built = time.perf_counter() - started if report.chunks_added else 0.0
    return index, built


def stored_vectors(index: HybridIndex) -> np.ndarray:
    texts = chunk_texts(index)
    cache = EmbeddingCache(index.config.embedding_cache or Path())
    from memory_server.embedding import text_hash

    found = cache.get_many(index.embedder.model_id, [text_hash(text) for text in texts])
    cache.close()
    return np.stack(list(found.values()))


def queries(count: int) -> list[str]:
    return [f"{ITEMS[n % 8]} orders in {CITIES[(n * 3) % 8]} quantity {n}" for n in range(count)]


def floor_ms(embedder: Embedder, matrix: np.ndarray, texts: list[str]) -> list[float]:
    samples = []
    for text in texts:
        started = time.perf_counter()
        vector = embedder.embed([text])[0]
        scores = matrix @ vector
        top = np.argpartition(-scores, 20)[:20]
        top[np.argsort(-scores[top])]
        samples.append((time.perf_counter() - started) * 1000)
    return samples


async def recall_ms(index: HybridIndex, texts: list[str]) -> list[float]:
    from memory_server.http import HttpServerThread
    from memory_server.server import build_server
    from runtime.mcp_client import MCPConnectionPool, MCPServerConfig

    server = build_server(index.workspace, index=index, transport="streamable-http")
    samples = []
    with HttpServerThread(server) as http:
        pool = MCPConnectionPool(MCPServerConfig(url=http.url))
        try:
            async with pool.lease() as tools:
                await tools.call("artifact_recall", {"query": "warm up"})
                for text in texts:
                    started = time.perf_counter()
                    outcome = await tools.call("artifact_recall", {"query": text, "k": 5})
                    samples.append((time.perf_counter() - started) * 1000)
                    assert not outcome.is_error, outcome.text
        finally:
            await pool.aclose()
    return samples


def recall(chunks: int, scratch: Path, count: int) -> dict[str, Any]:
    set_torch_threads(1)
    embedder = Embedder()
    embedder.embed(["warm up"])
    index, built = recall_index(chunks, scratch, embedder)
    matrix = stored_vectors(index)
    texts = queries(2 * count)
    floor = floor_ms(embedder, matrix, texts[:count])
    served = asyncio.run(recall_ms(index, texts[count:]))
    index.close()
    floor_p50, served_p50 = statistics.median(floor), statistics.median(served)
    return {
        "chunks": int(matrix.shape[0]),
        "build_seconds_first_run": round(built, 1),
        "floor_p50_ms": round(floor_p50, 2),
        "artifact_recall_mcp_http_p50_ms": round(served_p50, 2),
        "ratio": round(served_p50 / floor_p50, 2),
        "target": RECALL_TARGET,
        "queries": count,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=2000, help="indexing sample size")
    parser.add_argument("--recall-chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--scratch", type=Path, default=SCRATCH)
    args = parser.parse_args()
    args.scratch.mkdir(parents=True, exist_ok=True)
    load_start = [round(value, 2) for value in os.getloadavg()]
    throughput = indexing(args.chunks, args.scratch)
    print(
        f"indexing {throughput['chunks']} chunks: {throughput['index_per_s']}/s vs MiniLM alone "
        f"{throughput['model_alone_per_s']}/s -> {throughput['ratio']}x (target >= {INDEX_TARGET})"
    )
    served = recall(args.recall_chunks, args.scratch, args.queries)
    print(
        f"recall at {served['chunks']:,} chunks: artifact_recall p50 "
        f"{served['artifact_recall_mcp_http_p50_ms']} ms vs floor {served['floor_p50_ms']} ms -> "
        f"{served['ratio']}x (target <= {RECALL_TARGET})"
    )
    load_end = [round(value, 2) for value in os.getloadavg()]
    print(f"load {load_start} -> {load_end}")
    data = {
        "indexing": throughput,
        "recall": served,
        "load_average_start": load_start,
        "load_average_end": load_end,
    }
    print("wrote", write_results("index", data))


if __name__ == "__main__":
    main()
