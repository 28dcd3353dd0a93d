"""Memory server benchmark: recall latency at 1k/10k/100k chunks, concurrent HTTP clients, and
retrieval quality (recall@1/@5) against a substring-search baseline.

Run: ``python benchmarks/bench_memory.py [--sizes 1000,10000,100000] [--real-max 10000]``.
Writes ``benchmarks/results/memory.json``. ``--writers-only`` measures recall while other
processes write the same workspace (``benchmarks/results/memory_writers.json``).

``--mixed-only`` measures recall beside note appends (issue 47): ``--mixed-calls`` calls from
16 and 32 concurrent MCP clients (``--mixed-clients``; each its own session and ``/t/<tag>/mcp``
URL) against a real ``mirage memory serve --http`` process on a fresh copy of the smallest
workspace, once with 0 % and once with ``--append-share`` (40 %) ``memory_append`` calls
(``--rounds`` times, alternating, so machine load drifts over both alike). Recall p50/p99,
append p50/p99, server RSS, and whether every append reached both the call log and the notes,
with ``lscpu``'s model name and ``uptime`` before and after each run
(``benchmarks/results/memory_mixed<label>.json``). ``--server-pythonpath DIR`` (repeatable)
runs the server from those checkouts instead, each in turn within every round (e.g. main and
this branch, for before and after under the same load). The server's CPU seconds for the calls
(its process's user + system time after it answered its first call) do not depend on the
machine's load as latencies do.

Latency: a synthetic workspace of CSV files (one chunk per row) is indexed through the real
code path (chunking, FTS5, chroma). Sizes up to ``--real-max`` are embedded with MiniLM (once:
the embedding cache in ``--cache-dir`` survives runs); larger sizes get deterministic random
unit vectors written into the embedding cache first, so indexing stores them without calling
the model (queries are still embedded by the model). Recall latency is measured through
``MemoryService.recall`` (what the MCP tool runs: freshness check, query embedding, dense +
keyword search, fusion), with distinct queries so the query-vector cache never hits.

Quality: a small workspace of our own (charts with extracted tables, an invoice, screenshot
summaries, notes, code) with 30 questions and gold artifact ids (the bundled evidence pack
replaces it once it exists). Baselines: the reference MIRAGE recall, a case-insensitive
substring search over the workspace text (whole query), and a friendlier variant that ranks
files by how many query terms they contain as substrings.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import write_results

from memory_server.embedding import Embedder, EmbeddingCache, set_torch_threads, text_hash
from memory_server.index import HybridIndex, IndexConfig
from memory_server.service import MemoryService
from memory_server.workspace import Workspace

CITIES = ["Berlin", "Munich", "Hamburg", "Cologne", "Leipzig", "Dresden", "Bremen", "Essen"]
ITEMS = ["inverter", "battery", "cable", "panel", "meter", "bracket", "fuse", "relay"]


# -- latency ---------------------------------------------------------------------------------


def synthetic_workspace(root: Path, chunks: int, rows_per_file: int = 1000) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    files = max(1, chunks // rows_per_file)
    for number in range(files):
        rows = ["order_id,city,item,qty,price_eur,date"]
        for row in range(min(rows_per_file, chunks - number * rows_per_file)):
            n = number * rows_per_file + row
            rows.append(
                f"ORD-{n:06d},{CITIES[n % 8]},{ITEMS[(n // 8) % 8]},{1 + n % 7},"
                f"{(n * 37) % 5000 / 10:.2f},2024-{1 + n % 12:02d}-{1 + n % 28:02d}"
            )
        (root / f"orders_{number:04d}.csv").write_text("\n".join(rows) + "\n")
    return root


def seed_random_vectors(root: Path, cache_path: Path, embedder: Embedder) -> int:
    """Write deterministic random unit vectors for every chunk text of ``root`` into the cache,
    keyed exactly as the index keys them, so indexing never calls the model."""
    from memory_server.units import UnitCatalog, chunk_unit

    workspace = Workspace.open(root)
    cache = EmbeddingCache(cache_path)
    dimension = embedder.dimension
    seeded = 0
    for unit in UnitCatalog(workspace).of(workspace.manifest).values():
        texts = [f"{c.header}\n{c.text}" for c in chunk_unit(workspace, unit, None)]
        vectors = {}
        for text in texts:
            digest = text_hash(text)
            rng = np.random.default_rng(int(digest[:15], 16))
            vector = rng.standard_normal(dimension).astype(np.float32)
            vectors[digest] = vector / np.linalg.norm(vector)
        cache.put_many(embedder.model_id, vectors)
        seeded += len(vectors)
    cache.close()
    return seeded


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered), 2),
        "p95_ms": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 2),
        "mean_ms": round(statistics.fmean(ordered), 2),
        "n": len(ordered),
    }


def latency_at(size: int, cache_dir: Path, embedder: Embedder, real: bool) -> dict[str, Any]:
    root = cache_dir / f"ws_{size}"
    if not root.exists():
        synthetic_workspace(root, size)
    cache_path = cache_dir / "embeddings.sqlite"
    seeded = 0 if real else seed_random_vectors(root, cache_path, embedder)
    workspace = Workspace.open(root)
    index = HybridIndex(workspace, IndexConfig(embedding_cache=cache_path), embedder=embedder)
    started = time.perf_counter()
    report = index.sync()
    index_seconds = time.perf_counter() - started
    service = MemoryService(workspace, index, log_calls=False)
    samples = []
    for n in range(60):
        query = f"{ITEMS[n % 8]} orders in {CITIES[(n * 3) % 8]} quantity {n}"
        started = time.perf_counter()
        service.recall(query, 5)
        samples.append((time.perf_counter() - started) * 1000)
    exact = []
    for n in range(30):
        started = time.perf_counter()
        hits = service.recall(f"ORD-{(n * 7919) % size:06d}", 5).hits
        exact.append((time.perf_counter() - started) * 1000)
        assert hits, "exact id query returned nothing"
    result = {
        "chunks": index.chunk_count(),
        "vectors": "minilm" if real else "synthetic-random (model not called for passages)",
        "index_seconds": round(index_seconds, 2),
        "texts_embedded_now": report.texts_embedded,
        "synthetic_vectors_seeded": seeded,
        "recall_semantic_query": percentiles(samples[5:]),
        "recall_exact_id_query": percentiles(exact),
    }
    index.close()
    return result


# -- concurrent HTTP -------------------------------------------------------------------------


def concurrent_http(
    root: Path, cache_path: Path, embedder: Embedder, clients: int
) -> dict[str, Any]:
    import anyio
    import mcp

    from memory_server.calllog import read_calls
    from memory_server.http import HttpServerThread
    from memory_server.server import build_server

    workspace = Workspace.open(root)
    index = HybridIndex(workspace, IndexConfig(embedding_cache=cache_path), embedder=embedder)
    index.sync()
    call_log = root / ".mirage" / f"bench_calls_{clients}.jsonl"
    call_log.unlink(missing_ok=True)
    server = build_server(workspace, index=index, call_log=call_log)
    latencies: list[float] = []
    errors: list[str] = []
    per_client = 5

    async def one_client(number: int, url: str) -> None:
        try:
            async with mcp.Client(url) as client:
                for call in range(per_client):
                    started = time.perf_counter()
                    result = await client.call_tool(
                        "artifact_recall", {"query": f"{ITEMS[call % 8]} {CITIES[number % 8]}"}
                    )
                    latencies.append((time.perf_counter() - started) * 1000)
                    if result.is_error:
                        errors.append(str(result.content))
        except Exception as exc:  # a benchmark counts failures instead of stopping
            errors.append(f"{type(exc).__name__}: {exc}")

    async def run_all(http: HttpServerThread) -> float:
        started = time.perf_counter()
        async with anyio.create_task_group() as group:
            for number in range(clients):
                group.start_soon(one_client, number, http.tagged_url(f"client-{number}"))
        return time.perf_counter() - started

    with HttpServerThread(server) as http:
        wall = anyio.run(run_all, http)
    attributed = all(
        len(read_calls(call_log, tag=f"client-{n}")) == per_client for n in range(clients)
    )
    return {
        "clients": clients,
        "calls": clients * per_client,
        "errors": len(errors),
        "error_samples": errors[:3],
        "wall_seconds": round(wall, 2),
        "calls_per_second": round(clients * per_client / wall, 1),
        "latency": percentiles(latencies) if latencies else None,
        "every_call_attributed_to_its_client": attributed,
    }


# -- other processes writing ----------------------------------------------------------------

FOREIGN_WRITE = """
import sys
from pathlib import Path
from memory_server.index import HybridIndex, IndexConfig
from memory_server.workspace import Workspace

