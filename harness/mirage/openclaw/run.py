"""The pieces of an OpenClaw run (``--agent openclaw``): OpenClaw's window, the answering
model's backbone with room for it, the trunk configuration its checkpoint family is keyed by, and
reading a finished family back; each takes plain values.

Above: the OpenClaw run strategy (``harness.mirage.strategies.openclaw``), which runs the trunk
(``harness.mirage.openclaw.trunk``) and the probes through one gateway. Below: the pinned
OpenClaw install and its config (``harness.kit.agents.openclaw``), the checkpoint manifests.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.kit.agents.openclaw.config import config_digest
from harness.kit.agents.openclaw.errors import OpenClawError
from harness.kit.agents.openclaw.install import OpenClawInstall
from harness.kit.agents.openclaw.state import read_openclaw_checkpoint
from harness.mirage.trunk.checkpoints import (
    FAMILY_FILE,
    MANIFEST,
    Checkpoint,
    CheckpointManifest,
    TrunkConfig,
    read_family_record,
)
from runtime.backbones.base import LOCAL_PREFIX, Backbone

MIN_WINDOW = 16_384
"""OpenClaw's own prompt (system prompt and tool schemas) is ~5k tokens and it compacts at
W − W/4; below this window the depth states would come after its first compaction."""


def openclaw_window(model_window: int) -> int:
    """The window OpenClaw is configured with: the answering model's, at least ``MIN_WINDOW``
    (a local model is then loaded with that many positions; see docs/openclaw.md)."""
    return max(model_window, MIN_WINDOW)


def answering_backbone(
    model: str, window: int, backbone: Callable[[int | None], Backbone]
) -> Backbone:
    """The answering model with room for OpenClaw's ``window``; a hosted model with less is an
    error, a local one is loaded with the larger context. ``backbone(context_window)``: the
    model's backbone (None: with its own window)."""
    own = backbone(None)
    if own.context_window >= window:
        return own
    if model.startswith(LOCAL_PREFIX):
        return backbone(window)
    raise OpenClawError(
        f"the answering model {model} has a {own.context_window}-token window; OpenClaw "
        f"needs {window} (its own prompt is ~5k tokens): choose another --model"
    )


def openclaw_trunk(
    trunk: TrunkConfig,
    install: OpenClawInstall,
    user: dict[str, Any] | None,
    answer_model: str,
    max_output_tokens: int,
) -> TrunkConfig:
    """The run's trunk configuration ``trunk`` as OpenClaw plays it: its version and the user's
    settings instead of a trunk model, its own compaction and memory flush by the answering
    model."""
    return trunk.model_copy(
        update={
            "trunk_model": f"openclaw-{install.version}+config-{config_digest(user)}",
            "summary_format": "openclaw",
            "summarizer_model": answer_model,
            "memory_flush": True,
            "max_output_tokens": max_output_tokens,
        }
    )


def load_openclaw_family(family_dir: Path, states: list[str]) -> dict[str, Checkpoint] | None:
    """The finished family's checkpoints, each file checked against its manifest's hash."""
    if not (family_dir / FAMILY_FILE).exists():
        return None
    record, problem = read_family_record(family_dir)
    if record is not None and sorted(record.states) != sorted(states):
        problem = f"names states {', '.join(record.states)}, not {', '.join(states)}"
    if problem is not None:
        raise OpenClawError(
            f"{family_dir / FAMILY_FILE}: {problem}; delete {family_dir} to rebuild the OpenClaw "
            "trunk (records in results.jsonl are kept)"
        )
    checkpoints = {}
    for state in states:
        directory = family_dir / state
        try:
            manifest = CheckpointManifest.model_validate_json(
                (directory / MANIFEST).read_bytes(), strict=True
            )
            data = (directory / manifest.snapshot).read_bytes()
        except (OSError, ValueError) as exc:
            raise OpenClawError(
                f"{directory / MANIFEST}: unreadable checkpoint ({type(exc).__name__}); delete "
                f"{family_dir} to rebuild the OpenClaw trunk (records in results.jsonl are kept)"
            ) from exc
        if hashlib.sha256(data).hexdigest() != manifest.snapshot_sha256:
            raise OpenClawError(
                f"{directory / manifest.snapshot}: differs from its manifest's hash; delete "
                f"{family_dir} to rebuild the OpenClaw trunk"
            )
        read_openclaw_checkpoint(directory / manifest.snapshot)
        checkpoints[state] = Checkpoint(directory=directory, manifest=manifest)
    return checkpoints


def unreadable_context(checkpoint: Checkpoint, error: Exception) -> str:
    """Why an OpenClaw checkpoint's active context cannot be read (the visibility map's
    ``unavailable``): it names a session in OpenClaw's own store; any other file keeps its
    error."""
    from harness.mirage.probing.visibility import snapshot_error

    try:
        claw = read_openclaw_checkpoint(checkpoint.snapshot_path)
    except OpenClawError:
        return snapshot_error(checkpoint, error)
    return (
        f"OpenClaw checkpoint: the active context is OpenClaw session {claw.session!r} in "
        "OpenClaw's own store, which the checkpoint does not hold"
    )
