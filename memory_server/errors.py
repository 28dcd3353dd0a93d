"""Errors of the memory server. Every one carries a message written for the caller (a model or a
person): what was wrong and what to do instead. The MCP layer turns them into tool errors."""

from __future__ import annotations

MAX_REASON_CHARS = 300


class MemoryServerError(Exception):
    """Base class: a request the workspace or the index cannot serve."""


class InvalidInputError(MemoryServerError, ValueError):
    """An argument is empty, too large, out of range or of the wrong shape."""


class PathEscapeError(MemoryServerError, PermissionError):
    """A path points outside the workspace (``..``, absolute path, symlink escape)."""


class UnknownReferenceError(MemoryServerError, LookupError):
    """A reference (artifact id, path, alias) that the workspace does not know."""


class UnknownVersionError(MemoryServerError, LookupError):
    """A workspace version id with no stored snapshot."""


class ManifestError(MemoryServerError, ValueError):
    """``MANIFEST.yaml`` exists but does not follow the documented format."""


class CorruptStateError(MemoryServerError, OSError):
    """A file under ``.mirage/`` does not hold what its name promises (a stored copy whose hash
    does not match, a version file that does not parse): refused, never served."""


def short_reason(exc: BaseException) -> str:
    """An unexpected exception as one short line: ``Type: first line of its message``."""
    lines = str(exc).strip().splitlines()
    reason = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    return reason if len(reason) <= MAX_REASON_CHARS else reason[: MAX_REASON_CHARS - 1] + "…"
