"""The hybrid index over a workspace: dense vectors in chroma, BM25 in SQLite FTS5, fused with
reciprocal rank fusion.

Above: the memory service (the MCP tools) and ``mirage memory index/search``, which see only
``HybridIndex`` and ``IndexConfig``. Below, one module per concern:

- ``memory_server.units``: what is indexed (index units, their chunks, the units of a version);
- ``memory_server.generations``: the store generations this process reads and writes, and the
  writer lock shared with other processes (``memory_server.chroma``: each one's vectors);
- ``memory_server.ingest``: chunking, embedding and storing units, and removing them;
- ``memory_server.search``: the dense and keyword rankings and their fusion;
- ``memory_server.rounds``: syncs of the working tree, one at a time, group-committed.

Searches of the working tree rank within the units of the manifest the last completed sync
reached (``served``): a note being re-indexed stays findable as it was until its new chunks are
stored, then is findable as it is. While a note write of this process is in flight, searches
leave the sync to the writer (which waits for its own round) instead of indexing its note.

The index is a cache: every piece of it can be rebuilt from the files (the truth), and a
rebuild produces the same chunks (their ids are hashes of the content and its artifact
context) without embedding anything twice (the embedding cache outlives the stores).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import structlog
from pydantic import BaseModel, ConfigDict, Field

from memory_server.embedding import Embedder, EmbeddingCache
from memory_server.errors import UnknownReferenceError
from memory_server.generations import SEARCH_LOCK_WAIT_S, Generations
from memory_server.ingest import IndexProgress, Ingester, SyncReport
from memory_server.keyword import KeywordStore
from memory_server.manifest import BuiltManifest
from memory_server.rounds import SyncRounds
from memory_server.search import Hit, Searcher
from memory_server.units import IndexUnit, UnitCatalog
from memory_server.workspace import Workspace
from memory_server.writelock import WriterBusyError

log = structlog.get_logger(__name__)


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
        self._generations = Generations(
            workspace,
            self.embedder.model_id,
            model_path=self.config.model_path,
            chroma_url=self.config.chroma_url,
            lock_timeout_s=self.config.lock_timeout_s,
        )
        self._units = UnitCatalog(workspace)
        self._ingester = Ingester(workspace, self.embedder, self.cache, self._generations)
        self._searcher = Searcher(self.embedder, self._generations)
        self._rounds: SyncRounds[SyncReport] = SyncRounds()
        self._readers = _Readers()

    @property
    def generation(self) -> str:
        """The store generation searches use now."""
        return self._generations.current.generation

    @property
    def keyword(self) -> KeywordStore:
        return self._generations.fresh_view().keyword

    def chunk_count(self) -> int:
        with self._generations.using() as view:
            return view.keyword.chunk_count()

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
        (a note's previous content after an append). A sync of the working tree is a round
        (``memory_server.rounds``): it covers every change made before the call, and threads
        that ask while one runs share the next. ``collect_garbage`` also deletes index
        generations no process uses. Writes wait at most ``lock_timeout`` seconds (default
        ``IndexConfig.lock_timeout_s``) for another writer, then raise ``WriterBusyError``.
        ``progress(done, total)`` hears of the units to add as they are stored."""
        timeout = self.config.lock_timeout_s if lock_timeout is None else lock_timeout
        if version is not None:
            report = self._sync(version, timeout, progress)
        else:
            report = self._rounds.run(lambda: self._sync(None, timeout, progress)) or SyncReport()
        if collect_garbage:
            with self._generations.lock(timeout):
                self._generations.collect()
        return report

    def writing_notes(self) -> AbstractContextManager[None]:
        """Hold while a note of this process is written and then synced by the same thread:
        searches meanwhile serve what is indexed instead of indexing that note themselves."""
        return self._rounds.writing()

    def _sync(
        self, version: str | None, timeout: float, progress: IndexProgress | None
    ) -> SyncReport:
        if version is None:
            manifest = self.workspace.refresh()
            units = self._units.of(manifest)
        else:
            units = self._units.of_version(version)
        report = SyncReport()
        with self._generations.using() as view:
            known = view.keyword.unit_keys()
        pending = [units[key] for key in sorted(units) if key not in known]
        self._ingester.add(pending, version, report, timeout, progress=progress)
        if version is None:
            self._readers.serve(manifest, units)
            if not known <= units.keys():
                self._drop_stale(set(units), report, timeout)
        if report.units_added or report.units_removed:
            log.info("index.sync", **report.model_dump(exclude={"warnings"}))
        return report

    def rebuild(self, progress: IndexProgress | None = None) -> SyncReport:
        """Index the working tree into a new generation while searches keep using the current
        one, then switch to it (the embedding cache is kept, so nothing already embedded is
        embedded again). ``progress`` as for ``sync``."""
        timeout = self.config.lock_timeout_s
        units = self._units.of(self.workspace.refresh())
        view = self._generations.start_private(timeout)
        report = SyncReport()
        try:
            self._ingester.add(
                list(units.values()), None, report, timeout, private=view, progress=progress
            )
            with self._generations.lock(timeout):
                manifest = self.workspace.refresh()
                latest = self._units.of(manifest)
                changed = [unit for key, unit in latest.items() if key not in units]
                self._ingester.add(changed, None, report, timeout, private=view)
                self._generations.publish(view)
                self._readers.serve(manifest, latest)
        except BaseException:
            self._generations.discard(view)
            raise
        with self._generations.lock(timeout):
            self._generations.collect()
        log.info(
            "index.rebuild",
            generation=view.generation,
            **report.model_dump(exclude={"warnings"}),
        )
        return report

    def _drop_stale(self, live: set[str], report: SyncReport, timeout: float) -> None:
        """Remove units that neither the working tree, nor any snapshot, nor a search still
        ranking within an earlier state of the tree has."""
        snapshots = self._units.snapshot_keys()
        if snapshots is not None:
            self._ingester.drop(live | snapshots | self._readers.in_use(), report, timeout)

    def search(
        self,
        query: str,
        k: int = 5,
        *,
        artifact_id: str | None = None,
        version: str | None = None,
        refresh: bool = True,
    ) -> list[Hit]:
        """The ``k`` best chunks for ``query`` in the working tree (brought up to date first
        unless ``refresh`` is False or a note write of this process is in flight) or in a
        stored ``version``, optionally within one artifact. When another process is writing
        the index, the search serves what is indexed already."""
        if version is not None:
            self._sync_for_search(version)
            return self._search_within(self._units.of_version(version), query, k, artifact_id)
        if refresh and not self._rounds.writes_in_flight():
            self._catch_up()
        with self._readers.reading(lambda: self._units.of(self.workspace.manifest)) as units:
            return self._search_within(units, query, k, artifact_id)

    def _search_within(
        self, units: dict[str, IndexUnit], query: str, k: int, artifact_id: str | None
    ) -> list[Hit]:
        if artifact_id is not None:
            units = {key: unit for key, unit in units.items() if unit.artifact_id == artifact_id}
            if not units:
                raise UnknownReferenceError(f"no artifact {artifact_id!r} in this workspace")
        return self._searcher.search(query, k, units)

    def _catch_up(self) -> None:
        """Sync the working tree when it changed since the manifest searches are served from."""
        if self._readers.manifest() is self.workspace.refresh():
            return
        self._sync_for_search(None)

    def _sync_for_search(self, version: str | None) -> None:
        try:
            self.sync(version, lock_timeout=SEARCH_LOCK_WAIT_S)
        except WriterBusyError as exc:
            log.info("index.sync_deferred", reason=str(exc))

    def close(self) -> None:
        self._generations.close()
        self.cache.close()