root, cache, action = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
workspace = Workspace.open(root)
index = HybridIndex(workspace, IndexConfig(embedding_cache=cache))
if action == "rebuild":
    index.rebuild()
else:
    workspace.append_note(f"foreign writer note {action}", date="2030-01-01")
    index.sync()
index.close()
"""


def foreign(root: Path, cache_path: Path, action: str) -> subprocess.Popen[bytes]:
    """Another process writing the index of ``root`` (a note + sync, or a rebuild)."""
    return subprocess.Popen(
        [sys.executable, "-c", FOREIGN_WRITE, str(root), str(cache_path), action],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
    )


def writers(size: int, cache_dir: Path, embedder: Embedder, real: bool) -> dict[str, Any]:
    """Recall in this process while other processes write the same workspace: steady calls,
    the first call after another process wrote (it reloads the embedded store), and calls
    while another process rebuilds the index into a new generation."""
    root = cache_dir / f"ws_{size}"
    if not root.exists():
        synthetic_workspace(root, size)
    cache_path = cache_dir / "embeddings.sqlite"
    if not real:
        seed_random_vectors(root, cache_path, embedder)
    workspace = Workspace.open(root)
    index = HybridIndex(workspace, IndexConfig(embedding_cache=cache_path), embedder=embedder)
    index.sync()
    service = MemoryService(workspace, index, log_calls=False)

    def timed(n: int) -> float:
        started = time.perf_counter()
        service.recall(f"{ITEMS[n % 8]} orders in {CITIES[(n * 5) % 8]} batch {n}", 5)
        return (time.perf_counter() - started) * 1000

    steady = [timed(n) for n in range(25)][5:]
    after_foreign_write = []
    for n in range(5):
        assert foreign(root, cache_path, f"round-{n}").wait() == 0
        after_foreign_write.append(timed(100 + n))
    rebuild = foreign(root, cache_path, "rebuild")
    started = time.perf_counter()
    during: list[float] = []
    errors = 0
    while rebuild.poll() is None:
        try:
            during.append(timed(200 + len(during)))
        except Exception:  # a benchmark counts failures instead of stopping
            errors += 1
    rebuild_seconds = time.perf_counter() - started
    after_rebuild = [timed(400 + n) for n in range(5)]
    index.close()
    return {
        "chunks": size,
        "vectors": "minilm" if real else "synthetic-random",
        "steady": percentiles(steady),
        "first_call_after_another_process_wrote": percentiles(after_foreign_write),
        "during_rebuild_by_another_process": percentiles(during) if during else None,
        "errors_during_rebuild": errors,
        "rebuild_exit_code": rebuild.returncode,
        "rebuild_seconds": round(rebuild_seconds, 1),
        "after_rebuild": percentiles(after_rebuild),
    }


# -- mixed load: appends beside recalls, real clients against a real server process --------

MIXED_NOTE = "- client {c} note {n}: crate code KX{c}N{n}Q holds {q} parts for warehouse {w}."


class _MixedServer:
    """``mirage memory serve --http`` on a fresh copy of a workspace, as a child process."""

    def __init__(
        self, source: Path, scratch: Path, threads: int, pythonpath: Path | None = None
    ) -> None:
        import shutil
        import socket

        self.root = scratch / "ws"
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.copytree(source, self.root, ignore=shutil.ignore_patterns("calls*.jsonl"))
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        self.log = scratch / "server.log"
        command = [
            sys.executable,
            "-m",
            "mirage",
            "memory",
            "serve",
            "--workspace",
            str(self.root),
            "--http",
            f"127.0.0.1:{self.port}",
            "--threads",
            str(threads),
        ]
        self.checkout = pythonpath or Path(__file__).resolve().parent.parent
        env = {**os.environ, "PYTHONPATH": str(self.checkout)}
        with self.log.open("w") as sink:
            self.process = subprocess.Popen(
                command, stderr=sink, stdout=subprocess.DEVNULL, env=env
            )

    def url(self, tag: str) -> str:
        return f"http://127.0.0.1:{self.port}/t/{tag}/mcp"

    async def ready(self) -> None:
        import anyio
        import mcp

        for _ in range(1200):
            if self.process.poll() is not None:
                raise RuntimeError(self.log.read_text()[-2000:])
            try:
                async with mcp.Client(self.url("warm")) as client:
                    result = await client.call_tool("artifact_recall", {"query": "warm up"})
                    if not result.is_error:
                        return
            except Exception:  # not listening yet
                pass
            await anyio.sleep(0.25)
        raise RuntimeError("the memory server did not start")

    def cpu_seconds(self) -> float:
        """User + system CPU time of the server process so far."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def memory_kb(self) -> dict[str, int]:
        """VmRSS (now) and VmHWM (peak) of the server process, in kB."""
        fields = {}
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                fields[name] = int(value.split()[0])
        return fields

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)


