"""OpenClaw's own state as mirage reads it: compaction count, memory files, restored history.

Above: a trunk driver (MIRAGE's, which writes checkpoints) and the probe adapter (restores).
Below: OpenClaw's SQLite agent store, opened read-only while the gateway runs
(``session_nodes.entry_json`` holds ``compactionCount``; the gateway's RPC does not expose it),
and its agent workspace, whose ``MEMORY.md`` and ``memory/`` are OpenClaw's memory, shared by
every session: a checkpoint copies them, every probe copies them back first.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from harness.kit.agents.context import INSTRUCTIONS_SOURCE, BootItem
from harness.kit.agents.openclaw.errors import OpenClawError

MEMORY_FILE = "MEMORY.md"
MEMORY_DIR = "memory"
TRUNK_SESSION = "trunk"
"""The session a trunk is replayed into; every checkpoint session is a fork of it."""
MEMORY_COPY = "agent-memory"
"""The folder of a checkpoint holding its copy of OpenClaw's memory files."""
RUNTIME_LINE = re.compile(r"^Runtime: .*$", re.MULTILINE)
BOOT_FILE_HEADING = re.compile(r"^#{2,3} (?:\S*/)?([\w.-]+\.md)\s*$", re.MULTILINE)
"""A heading naming a workspace file (``## /home/…/MEMORY.md``): OpenClaw's system prompt
injects each bootstrap file (AGENTS.md, SOUL.md, MEMORY.md, …) under one."""
"""OpenClaw's first user message carries the session key and id of each fork on this line."""


class SessionNode(BaseModel):
    compaction_count: int = 0
    status: str | None = None
    session_id: str | None = None


def session_node(store: Path, key: str) -> SessionNode | None:
    """Compaction count, run status and session id of session ``key``; None before its first
    turn."""
    if not store.is_file():
        return None
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=30) as db:
            row = db.execute(
                "SELECT entry_json, status FROM session_nodes WHERE session_key = ?", (key,)
            ).fetchone()
    except sqlite3.Error as exc:
        raise OpenClawError(f"cannot read OpenClaw's session store {store}: {exc}") from exc
    if row is None:
        return None
    try:
        entry = json.loads(row[0])
    except ValueError as exc:
        raise OpenClawError(f"{store}: session {key} has an unreadable entry") from exc
    return SessionNode(
        compaction_count=int(entry.get("compactionCount") or 0),
        status=row[1],
        session_id=entry.get("sessionId"),
    )


def memory_paths(workspace: Path) -> list[Path]:
    """OpenClaw's memory files in ``workspace``, sorted, relative to it."""
    found = [Path(MEMORY_FILE)] if (workspace / MEMORY_FILE).is_file() else []
    folder = workspace / MEMORY_DIR
    if folder.is_dir():
        found += sorted(p.relative_to(workspace) for p in folder.rglob("*") if p.is_file())
    return found


def memory_digest(workspace: Path) -> str:
    digest = hashlib.sha256()
    for relative in memory_paths(workspace):
        digest.update(str(relative).encode() + b"\0")
        digest.update((workspace / relative).read_bytes() + b"\0")
    return digest.hexdigest()


def copy_memory(source: Path, target: Path) -> str:
    """Make ``target``'s memory files exactly ``source``'s; returns their digest."""
    (target / MEMORY_FILE).unlink(missing_ok=True)
    shutil.rmtree(target / MEMORY_DIR, ignore_errors=True)
    (target / MEMORY_DIR).mkdir(parents=True, exist_ok=True)
    for relative in memory_paths(source):
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / relative, target / relative)
    return memory_digest(target)


def is_memory_path(path: object) -> bool:
    """A workspace-relative path of OpenClaw's memory (what the paper counts as R_tool)."""
    if not isinstance(path, str):
        return False
    clean = path.split("#", 1)[0].lstrip("./")
    return clean == MEMORY_FILE or clean.startswith(f"{MEMORY_DIR}/")


def openclaw_boot(system_prompt: str) -> list[BootItem]:
    """OpenClaw's system prompt as start-of-session material: each injected file under its
    heading (``source`` its file name, e.g. ``MEMORY.md``), the rest as ``system_prompt``."""
    headings = list(BOOT_FILE_HEADING.finditer(system_prompt))
    starts = [h.start() for h in headings] + [len(system_prompt)]
    items = [BootItem(source=INSTRUCTIONS_SOURCE, text=system_prompt[: starts[0]])]
    for heading, end in zip(headings, starts[1:], strict=True):
        items.append(BootItem(source=heading.group(1), text=system_prompt[heading.end() : end]))
    return [item for item in items if item.text.strip()]


def history_digest(request_messages: list[dict[str, Any]] | None) -> str | None:
    """The hash of the history a probe's first model request carried: every message but the
    system prompt and the probe itself, with the per-fork ``Runtime:`` line normalised. Equal
    for every probe restored from the same checkpoint, different if one saw another's turn."""
    if not request_messages:
        return None
    history = [m for m in request_messages[:-1] if m.get("role") != "system"]
    text = json.dumps(_without_runtime_line(history), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _without_runtime_line(value: Any) -> Any:
    if isinstance(value, str):
        return RUNTIME_LINE.sub("Runtime: <fork>", value)
    if isinstance(value, list):
        return [_without_runtime_line(item) for item in value]
    if isinstance(value, dict):
        return {key: _without_runtime_line(item) for key, item in value.items()}
    return value


class OpenClawCheckpoint(BaseModel):
    """``openclaw-checkpoint.json``: which OpenClaw session holds a state, and its memory."""

    session: str
    memory_sha256: str
    eit: int
    compaction_count: int
    openclaw_version: str


def read_openclaw_checkpoint(path: Path) -> OpenClawCheckpoint:
    try:
        return OpenClawCheckpoint.model_validate_json(path.read_bytes())
    except (OSError, ValidationError) as exc:
        raise OpenClawError(
            f"{path}: not a readable OpenClaw checkpoint; delete its family folder "
            f"{path.parent.parent} to rebuild the trunk"
        ) from exc
