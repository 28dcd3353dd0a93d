"""The index's store generations as one process sees them: which generation its searches use,
when it follows what other processes wrote, and how it writes.

Above: ``memory_server.index`` (sync, rebuild, search), ``memory_server.ingest`` (which stores
chunks through ``writing``) and ``memory_server.search`` (which ranks within ``using``). Below:
``memory_server.stores`` (the generation folders, the pointer to the current one, the writer
lock) and ``memory_server.chroma`` (each generation's vector collection).

Every write holds the writer lock, briefly; a search takes it only to follow a newer
generation or serial, and then waits at most ``SEARCH_LOCK_WAIT_S`` before serving what is
open. A view stays open while a call uses it, even when a rebuild switches to a new one.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import structlog

from memory_server.chroma import ChromaStores
from memory_server.stores import IndexDirectory, IndexPointer, StoreView
from memory_server.workspace import Workspace
from memory_server.writelock import WriterBusyError

log = structlog.get_logger(__name__)

# How long a search waits for the writer lock (to add new files, or to reload a store another
# process changed) before serving what is indexed; writes hold it for one slice at most.
SEARCH_LOCK_WAIT_S = 5.0


class Generations:
    """The generations of one workspace's index, opened for this index object: the current
    view, the chroma collection of each view, and the writer lock around them."""

    def __init__(
        self,
        workspace: Workspace,
        model_id: str,
        *,
        model_path: str | None,
        chroma_url: str | None,
        lock_timeout_s: float,
    ) -> None:
        self._workspace_root = workspace.root
        self._directory = IndexDirectory(workspace.state_dir / "index", workspace.root)
        self._chroma = ChromaStores(workspace.root, model_id, model_path, chroma_url)
        self._views_guard = threading.Lock()
        self._view = self._open_current(lock_timeout_s)

    @property
    def current(self) -> StoreView:
        """The view searches use now (without following other processes' writes)."""
        return self._view

    def lock(self, timeout: float) -> AbstractContextManager[None]:
        return self._directory.lock.hold(timeout)

    def collect(self) -> None:
        """Delete generations no process uses (the caller holds the writer lock)."""
        self._directory.collect(on_delete=self._chroma.drop)

    def collection(self, view: StoreView, *, reopen: bool = False) -> Any:
        """The view's chroma collection (``ChromaStores.collection``)."""
        return self._chroma.collection(view, reopen=reopen)

    def _open_current(self, timeout: float) -> StoreView:
        """Open the current generation (making one if there is none); a half-lost index (the
        two stores disagree) is replaced by an empty generation that the next sync fills."""
        with self.lock(timeout):
            pointer = self._directory.pointer() or self._start_generation()
            view = self._open_view(pointer)
            if self.collection(view).count() == view.keyword.chunk_count():
                return view
            log.warning("index.inconsistent_rebuilding", workspace=str(self._workspace_root))
            self._close_view(view)
            view = self._open_view(self._start_generation())
            self.collect()
            return view

    def _start_generation(self) -> IndexPointer:
        """A new, empty generation made current (the caller holds the writer lock)."""
        pointer = IndexPointer(generation=self._directory.new_generation())
        self._directory.point_to(pointer)
        return pointer

    def _open_view(self, pointer: IndexPointer) -> StoreView:
        view = StoreView(self._directory, pointer)
        self._chroma.opened(view)
        return view

    def _close_view(self, view: StoreView) -> None:
        self._chroma.closing(view)
        view.close()

    def fresh_view(self) -> StoreView:
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
            with self.lock(SEARCH_LOCK_WAIT_S):
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
            self.collect()
        view.serial = max(view.serial, pointer.serial)
        self.collection(view, reopen=view.suspect)
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
    def using(self, view: StoreView | None = None) -> Iterator[StoreView]:
        """Keep a view open while it is used (a generation switch closes it afterwards)."""
        view = view or self.fresh_view()
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
    def writing(self, timeout: float) -> Iterator[StoreView]:
        """Write the current generation under the writer lock; afterwards its serial tells
        other processes to reload."""
        with self.lock(timeout):
            view = self._follow(self._directory.pointer() or self._start_generation())
            try:
                with self.using(view):
                    yield view
            finally:
                bumped = IndexPointer(generation=view.generation, serial=view.serial + 1)
                self._directory.point_to(bumped)
                view.serial = bumped.serial
                self._chroma.written(view)

    def start_private(self, timeout: float) -> StoreView:
        """A new generation, open for writing but not current: nobody else sees it until
        ``publish``, and no writer collects it meanwhile (it is open)."""
        with self.lock(timeout):
            return self._open_view(IndexPointer(generation=self._directory.new_generation()))

    def publish(self, view: StoreView) -> None:
        """Make a private generation current and search it from now on (the caller holds the
        writer lock)."""
        self._directory.point_to(IndexPointer(generation=view.generation))
        self._switch(view)

    def discard(self, view: StoreView) -> None:
        """Close a private generation that will never be published, and delete it."""
        self._close_view(view)
        shutil.rmtree(view.path, ignore_errors=True)

    def close(self) -> None:
        self._retire(self._view)