def _mixed_plan(clients: int, calls: int, append_share: float) -> list[list[str]]:
    """Per client, the tools it calls in order (deterministic: the same plan every run)."""
    import random

    rng = random.Random(47)
    plan: list[list[str]] = [[] for _ in range(clients)]
    for number in range(calls):
        tool = "memory_append" if rng.random() < append_share else "artifact_recall"
        plan[number % clients].append(tool)
    return plan


async def _mixed_client(
    url: str, number: int, tools: list[str], samples: dict[str, list[float]], errors: list[str]
) -> None:
    import mcp

    try:
        async with mcp.Client(url) as client:
            for call, tool in enumerate(tools):
                if tool == "memory_append":
                    text = MIXED_NOTE.format(c=number, n=call, q=call * 7 % 97, w=call % 13)
                    arguments: dict[str, Any] = {"text": text}
                else:
                    query = f"{ITEMS[call % 8]} orders in {CITIES[(number + call) % 8]} qty {call}"
                    arguments = {"query": query}
                started = time.perf_counter()
                result = await client.call_tool(tool, arguments)
                samples[tool].append((time.perf_counter() - started) * 1000)
                if result.is_error:
                    errors.append(f"{tool}: {result.content}")
    except Exception as exc:  # a benchmark counts failures instead of stopping
        errors.append(f"{type(exc).__name__}: {exc}")


