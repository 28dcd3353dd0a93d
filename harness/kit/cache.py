"""mirage's cache folder: installed agents, digest caches; kept between runs.

Above: the installed agents (``harness.kit.agents.*.install``), the provenance's digest cache.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "MIRAGE_CACHE_DIR"


def cache_root() -> Path:
    """``$MIRAGE_CACHE_DIR``, else ``$XDG_CACHE_HOME/mirage``, else ``~/.cache/mirage``."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "mirage"
