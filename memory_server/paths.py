"""Path confinement: every read and write of the workspace goes through ``confine``.

Above: the workspace, the snapshot store and the MCP tools, which receive paths from callers
they do not trust. Below: the file system. A path is accepted only if it is relative, has no
``..`` component, and its real location (symlinks followed) stays inside the workspace root.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from memory_server.errors import InvalidInputError, PathEscapeError

MAX_PATH_CHARS = 1024
STATE_DIR_NAME = ".mirage"


def normalise_relative(path: str) -> str:
    """A caller's relative path as a clean POSIX string, or an error saying why it is refused."""
    if not isinstance(path, str) or not path.strip():
        raise InvalidInputError("path must be a non-empty string")
    if len(path) > MAX_PATH_CHARS:
        raise InvalidInputError(f"path is longer than {MAX_PATH_CHARS} characters")
    if "\x00" in path:
        raise InvalidInputError("path contains a NUL character")
    text = path.strip().replace("\\", "/")
    while text.startswith("./"):
        text = text[2:]
    pure = PurePosixPath(text)
    if pure.is_absolute() or (len(text) > 1 and text[1] == ":"):
        raise PathEscapeError(f"absolute paths are not allowed: {path!r}; use a workspace path")
    if any(part == ".." for part in pure.parts):
        raise PathEscapeError(f"'..' is not allowed in workspace paths: {path!r}")
    cleaned = "/".join(part for part in pure.parts if part not in ("", "."))
    if not cleaned:
        raise InvalidInputError(f"path {path!r} names the workspace root, not a file")
    return cleaned


def confine(root: Path, path: str, *, allow_state: bool = False) -> Path:
    """The absolute path for a workspace-relative ``path``, guaranteed to stay inside ``root``
    even through symlinks. ``.mirage/`` (the server's own state) is refused unless allowed,
    also when a symlink elsewhere in the workspace points into it."""
    relative = normalise_relative(path)
    if not allow_state and relative.split("/", 1)[0] == STATE_DIR_NAME:
        raise PathEscapeError(f"{STATE_DIR_NAME}/ holds server state and is not readable")
    real_root = root.resolve()
    candidate = real_root / relative
    real = Path(os.path.realpath(candidate))
    if real != real_root and not real.is_relative_to(real_root):
        raise PathEscapeError(f"path {path!r} leaves the workspace (symlink escape)")
    if not allow_state and real.is_relative_to(real_root / STATE_DIR_NAME):
        raise PathEscapeError(
            f"path {path!r} is a symlink into {STATE_DIR_NAME}/, which holds server state "
            "and is not readable"
        )
    return candidate


def is_servable(root: Path, candidate: Path) -> bool:
    """True when the real location of ``candidate`` lies inside the real ``root`` and outside
    its ``.mirage/`` state directory."""
    real_root = root.resolve()
    real = Path(os.path.realpath(candidate))
    inside = real == real_root or real.is_relative_to(real_root)
    return inside and not real.is_relative_to(real_root / STATE_DIR_NAME)
