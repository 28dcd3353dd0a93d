"""Search: dense and keyword rankings of one generation, fused with reciprocal rank fusion.

Above: ``memory_server.index`` (which syncs first and names the units a query may return) and,
for ``Hit`` and ``citation_for``, the memory service. Below: the embedding model (query
vectors, cached per query text), the view's chroma collection and its FTS5 keyword store
(``memory_server.generations``, ``memory_server.keyword``).

When the vector store cannot answer (another process holds the writer lock while it must be
loaded, or chroma fails twice), the search ranks by keywords alone rather than failing.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from typing import Any

import numpy as np
import structlog
from pydantic import BaseModel, ConfigDict

from memory_server.chroma import chroma_errors
from memory_server.embedding import Embedder
from memory_server.errors import short_reason
from memory_server.generations import SEARCH_LOCK_WAIT_S, Generations
from memory_server.keyword import StoredChunk
from memory_server.stores import StoreView
from memory_server.units import IndexUnit
from memory_server.writelock import WriterBusyError

log = structlog.get_logger(__name__)

RRF_K = 60
SNIPPET_CHARS = 320
_QUERY_VECTORS_KEPT = 512


class Hit(BaseModel):
    """One ranked piece of evidence."""

    model_config = ConfigDict(frozen=True)

    artifact_id: str
    path: str
    snippet: str
    score: float
    citation: str
    start_line: int
    end_line: int
    locator: str = ""


def rrf_fuse(rankings: list[list[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    """Reciprocal rank fusion: score(d) = sum over rankings of 1 / (k + rank), ranks from 1."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))


def citation_for(path: str, start_line: int, end_line: int) -> str:
    if start_line <= 0:
        return path
    if start_line == end_line:
        return f"{path}#L{start_line}"
    return f"{path}#L{start_line}-L{end_line}"


def _snippet(text: str) -> str:
    flat = re.sub(r"\s+", " ", text).strip()
    return flat if len(flat) <= SNIPPET_CHARS else flat[: SNIPPET_CHARS - 1].rstrip() + "…"


class Searcher:
    """Ranks the chunks of the current generation for a query."""

    def __init__(self, embedder: Embedder, generations: Generations) -> None:
        self._embedder = embedder
        self._generations = generations
        self._query_vectors: OrderedDict[str, np.ndarray] = OrderedDict()

    def search(self, query: str, k: int, units: dict[str, IndexUnit]) -> list[Hit]:
        """The ``k`` best chunks for ``query`` among the chunks of ``units``."""
        pool = max(20, 4 * k)
        with self._generations.using() as view:
            allowed = _restriction(view, units)
            dense = self._dense_ranking(view, query, pool, allowed)
            lexical = view.keyword.search(query, pool, allowed)
            fused = rrf_fuse([dense, lexical])[:k]
            stored = view.keyword.get_chunks([chunk_id for chunk_id, _ in fused])
        return [
            _hit(stored[chunk_id], units, score)
            for chunk_id, score in fused
            if chunk_id in stored and stored[chunk_id].unit_key in units
        ]

    def _dense_ranking(
        self, view: StoreView, query: str, pool: int, allowed: list[str] | None
    ) -> list[str]:
        """Chunk ids by vector similarity. The first query of a (re)opened embedded store loads
        its files, so it runs under the writer lock; a store that fails is reloaded once, and
        if the search still cannot use it, this call ranks by keywords alone."""
        if allowed is not None and not allowed:
            return []
        vector = self._query_vector(query)
        try:
            if view.loaded:
                try:
                    return _query_ids(self._generations.collection(view), vector, pool, allowed)
                except chroma_errors() as exc:
                    log.warning("index.dense_reloading", error=short_reason(exc))
                    view.suspect = True
            with self._generations.lock(SEARCH_LOCK_WAIT_S):
                collection = self._generations.collection(view, reopen=view.suspect)
                view.suspect = False
                ids = _query_ids(collection, vector, pool, allowed)
                view.loaded = True
                return ids
        except WriterBusyError:
            log.info("index.dense_deferred", generation=view.generation)
        except chroma_errors() as exc:
            view.suspect = True
            log.warning("index.dense_unavailable", error=short_reason(exc))
        return []

    def _query_vector(self, query: str) -> np.ndarray:
        vector = self._query_vectors.get(query)
        if vector is None:
            vector = self._embedder.embed([query])[0]
            self._query_vectors[query] = vector
            if len(self._query_vectors) > _QUERY_VECTORS_KEPT:
                self._query_vectors.popitem(last=False)
        return vector


def _restriction(view: StoreView, units: dict[str, IndexUnit]) -> list[str] | None:
    """Unit keys to filter on, or None when the index holds nothing outside ``units``."""
    if view.keyword.unit_keys() <= set(units):
        return None
    return sorted(units)


def _hit(chunk: StoredChunk, units: dict[str, IndexUnit], score: float) -> Hit:
    unit = units[chunk.unit_key]
    return Hit(
        artifact_id=unit.artifact_id,
        path=chunk.path,
        snippet=_snippet(chunk.text),
        score=round(score, 6),
        citation=citation_for(chunk.path, chunk.start_line, chunk.end_line),
        start_line=chunk.start_line,
        end_line=chunk.end_line,
        locator=chunk.locator,
    )


def _query_ids(
    collection: Any, vector: np.ndarray, pool: int, allowed: list[str] | None
) -> list[str]:
    # No count() first: it cost ~30 ms at 100k chunks, and chroma (1.x) answers a pool larger
    # than the collection, or an empty collection, with what it has.
    result = collection.query(
        query_embeddings=[vector],
        n_results=pool,
        where={"unit_key": {"$in": allowed}} if allowed is not None else None,
        include=[],
    )
    return list(result["ids"][0])
