"""The vector side of an index generation: chroma, embedded or a server.

Above: ``memory_server.generations``, which opens, writes and closes store views, and through it
ingestion and search, which use a view's collection. Below: chromadb. An embedded store lives in
its generation's folder and is shared by every index of this process
(``memory_server.stores.EMBEDDED_CLIENTS``); a Chroma server (``IndexConfig.chroma_url``) holds
the collections of every generation side by side, named after the workspace as well.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from memory_server.errors import InvalidInputError
from memory_server.stores import EMBEDDED_CLIENTS, StoreView


class ChromaStores:
    """The chroma collections of one workspace's generations, for one embedding model."""

    def __init__(
        self, workspace_root: Path, model_id: str, model_path: str | None, url: str | None
    ) -> None:
        self._workspace_root = workspace_root
        self._model_path = model_path
        self._http = _http_client(url) if url else None
        self._base = self._base_name(model_id)

    def _base_name(self, model_id: str) -> str:
        slug = re.sub(r"[^A-Za-z0-9._-]", "-", model_id)[:80].strip("-.") or "model"
        if self._http is not None:
            workspace_tag = hashlib.sha256(str(self._workspace_root.resolve()).encode()).hexdigest()
            return f"mirage-{workspace_tag[:12]}-{slug}"
        return f"mirage-{slug}"

    def _name(self, generation: str) -> str:
        """Embedded stores live in their generation's folder; a Chroma server holds the
        collections of every generation side by side."""
        return f"{self._base}-{generation}" if self._http else self._base

    def opened(self, view: StoreView) -> None:
        """``view`` was just opened: an embedded store gets (or shares) its client."""
        if self._http is None:
            EMBEDDED_CLIENTS.acquire(view.chroma_path, view.serial)

    def closing(self, view: StoreView) -> None:
        if self._http is None:
            EMBEDDED_CLIENTS.release(view.chroma_path)

    def written(self, view: StoreView) -> None:
        """This process wrote ``view`` up to its serial: its embedded client reflects that."""
        if self._http is None:
            EMBEDDED_CLIENTS.mark_written(view.chroma_path, view.serial)

    def collection(self, view: StoreView, *, reopen: bool = False) -> Any:
        """The view's chroma collection; ``reopen`` (under the writer lock) reloads an
        embedded store whose in-memory state is suspect."""
        if self._http is not None:
            client, epoch = self._http, 0
        else:
            client, epoch = EMBEDDED_CLIENTS.client(view.chroma_path, view.serial, reopen=reopen)
        if view.collection is None or view.epoch != epoch:
            from memory_server.chroma_ef import chroma_embedding_function

            view.collection = client.get_or_create_collection(
                name=self._name(view.generation),
                embedding_function=chroma_embedding_function(self._model_path),
                configuration={"hnsw": {"space": "cosine"}},
            )
            view.epoch = epoch
            view.loaded = False
        return view.collection

    def drop(self, generation: str) -> None:
        """Forget a deleted generation's collection (an embedded one went with its folder)."""
        if self._http is not None:
            with contextlib.suppress(Exception):
                self._http.delete_collection(self._name(generation))


def chroma_errors() -> tuple[type[Exception], ...]:
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
