"""Pack assembly shared by the builders: artifact records, planting turns, and the three pack
files (``pack.yaml``, ``questions.yaml``, ``filler.yaml``) written deterministically."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.kit.packfiles import load_model, write_text
from harness.mirage.packs.build.render import canonical_json
from harness.mirage.packs.pack import Pack, with_keywords
from harness.mirage.packs.schema import (
    Artifact,
    Attachment,
    DerivedFile,
    DerivedKind,
    FillerLibrary,
    Modality,
    PackFile,
    PlantingTurn,
    Question,
    QuestionBank,
)
from harness.mirage.protocol.keywords import MIN_MATCHES

SOURCES = Path(__file__).resolve().parent.parent / "sources"
FILLER_SOURCE = SOURCES / "filler.yaml"


@dataclass(frozen=True)
class BuiltArtifact:
    artifact: Artifact
    planting_text: str
    questions: list[Question]


def load_source(path: Path) -> dict[str, Any]:
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(loaded, dict):
        raise ValueError(f"{path}: expected a mapping")
    return loaded


def write_data(out_dir: Path, artifact_id: str, data: Any) -> str:
    relative = f"derived/{artifact_id}.json"
    write_text(out_dir / relative, canonical_json(data))
    return relative


def make_artifact(
    artifact_id: str,
    modality: Modality,
    title: str,
    original: str,
    derived: dict[str, DerivedKind],
    aliases: list[str],
    text_representation: str | None,
) -> Artifact:
    """An artifact whose data JSON lives at ``derived/<id>.json`` (listed among ``derived``)."""
    return Artifact(
        id=artifact_id,
        modality=modality,
        title=title,
        originals=[original],
        derived=[DerivedFile(path=path, kind=kind) for path, kind in derived.items()],
        aliases=aliases,
        text_representation=text_representation,
        data=f"derived/{artifact_id}.json",
    )


def planting_turn(built: BuiltArtifact) -> PlantingTurn:
    artifact = built.artifact
    derived = ", ".join(item.path for item in artifact.derived)
    reply = (
        f"Saved. I've filed it in your workspace as {artifact.id}: the original is "
        f"{artifact.originals[0]}, and the derived copies ({derived}) make it searchable later."
    )
    return PlantingTurn(
        user=built.planting_text,
        attachments=[Attachment(artifact=artifact.id, file=artifact.originals[0])],
        workspace_writes=artifact.files,
        assistant=reply,
    )


def _dump(path: Path, payload: Any) -> None:
    text = yaml.safe_dump(payload, sort_keys=False, allow_unicode=True, width=100)
    write_text(path, text)


def write_pack_files(
    out_dir: Path, name: str, description: str, intro: str, built: list[BuiltArtifact]
) -> None:
    intro_turn = PlantingTurn(
        user=intro,
        assistant="Sounds good. Send them over and I'll keep each one in your workspace.",
    )
    pack = PackFile(
        name=name,
        version=1,
        description=description,
        artifacts=[item.artifact for item in built],
        planting=[intro_turn, *(planting_turn(item) for item in built)],
    )
    bank = QuestionBank(questions=[q for item in built for q in item.questions])
    _dump(out_dir / "pack.yaml", pack.model_dump(mode="json", exclude_none=True))
    _dump(out_dir / "questions.yaml", bank.model_dump(mode="json", exclude_none=True))
    load_model(FILLER_SOURCE, FillerLibrary)
    shutil.copyfile(FILLER_SOURCE, out_dir / "filler.yaml")
    write_keywords(out_dir)


def write_keywords(pack_dir: Path) -> dict[str, list[str]]:
    """Derive every artifact's content keywords from the pack written at ``pack_dir`` (its
    text representations, planting turns and filler) and rewrite its ``pack.yaml`` with them.
    Refuses an artifact left with fewer than ``MIN_MATCHES`` keywords."""
    pack = Pack(pack_dir)
    keywords = pack.derived_keywords()
    few = {artifact: words for artifact, words in keywords.items() if len(words) < MIN_MATCHES}
    if few:
        raise ValueError(f"too few distinctive tokens for content keywords: {few}")
    spec = with_keywords(pack.spec, keywords)
    _dump(pack_dir / "pack.yaml", spec.model_dump(mode="json", exclude_none=True))
    return keywords
