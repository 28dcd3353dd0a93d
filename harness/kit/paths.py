"""Whether a path a user named can become what a command makes of it — a folder it writes into
(``--out``) or a file it appends to (``--log``) — checked before any work starts, so a wrong one
is one line naming the path, not an ``OSError`` from deep inside a run.

Above: the ``mirage`` commands' path options (``mirage.cli.options``: ``folder_to_write``,
``file_to_write``), ``mirage run``/``cue run`` for an ``out`` a study file gives, and
``harness.kit.outlock`` for a run started from the API. Below: the file system (``stat`` and
``access``; nothing is created).
"""

from __future__ import annotations

import os
from pathlib import Path


def folder_problem(path: Path) -> str | None:
    """Why ``path`` cannot be a folder to create or write into; None when it can."""
    if path.is_dir():
        return None if _writable(path) else f"{path} is a folder this user may not write to"
    if path.exists():
        return f"{path} is a file, not a folder"
    return _creatable(path)


def file_problem(path: Path) -> str | None:
    """Why ``path`` cannot be a file to create or append to; None when it can."""
    if path.is_dir():
        return f"{path} is a folder, not a file"
    if path.exists():
        return None if os.access(path, os.W_OK) else f"{path} is a file this user may not write to"
    return _creatable(path)


def _creatable(path: Path) -> str | None:
    """For a ``path`` that does not exist: why it cannot be created (a broken symbolic link, a
    file where a folder on the way to it belongs, a folder this user may not write to)."""
    if path.is_symlink():
        return f"{path} is a symbolic link to {os.readlink(path)}, which does not exist"
    ancestor = next(parent for parent in path.absolute().parents if parent.exists())
    if not ancestor.is_dir():
        return f"{ancestor} is a file, so {path} cannot be created in it"
    if not _writable(ancestor):
        return f"{ancestor} is a folder this user may not write to, so {path} cannot be created"
    return None


def _writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK | os.X_OK)