def _tail(samples: list[float]) -> dict[str, float] | None:
    if not samples:
        return None
    ordered = sorted(samples)
    return {**percentiles(ordered), "p99_ms": round(ordered[int(0.99 * (len(ordered) - 1))], 2)}


def mixed_load(
    source: Path,
    scratch: Path,
    clients: int,
    calls: int,
    append_share: float,
    threads: int,
    pythonpath: Path | None = None,
) -> dict[str, Any]:
    """``calls`` calls from ``clients`` concurrent MCP clients (each its own session and tag)
    against a server process, ``append_share`` of them ``memory_append``; recall latency,
    server memory, and whether every append reached the call log and the notes."""
    import anyio

    from memory_server.calllog import read_calls

    server = _MixedServer(source, scratch, threads, pythonpath)
    samples: dict[str, list[float]] = {"artifact_recall": [], "memory_append": []}
    errors: list[str] = []
    plan = _mixed_plan(clients, calls, append_share)
    uptime_before = _uptime()
    cpu_at_start: list[float] = []

    async def run_all() -> float:
        await server.ready()
        cpu_at_start.append(server.cpu_seconds())
        started = time.perf_counter()
        async with anyio.create_task_group() as group:
            for number, tools in enumerate(plan):
                group.start_soon(
                    _mixed_client, server.url(f"c{number}"), number, tools, samples, errors
                )
        return time.perf_counter() - started

    try:
        wall = anyio.run(run_all)
        memory = server.memory_kb()
        cpu = server.cpu_seconds() - cpu_at_start[0]
    finally:
        server.stop()
    logged = [
        r
        for r in read_calls(server.root / ".mirage" / "calls.jsonl")
        if r.tool == "memory_append" and r.error is None
    ]
    notes = "".join(p.read_text() for p in (server.root / "memory").glob("*.md"))
    return {
        "server_checkout": str(server.checkout),
        "clients": clients,
        "calls": calls,
        "append_share": append_share,
        "server_cpu_seconds": round(cpu, 1),
        "server_cpu_ms_per_call": round(cpu * 1000 / calls, 1),
        "wall_seconds": round(wall, 1),
        "calls_per_second": round(calls / wall, 1),
        "recall": _tail(samples["artifact_recall"]),
        "append": _tail(samples["memory_append"]),
        "errors": len(errors),
        "error_samples": errors[:3],
        "server_rss_mb": round(memory.get("VmRSS", 0) / 1024),
        "server_peak_rss_mb": round(memory.get("VmHWM", 0) / 1024),
        "appends_logged": len(logged),
        "appends_in_notes": notes.count("crate code KX"),
        "uptime_before": uptime_before,
        "uptime_after": _uptime(),
    }


