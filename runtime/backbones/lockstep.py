"""Calls from a fixed group of concurrent agent turns, sent to a batching backbone together.

Above: the harness's probe loop (``harness/mirage/probing/loop.py``), which runs each fixed group
of probes as members of one ``LockstepGroup``. Below: a backbone whose ``batch_width`` is set
(``EmbeddedBackbone``), which hands each call to ``submit`` when its turn runs inside a group
(``current_member``) and gets the reply of its slice of one batch back.

A batch goes out once every member not yet finished waits on a call: members that have not
started, or are executing a tool, hold it back; members that have finished no longer count.
Its calls are in member order (the members' keys), not in arrival order. So which calls share
a batch, and in what order, depends only on the group and on what the members ask — never on
timing — and a backbone whose replies depend on their batch
(``runtime/backbones/llama/batch.py``) still gives the same replies in every run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

BatchCall = Callable[[Sequence[Any]], Sequence[Any]]
"""Sends requests as one batch and returns one reply (or an exception to raise) for each."""


@dataclass
class _Waiting:
    key: str
    call: BatchCall
    request: Any
    reply: asyncio.Future[Any]


@dataclass(frozen=True)
class Member:
    group: LockstepGroup
    key: str

    async def submit(self, call: BatchCall, request: Any) -> Any:
        """``request``'s reply, once it has gone out with the rest of its batch."""
        return await self.group.submit(self.key, call, request)


_CURRENT: ContextVar[Member | None] = ContextVar("mirage_lockstep_member", default=None)


def current_member() -> Member | None:
    """The group member the running agent turn belongs to, if any."""
    return _CURRENT.get()


class LockstepGroup:
    """Members (agent turns, keyed in a fixed order) whose backbone calls go out together.
    Every member is named up front, so the first batch waits for the last member to start."""

    def __init__(self, keys: Iterable[str]) -> None:
        self._members: set[str] = set(keys)
        self._entered: set[str] = set()
        self._waiting: list[_Waiting] = []
        self._sending: set[asyncio.Task[None]] = set()

    @contextmanager
    def member(self, key: str) -> Iterator[Member]:
        """Run the body as member ``key``: backbone calls made inside it join the group; the
        group stops waiting for it when the body ends."""
        if key not in self._members or key in self._entered:
            raise ValueError(f"{key!r} is not a lockstep member waiting to run")
        self._entered.add(key)
        member = Member(self, key)
        token = _CURRENT.set(member)
        try:
            yield member
        finally:
            _CURRENT.reset(token)
            self._members.discard(key)
            self._waiting = [w for w in self._waiting if w.key != key]
            self._send_when_ready()

    async def submit(self, key: str, call: BatchCall, request: Any) -> Any:
        reply: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting.append(_Waiting(key, call, request, reply))
        self._send_when_ready()
        return await reply

    def _send_when_ready(self) -> None:
        if not self._waiting or len(self._waiting) < len(self._members):
            return
        batch = sorted(self._waiting, key=lambda waiting: waiting.key)
        self._waiting = []
        task = asyncio.get_running_loop().create_task(self._send(batch))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    @staticmethod
    async def _send(batch: list[_Waiting]) -> None:
        calls: dict[BatchCall, list[_Waiting]] = {}
        for waiting in batch:
            calls.setdefault(waiting.call, []).append(waiting)
        for call, items in calls.items():
            try:
                replies = await asyncio.to_thread(call, [w.request for w in items])
            except Exception as exc:  # the whole batch failed: every member gets the error
                replies = [exc] * len(items)
            for waiting, reply in zip(items, replies, strict=True):
                if waiting.reply.done():
                    continue
                if isinstance(reply, BaseException):
                    waiting.reply.set_exception(reply)
                else:
                    waiting.reply.set_result(reply)
