"""Where a run's pieces live: result folders named by model (``model_slug``), the digest that
keys a pack's checkpoints and results (``pack_digest``), and the link from a model's result
folder to the run's workspace.

``mirage run --out OUT`` materialises the workspace once at ``OUT/workspace`` and writes each
answerer's records to ``OUT/<model>/results.jsonl``; it also writes
``OUT/<model>/workspace-link.json`` (the workspace path, relative to that folder), so
``mirage rescore OUT/<model>`` and ``mirage report`` canonicalise SOURCE with the same workspace
the run used, wherever the run put it. A result folder without a findable workspace is an error:
scoring without the manifest would silently change SC.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from harness.kit.packsums import pack_files
from runtime.snapshot import validation_problem

WORKSPACE_LINK = "workspace-link.json"
RUN_CONFIG = "run.json"


def model_slug(model: str) -> str:
    """A model string as a folder name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("_") or "model"


def pack_digest(pack_root: Path) -> str:
    """Hash of every file in the pack folder (a symlink out of the folder is not followed);
    its ``SHA256SUMS`` is left out, so locking a pack keeps its digest."""
    digest = hashlib.sha256()
    for path in pack_files(pack_root):
        digest.update(str(path.relative_to(pack_root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def run_config_path(result_dir: Path) -> Path | None:
    """The ``run.json`` of a result folder: in it, or in the run folder holding it."""
    for candidate in (result_dir / RUN_CONFIG, result_dir.parent / RUN_CONFIG):
        if candidate.is_file():
            return candidate
    return None


class RunFileError(ValueError):
    """A file of a run folder that mirage reads back (``run.json``, ``visibility.json``,
    ``summaries.json``, …) is unreadable, of the wrong shape (read strictly: no unknown field,
    no coerced value), or contradicts what names it; the message is one line naming the file
    and what to do. Nothing is repaired or written over."""


class WorkspaceNotFoundError(FileNotFoundError):
    """No workspace could be found for a result folder."""


class WorkspaceLink(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workspace: str  # relative to the folder holding the link, or absolute


def write_workspace_link(result_dir: Path, workspace: Path) -> Path:
    """Record in ``result_dir`` where the run's workspace is (relative when possible)."""
    target = Path(os.path.relpath(workspace.absolute(), result_dir.absolute()))
    path = result_dir / WORKSPACE_LINK
    path.write_text(WorkspaceLink(workspace=target.as_posix()).model_dump_json(indent=2) + "\n")
    return path


def _linked(result_dir: Path) -> Path | None:
    path = result_dir / WORKSPACE_LINK
    if not path.is_file():
        return None
    try:
        link = WorkspaceLink.model_validate_json(path.read_bytes(), strict=True)
    except ValidationError as exc:
        raise WorkspaceNotFoundError(
            f"{path} is not a workspace link ({validation_problem(exc)}); delete it and pass "
            "--workspace W, the workspace the run materialised"
        ) from exc
    return result_dir / link.workspace


def find_workspace(result_dir: Path, explicit: Path | None = None) -> Path:
    """The workspace whose manifest canonicalises the SOURCE answers of ``result_dir``.

    Looked for in order: ``explicit`` (``--workspace``), the folder's workspace link, a
    ``workspace/`` inside it, and ``../workspace`` beside a ``../run.json`` (the layout of
    ``mirage run`` before links were written).
    """
    if explicit is not None:
        if not explicit.is_dir():
            raise WorkspaceNotFoundError(f"--workspace {explicit} is not a directory")
        return explicit
    linked = _linked(result_dir)
    candidates = [linked] if linked is not None else []
    candidates.append(result_dir / "workspace")
    if (result_dir.parent / RUN_CONFIG).is_file():
        candidates.append(result_dir.parent / "workspace")
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    looked = ", ".join(str(c) for c in candidates)
    raise WorkspaceNotFoundError(
        f"no workspace found for {result_dir} (looked at {looked}); pass --workspace W, the "
        "workspace the run materialised, so SOURCE answers are canonicalised as they were"
    )