def mixed(args: argparse.Namespace, embedder: Embedder) -> dict[str, Any]:
    """Recall p50/p99 with 0 % and ``--append-share`` appends at each ``--mixed-clients``, and
    the ratio of the recall p50s (the target: at most 2 at 16 clients)."""
    size = min(int(s) for s in args.sizes.split(","))
    source = args.cache_dir / f"ws_{size}"
    if not source.exists():
        synthetic_workspace(source, size)
    cache_path = args.cache_dir / "embeddings.sqlite"
    index = HybridIndex(
        Workspace.open(source), IndexConfig(embedding_cache=cache_path), embedder=embedder
    )
    index.sync()
    index.close()
    checkouts = args.server_pythonpath or [Path(__file__).resolve().parent.parent]
    runs = []
    for round_number in range(args.rounds):
        for clients in (int(n) for n in args.mixed_clients.split(",")):
            for share in (0.0, args.append_share):
                for checkout in checkouts:
                    measured = mixed_load(
                        source,
                        args.cache_dir / "mixed",
                        clients,
                        args.mixed_calls,
                        share,
                        args.threads,
                        checkout,
                    )
                    measured["round"] = round_number
                    print("mixed", measured, flush=True)
                    runs.append(measured)
    summary = []
    for checkout in checkouts:
        for clients in (int(n) for n in args.mixed_clients.split(",")):
            for round_number in range(args.rounds):
                pair = {
                    run["append_share"]: run
                    for run in runs
                    if run["clients"] == clients
                    and run["round"] == round_number
                    and run["server_checkout"] == str(checkout)
                }
                without, beside = pair[0.0], pair[args.append_share]
                summary.append(
                    {
                        "server_checkout": str(checkout),
                        "clients": clients,
                        "round": round_number,
                        "recall_p50_ms_without_appends": without["recall"]["p50_ms"],
                        "recall_p50_ms_with_appends": beside["recall"]["p50_ms"],
                        "recall_p99_ms_without_appends": without["recall"]["p99_ms"],
                        "recall_p99_ms_with_appends": beside["recall"]["p99_ms"],
                        "p50_ratio": round(
                            beside["recall"]["p50_ms"] / without["recall"]["p50_ms"], 2
                        ),
                        "append_p50_ms": beside["append"]["p50_ms"],
                        "server_cpu_ms_per_call_without_appends": without["server_cpu_ms_per_call"],
                        "server_cpu_ms_per_call_with_appends": beside["server_cpu_ms_per_call"],
                        "server_rss_mb_with_appends": beside["server_rss_mb"],
                    }
                )
    for row in summary:
        print("summary", row, flush=True)
    return {"chunks": size, "runs": runs, "summary": summary}


# -- quality ---------------------------------------------------------------------------------

