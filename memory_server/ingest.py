"""Ingestion: units chunked, embedded and stored in both stores, and units removed again.

Above: ``memory_server.index``, which decides what to add (the units a sync finds missing, or
all of them into a rebuild's private generation) and what to drop. Below: the chunkers (via
``memory_server.units``), the embedding model and its cache, and the stores of a generation
(``memory_server.generations``): one chroma upsert per ``_CHROMA_BATCH`` chunks and one
keyword transaction per slice of at most ``_CHUNKS_PER_WRITE`` chunks.

Embedding runs outside any lock; a writer thread stores each batch while the next one embeds,
so the model never waits for the stores, and a write holds the writer lock for one slice only.
A handful of units (a sync after a note append) is embedded and stored in the calling thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np
import structlog
from pydantic import BaseModel, Field

from memory_server.embedding import Embedder, EmbeddingCache, embed_cached
from memory_server.errors import InvalidInputError, UnknownReferenceError
from memory_server.generations import Generations
from memory_server.keyword import StoredChunk
from memory_server.stores import StoreView
from memory_server.units import IndexUnit, chunk_unit
from memory_server.workspace import Workspace

log = structlog.get_logger(__name__)

_UNITS_PER_BATCH = 256
_INLINE_UNITS = 8
_CHUNKS_PER_WRITE = 2000
_CHROMA_BATCH = 1000
IndexProgress = Callable[[int, int], None]
"""Told (units stored, units to store) as an index grows."""


class SyncReport(BaseModel):
    units_added: int = 0
    units_removed: int = 0
    chunks_added: int = 0
    chunks_removed: int = 0
    texts_embedded: int = 0
    warnings: list[str] = Field(default_factory=list)


class PreparedUnit(NamedTuple):
    """A unit chunked and embedded, ready to store."""

    unit: IndexUnit
    chunks: list[StoredChunk]
    vectors: np.ndarray | None


class Ingester:
    """Adds units to a generation and removes them, counting what it did in a ``SyncReport``."""

    def __init__(
        self,
        workspace: Workspace,
        embedder: Embedder,
        cache: EmbeddingCache,
        generations: Generations,
    ) -> None:
        self._workspace = workspace
        self._embedder = embedder
        self._cache = cache
        self._generations = generations

    def add(
        self,
        pending: list[IndexUnit],
        version: str | None,
        report: SyncReport,
        timeout: float,
        *,
        private: StoreView | None = None,
        progress: IndexProgress | None = None,
    ) -> None:
        """Chunk and embed ``pending`` a batch at a time outside any lock, and store each batch
        while the next one embeds: into ``private`` (a generation nobody else sees yet) or, by
        default, into the current generation under the writer lock, a slice at a time."""
        total, done = len(pending), 0
        if not total:
            return  # a search's sync of an index that is up to date
        if progress is not None:
            progress(done, total)
        if total <= _INLINE_UNITS:  # a few changed files (a note): no store thread to start
            for consumed, chunked in self._chunked_batches(pending, version, report):
                self._store_slices(self._embedded(chunked, report), report, timeout, private)
                done += consumed
                if progress is not None:
                    progress(done, total)
            return
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="index-store") as writer:
            storing: tuple[Future[None], int] | None = None
            for consumed, chunked in self._chunked_batches(pending, version, report):
                prepared = self._embedded(chunked, report)
                if storing is not None:
                    done += _finished(storing, progress, done, total)
                task = writer.submit(self._store_slices, prepared, report, timeout, private)
                storing = (task, consumed)
            if storing is not None:
                _finished(storing, progress, done, total)

    def drop(self, keep: set[str], report: SyncReport, timeout: float) -> None:
        """Remove every unit whose key is not in ``keep`` from the current generation."""
        with self._generations.using() as view:
            if view.keyword.unit_keys() <= keep:
                return
        with self._generations.writing(timeout) as view:
            stale = view.keyword.unit_keys() - keep
            collection = self._generations.collection(view)
            for key in sorted(stale):
                collection.delete(where={"unit_key": key})
            removed = view.keyword.remove_units(sorted(stale))
        report.units_removed += len(stale)
        report.chunks_removed += len(removed)

    def _chunked_batches(
        self, pending: list[IndexUnit], version: str | None, report: SyncReport
    ) -> Iterator[tuple[int, list[tuple[IndexUnit, list[StoredChunk]]]]]:
        """Units with their chunks, in batches of at most ``_UNITS_PER_BATCH`` units and about
        ``_CHUNKS_PER_WRITE`` chunks; with each batch, how many pending units it consumed (a
        unit that cannot be read is skipped with a warning)."""
        batch: list[tuple[IndexUnit, list[StoredChunk]]] = []
        consumed = chunks = 0
        for unit in pending:
            consumed += 1
            try:
                batch.append((unit, chunk_unit(self._workspace, unit, version)))
                chunks += len(batch[-1][1])
            except (InvalidInputError, OSError, UnknownReferenceError) as exc:
                report.warnings.append(f"{unit.path}: {exc}")
                log.warning("index.unit_skipped", path=unit.path, error=str(exc))
            if consumed >= _UNITS_PER_BATCH or chunks >= _CHUNKS_PER_WRITE:
                yield consumed, batch
                batch, consumed, chunks = [], 0, 0
        if consumed:
            yield consumed, batch

    def _embedded(
        self, chunked: list[tuple[IndexUnit, list[StoredChunk]]], report: SyncReport
    ) -> list[PreparedUnit]:
        """The batch's units with vectors for all their chunks, new texts embedded in one go."""
        texts = [f"{chunk.header}\n{chunk.text}" for _, chunks in chunked for chunk in chunks]
        before = self._embedder.texts_embedded
        vectors = embed_cached(self._embedder, self._cache, texts) if texts else None
        report.texts_embedded += self._embedder.texts_embedded - before
        prepared, offset = [], 0
        for unit, chunks in chunked:
            part = vectors[offset : offset + len(chunks)] if vectors is not None else None
            prepared.append(PreparedUnit(unit, chunks, part))
            offset += len(chunks)
        return prepared

    def _store_slices(
        self,
        prepared: list[PreparedUnit],
        report: SyncReport,
        timeout: float,
        private: StoreView | None,
    ) -> None:
        for part in _write_slices(prepared):
            if private is not None:
                self._store(private, part, report)
                continue
            with self._generations.writing(timeout) as view:
                self._store(view, part, report)

    def _store(self, view: StoreView, part: list[PreparedUnit], report: SyncReport) -> None:
        """Store prepared units the view does not hold yet (another writer may have stored
        them meanwhile): one chroma upsert per ``_CHROMA_BATCH`` chunks and one keyword
        transaction for the whole slice, however many files it holds."""
        known = view.keyword.known_units([item.unit.key for item in part])
        fresh = [item for item in part if item.unit.key not in known]
        if any(item.chunks for item in fresh):
            _upsert(self._generations.collection(view), fresh)
            view.loaded = True
        view.keyword.add_units([(i.unit.key, i.unit.path, i.chunks) for i in fresh])
        report.units_added += len(fresh)
        report.chunks_added += sum(len(item.chunks) for item in fresh)


