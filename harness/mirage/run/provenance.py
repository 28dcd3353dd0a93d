"""The provenance of a ``mirage run``: the kit's block (``harness.kit.provenance``) filled with
the study — pack and question set digests, every model of the run with its weights' digest or
provider, scoring, depth profile, summary formats and, with ``--agent openclaw``, OpenClaw's
version (which models and that version: the run strategy's, ``harness.mirage.strategies``) — and
written into ``run.json`` beside the run's options. A resumed run keeps the first
run's block and adds a note when its own differs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError

from harness.kit.provenance import (
    ModelProvenance,
    Provenance,
    ProvenanceError,
    embedder_provenance,
    json_digest,
    machine_fields,
    model_provenance,
    on_resume,
    read_provenance,
)
from harness.kit.rundir import RUN_CONFIG
from harness.mirage.config import RunConfig
from harness.mirage.references import is_reference
from harness.mirage.strategies import strategy_for
from harness.mirage.trunk.checkpoints import SCRIPTED_TRUNK_MODEL
from memory_server.store import atomic_write_bytes
from runtime.snapshot import validation_problem

RUN_CONFIG_MODE = 0o644


class MirageRunLike(Protocol):
    """What the provenance reads of a ``MirageRun`` (``harness.mirage.run``)."""

    config: RunConfig
    out: Path
    pack: Any
    profile: Any
    backbones: dict[str, Any]

    family: Any  # its ``trunk_config()`` names the pack digest

    def questions(self) -> list[tuple[str, str, Any]]: ...


def _models(run: MirageRunLike) -> list[ModelProvenance]:
    roles = strategy_for(run.config).kind.roles  # the run's own: a function of its config
    return [*(_model(role, model, run) for role, model in roles), embedder_provenance()]


def _model(role: str, model: str, run: MirageRunLike) -> ModelProvenance:
    if role == "agent":
        return ModelProvenance(role=role, model=model, provider="external agent")
    if model == SCRIPTED_TRUNK_MODEL:
        return ModelProvenance(role=role, model=model, provider="scripted replies")
    if is_reference(model):
        kind = "summarizer, no model" if role == "summarizer" else "agent"
        return ModelProvenance(role=role, model=model, provider=f"mirage reference {kind}")
    return model_provenance(role, model, run.config.api_base, set(run.backbones))


def run_provenance(run: MirageRunLike) -> Provenance:
    """This run's provenance as of now."""
    questions = run.questions()
    asked = [[qid, text, gold.model_dump(mode="json")] for qid, text, gold in questions]
    return Provenance(
        **machine_fields(),  # type: ignore[arg-type]
        pack=run.pack.name,
        pack_digest=run.family.trunk_config().pack_digest,
        questions=len(questions),
        questions_digest=json_digest(asked),
        models=_models(run),
        scoring=run.config.scoring,
        depth_profile=run.profile.name,
        summary_formats=list(run.config.summary_formats),
        conditions=list(run.config.conditions),
        agent_software=strategy_for(run.config).agent_software(),
    )


def read_run_file(path: Path) -> Provenance | None:
    """``run.json`` read back strictly — its options (``RunConfig``: no unknown option, no
    coerced value) and its provenance block; the block (None for a run from before provenance
    was recorded). A bad file raises ``ProvenanceError`` (one line)."""
    block = read_provenance(path)  # the file is a JSON object with a valid block, or refused
    options = json.loads(path.read_bytes())
    options.pop("provenance", None)
    try:
        RunConfig.model_validate_json(json.dumps(options), strict=True)
    except ValidationError as exc:
        raise ProvenanceError(
            f"{path}: not a valid run configuration ({validation_problem(exc)}); restore it, or "
            "use a new --out"
        ) from exc
    return block


def write_run_config(run: MirageRunLike) -> Provenance:
    """``run.json``: the run's options and its provenance (the first run's, on a resume)."""
    path = run.out / RUN_CONFIG
    earlier = read_run_file(path) if path.is_file() else None
    now = run_provenance(run)
    if earlier is not None and earlier.pack_digest not in (None, now.pack_digest):
        raise ProvenanceError(
            f"{path}: the run in {run.out} used pack digest {earlier.pack_digest}, this run's "
            f"pack {now.pack} has {now.pack_digest}: its records would mix two packs; use a "
            "new --out"
        )
    block = on_resume(earlier, now)
    payload = {
        **json.loads(run.config.model_dump_json()),
        "provenance": block.model_dump(mode="json"),
    }
    atomic_write_bytes(path, (json.dumps(payload, indent=2, ensure_ascii=False) + "\n").encode())
    path.chmod(RUN_CONFIG_MODE)  # readable as before (the temporary file was private)
    return block