QUALITY_FILES: dict[str, str] = {
    "MANIFEST.yaml": """\
artifacts:
  - id: chart_rent_7a21
    title: "Median rent by city, 2015-2023"
    modality: chart
    files: [artifacts/chart_rent_7a21.png, derived/chart_rent_7a21.table.csv]
    aliases: ["rent chart"]
  - id: shot_router_5c02
    title: "Router admin page screenshot"
    modality: screenshot
    files: [artifacts/shot_router_5c02.png, derived/shot_router_5c02.summary.md]
  - id: chart_energy_19be
    title: "Household electricity use per month, 2024"
    modality: chart
    files: [artifacts/chart_energy_19be.png, derived/chart_energy_19be.table.csv]
  - id: doc_lease_44f0
    title: "Apartment lease agreement"
    modality: document
    files: [artifacts/doc_lease_44f0.txt]
""",
    "artifacts/chart_rent_7a21.png": "PNG placeholder",
    "derived/chart_rent_7a21.table.csv": (
        "city,year,median_rent_eur\nBerlin,2015,1020\nBerlin,2023,1480\nMunich,2015,1390\n"
        "Munich,2023,1960\nHamburg,2023,1310\n"
    ),
    "artifacts/shot_router_5c02.png": "PNG placeholder",
    "derived/shot_router_5c02.summary.md": (
        "# Router admin page\n\nNetwork name (SSID): Birchwood-5G. Channel 36. Firmware "
        "version 7.29.3. Guest network disabled. Admin IP 192.168.178.1.\n"
    ),
    "artifacts/chart_energy_19be.png": "PNG placeholder",
    "derived/chart_energy_19be.table.csv": (
        "month,kwh\nJanuary,412\nFebruary,388\nJuly,201\nDecember,455\n"
    ),
    "artifacts/doc_lease_44f0.txt": (
        "LEASE AGREEMENT\n\nTenant: Mara Lindqvist. Landlord: Oskar Brandt.\n"
        "Monthly rent: 1,250 EUR, due on the 3rd of each month.\n"
        "Notice period: three months. Deposit: 3,750 EUR.\n"
    ),
    "artifacts/invoice_9d3e.json": (
        '{"invoice": "INV-2024-0117", "vendor": "Solaris Dach GmbH", "total_eur": 7340.0,'
        ' "items": [{"name": "roof mounting kit", "eur": 890.0},'
        ' {"name": "hybrid inverter 8kW", "eur": 2450.0}], "due": "2024-05-31"}\n'
    ),
    "artifacts/receipt_pharmacy_0b7.txt": (
        "Linden Apotheke\nIbuprofen 400mg 20 tablets 4.95\nVitamin D3 drops 9.90\n"
        "Total 14.85 EUR paid by card on 2024-02-12\n"
    ),
    "artifacts/recipe_dal_2f1.md": (
        "# Red lentil dal\n\n## Ingredients\n- 250 g red lentils\n- 400 ml coconut milk\n"
        "- 2 tsp garam masala\n\n## Method\nSimmer the lentils for 20 minutes, then stir in "
        "the coconut milk.\n"
    ),
    "artifacts/flight_booking_83c.txt": (
        "Booking reference QX7LMP. Flight LH 1842 from Munich to Lisbon on 14 June 2024, "
        "departure 07:35, seat 21A, one checked bag.\n"
    ),
    "artifacts/vet_visit_6ad.md": (
        "# Vet visit for Miso\n\nDate: 2024-03-08. Weight 4.6 kg. Vaccination against "
        "feline leukemia renewed; next booster due March 2025. Clinic: Tierarztpraxis Nord.\n"
    ),
    "code/budget_tool_e51.py": (
        "SAVINGS_RATE = 0.18\n\n\ndef monthly_savings(net_income: float) -> float:\n"
        "    return round(net_income * SAVINGS_RATE, 2)\n"
    ),
    "artifacts/meeting_notes_c90.md": (
        "# Kickoff: garden renovation\n\nAttendees: Mara, the landscaper Jonas Weber.\n"
        "Decision: use basalt paving stones. Budget cap 9,500 EUR. Work starts 2024-04-15.\n"
    ),
    "artifacts/bank_statement_a14.csv": (
        "date,description,amount_eur\n2024-01-03,Rent transfer Oskar Brandt,-1250.00\n"
        "2024-01-09,Salary ACME Robotics,3890.55\n2024-01-17,Gym membership FitPoint,-29.90\n"
    ),
    "memory/2024-06-01.md": (
        "# 2024-06-01\n\n- The user's car is a 2019 Skoda Octavia, licence plate M-KL 4821.\n"
        "- The user is allergic to penicillin.\n"
    ),
    "MEMORY.md": (
        "# Long-term memory\n\n- Preferred name: Mara.\n- Works as a structural engineer.\n"
    ),
}

QUESTIONS: list[tuple[str, str]] = [
    ("What was the median rent in Munich in 2023?", "chart_rent_7a21"),
    ("How much did rent in Berlin cost in 2015 according to the chart?", "chart_rent_7a21"),
    ("rent chart", "chart_rent_7a21"),
    ("What is the Wi-Fi network called?", "shot_router_5c02"),
    ("Which firmware version is the router running?", "shot_router_5c02"),
    ("192.168.178.1", "shot_router_5c02"),
    ("How many kWh of electricity were used in December?", "chart_energy_19be"),
    ("Which month had the lowest power consumption?", "chart_energy_19be"),
    ("How long is the notice period for the apartment?", "doc_lease_44f0"),
    ("How much is the security deposit?", "doc_lease_44f0"),
    ("Who is the landlord?", "doc_lease_44f0"),
    ("INV-2024-0117", "invoice_9d3e"),
    ("What did the hybrid inverter cost?", "invoice_9d3e"),
    ("When is the solar invoice due?", "invoice_9d3e"),
    ("How much did I spend at the pharmacy?", "receipt_pharmacy_0b7"),
    ("Which painkiller did I buy?", "receipt_pharmacy_0b7"),
    ("How much coconut milk goes into the dal?", "recipe_dal_2f1"),
    ("How long should the lentils simmer?", "recipe_dal_2f1"),
    ("What is my booking reference for the Lisbon trip?", "flight_booking_83c"),
    ("Which seat do I have on the flight?", "flight_booking_83c"),
    ("QX7LMP", "flight_booking_83c"),
    ("How much does the cat weigh?", "vet_visit_6ad"),
    ("When is Miso's next booster shot due?", "vet_visit_6ad"),
    ("What savings rate does the budget script use?", "budget_tool_e51"),
    ("What paving stones did we decide on for the garden?", "meeting_notes_c90"),
    ("What is the budget cap for the garden renovation?", "meeting_notes_c90"),
    ("How much was my salary in January?", "bank_statement_a14"),
    ("How much is the gym membership?", "bank_statement_a14"),
    ("What is the licence plate of my car?", "memory/2024-06-01"),
    ("Which antibiotic am I allergic to?", "memory/2024-06-01"),
    ("What's the name of my home network?", "shot_router_5c02"),
    ("Which city was the most expensive to rent in 2023?", "chart_rent_7a21"),
    ("How much do I put aside from each paycheck?", "budget_tool_e51"),
    ("Who is doing the landscaping work?", "meeting_notes_c90"),
    ("Who is my employer?", "bank_statement_a14"),
    ("What time does my plane leave?", "flight_booking_83c"),
]

