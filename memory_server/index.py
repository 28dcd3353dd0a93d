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

import hashlib
import json
import re
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np
import structlog
from pydantic import BaseModel, ConfigDict, Field

from memory_server.chunking import CHUNKER_VERSION, PdfUnavailableError, chunk_text, extract_text
from memory_server.embedding import Embedder, EmbeddingCache, embed_cached
from memory_server.errors import InvalidInputError, UnknownReferenceError
from memory_server.keyword import KeywordStore, StoredChunk
from memory_server.manifest import ArtifactRecord, BuiltManifest, FileEntry
from memory_server.workspace import Workspace

log = structlog.get_logger(__name__)

RRF_K = 60
SNIPPET_CHARS = 320
_CARD_KINDS = frozenset({"image", "binary"})
_UNITS_PER_BATCH = 256
_CHROMA_BATCH = 1000


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
    """Index of one workspace. Thread-safe: syncs are serialised, searches run concurrently."""

    def __init__(
        self,
        workspace: Workspace,
        config: IndexConfig | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.workspace = workspace
        self.config = config or IndexConfig()
        self.embedder = embedder or Embedder(self.config.model_path, self.config.batch_size)
        index_dir = workspace.state_dir / "index"
        self.cache = EmbeddingCache(
            self.config.embedding_cache or workspace.state_dir / "embeddings.sqlite"
        )
        self.keyword = KeywordStore(index_dir / "keyword.sqlite")
        self._client = _make_chroma_client(self.config, index_dir / "chroma")
        self._collection_name = self._make_collection_name()
        self._collection = self._open_collection()
        self._sync_lock = threading.RLock()
        self._query_vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._units_cache: tuple[BuiltManifest, dict[str, IndexUnit]] | None = None
        self._check_consistency()

    # -- stores -----------------------------------------------------------------------------

    def _make_collection_name(self) -> str:
        slug = re.sub(r"[^A-Za-z0-9._-]", "-", self.embedder.model_id)[:80].strip("-.") or "model"
        if self.config.chroma_url:
            workspace_tag = hashlib.sha256(str(self.workspace.root.resolve()).encode()).hexdigest()
            return f"mirage-{workspace_tag[:12]}-{slug}"
        return f"mirage-{slug}"

    def _open_collection(self) -> Any:
        from memory_server.embedding import chroma_embedding_function

        return self._client.get_or_create_collection(
            name=self._collection_name,
            embedding_function=chroma_embedding_function(self.config.model_path),
            configuration={"hnsw": {"space": "cosine"}},
        )

    def _check_consistency(self) -> None:
        """A half-deleted index (one store lost) is rebuilt from the files, not trusted."""
        if self._collection.count() != self.keyword.chunk_count():
            log.warning("index.inconsistent_rebuilding", workspace=str(self.workspace.root))
            self._reset_stores()

    def _reset_stores(self) -> None:
        self._client.delete_collection(self._collection_name)
        self._collection = self._open_collection()
        self.keyword.clear()

    def chunk_count(self) -> int:
        return self.keyword.chunk_count()

    # -- building ---------------------------------------------------------------------------

    def sync(self, version: str | None = None, *, collect_garbage: bool = False) -> SyncReport:
        """Index every unit of the working tree (or of ``version``) not indexed yet. With
        ``collect_garbage``, drop units no longer in the working tree nor in any snapshot."""
        with self._sync_lock:
            manifest = self._manifest(version)
            units = self._units_of(manifest)
            known = self.keyword.unit_keys()
            report = SyncReport()
            pending = [units[key] for key in sorted(units) if key not in known]
            for start in range(0, len(pending), _UNITS_PER_BATCH):
                self._add_units(pending[start : start + _UNITS_PER_BATCH], version, report)
            if collect_garbage:
                self._collect_garbage(set(units) | self._snapshot_keys(), report)
        if report.units_added or report.units_removed:
            log.info("index.sync", **report.model_dump(exclude={"warnings"}))
        return report

    def rebuild(self) -> SyncReport:
        """Drop both stores and index the working tree again (the embedding cache is kept, so
        nothing already embedded is embedded again)."""
        with self._sync_lock:
            self._reset_stores()
            return self.sync(collect_garbage=True)

    def _manifest(self, version: str | None) -> BuiltManifest:
        return self.workspace.refresh() if version is None else self.workspace.version(version)

    def _snapshot_keys(self) -> set[str]:
        keys: set[str] = set()
        for version in self.workspace.store.list_versions():
            keys.update(units_for(self.workspace.version(version)))
        return keys

    def _add_units(self, batch: list[IndexUnit], version: str | None, report: SyncReport) -> None:
        """Chunk a batch of units, embed all their new texts in one go, then store them."""
        chunked: list[tuple[IndexUnit, list[StoredChunk]]] = []
        for unit in batch:
            try:
                chunked.append((unit, self._chunk_unit(unit, version)))
            except (PdfUnavailableError, OSError, UnknownReferenceError) as exc:
                report.warnings.append(f"{unit.path}: {exc}")
                log.warning("index.unit_skipped", path=unit.path, error=str(exc))
        texts = [f"{chunk.header}\n{chunk.text}" for _, chunks in chunked for chunk in chunks]
        before = self.embedder.texts_embedded
        vectors = embed_cached(self.embedder, self.cache, texts) if texts else None
        report.texts_embedded += self.embedder.texts_embedded - before
        offset = 0
        for unit, chunks in chunked:
            if chunks:
                assert vectors is not None
                self._upsert(unit, chunks, vectors[offset : offset + len(chunks)])
                offset += len(chunks)
            self.keyword.add_unit(unit.key, unit.path, chunks)
            report.units_added += 1
            report.chunks_added += len(chunks)

    def _upsert(self, unit: IndexUnit, chunks: list[StoredChunk], vectors: np.ndarray) -> None:
        for start in range(0, len(chunks), _CHROMA_BATCH):
            part = chunks[start : start + _CHROMA_BATCH]
            self._collection.upsert(
                ids=[chunk.chunk_id for chunk in part],
                embeddings=vectors[start : start + _CHROMA_BATCH],
                documents=[chunk.text for chunk in part],
                metadatas=[{"unit_key": unit.key, "path": unit.path} for _ in part],
            )

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

    def _collect_garbage(self, keep: set[str], report: SyncReport) -> None:
        stale = self.keyword.unit_keys() - keep
        if not stale:
            return
        for key in sorted(stale):
            self._collection.delete(where={"unit_key": key})
        removed = self.keyword.remove_units(sorted(stale))
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
        ``refresh`` is False) or in a stored ``version``, optionally within one artifact."""
        if refresh or version is not None:
            self.sync(version)
        manifest = self.workspace.manifest if version is None else self.workspace.version(version)
        units = self._units_of(manifest)
        if artifact_id is not None:
            units = {key: unit for key, unit in units.items() if unit.artifact_id == artifact_id}
            if not units:
                raise UnknownReferenceError(f"no artifact {artifact_id!r} in this workspace")
        allowed = self._restriction(units)
        pool = max(20, 4 * k)
        dense = self._dense_ranking(query, pool, allowed)
        lexical = self.keyword.search(query, pool, allowed)
        fused = rrf_fuse([dense, lexical])[:k]
        stored = self.keyword.get_chunks([chunk_id for chunk_id, _ in fused])
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

    def _restriction(self, units: dict[str, IndexUnit]) -> list[str] | None:
        """Unit keys to filter on, or None when the index holds nothing outside ``units``."""
        if self.keyword.unit_keys() <= set(units):
            return None
        return sorted(units)

    def _dense_ranking(self, query: str, pool: int, allowed: list[str] | None) -> list[str]:
        count = self._collection.count()
        if count == 0 or (allowed is not None and not allowed):
            return []
        where = {"unit_key": {"$in": allowed}} if allowed is not None else None
        result = self._collection.query(
            query_embeddings=[self._query_vector(query)],
            n_results=min(pool, count),
            where=where,
            include=[],
        )
        return list(result["ids"][0])

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
        self.keyword.close()
        self.cache.close()


def _make_chroma_client(config: IndexConfig, path: Path) -> Any:
    import chromadb
    from chromadb.config import Settings

    settings = Settings(anonymized_telemetry=False)
    if config.chroma_url is None:
        path.mkdir(parents=True, exist_ok=True)
        return chromadb.PersistentClient(path=str(path), settings=settings)
    parsed = urlparse(config.chroma_url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise InvalidInputError(f"chroma url {config.chroma_url!r} must look like http://host:port")
    return chromadb.HttpClient(
        host=parsed.hostname,
        port=parsed.port or (443 if parsed.scheme == "https" else 8000),
        ssl=parsed.scheme == "https",
        settings=settings,
    )
