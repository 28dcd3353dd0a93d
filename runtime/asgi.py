"""A uvicorn server that says when it listens: the one base of every background server mirage
runs (the model endpoint in ``runtime.serve``, the memory server's HTTP transport)."""

from __future__ import annotations

import threading
from typing import Any

import uvicorn


class ReadyServer(uvicorn.Server):
    """Sets ``ready`` once its sockets are bound, so a starter thread can wait for it."""

    def __init__(self, config: uvicorn.Config, ready: threading.Event) -> None:
        super().__init__(config)
        self._ready = ready

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        self._ready.set()