def _finished(
    storing: tuple[Future[None], int], progress: IndexProgress | None, done: int, total: int
) -> int:
    """Wait for a batch's store (raising what it raised); tell ``progress``; its unit count."""
    task, consumed = storing
    task.result()
    if progress is not None:
        progress(done + consumed, total)
    return consumed


def _write_slices(prepared: list[PreparedUnit]) -> Iterator[list[PreparedUnit]]:
    """Consecutive groups of whole units with at most ``_CHUNKS_PER_WRITE`` chunks each (a unit
    larger than that is a group of its own)."""
    group: list[PreparedUnit] = []
    size = 0
    for item in prepared:
        if group and size + len(item.chunks) > _CHUNKS_PER_WRITE:
            yield group
            group, size = [], 0
        group.append(item)
        size += len(item.chunks)
    if group:
        yield group


def _upsert(collection: Any, items: list[PreparedUnit]) -> None:
    rows = [
        (chunk, vector, item.unit)
        for item in items
        if item.vectors is not None
        for chunk, vector in zip(item.chunks, item.vectors, strict=True)
    ]
    for start in range(0, len(rows), _CHROMA_BATCH):
        part = rows[start : start + _CHROMA_BATCH]
        collection.upsert(
            ids=[chunk.chunk_id for chunk, _, _ in part],
            embeddings=np.stack([vector for _, vector, _ in part]),
            documents=[chunk.text for chunk, _, _ in part],
            metadatas=[{"unit_key": unit.key, "path": unit.path} for _, _, unit in part],
        )