class _Readers:
    """The units searches of the working tree rank within: those of the manifest the last
    completed sync reached (``serve``), and which such unit sets searches are still using, so a
    sync does not drop the units a search in progress ranks within."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._served: tuple[BuiltManifest, dict[str, IndexUnit]] | None = None
        self._using: dict[int, tuple[dict[str, IndexUnit], int]] = {}

    def serve(self, manifest: BuiltManifest, units: dict[str, IndexUnit]) -> None:
        with self._guard:
            self._served = (manifest, units)

    def manifest(self) -> BuiltManifest | None:
        with self._guard:
            return self._served[0] if self._served is not None else None

    @contextmanager
    def reading(
        self, before_any: Callable[[], dict[str, IndexUnit]]
    ) -> Iterator[dict[str, IndexUnit]]:
        """The units to search (``before_any()`` until a sync completed), held until the
        search is done. Picking a set and holding it is one step, so a sync that serves a newer
        set meanwhile sees this one in use."""
        with self._guard:
            units = self._served[1] if self._served is not None else None
            if units is not None:
                self._hold(units)
        if units is None:
            units = before_any()  # nothing served, so nothing dropped yet either
            with self._guard:
                self._hold(units)
        try:
            yield units
        finally:
            with self._guard:
                marker = id(units)
                _, count = self._using[marker]
                if count == 1:
                    del self._using[marker]
                else:
                    self._using[marker] = (units, count - 1)

    def _hold(self, units: dict[str, IndexUnit]) -> None:
        held = self._using.get(id(units))
        self._using[id(units)] = (units, 1 if held is None else held[1] + 1)

    def in_use(self) -> set[str]:
        """Keys of every unit set a search is ranking within now."""
        with self._guard:
            held = [units for units, _ in self._using.values()]
        return set().union(*held) if held else set()
