"""The hybrid index over a workspace: dense vectors in chroma, BM25 in SQLite FTS5, fused with
reciprocal rank fusion.

Above: the MCP tools and ``mirage memory index/search``. Below: the workspace (files are the
truth), the chunkers, the embedding cache and the two stores. The index is a cache: every
piece of it can be rebuilt from the files, and a rebuild produces the same chunks (their ids
are hashes of the content and its artifact context) without embedding anything twice.

An *index unit* is one file, or one artifact card (id, title, modality, aliases, files) for
artifacts whose files have no text of their own (an image) or that carry a title or aliases.
A unit's key changes whenever its content or artifact context changes, so a sync only adds
new keys; keys of a version are what restrict a query to that version.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import shutil
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlparse

import numpy as np
import structlog
from pydantic import BaseModel, ConfigDict, Field

from memory_server.chunking import CHUNKER_VERSION, chunk_text, extract_text
from memory_server.embedding import Embedder, EmbeddingCache, embed_cached
from memory_server.errors import (
    CorruptStateError,
    InvalidInputError,
    UnknownReferenceError,
    short_reason,
)
from memory_server.keyword import KeywordStore, StoredChunk
from memory_server.manifest import ArtifactRecord, BuiltManifest, FileEntry
from memory_server.stores import EMBEDDED_CLIENTS, IndexDirectory, IndexPointer, StoreView
from memory_server.workspace import Workspace
from memory_server.writelock import WriterBusyError

log = structlog.get_logger(__name__)

RRF_K = 60
SNIPPET_CHARS = 320
_CARD_KINDS = frozenset({"image", "binary"})
_UNITS_PER_BATCH = 256
_CHUNKS_PER_WRITE = 2000
_CHROMA_BATCH = 1000
IndexProgress = Callable[[int, int], None]
"""Told (units stored, units to store) as an index grows."""
# How long a search waits for the writer lock (to add new files, or to reload a store another
# process changed) before serving what is indexed; writes hold it for one slice at most.
SEARCH_LOCK_WAIT_S = 5.0


class IndexConfig(BaseModel):
    """How the index embeds and where it stores vectors."""

    model_config = ConfigDict(frozen=True)

    model_path: str | None = Field(
        default=None, description="sentence-transformers model directory; None = bundled MiniLM"
    )
    chroma_url: str | None = Field(
        default=None, description="http(s)://host:port of a Chroma server; None = embedded store"
    )
    batch_size: int = Field(default=64, ge=1, le=4096)
    lock_timeout_s: float = Field(
        default=60.0,
        ge=0,
        description="How long a write waits for another process's write to the same index "
        "before failing with WriterBusyError (searches wait at most SEARCH_LOCK_WAIT_S).",
    )
    embedding_cache: Path | None = Field(
        default=None,
        description="SQLite embedding cache; None = <workspace>/.mirage/embeddings.sqlite. "
        "Workspaces may share one cache.",
    )


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


class SyncReport(BaseModel):
    units_added: int = 0
    units_removed: int = 0
    chunks_added: int = 0
    chunks_removed: int = 0
    texts_embedded: int = 0
    warnings: list[str] = Field(default_factory=list)


class IndexUnit(BaseModel):
    model_config = ConfigDict(frozen=True)

    key: str
    path: str
    artifact_id: str
    header_label: str
    entry: FileEntry | None = None
    card: ArtifactRecord | None = None


def _digest(*parts: Any) -> str:
    payload = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


def units_for(manifest: BuiltManifest) -> dict[str, IndexUnit]:
    """Every index unit of a built manifest, by key."""
    units: dict[str, IndexUnit] = {}
    for entry in manifest.files.values():
        record = manifest.artifacts.get(entry.artifact_id)
        title = record.title if record else None
        label = f"{entry.artifact_id} — {title}" if title else entry.artifact_id
        key = _digest("file", CHUNKER_VERSION, entry.path, entry.sha256, entry.kind, label)
        units[key] = IndexUnit(
            key=key, path=entry.path, artifact_id=entry.artifact_id, header_label=label, entry=entry
        )
    for record in manifest.artifacts.values():
        if record.is_note or not record.files or not _needs_card(record, manifest):
            continue
        key = _digest("card", CHUNKER_VERSION, record.model_dump(mode="json"))
        units[key] = IndexUnit(
            key=key,
            path=record.files[0],
            artifact_id=record.id,
            header_label=record.id,
            card=record,
        )
    return units


def _needs_card(record: ArtifactRecord, manifest: BuiltManifest) -> bool:
    if record.title or record.aliases or record.modality:
        return True
    return any(manifest.files[path].kind in _CARD_KINDS for path in record.files)


def _card_text(record: ArtifactRecord) -> str:
    lines = [f"Artifact {record.id}"]
    if record.title:
        lines.append(f"Title: {record.title}")
    if record.modality:
        lines.append(f"Modality: {record.modality}")
    if record.aliases:
        lines.append("Aliases: " + ", ".join(record.aliases))
    lines.append("Files: " + ", ".join(record.files))
    return "\n".join(lines)


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


class HybridIndex:
    """Index of one workspace, safe to share between threads and processes: every write
    holds the workspace's writer lock (briefly: at most one slice of chunks), searches take no
    lock and follow what other processes wrote (see ``memory_server.stores``)."""

    def __init__(
        self,
        workspace: Workspace,
        config: IndexConfig | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.workspace = workspace
        self.config = config or IndexConfig()
        self.embedder = embedder or Embedder(self.config.model_path, self.config.batch_size)
        self.cache = EmbeddingCache(
            self.config.embedding_cache or workspace.state_dir / "embeddings.sqlite"
        )
        self._directory = IndexDirectory(workspace.state_dir / "index", workspace.root)
        self._http = _http_client(self.config.chroma_url) if self.config.chroma_url else None
        self._collection_base = self._make_collection_name()
        self._views_guard = threading.Lock()
        self._query_vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._units_cache: tuple[BuiltManifest, dict[str, IndexUnit]] | None = None
        self._version_units: dict[str, frozenset[str]] = {}
        self._view = self._open_current()

    # -- stores -----------------------------------------------------------------------------

    def _make_collection_name(self) -> str:
        slug = re.sub(r"[^A-Za-z0-9._-]", "-", self.embedder.model_id)[:80].strip("-.") or "model"
        if self.config.chroma_url:
            workspace_tag = hashlib.sha256(str(self.workspace.root.resolve()).encode()).hexdigest()
            return f"mirage-{workspace_tag[:12]}-{slug}"
        return f"mirage-{slug}"

    def _collection_name(self, generation: str) -> str:
        """Embedded stores live in their generation's folder; a Chroma server holds the
        collections of every generation side by side."""
        return f"{self._collection_base}-{generation}" if self._http else self._collection_base

    def _lock(self, timeout: float) -> AbstractContextManager[None]:
        return self._directory.lock.hold(timeout)

    def _open_current(self) -> StoreView:
        """Open the current generation (making one if there is none); a half-lost index (the
        two stores disagree) is replaced by an empty generation that the next sync fills."""
        with self._lock(self.config.lock_timeout_s):
            pointer = self._directory.pointer() or self._start_generation()
            view = self._open_view(pointer)
            if self._collection(view).count() == view.keyword.chunk_count():
                return view
            log.warning("index.inconsistent_rebuilding", workspace=str(self.workspace.root))
            self._close_view(view)
            view = self._open_view(self._start_generation())
            self._directory.collect(on_delete=self._drop_collection)
            return view

    def _start_generation(self) -> IndexPointer:
        """A new, empty generation made current (the caller holds the writer lock)."""
        pointer = IndexPointer(generation=self._directory.new_generation())
        self._directory.point_to(pointer)
        return pointer

    def _open_view(self, pointer: IndexPointer) -> StoreView:
        view = StoreView(self._directory, pointer)
        if self._http is None:
            EMBEDDED_CLIENTS.acquire(view.chroma_path, pointer.serial)
        return view

    def _close_view(self, view: StoreView) -> None:
        if self._http is None:
            EMBEDDED_CLIENTS.release(view.chroma_path)
        view.close()

    def _collection(self, view: StoreView, *, reopen: bool = False) -> Any:
        """The view's chroma collection; ``reopen`` (under the writer lock) reloads an
        embedded store whose in-memory state is suspect."""
        if self._http is not None:
            client, epoch = self._http, 0
        else:
            client, epoch = EMBEDDED_CLIENTS.client(view.chroma_path, view.serial, reopen=reopen)
        if view.collection is None or view.epoch != epoch:
            from memory_server.chroma_ef import chroma_embedding_function

            view.collection = client.get_or_create_collection(
                name=self._collection_name(view.generation),
                embedding_function=chroma_embedding_function(self.config.model_path),
                configuration={"hnsw": {"space": "cosine"}},
            )
            view.epoch = epoch
            view.loaded = False
        return view.collection

    def _drop_collection(self, generation: str) -> None:
        if self._http is not None:
            with contextlib.suppress(Exception):
                self._http.delete_collection(self._collection_name(generation))

    def _fresh_view(self) -> StoreView:
        """The view to search: the current generation as of now, following other processes'
        writes; while the writer lock stays busy, the view as it was (consistent, maybe
        missing the newest writes)."""
        pointer = self._directory.pointer()
        view = self._view
        behind = pointer is not None and (
            pointer.generation != view.generation or pointer.serial > view.serial
        )
        if not behind and not view.suspect:
            return view
        try:
            with self._lock(SEARCH_LOCK_WAIT_S):
                return self._follow(self._directory.pointer())
        except WriterBusyError:
            log.info("index.follow_deferred", generation=view.generation)
            return view

    def _follow(self, pointer: IndexPointer | None) -> StoreView:
        """Bring the view up to ``pointer`` (the caller holds the writer lock)."""
        view = self._view
        if pointer is None:
            return view
        if pointer.generation != view.generation:
            self._switch(self._open_view(pointer))
            view = self._view
            self._directory.collect(on_delete=self._drop_collection)
        view.serial = max(view.serial, pointer.serial)
        self._collection(view, reopen=view.suspect)
        view.suspect = False
        return view

    def _switch(self, view: StoreView) -> None:
        """Search ``view`` from now on; the previous view closes once no call uses it."""
        previous, self._view = self._view, view
        self._retire(previous)

    def _retire(self, view: StoreView) -> None:
        with self._views_guard:
            view.retired = True
            if view.users == 0:
                self._close_view(view)

    @contextmanager
    def _using(self, view: StoreView | None = None) -> Iterator[StoreView]:
        """Keep a view open while it is used (a generation switch closes it afterwards)."""
        view = view or self._fresh_view()
        with self._views_guard:
            while view.retired:  # switched away from since it was picked
                view = self._view
            view.users += 1
        try:
            yield view
        finally:
            with self._views_guard:
                view.users -= 1
                closing = view.retired and view.users == 0
            if closing:
                self._close_view(view)

    @contextmanager
    def _writing(self, timeout: float) -> Iterator[StoreView]:
        """Write the current generation under the writer lock; afterwards its serial tells
        other processes to reload."""
        with self._lock(timeout):
            view = self._follow(self._directory.pointer() or self._start_generation())
            try:
                with self._using(view):
                    yield view
            finally:
                bumped = IndexPointer(generation=view.generation, serial=view.serial + 1)
                self._directory.point_to(bumped)
                view.serial = bumped.serial
                if self._http is None:
                    EMBEDDED_CLIENTS.mark_written(view.chroma_path, bumped.serial)

    @property
    def keyword(self) -> KeywordStore:
        return self._fresh_view().keyword

    def chunk_count(self) -> int:
        with self._using() as view:
            return view.keyword.chunk_count()

    # -- building ---------------------------------------------------------------------------

    def sync(
        self,
        version: str | None = None,
        *,
        collect_garbage: bool = False,
        lock_timeout: float | None = None,
        progress: IndexProgress | None = None,
    ) -> SyncReport:
        """Index every unit of the working tree (or of ``version``) not indexed yet; a sync of
        the working tree also drops units that neither the tree nor any snapshot has any more
        (a note's previous content after an append). ``collect_garbage`` also deletes index
        generations no process uses. Writes wait at most ``lock_timeout`` seconds (default
        ``IndexConfig.lock_timeout_s``) for another writer, then raise ``WriterBusyError``.
        ``progress(done, total)`` hears of the units to add as they are stored."""
        timeout = self.config.lock_timeout_s if lock_timeout is None else lock_timeout
        manifest = self._manifest(version)
        units = self._units_of(manifest)
        report = SyncReport()
        with self._using() as view:
            known = view.keyword.unit_keys()
        pending = [units[key] for key in sorted(units) if key not in known]
        self._add_units(pending, version, report, timeout, progress=progress)
        if version is None and not known <= units.keys():
            self._drop_stale(set(units), report, timeout)
        if collect_garbage:
            with self._lock(timeout):
                self._directory.collect(on_delete=self._drop_collection)
        if report.units_added or report.units_removed:
            log.info("index.sync", **report.model_dump(exclude={"warnings"}))
        return report

    def rebuild(self, progress: IndexProgress | None = None) -> SyncReport:
        """Index the working tree into a new generation while searches keep using the current
        one, then switch to it (the embedding cache is kept, so nothing already embedded is
        embedded again). ``progress`` as for ``sync``."""
        timeout = self.config.lock_timeout_s
        units = self._units_of(self.workspace.refresh())
        with self._lock(timeout):  # so that no writer collects it before it is open
            pointer = IndexPointer(generation=self._directory.new_generation())
            view = self._open_view(pointer)
        report = SyncReport()
        try:
            self._add_units(
                list(units.values()), None, report, timeout, private=view, progress=progress
            )
            with self._lock(timeout):
                latest = self._units_of(self.workspace.refresh())
                changed = [unit for key, unit in latest.items() if key not in units]
                self._add_units(changed, None, report, timeout, private=view)
                self._directory.point_to(pointer)
                self._switch(view)
        except BaseException:
            self._close_view(view)
            shutil.rmtree(view.path, ignore_errors=True)
            raise
        with self._lock(timeout):
            self._directory.collect(on_delete=self._drop_collection)
        log.info(
            "index.rebuild",
            generation=pointer.generation,
            **report.model_dump(exclude={"warnings"}),
        )
        return report

    def _manifest(self, version: str | None) -> BuiltManifest:
        return self.workspace.refresh() if version is None else self.workspace.version(version)

    def _snapshot_keys(self) -> set[str] | None:
        """Unit keys of every stored version, or None when one cannot be read (then nothing is
        dropped: the index cannot tell what that version needs)."""
        keys: set[str] = set()
        for version in self.workspace.store.list_versions():
            cached = self._version_units.get(version)
            if cached is None:
                try:
                    cached = frozenset(units_for(self.workspace.version(version)))
                except CorruptStateError as exc:
                    log.warning("index.version_unreadable", version=version, error=str(exc))
                    return None
                self._version_units[version] = cached
            keys |= cached
        return keys

    def _add_units(
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
        while the next one embeds (one writer thread, so the model never waits for the
        stores): into ``private`` (a generation nobody else sees yet) or, by default, into the
        current generation under the writer lock, a slice at a time, so that no write holds
        the lock for long."""
        total, done = len(pending), 0
        if not total:
            return  # a search's sync of an index that is up to date
        if progress is not None:
            progress(done, total)
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
                batch.append((unit, self._chunk_unit(unit, version)))
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
        before = self.embedder.texts_embedded
        vectors = embed_cached(self.embedder, self.cache, texts) if texts else None
        report.texts_embedded += self.embedder.texts_embedded - before
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
            with self._writing(timeout) as view:
                self._store(view, part, report)

    def _store(self, view: StoreView, part: list[PreparedUnit], report: SyncReport) -> None:
        """Store prepared units the view does not hold yet (another writer may have stored
        them meanwhile): one chroma upsert per ``_CHROMA_BATCH`` chunks and one keyword
        transaction for the whole slice, however many files it holds."""
        known = view.keyword.known_units([item.unit.key for item in part])
        fresh = [item for item in part if item.unit.key not in known]
        if any(item.chunks for item in fresh):
            _upsert(self._collection(view), fresh)
            view.loaded = True
        view.keyword.add_units([(i.unit.key, i.unit.path, i.chunks) for i in fresh])
        report.units_added += len(fresh)
        report.chunks_added += sum(len(item.chunks) for item in fresh)

    def _chunk_unit(self, unit: IndexUnit, version: str | None) -> list[StoredChunk]:
        if unit.card is not None:
            pieces = [(0, _card_text(unit.card), 0, 0, "artifact card")]
        else:
            assert unit.entry is not None
            text = extract_text(self.workspace.read_bytes(unit.path, version), unit.entry.kind)
            if text is None:
                return []
            pieces = [
                (c.ordinal, c.text, c.start_line, c.end_line, c.locator)
                for c in chunk_text(text, unit.entry.kind)
            ]
        return [
            StoredChunk(
                chunk_id=_digest(unit.key, ordinal),
                unit_key=unit.key,
                path=unit.path,
                ordinal=ordinal,
                start_line=start,
                end_line=end,
                locator=locator,
                header=f"[{unit.header_label}] {unit.path}" + (f" › {locator}" if locator else ""),
                text=text,
            )
            for ordinal, text, start, end, locator in pieces
        ]

    def _drop_stale(self, live: set[str], report: SyncReport, timeout: float) -> None:
        """Remove units that neither the working tree nor any snapshot has."""
        snapshots = self._snapshot_keys()
        if snapshots is None:
            return
        with self._using() as view:
            if view.keyword.unit_keys() <= live | snapshots:
                return
        with self._writing(timeout) as view:
            stale = view.keyword.unit_keys() - live - snapshots
            collection = self._collection(view)
            for key in sorted(stale):
                collection.delete(where={"unit_key": key})
            removed = view.keyword.remove_units(sorted(stale))
        report.units_removed += len(stale)
        report.chunks_removed += len(removed)

    # -- querying ---------------------------------------------------------------------------

    def search(
        self,
        query: str,
        k: int = 5,
        *,
        artifact_id: str | None = None,
        version: str | None = None,
        refresh: bool = True,
    ) -> list[Hit]:
        """The ``k`` best chunks for ``query`` in the working tree (synced first unless
        ``refresh`` is False) or in a stored ``version``, optionally within one artifact. When
        another process is writing the index, the search serves what is indexed already."""
        if refresh or version is not None:
            try:
                self.sync(version, lock_timeout=SEARCH_LOCK_WAIT_S)
            except WriterBusyError as exc:
                log.info("index.sync_deferred", reason=str(exc))
        manifest = self.workspace.manifest if version is None else self.workspace.version(version)
        units = self._units_of(manifest)
        if artifact_id is not None:
            units = {key: unit for key, unit in units.items() if unit.artifact_id == artifact_id}
            if not units:
                raise UnknownReferenceError(f"no artifact {artifact_id!r} in this workspace")
        pool = max(20, 4 * k)
        with self._using() as view:
            allowed = self._restriction(view, units)
            dense = self._dense_ranking(view, query, pool, allowed)
            lexical = view.keyword.search(query, pool, allowed)
            fused = rrf_fuse([dense, lexical])[:k]
            stored = view.keyword.get_chunks([chunk_id for chunk_id, _ in fused])
        return [
            self._hit(stored[chunk_id], units, score)
            for chunk_id, score in fused
            if chunk_id in stored and stored[chunk_id].unit_key in units
        ]

    def _units_of(self, manifest: BuiltManifest) -> dict[str, IndexUnit]:
        """``units_for`` with a one-entry cache keyed by manifest identity (the workspace keeps
        the same manifest object while nothing changes)."""
        cached = self._units_cache
        if cached is not None and cached[0] is manifest:
            return cached[1]
        units = units_for(manifest)
        self._units_cache = (manifest, units)
        return units

    def _restriction(self, view: StoreView, units: dict[str, IndexUnit]) -> list[str] | None:
        """Unit keys to filter on, or None when the index holds nothing outside ``units``."""
        if view.keyword.unit_keys() <= set(units):
            return None
        return sorted(units)

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
                    return _query_ids(self._collection(view), vector, pool, allowed)
                except _chroma_errors() as exc:
                    log.warning("index.dense_reloading", error=short_reason(exc))
                    view.suspect = True
            with self._lock(SEARCH_LOCK_WAIT_S):
                collection = self._collection(view, reopen=view.suspect)
                view.suspect = False
                ids = _query_ids(collection, vector, pool, allowed)
                view.loaded = True
                return ids
        except WriterBusyError:
            log.info("index.dense_deferred", generation=view.generation)
        except _chroma_errors() as exc:
            view.suspect = True
            log.warning("index.dense_unavailable", error=short_reason(exc))
        return []

    def _query_vector(self, query: str) -> np.ndarray:
        vector = self._query_vectors.get(query)
        if vector is None:
            vector = self.embedder.embed([query])[0]
            self._query_vectors[query] = vector
            if len(self._query_vectors) > 512:
                self._query_vectors.popitem(last=False)
        return vector

    def _hit(self, chunk: StoredChunk, units: dict[str, IndexUnit], score: float) -> Hit:
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

    def close(self) -> None:
        self._retire(self._view)
        self.cache.close()


class PreparedUnit(NamedTuple):
    """A unit chunked and embedded, ready to store."""

    unit: IndexUnit
    chunks: list[StoredChunk]
    vectors: np.ndarray | None


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


def _chroma_errors() -> tuple[type[Exception], ...]:
    """Chroma's exception base (imported only once a store is in use)."""
    from chromadb.errors import ChromaError

    return (ChromaError,)


def _http_client(url: str) -> Any:
    import chromadb
    from chromadb.config import Settings

    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise InvalidInputError(f"chroma url {url!r} must look like http://host:port")
    return chromadb.HttpClient(
        host=parsed.hostname,
        port=parsed.port or (443 if parsed.scheme == "https" else 8000),
        ssl=parsed.scheme == "https",
        settings=Settings(anonymized_telemetry=False),
    )
