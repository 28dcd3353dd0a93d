"""The provenance of a ``mirage cue run`` (``harness.kit.provenance``): the CUE pack and its
questions with their digests, the answering model (its GGUF's digest or its provider) and the
embedder, the conditions, and the software and machine; written into ``<model>/run.json``
(the first run's block kept, with a note, on a resume that differs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.cue.config import CueRunConfig
from harness.kit.provenance import (
    Provenance,
    embedder_provenance,
    machine_fields,
    model_provenance,
    on_resume,
    questions_digest,
    read_provenance,
)


def cue_provenance(config: CueRunConfig, pack: Any, digest: str, run_file: Path) -> Provenance:
    """This run's block, or the earlier run's in ``run_file`` with a note of what changed."""
    questions = list(pack.questions)
    now = Provenance(
        **machine_fields(),  # type: ignore[arg-type]
        pack=pack.name,
        pack_digest=digest,
        questions=len(questions),
        questions_digest=questions_digest(questions),
        models=[
            model_provenance("answerer", config.model, config.api_base, set()),
            embedder_provenance(),
        ],
        conditions=list(config.conditions),
    )
    earlier = read_provenance(run_file) if run_file.is_file() else None
    return on_resume(earlier, now)
