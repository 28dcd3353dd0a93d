"""A full disk, told as one line: ``disk full writing FILE: free space ... and re-run``.

A run that fills its disk fails somewhere deep — an ``OSError`` with ``ENOSPC`` from a results
write, SQLite's ``database or disk is full`` / ``disk I/O error`` from the keyword index's WAL,
a library wrapping either — and often wrapped again by the layers above. ``disk_full`` walks an
error's causes, contexts and exception groups for one of those and returns a ``DiskFull`` that
names the file (or the folder the run writes under) and what to do; the command line prints it
and exits 1 (a machine failure: what was written is kept, and a re-run resumes).
"""

from __future__ import annotations

import errno
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

LOW_SPACE_BYTES = 1 << 20
"""Below this much free space a storage error that does not say why (SQLite's ``disk I/O
error``, chromadb's ``InternalError``) is taken for a full disk."""
FULL_TEXTS = ("no space left on device", "database or disk is full", "disk quota exceeded")


class DiskFullError(OSError):
    """A write found the disk full; raised with the file's name (``filename``)."""

    def __init__(self, path: Path, detail: str = "") -> None:
        super().__init__(errno.ENOSPC, detail or "No space left on device", str(path))


@dataclass(frozen=True)
class DiskFull:
    file: str

    def message(self) -> str:
        return (
            f"disk full writing {self.file}: free space on that disk (or give another --out) "
            "and re-run the same command to resume; what was written so far is kept"
        )


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    stack = [error]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, BaseExceptionGroup):
            stack.extend(current.exceptions)
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                stack.append(linked)


def _low_space(folder: Path | None) -> bool:
    if folder is None:
        return False
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        return shutil.disk_usage(probe).free < LOW_SPACE_BYTES
    except OSError:
        return False


def disk_full(error: BaseException, out: Path | None = None) -> DiskFull | None:
    """The full disk behind ``error`` (``out``: the folder the run writes under, named when
    the failing file is not known), or None when the error has another cause."""
    somewhere = f"a file under {out}" if out else "the output folder"
    chain = list(_chain(error))
    for item in chain:
        if isinstance(item, OSError) and item.errno in (errno.ENOSPC, errno.EDQUOT):
            named = item.filename2 or item.filename  # a copy names its source first
            return DiskFull(str(named) if named else somewhere)
        if any(text in str(item).lower() for text in FULL_TEXTS):
            return DiskFull(somewhere)
    if any(_storage_error(item) for item in chain) and _low_space(out):
        return DiskFull(somewhere)
    return None


def _storage_error(error: BaseException) -> bool:
    """An error of the storage layers that hide ENOSPC behind their own words (SQLite's
    ``disk I/O error``, chromadb's ``Failed to apply logs``): a full disk when space is low."""
    return isinstance(error, OSError | sqlite3.Error) or type(error).__module__.startswith(
        "chromadb"
    )