_STOP = set(
    [
        "a",
        "an",
        "and",
        "are",
        "at",
        "by",
        "did",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "in",
        "is",
        "it",
        "many",
        "much",
        "my",
        "of",
        "on",
        "the",
        "to",
        "was",
        "were",
        "what",
        "when",
        "which",
        "who",
        "why",
        "with",
    ]
)


def quality_workspace(root: Path) -> Path:
    for relative, content in QUALITY_FILES.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    return root


def _workspace_texts(workspace: Workspace) -> list[tuple[str, str]]:
    texts = []
    for entry in workspace.manifest.files.values():
        if entry.kind in ("image", "binary"):
            continue
        try:  # the substring baseline reads text files only (PDF originals have derived text)
            texts.append((entry.artifact_id, workspace.read_bytes(entry.path).decode().lower()))
        except UnicodeDecodeError:
            continue
    return texts


def substring_whole(texts: list[tuple[str, str]], query: str) -> list[str]:
    needle = query.lower().strip(" ?")
    return list(dict.fromkeys(aid for aid, text in texts if needle in text))


def substring_terms(texts: list[tuple[str, str]], query: str) -> list[str]:
    terms = [t for t in re.findall(r"[\w.-]+", query.lower()) if t not in _STOP and len(t) > 2]
    scored: dict[str, int] = {}
    for aid, text in texts:
        score = sum(1 for term in terms if term in text)
        if score:
            scored[aid] = max(scored.get(aid, 0), score)
    return sorted(scored, key=lambda aid: -scored[aid])


def recall_at(ranked: list[list[str]], gold: list[str], k: int) -> float:
    return round(sum(g in r[:k] for r, g in zip(ranked, gold, strict=True)) / len(gold), 3)


def quality_on(
    root: Path, questions: list[tuple[str, str]], cache_dir: Path, embedder: Embedder
) -> dict[str, Any]:
    """recall@1/@5 of the hybrid index against two substring baselines for (question, gold
    artifact id) pairs over the workspace at ``root``."""
    workspace = Workspace.open(root)
    config = IndexConfig(embedding_cache=cache_dir / "embeddings.sqlite")
    index = HybridIndex(workspace, config, embedder=embedder)
    texts = _workspace_texts(workspace)
    gold = [artifact for _, artifact in questions]
    ours = []
    for question, _ in questions:
        hits = index.search(question, 20)
        ours.append(list(dict.fromkeys(hit.artifact_id for hit in hits)))
    index.close()
    whole = [substring_whole(texts, q) for q, _ in questions]
    terms = [substring_terms(texts, q) for q, _ in questions]
    misses = [q for (q, g), r in zip(questions, ours, strict=True) if r[:1] != [g]]
    return {
        "questions": len(questions),
        "artifacts": len(set(gold)),
        "hybrid": {"recall@1": recall_at(ours, gold, 1), "recall@5": recall_at(ours, gold, 5)},
        "substring_whole_query": {
            "recall@1": recall_at(whole, gold, 1),
            "recall@5": recall_at(whole, gold, 5),
        },
        "substring_any_term": {
            "recall@1": recall_at(terms, gold, 1),
            "recall@5": recall_at(terms, gold, 5),
        },
        "hybrid_top1_misses": misses[:10],
    }


def quality(cache_dir: Path, embedder: Embedder) -> dict[str, Any]:
    root = quality_workspace(Path(tempfile.mkdtemp(prefix="mirage-quality-")) / "ws")
    return quality_on(root, QUESTIONS, cache_dir, embedder)


