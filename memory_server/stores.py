"""Where a workspace's index lives on disk, and how several processes share it safely.

Above: ``HybridIndex``. Below: ``<workspace>/.mirage/index/``::

    writer.lock       the single-writer lock (``memory_server.writelock``)
    current.json      {"generation": "g-…", "serial": N}: what searches use; every write bumps N
    g-<time>-<hex>/   one generation: keyword.sqlite, chroma/ (embedded store), in-use.lock

Writes go to the current generation under the writer lock. A rebuild fills a new generation
while searches keep using the current one, then points ``current.json`` at it; the next writer
deletes generations that no process has open (each open view holds a shared lock on its
generation's ``in-use.lock``). An embedded chroma client keeps its vector index in memory and
never sees another process's writes, so a view whose serial is behind ``current.json`` is
reopened, under the writer lock so that it never loads files a writer is changing.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import os
import secrets
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel, ValidationError

from memory_server.keyword import KeywordStore
from memory_server.store import atomic_write_bytes
from memory_server.writelock import WriterLock

log = structlog.get_logger(__name__)

POINTER_NAME = "current.json"
LOCK_NAME = "writer.lock"
IN_USE_NAME = "in-use.lock"
GENERATION_PREFIX = "g-"


class IndexPointer(BaseModel):
    generation: str
    serial: int = 0


class IndexDirectory:
    """The generations of one workspace's index and the pointer to the current one."""

    def __init__(self, root: Path, workspace: Path) -> None:
        self.root = root
        self.lock = WriterLock.for_path(root / LOCK_NAME, f"the index of workspace {workspace}")

    def pointer(self) -> IndexPointer | None:
        """The current generation, or None when there is none (new, legacy or damaged)."""
        try:
            pointer = IndexPointer.model_validate_json((self.root / POINTER_NAME).read_bytes())
        except (OSError, ValidationError, ValueError):
            return None
        return pointer if self.generation_dir(pointer.generation).is_dir() else None

    def point_to(self, pointer: IndexPointer) -> None:
        """Make ``pointer`` current (atomically; the caller holds the writer lock)."""
        atomic_write_bytes(self.root / POINTER_NAME, pointer.model_dump_json().encode("utf-8"))

    def new_generation(self) -> str:
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
        generation = f"{GENERATION_PREFIX}{stamp}-{secrets.token_hex(3)}"
        self.generation_dir(generation).mkdir(parents=True)
        return generation

    def generation_dir(self, generation: str) -> Path:
        return self.root / generation

    def collect(self, on_delete: Callable[[str], None]) -> list[str]:
        """Delete every generation but the current one that no process has open, and stores
        left by versions before generations existed. The caller holds the writer lock."""
        current = self.pointer()
        deleted = []
        for entry in sorted(self.root.iterdir()):
            if current is not None and entry.name == current.generation:
                continue
            if entry.name.startswith(GENERATION_PREFIX) and entry.is_dir():
                if _delete_if_unused(entry):
                    on_delete(entry.name)
                    deleted.append(entry.name)
            elif entry.name == "chroma" or entry.name.startswith("keyword.sqlite"):
                _remove(entry)
                deleted.append(entry.name)
        if deleted:
            log.info("index.generations_deleted", generations=deleted)
        return deleted


def _delete_if_unused(directory: Path) -> bool:
    fd = os.open(directory / IN_USE_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        shutil.rmtree(directory, ignore_errors=True)
        return True
    finally:
        os.close(fd)


def _remove(entry: Path) -> None:
    if entry.is_dir():
        shutil.rmtree(entry, ignore_errors=True)
    else:
        entry.unlink(missing_ok=True)


@dataclass
class _EmbeddedClient:
    client: Any
    serial: int
    epoch: int
    users: int


class EmbeddedClients:
    """One embedded chroma client per store directory in this process (chroma would share one
    in-memory system per path anyway), reopened for every index of the process at once when it
    is behind the serial another process wrote."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._entries: dict[str, _EmbeddedClient] = {}

    def acquire(self, path: Path, serial: int) -> None:
        with self._guard:
            entry = self._entries.get(str(path))
            if entry is None:
                self._entries[str(path)] = _EmbeddedClient(_open_embedded(path), serial, 0, 1)
                return
            entry.users += 1
        self.client(path, serial)

    def client(self, path: Path, serial: int, *, reopen: bool = False) -> tuple[Any, int]:
        """The client of ``path`` reflecting at least ``serial`` (``reopen``: reload it
        anyway), and its epoch, which changes on every reload."""
        with self._guard:
            entry = self._entries[str(path)]
            if reopen or entry.serial < serial:
                entry.client.close()
                entry.client = _open_embedded(path)
                entry.serial = serial
                entry.epoch += 1
                log.info("index.store_reopened", path=str(path), serial=serial)
            return entry.client, entry.epoch

    def mark_written(self, path: Path, serial: int) -> None:
        """This process wrote ``serial`` itself: its client already reflects it."""
        with self._guard:
            entry = self._entries[str(path)]
            entry.serial = max(entry.serial, serial)

    def release(self, path: Path) -> None:
        with self._guard:
            entry = self._entries.get(str(path))
            if entry is None:
                return
            entry.users -= 1
            if entry.users <= 0:
                entry.client.close()
                del self._entries[str(path)]


EMBEDDED_CLIENTS = EmbeddedClients()


def _open_embedded(path: Path) -> Any:
    import chromadb
    from chromadb.config import Settings

    path.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))


class StoreView:
    """One generation opened by one index: its keyword store, its chroma collection (looked up
    through ``collection``), the serial it reflects, and a shared lock that keeps writers from
    deleting the generation while it is open."""

    def __init__(self, directory: IndexDirectory, pointer: IndexPointer) -> None:
        self.generation = pointer.generation
        self.serial = pointer.serial
        self.path = directory.generation_dir(pointer.generation)
        self._in_use = os.open(
            self.path / IN_USE_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644
        )
        fcntl.flock(self._in_use, fcntl.LOCK_SH)
        self.keyword = KeywordStore(self.path / "keyword.sqlite")
        self.collection: Any = None
        self.epoch = -1
        self.loaded = False  # the embedded store's files were read under the writer lock
        self.suspect = False  # a query failed: reload the embedded store before trusting it
        self.users = 0
        self.retired = False

    @property
    def chroma_path(self) -> Path:
        return self.path / "chroma"

    def close(self) -> None:
        self.keyword.close()
        os.close(self._in_use)
