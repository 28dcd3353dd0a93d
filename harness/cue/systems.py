"""The memory systems under test: each turns a profile's textualized history plus a question into
the memory the answerer sees (and, for retrieval systems, a ranking of rounds).

Above: the runner, which opens one system per condition and one profile at a time. Below:
MiniLM embeddings and chroma (``memory_server.embedding``), mirage's memory server (workspace,
hybrid index, MCP over streamable HTTP, its call log), and the agent adapters
(``harness.kit.agents``) for an agent we did not write.

- ``full_context``: every round, oldest first, cut from the oldest end until the prompt fits the
  answerer's window (counted with the model's own tokenizer when it has one, otherwise cl100k
  plus 10%), and to ``context_tokens`` (cl100k) when set. No ranking.
- ``naive_rag``: one MiniLM vector per round in a chroma collection (cosine); the question with
  its options is the query; the top ``k`` rounds, shown in history order.
- ``mirage_memory``: the rounds written as a memory-server workspace (one markdown file per
  round, ``MANIFEST.yaml`` naming each round), indexed by ``HybridIndex`` (dense + BM25, RRF
  1/(60+r), pool max(20, 4k)) and queried with ``artifact_recall`` over a real MCP session at the
  question's own tagged URL; the top ``k`` rounds, shown in history order.
- ``agent``: the same memory server, but the agent under test decides what to ask it; the
  agent receives the question only (a checkpoint with an empty session carries the system
  prompt), and what it retrieved is read back from the server's call log by the question's tag.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

import structlog
import yaml
from pydantic import BaseModel, ConfigDict

from harness.cue.answer import answer_prompt, memory_block, system_prompt
from harness.cue.config import (
    AgentSpec,
    FullContextSpec,
    MirageMemorySpec,
    NaiveRagSpec,
    SystemSpec,
)
from harness.cue.records import CueUsage
from harness.cue.responder import ProfileRun, Responder, Response, ranked_rounds
from harness.cue.schema import Question
from harness.cue.textualize import MemoryUnit
from runtime.backbones.base import Backbone, ProviderError
from runtime.messages import Message, SystemMessage, UserMessage
from runtime.tokens import count_tokens

log = structlog.get_logger(__name__)

ESTIMATE_MARGIN = 1.1


class RetrievalError(RuntimeError):
    """A memory system could not retrieve for a question (recorded as the question's error)."""


class Retrieval(BaseModel):
    """What a system gives the answerer for one question."""

    model_config = ConfigDict(frozen=True)

    units: tuple[MemoryUnit, ...]
    ranked: tuple[str, ...] = ()


class Retriever(Protocol):
    """One retrieval system's memory of one profile."""

    async def retrieve(self, question: Question, tag: str) -> Retrieval: ...


class Answerer:
    """A retrieval system in front of the answering backbone."""

    def __init__(self, retriever: Retriever, backbone: Backbone, name: str) -> None:
        self.retriever = retriever
        self.backbone = backbone
        self.name = name

    async def respond(self, question: Question, tag: str) -> Response:
        started = time.perf_counter()
        try:
            retrieval = await self.retriever.retrieve(question, tag)
        except RetrievalError as exc:
            return Response(
                error=f"retrieval_error: {exc}", latency_s=time.perf_counter() - started
            )
        shown = Response(
            ranked=retrieval.ranked,
            in_context=tuple(u.round_id for u in retrieval.units),
            memory_tokens=count_tokens(memory_block(self.name, retrieval.units)),
        )
        try:
            completion = await self.backbone.complete(
                prompt_messages(self.name, retrieval.units, question), []
            )
        except ProviderError as exc:
            return shown.model_copy(
                update={
                    "error": f"provider_error: {exc}",
                    "latency_s": time.perf_counter() - started,
                }
            )
        usage = CueUsage(
            input_tokens=completion.usage.input_tokens,
            output_tokens=completion.usage.output_tokens,
            cached_tokens=completion.usage.cached_tokens,
        )
        return shown.model_copy(
            update={
                "text": completion.text,
                "usage": usage,
                "latency_s": time.perf_counter() - started,
            }
        )


class SystemContext(BaseModel):
    """What opening a system needs besides its spec."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    work_dir: Path
    backbone: Backbone | None = None
    output_tokens: int = 64


def query_text(question: Question) -> str:
    """The retrieval query: the stem and its options (as the release queries its memories)."""
    return question.prompt_block()


def in_history_order(units: Sequence[MemoryUnit], chosen: Sequence[str]) -> tuple[MemoryUnit, ...]:
    wanted = set(chosen)
    return tuple(unit for unit in units if unit.round_id in wanted)


def prompt_messages(name: str, units: Sequence[MemoryUnit], question: Question) -> list[Message]:
    return [
        SystemMessage(content=system_prompt(name)),
        UserMessage.text(answer_prompt(name, units, question)),
    ]


# -- full context ---------------------------------------------------------------------------


def prompt_tokens(backbone: Backbone, messages: list[Message]) -> int:
    count = backbone.count_prompt_tokens(messages, [])
    return count.tokens if count.source == "provider" else int(count.tokens * ESTIMATE_MARGIN)


def fit_to_window(
    name: str,
    units: Sequence[MemoryUnit],
    questions: Sequence[Question],
    backbone: Backbone | None,
    output_tokens: int,
    context_tokens: int | None,
) -> tuple[MemoryUnit, ...]:
    """The newest suffix of ``units`` that fits, with the longest of ``questions``, in the
    window (and in ``context_tokens`` of history when set). Binary search over the cut."""
    window = backbone.context_window if backbone is not None else 0
    longest = max(questions, key=lambda q: len(q.prompt_block()))

    def fits(start: int) -> bool:
        kept = units[start:]
        if context_tokens is not None and sum(count_tokens(u.text) for u in kept) > context_tokens:
            return False
        if backbone is None or not window:
            return True
        return (
            prompt_tokens(backbone, prompt_messages(name, kept, longest)) + output_tokens <= window
        )

    low, high = 0, len(units)
    while low < high:
        middle = (low + high) // 2
        if fits(middle):
            high = middle
        else:
            low = middle + 1
    if low:
        log.info("cue.full_context_truncated", dropped=low, kept=len(units) - low)
    return tuple(units[low:])


class FullContextMemory:
    def __init__(self, units: tuple[MemoryUnit, ...]) -> None:
        self.units = units

    async def retrieve(self, question: Question, tag: str) -> Retrieval:
        return Retrieval(units=self.units)


# -- naive RAG ------------------------------------------------------------------------------


def collection_name(profile_id: str, units: Sequence[MemoryUnit]) -> str:
    digest = hashlib.sha256("\n\x00".join(u.text for u in units).encode("utf-8")).hexdigest()
    slug = re.sub(r"[^A-Za-z0-9._-]", "-", profile_id)[:40]
    return f"cue-{slug}-{digest[:16]}"


class NaiveRagMemory:
    """Cosine top-k over round vectors in a chroma collection (built once per history text)."""

    def __init__(
        self, index_dir: Path, cache: Path, profile_id: str, units: Sequence[MemoryUnit], k: int
    ) -> None:
        import chromadb
        from chromadb.config import Settings

        from memory_server.chroma_ef import chroma_embedding_function
        from memory_server.embedding import Embedder, EmbeddingCache, embed_cached

        self.units = list(units)
        self.k = k
        self.embedder = Embedder()
        index_dir.mkdir(parents=True, exist_ok=True)
        self.cache = EmbeddingCache(cache)
        client = chromadb.PersistentClient(
            path=str(index_dir / "chroma"), settings=Settings(anonymized_telemetry=False)
        )
        self.collection = client.get_or_create_collection(
            name=collection_name(profile_id, units),
            embedding_function=chroma_embedding_function(None),
            configuration={"hnsw": {"space": "cosine"}},
        )
        if self.collection.count() != len(self.units):
            vectors = embed_cached(self.embedder, self.cache, [u.text for u in self.units])
            self.collection.upsert(
                ids=[u.round_id for u in self.units],
                embeddings=vectors,
                documents=[u.text for u in self.units],
            )

    async def retrieve(self, question: Question, tag: str) -> Retrieval:
        vector = self.embedder.embed([query_text(question)])[0]
        result = self.collection.query(
            query_embeddings=[vector], n_results=min(self.k, len(self.units)), include=[]
        )
        ranked = tuple(result["ids"][0])
        return Retrieval(units=in_history_order(self.units, ranked), ranked=ranked)

    def close(self) -> None:
        self.cache.close()


# -- the memory server (mirage-memory and agents) --------------------------------------------


def artifact_ids(units: Sequence[MemoryUnit]) -> dict[str, str]:
    """Round id -> a memory-server artifact id (``D03:01`` -> ``round-D03_01``), unique."""
    ids: dict[str, str] = {}
    for unit in units:
        base = "round-" + re.sub(r"[^A-Za-z0-9_.\-]", "_", unit.round_id)
        candidate, suffix = base, 1
        while candidate in ids.values():
            suffix += 1
            candidate = f"{base}-{suffix}"
        ids[unit.round_id] = candidate
    return ids


def write_workspace(directory: Path, units: Sequence[MemoryUnit]) -> dict[str, str]:
    """One markdown file per round and a MANIFEST naming each; returns artifact id -> round id."""
    ids = artifact_ids(units)
    rounds_dir = directory / "rounds"
    rounds_dir.mkdir(parents=True, exist_ok=True)
    manifest = []
    for unit in units:
        path = f"rounds/{ids[unit.round_id]}.md"
        target = directory / path
        if not target.is_file() or target.read_text(encoding="utf-8") != unit.text + "\n":
            target.write_text(unit.text + "\n", encoding="utf-8")
        manifest.append({"id": ids[unit.round_id], "files": [path]})
    text = yaml.safe_dump({"artifacts": manifest}, sort_keys=False)
    manifest_path = directory / "MANIFEST.yaml"
    if not manifest_path.is_file() or manifest_path.read_text(encoding="utf-8") != text:
        manifest_path.write_text(text, encoding="utf-8")
    return {artifact: round_id for round_id, artifact in ids.items()}


@asynccontextmanager
async def memory_server(
    directory: Path, units: Sequence[MemoryUnit], shared_cache: Path
) -> AsyncIterator[tuple[Any, dict[str, str], Path]]:
    """The memory server over a workspace of ``units``: (endpoint, artifact -> round, call log)."""
    from harness.kit.memory import memory_endpoint
    from memory_server.index import HybridIndex, IndexConfig
    from memory_server.workspace import Workspace

    rounds = write_workspace(directory, units)
    index = HybridIndex(Workspace.open(directory), IndexConfig(embedding_cache=shared_cache))
    index.sync(collect_garbage=True)
    call_log = directory / ".mirage" / "calls.jsonl"  # hidden: not part of the workspace
    try:
        with memory_endpoint(directory, index, call_log) as endpoint:
            yield endpoint, rounds, call_log
    finally:
        index.close()


class MirageMemory:
    def __init__(
        self, endpoint: Any, rounds: dict[str, str], units: Sequence[MemoryUnit], k: int
    ) -> None:
        self.endpoint = endpoint
        self.rounds = rounds
        self.units = list(units)
        self.k = k

    async def retrieve(self, question: Question, tag: str) -> Retrieval:
        from runtime.mcp_client import MCPServerConfig, MCPToolset

        server = MCPServerConfig(name="memory", url=self.endpoint.tagged_url(tag))
        try:
            async with MCPToolset([server]) as tools:
                outcome = await tools.call(
                    "artifact_recall", {"query": query_text(question), "k": self.k}
                )
        except Exception as exc:  # a failed MCP session is this question's error, not the run's
            raise RetrievalError(f"memory server session failed: {exc}") from exc
        if outcome.is_error or not isinstance(outcome.structured, dict):
            raise RetrievalError(f"artifact_recall failed: {outcome.text[:300]}")
        hits = [hit.get("artifact_id", "") for hit in outcome.structured.get("hits", [])]
        ranked = ranked_rounds(hits, self.rounds)
        return Retrieval(units=in_history_order(self.units, ranked), ranked=ranked)


# -- opening a system per profile -----------------------------------------------------------


class CueSystem:
    """One condition's system: ``profile(...)`` opens its memory of one profile."""

    def __init__(self, name: str, spec: SystemSpec, context: SystemContext) -> None:
        self.name = name
        self.spec = spec
        self.context = context

    def profile(self, profile: ProfileRun) -> AbstractAsyncContextManager[Responder]:
        return self._open(profile)

    @asynccontextmanager
    async def _open(self, profile: ProfileRun) -> AsyncIterator[Responder]:
        spec, work, units = self.spec, self.context.work_dir, profile.units
        if isinstance(spec, AgentSpec):
            from harness.cue.agent import AgentMemory

            directory = work / "workspaces" / profile.label
            async with memory_server(directory, units, _shared_cache(work)) as served:
                agent = AgentMemory(spec, served, profile, work / "checkpoints" / profile.label)
                try:
                    yield agent
                finally:
                    await agent.aclose()
            return
        backbone = self.context.backbone
        if backbone is None:
            raise ValueError(f"system {self.name!r} answers with a backbone, and none was given")
        if isinstance(spec, FullContextSpec):
            kept = fit_to_window(
                profile.name,
                units,
                profile.questions,
                backbone,
                self.context.output_tokens,
                spec.context_tokens,
            )
            yield Answerer(FullContextMemory(kept), backbone, profile.name)
        elif isinstance(spec, NaiveRagSpec):
            memory = NaiveRagMemory(
                work / "index" / "naive-rag", _shared_cache(work), profile.profile_id, units, spec.k
            )
            try:
                yield Answerer(memory, backbone, profile.name)
            finally:
                memory.close()
        else:
            assert isinstance(spec, MirageMemorySpec)
            directory = work / "workspaces" / profile.label
            async with memory_server(directory, units, _shared_cache(work)) as (
                endpoint,
                rounds,
                _,
            ):
                yield Answerer(
                    MirageMemory(endpoint, rounds, units, spec.k), backbone, profile.name
                )


def _shared_cache(work: Path) -> Path:
    return work / "index" / "embeddings.sqlite"