def pack_quality(name: str, cache_dir: Path, embedder: Embedder) -> dict[str, Any]:
    """The same comparison on a bundled evidence pack's answerable questions."""
    from harness.mirage.packs import load_pack

    pack = load_pack(name)
    root = Path(tempfile.mkdtemp(prefix=f"mirage-{name}-")) / "ws"
    pack.materialize_workspace(root)
    questions = [
        (q.question, q.gold_source) for q in pack.questions if str(q.gold_answerable) == "YES"
    ]
    return quality_on(root, questions, cache_dir, embedder)


def _cpu_model() -> str:
    """``lscpu``'s model name (``/proc/cpuinfo`` when lscpu is missing)."""
    try:
        listing = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        listing = Path("/proc/cpuinfo").read_text()
    for line in listing.splitlines():
        name, _, value = line.partition(":")
        if name.strip().lower() == "model name":
            return value.strip()
    return "unknown"


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return f"load average: {os.getloadavg()}"


# -- main ------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument(
        "--real-max", type=int, default=10000, help="largest size embedded by MiniLM"
    )
    parser.add_argument("--clients", default="8,32")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument(
        "--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "mirage-bench-memory"
    )
    parser.add_argument("--quality-only", action="store_true", help="skip latency and HTTP")
    parser.add_argument(
        "--writers-only",
        action="store_true",
        help="only recall while other processes write the workspace (--sizes)",
    )
    parser.add_argument(
        "--mixed-only",
        action="store_true",
        help="only recall beside memory_append from concurrent HTTP clients (memory_mixed.json)",
    )
    parser.add_argument("--mixed-clients", default="16,32")
    parser.add_argument("--mixed-calls", type=int, default=2000)
    parser.add_argument("--append-share", type=float, default=0.4)
    parser.add_argument("--rounds", type=int, default=1, help="repeat the mixed runs")
    parser.add_argument(
        "--server-pythonpath",
        type=Path,
        action="append",
        default=None,
        help="run the mixed benchmark's server from this checkout (repeatable; default: this one)",
    )
    parser.add_argument("--label", default="", help="suffix of the result file name")
    args = parser.parse_args()
    args.cache_dir.mkdir(parents=True, exist_ok=True)
    set_torch_threads(args.threads)
    embedder = Embedder()
    started = time.perf_counter()
    embedder.embed(["warm up"])
    results: dict[str, Any] = {
        "model_load_seconds": round(time.perf_counter() - started, 2),
        "torch_threads": args.threads,
        "load_average_at_start": list(os.getloadavg()),
    }

    sizes = [int(s) for s in args.sizes.split(",")]
    if args.mixed_only:
        results["cpu"] = _cpu_model()
        results["cores"] = os.cpu_count()
        checkouts = args.server_pythonpath or [Path(__file__).resolve().parent.parent]
        results["server_checkouts"] = [str(path) for path in checkouts]
        results["uptime_at_start"] = _uptime()
        results["mixed"] = mixed(args, embedder)
        results["uptime_at_end"] = _uptime()
        print("wrote", write_results(f"memory_mixed{args.label}", results))
        return
    if args.writers_only:
        results["writers"] = {
            str(size): writers(size, args.cache_dir, embedder, real=size <= args.real_max)
            for size in sizes
        }
        print("writers", results["writers"], flush=True)
        results["load_average_at_end"] = list(os.getloadavg())
        print("wrote", write_results("memory_writers", results))
        return

    results["quality"] = quality(args.cache_dir, embedder)
    print("quality", results["quality"], flush=True)
    for pack in ("mirage-core", "mirage-ext"):
        results[f"quality_{pack}"] = pack_quality(pack, args.cache_dir, embedder)
        print(f"quality {pack}", results[f"quality_{pack}"], flush=True)
    if args.quality_only:
        print("wrote", write_results("memory_quality", results))
        return

    results["latency"] = {}
    for size in (int(s) for s in args.sizes.split(",")):
        measured = latency_at(size, args.cache_dir, embedder, real=size <= args.real_max)
        results["latency"][str(size)] = measured
        print(size, measured, flush=True)

    smallest = args.cache_dir / f"ws_{min(int(s) for s in args.sizes.split(','))}"
    results["concurrent_http"] = [
        concurrent_http(smallest, args.cache_dir / "embeddings.sqlite", embedder, int(n))
        for n in args.clients.split(",")
    ]
    print("http", results["concurrent_http"], flush=True)
    results["threads_alive_after"] = threading.active_count()
    path = write_results("memory", results)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
