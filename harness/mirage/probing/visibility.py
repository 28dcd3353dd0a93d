"""The visibility map: for every checkpoint and every planted artifact, where its content still
is — ``verbatim`` in the active context outside the compaction summary, ``summary_only`` (the
summary is needed to show it), ``notes_only`` (only in the workspace's dated notes, e.g. from
the memory flush), or ``nowhere``.

The context rule is the retrieval-path classifier's (``harness.mirage.probing.retrieval_paths``):
the artifact's image, or at least ``min(2, n)`` distinct content keywords; so an artifact is
``verbatim`` or ``summary_only`` exactly when a probe about it that made no retrieval call is
``R_context``. The notes need the same number of keywords.

Above: the run (one ``StateVisibility`` per checkpoint, gathered in a ``VisibilityMap`` and
written once) and the reports (the state × artifact grid, GC per class). Below: a restored
``runtime.session.Session``, the workspace notes (``memory_server.workspace.Workspace``) and the
pack's keywords per artifact.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal

import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.kit.rundir import RunFileError
from harness.mirage.packs.pack import Pack
from harness.mirage.probing.retrieval_paths import (
    ContextEvidence,
    ContextMessage,
    content_keywords,
    context_evidence,
    context_from_messages,
)
from harness.mirage.protocol.keywords import MIN_MATCHES, matched, threshold
from harness.mirage.trunk.checkpoints import Checkpoint
from memory_server.workspace import Workspace
from runtime.session import Session
from runtime.snapshot import SnapshotError, load_snapshot, validation_problem

VISIBILITY_FILE = "visibility.json"
"""Written by ``mirage run`` into each result folder, once per run, beside ``summaries.json``."""

Visibility = Literal["verbatim", "summary_only", "notes_only", "nowhere"]
VISIBILITY_CLASSES: tuple[Visibility, ...] = ("verbatim", "summary_only", "notes_only", "nowhere")
log = structlog.get_logger(__name__)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Note(_Frozen):
    """One workspace note file (``memory/YYYY-MM-DD.md``, ``MEMORY.md``) and its text."""

    path: str
    text: str


class NoteHit(_Frozen):
    keyword: str
    path: str


class ArtifactVisibility(_Frozen):
    """Where one artifact's content is at one checkpoint, with the keyword evidence."""

    visibility: Visibility
    keywords: list[str]
    threshold: int
    context: ContextEvidence
    notes: list[NoteHit] = Field(default_factory=list)


class StateVisibility(_Frozen):
    state: str
    compaction_count: int
    messages: int
    notes: list[str] = Field(default_factory=list, description="note files read")
    artifacts: dict[str, ArtifactVisibility] = Field(default_factory=dict)
    unavailable: str | None = Field(
        default=None, description="why the checkpoint's context could not be read (no artifacts)"
    )


