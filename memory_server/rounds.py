"""Group-committed syncs of the working tree: one thread at a time brings the index up to the
files, for every thread that asked meanwhile.

Above: ``memory_server.index`` (``HybridIndex.sync`` of the working tree runs as a round;
``search`` asks whether note writes are in flight before it considers syncing). Below: nothing
but ``threading``.

A caller waits until a round that started after its call has finished, and leads that round
when no other thread is running one: appends that arrive while a round runs are all indexed by
the next one, whose chunks are embedded in one batch. Only the leader sees a round's exception;
the threads it served get its result, or ``None`` when it failed (a later round retries).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

T = TypeVar("T")


class SyncRounds(Generic[T]):
    """Rounds of one sync function, run by whichever waiting thread comes first."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._running = False
        self._started = 0
        self._finished = 0
        self._result: T | None = None
        self._writers = 0

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Mark a write of this process in flight (a note being written and then indexed by
        the writer's own round): searches meanwhile serve what is indexed rather than index it."""
        with self._changed:
            self._writers += 1
        try:
            yield
        finally:
            with self._changed:
                self._writers -= 1

    def writes_in_flight(self) -> bool:
        with self._changed:
            return self._writers > 0

    def run(self, sync: Callable[[], T]) -> T | None:
        """The result of a round of ``sync`` that started after this call (led by this thread
        when none is running), or None when another thread led it and it failed."""
        with self._changed:
            wanted = self._started + 1
            while self._finished < wanted:
                if not self._running:
                    self._running = True
                    self._started += 1
                    number = self._started
                    break
                self._changed.wait()
            else:
                return self._result
        result: T | None = None
        try:
            result = sync()
        finally:
            with self._changed:
                self._running = False
                self._finished = number
                self._result = result
                self._changed.notify_all()
        return result