class VisibilityMap(BaseModel):
    """state -> artifact -> class and evidence, in checkpoint order."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = 1
    states: dict[str, StateVisibility] = Field(default_factory=dict)

    def add(self, state: StateVisibility) -> None:
        self.states[state.state] = state

    def grid(self) -> dict[str, dict[str, Visibility]]:
        return {
            name: {artifact: seen.visibility for artifact, seen in state.artifacts.items()}
            for name, state in self.states.items()
        }

    def of(self, state: str, artifact_id: str | None) -> Visibility | None:
        """The class of ``artifact_id`` at ``state`` (None: not mapped or not available)."""
        seen = self.states.get(state)
        found = None if seen is None or artifact_id is None else seen.artifacts.get(artifact_id)
        return None if found is None else found.visibility


def note_evidence(notes: Sequence[Note], keywords: Sequence[str]) -> list[NoteHit]:
    """The first note holding each keyword."""
    hits: list[NoteHit] = []
    for note in notes:
        found = {hit.keyword for hit in hits}
        hits += [
            NoteHit(keyword=k, path=note.path)
            for k in matched(note.text, keywords)
            if k not in found
        ]
    return hits


def artifact_visibility(
    context: Sequence[ContextMessage],
    notes: Sequence[Note],
    artifact_id: str,
    keywords: Sequence[str],
    min_matches: int = MIN_MATCHES,
) -> ArtifactVisibility:
    kept = content_keywords(artifact_id, keywords)
    need = threshold(kept, min_matches)
    evidence = context_evidence(context, artifact_id, kept)
    hits = note_evidence(notes, kept)
    visibility: Visibility
    if evidence.holds_verbatim(need):
        visibility = "verbatim"
    elif evidence.holds(need):
        visibility = "summary_only"
    elif 0 < need <= len(hits):
        visibility = "notes_only"
    else:
        visibility = "nowhere"
    return ArtifactVisibility(
        visibility=visibility, keywords=kept, threshold=need, context=evidence, notes=hits
    )


def state_visibility(
    state: str,
    session: Session,
    notes: Sequence[Note],
    keywords: Mapping[str, Sequence[str]],
    min_matches: int = MIN_MATCHES,
) -> StateVisibility:
    """The visibility of every artifact in ``keywords`` (artifact id -> content keywords) at
    one checkpoint: its restored ``session`` and the workspace ``notes`` at that point."""
    context = context_from_messages(session.messages)
    return StateVisibility(
        state=state,
        compaction_count=session.compaction_count,
        messages=len(session.messages),
        notes=[note.path for note in notes],
        artifacts={
            artifact_id: artifact_visibility(context, notes, artifact_id, words, min_matches)
            for artifact_id, words in keywords.items()
        },
    )


def workspace_notes(workspace: Workspace, version: str | None = None) -> list[Note]:
    """The note files (``MEMORY.md``, ``memory/YYYY-MM-DD.md``) of ``workspace``, at a stored
    ``version`` (a checkpoint's ``workspace_version``) or as the files are now."""
    manifest = workspace.manifest if version is None else workspace.version(version)
    paths = sorted(path for path, entry in manifest.files.items() if entry.role == "note")
    return [
        Note(path=path, text=workspace.read_bytes(path, version).decode("utf-8", errors="replace"))
        for path in paths
    ]


UnreadableReason = Callable[[Checkpoint, Exception], str]
"""Why a checkpoint's active context cannot be read, in one line: ``snapshot_error`` for mirage's
snapshots; an agent whose context lives in its own store gives its own (its run strategy)."""


def snapshot_error(checkpoint: Checkpoint, error: Exception) -> str:
    return f"{checkpoint.snapshot_path}: {error}"


def checkpoint_visibility(
    state: str,
    checkpoint: Checkpoint,
    workspace: Workspace,
    keywords: Mapping[str, Sequence[str]],
    unreadable: UnreadableReason = snapshot_error,
) -> StateVisibility:
    """``state_visibility`` of a checkpoint (its restored snapshot and the workspace notes at its
    ``workspace_version``); a checkpoint whose context is not a readable session snapshot (an
    agent's own store, a damaged file) gives a state marked ``unavailable`` with the reason
    ``unreadable`` gives, never a guess."""
    try:
        session = load_snapshot(checkpoint.snapshot_path)
    except SnapshotError as exc:
        return StateVisibility(
            state=state,
            compaction_count=checkpoint.compaction_count,
            messages=0,
            unavailable=unreadable(checkpoint, exc),
        )
    notes = workspace_notes(workspace, checkpoint.workspace_version)
    return state_visibility(state, session, notes, keywords)


def visibility_map(
    checkpoints: Mapping[str, Checkpoint],
    workspace: Workspace,
    keywords: Mapping[str, Sequence[str]],
    unreadable: UnreadableReason = snapshot_error,
) -> VisibilityMap:
    """Every checkpoint (record state -> checkpoint) and every artifact in ``keywords``."""
    found = VisibilityMap()
    for state, checkpoint in checkpoints.items():
        found.add(checkpoint_visibility(state, checkpoint, workspace, keywords, unreadable))
    return found


def write_visibility(directory: Path, found: VisibilityMap) -> Path:
    path = directory / VISIBILITY_FILE
    path.write_text(found.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return path


def read_visibility(directory: Path) -> VisibilityMap | None:
    """``visibility.json`` of a result folder, read strictly; None when the run wrote none. A
    bad file raises ``RunFileError`` (one line): the report's visibility columns are never
    left out, or filled, silently."""
    path = directory / VISIBILITY_FILE
    if not path.is_file():
        return None
    try:
        return VisibilityMap.model_validate_json(path.read_bytes(), strict=True)
    except OSError as exc:
        raise RunFileError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except ValidationError as exc:
        raise RunFileError(
            f"{path}: not a visibility map ({validation_problem(exc)}); {REWRITE_HINT}"
        ) from exc


REWRITE_HINT = "delete it and re-run the same mirage run command to write it again"


def check_visibility(found: VisibilityMap | None, states: Iterable[str], directory: Path) -> None:
    """The map covers every state the records name (it is written from the same checkpoints):
    a map edited to other states is refused, not reported beside the wrong rows."""
    if found is None:
        return
    missing = sorted(set(states) - set(found.states))
    if missing:
        raise RunFileError(
            f"{directory / VISIBILITY_FILE}: has no state {', '.join(missing)} of the records "
            f"(it names {', '.join(found.states) or 'none'}); {REWRITE_HINT}"
        )
    renamed = [name for name, state in found.states.items() if state.state != name]
    if renamed:
        raise RunFileError(
            f"{directory / VISIBILITY_FILE}: state {renamed[0]} holds another state's map; "
            f"{REWRITE_HINT}"
        )


def write_run_visibility(
    directory: Path,
    checkpoints: Mapping[str, Checkpoint],
    workspace: Path,
    pack: Pack,
    unreadable: UnreadableReason = snapshot_error,
) -> Path:
    """The visibility map of a run's checkpoints for every artifact of ``pack``, written into
    the result folder ``directory`` (``mirage run`` calls it once per answerer)."""
    keywords = {artifact_id: pack.keywords(artifact_id) for artifact_id in pack.artifacts}
    found = visibility_map(checkpoints, Workspace.open(workspace), keywords, unreadable)
    return write_visibility(directory, found)
