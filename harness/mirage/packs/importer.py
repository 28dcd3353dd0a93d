"""Import a reference MIRAGE question bank (JSON with ``base_questions``) plus the user's
artifact files into a pack directory.

Artifacts come from ``--artifacts DIR``: its ``MANIFEST.yaml`` when present (the memory-server
format), otherwise one artifact per file at the top of DIR, identified by the file name up to
its first dot; files under ``DIR/derived/`` named ``<id>.*`` become derived representations.
Field names of the reference bank vary between releases, so a few aliases are accepted; any
entry that cannot be mapped is reported with its index and id.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, NamedTuple

import yaml
from pydantic import ValidationError

from harness.kit.packfiles import (
    PACK_ROOT,
    PackFormatError,
    format_validation_error,
    read_text,
    read_yaml,
)
from harness.kit.packsums import SUMS_FILE, write_sums
from harness.mirage.packs.build.assemble import FILLER_SOURCE
from harness.mirage.packs.pack import Pack, with_keywords
from harness.mirage.packs.schema import (
    NONE,
    Artifact,
    Attachment,
    DerivedKind,
    Modality,
    PackFile,
    PlantingTurn,
    Question,
    QuestionBank,
    confined_path,
)
from harness.mirage.protocol.keywords import MIN_MATCHES

ID_KEYS = ("id", "question_id", "qid")
TEXT_KEYS = ("question", "question_text", "prompt")
TOPIC_KEYS = ("artifact", "artifact_id", "topic_source", "source_artifact")
PAIR_KEYS = ("pair_id", "paired_with", "counterpart_id", "matched_id")
ANSWER_TYPES = {
    "number": "numeric",
    "numeric": "numeric",
    "float": "numeric",
    "int": "numeric",
    "integer": "numeric",
    "year": "year",
    "date": "date",
    "enum": "enum",
    "categorical": "enum",
    "choice": "enum",
    "string": "string",
    "text": "string",
    "str": "string",
}
DIFFICULTIES = {
    "lookup": "lookup",
    "comparison": "comparison",
    "normalization": "comparison",
    "comparison/normalization": "comparison",
    "layout": "layout",
    "layout-sensitive": "layout",
    "layout_sensitive": "layout",
}
SHORTCUT_RISKS = {
    "priors": "priors",
    "prior": "priors",
    "filename": "filename",
    "file_name": "filename",
    "template": "template",
    "lexical": "lexical_cue",
    "lexical_cue": "lexical_cue",
    "lexical cue": "lexical_cue",
}
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".webp", ".gif"}
TEXT_SUFFIXES = {".md", ".txt", ".csv", ".json"}


def canonical_id(reference: str) -> str:
    """``artifacts/chart_01.png`` and ``derived/chart_01.table.csv`` -> ``chart_01``."""
    return Path(reference.strip()).name.split(".", 1)[0]


def _first(entry: dict[str, Any], keys: tuple[str, ...]) -> Any:
    return next((entry[key] for key in keys if entry.get(key) not in (None, "")), None)


def _modality(artifact_id: str, original: str) -> Modality:
    suffix = Path(original).suffix.lower()
    if suffix == ".pdf":
        return Modality.document
    if suffix == ".eml":
        return Modality.email
    if suffix in IMAGE_SUFFIXES:
        lowered = artifact_id.lower()
        if lowered.startswith(("ui", "screen")):
            return Modality.screenshot
        return Modality.chart if lowered.startswith("chart") else Modality.photo
    return Modality.code if suffix not in TEXT_SUFFIXES else Modality.document


def _derived_kind(path: str) -> DerivedKind:
    if path.endswith(".csv"):
        return DerivedKind.table_csv
    if path.endswith(".json"):
        return DerivedKind.json
    return DerivedKind.summary if path.endswith(".md") else DerivedKind.text


def discover_artifacts(artifacts_dir: Path) -> list[Artifact]:
    if not artifacts_dir.is_dir():
        raise PackFormatError(
            artifacts_dir, ["no such folder (--artifacts names the folder holding the artifacts)"]
        )
    manifest = artifacts_dir / "MANIFEST.yaml"
    if manifest.is_file():
        return _artifacts_from_manifest(artifacts_dir, manifest)
    artifacts, problems = [], []
    for original in sorted(p for p in artifacts_dir.iterdir() if p.is_file()):
        artifact_id = canonical_id(original.name)
        derived_dir = artifacts_dir / "derived"
        derived = (
            sorted(f"derived/{p.name}" for p in derived_dir.glob(f"{artifact_id}.*"))
            if derived_dir.is_dir()
            else []
        )
        try:
            artifacts.append(
                _artifact(artifacts_dir, artifact_id, artifact_id, original.name, derived, [])
            )
        except ValidationError as exc:
            problems += [f"{original.name}: {line}" for line in format_validation_error(exc)]
    if problems:
        raise PackFormatError(artifacts_dir, problems)
    return artifacts


def _artifacts_from_manifest(root: Path, manifest: Path) -> list[Artifact]:
    raw = read_yaml(manifest)
    entries = raw.get("artifacts") if isinstance(raw, dict) else None
    if not isinstance(entries, list):
        raise PackFormatError(manifest, ["expected a mapping with an 'artifacts' list"])
    artifacts, problems = [], []
    for index, entry in enumerate(entries):
        files = entry.get("files") if isinstance(entry, dict) else None
        if not isinstance(entry, dict) or not entry.get("id") or not isinstance(files, list):
            problems.append(f"artifacts.{index}: expected an object with an id and a files list")
            continue
        if not files:
            problems.append(f"artifacts.{index} (id {entry['id']}): no files")
            continue
        names = [str(name) for name in files]
        title = entry.get("title") or str(entry["id"])
        try:
            artifacts.append(
                _artifact(
                    root, str(entry["id"]), title, names[0], names[1:], entry.get("aliases", [])
                )
            )
        except ValidationError as exc:
            where = f"artifacts.{index} (id {entry['id']})"
            problems += [f"{where}: {line}" for line in format_validation_error(exc)]
    if problems:
        raise PackFormatError(manifest, problems)
    return artifacts


def _artifact(
    root: Path,
    artifact_id: str,
    title: str,
    original: str,
    derived: list[str],
    aliases: list[str],
) -> Artifact:
    """The artifact, its paths confined to ``root`` (the --artifacts folder)."""
    texts = [path for path in derived if Path(path).suffix in {".md", ".txt"}]
    fields = {
        "id": artifact_id,
        "modality": _modality(artifact_id, original),
        "title": title,
        "originals": [original],
        "derived": [{"path": path, "kind": _derived_kind(path)} for path in derived],
        "aliases": aliases,
        "text_representation": texts[0] if texts else None,
    }
    return Artifact.model_validate(fields, context={PACK_ROOT: root})


def convert_entry(entry: dict[str, Any], partner_topics: dict[str, str]) -> dict[str, Any]:
    """One reference ``base_questions`` entry as a ``Question`` mapping."""
    answerable = entry.get("gold_answerable")
    if isinstance(answerable, bool):
        answerable = "YES" if answerable else "NO"
    source = entry.get("gold_source")
    source = NONE if source in (None, "", NONE) else canonical_id(str(source))
    answer = entry.get("gold_answer")
    question_id = str(_first(entry, ID_KEYS))
    topic = _first(entry, TOPIC_KEYS)
    artifact = (
        canonical_id(str(topic))
        if topic
        else (source if source != NONE else partner_topics.get(question_id))
    )
    risk = entry.get("shortcut_risk") or []
    risks = [risk] if isinstance(risk, str) else list(risk)
    return {
        "id": question_id,
        "question": _first(entry, TEXT_KEYS),
        "artifact": artifact,
        "gold_answerable": answerable,
        "gold_source": source,
        "gold_answer": NONE if answer in (None, "") else str(answer),
        "answer_type": ANSWER_TYPES.get(str(entry.get("answer_type", "string")).lower(), "string"),
        "tolerance": entry.get("tolerance"),
        "choices": entry.get("choices"),
        "difficulty": DIFFICULTIES.get(str(entry.get("difficulty", "lookup")).lower(), "lookup"),
        "query_type": str(entry.get("query_type") or "unspecified"),
        "shortcut_risk": [SHORTCUT_RISKS.get(str(r).strip().lower(), r) for r in risks],
        "pair_id": _first(entry, PAIR_KEYS),
    }


def _partner_topics(entries: list[dict[str, Any]]) -> dict[str, str]:
    """For entries without a topic artifact: the source of their answerable pair partner."""
    by_pair: dict[str, str] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        source = entry.get("gold_source")
        pair = _first(entry, PAIR_KEYS)
        if pair and source not in (None, "", NONE):
            by_pair[str(pair)] = canonical_id(str(source))
    topics = {}
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        pair = _first(entry, PAIR_KEYS)
        if pair and str(pair) in by_pair:
            topics[str(_first(entry, ID_KEYS))] = by_pair[str(pair)]
    return topics


def convert_bank(bank_path: Path) -> list[Question]:
    try:
        raw = json.loads(read_text(bank_path))
    except json.JSONDecodeError as exc:
        raise PackFormatError(bank_path, [f"not valid JSON: {exc}"]) from exc
    entries = raw.get("base_questions") if isinstance(raw, dict) else None
    if not isinstance(entries, list) or not entries:
        raise PackFormatError(bank_path, ["expected a non-empty 'base_questions' list"])
    topics = _partner_topics(entries)
    questions, problems = [], []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            problems.append(f"base_questions.{index}: expected an object, got {_json_type(entry)}")
            continue
        try:
            questions.append(Question.model_validate(convert_entry(entry, topics)))
        except ValidationError as exc:
            label = f"base_questions.{index} (id {_first(entry, ID_KEYS)})"
            problems += [f"{label}: {line}" for line in format_validation_error(exc)]
    if problems:
        raise PackFormatError(bank_path, problems)
    return questions


def _json_type(value: Any) -> str:
    names = {list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


class ImportedPack(NamedTuple):
    path: Path
    warnings: list[str]


def import_bank(bank_path: Path, artifacts_dir: Path, out_dir: Path, name: str) -> ImportedPack:
    """Write a pack at ``out_dir`` from a reference bank and the user's artifact files; the
    warnings say which content keywords were derived for each artifact."""
    questions = convert_bank(bank_path)
    artifacts = discover_artifacts(artifacts_dir)
    known = {artifact.id for artifact in artifacts}
    missing = sorted({q.artifact for q in questions} - known)
    if missing:
        raise PackFormatError(
            bank_path,
            [f"questions refer to artifacts not found in {artifacts_dir}: {', '.join(missing)}"],
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / SUMS_FILE).unlink(missing_ok=True)  # an earlier import's; written again below
    for artifact in artifacts:
        for relative in artifact.files:
            target = confined_path(out_dir, relative)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(confined_path(artifacts_dir, relative), target)
    planting = [
        PlantingTurn(
            user=f"Here is {artifact.title}. Please keep it in my workspace for later.",
            attachments=[Attachment(artifact=artifact.id, file=artifact.originals[0])],
            workspace_writes=artifact.files,
        )
        for artifact in artifacts
    ]
    pack = PackFile(
        name=name,
        version=1,
        description=f"Imported from {bank_path.name}",
        artifacts=artifacts,
        planting=planting,
    )
    _write_yaml(out_dir / "pack.yaml", pack.model_dump(mode="json", exclude_none=True))
    _write_yaml(
        out_dir / "questions.yaml",
        QuestionBank(questions=questions).model_dump(mode="json", exclude_none=True),
    )
    shutil.copyfile(FILLER_SOURCE, out_dir / "filler.yaml")
    derived = _derive_keywords(out_dir)
    write_sums(out_dir)  # after the keywords, which rewrite pack.yaml
    return ImportedPack(out_dir, derived)


def _derive_keywords(out_dir: Path) -> list[str]:
    """Give every artifact of the pack at ``out_dir`` keywords derived from its text (a
    reference bank has none) and say so; ``mirage pack validate`` reports an artifact left
    without any."""
    pack = Pack(out_dir)
    keywords = pack.derived_keywords()
    _write_yaml(
        out_dir / "pack.yaml",
        with_keywords(pack.spec, keywords).model_dump(mode="json", exclude_none=True),
    )
    warnings = []
    for artifact_id, words in keywords.items():
        if len(words) >= MIN_MATCHES:
            listed = ", ".join(words)
            warnings.append(f"artifact {artifact_id}: keywords derived from its text: {listed}")
            continue
        source = pack.artifact(artifact_id).content_path
        if pack.content_text(artifact_id) is None:
            warnings.append(
                f"artifact {artifact_id}: {source} is not text and no derived text describes "
                f"it, so it has no content keywords; add derived/{artifact_id}.description.md"
            )
            continue
        warnings.append(
            f"artifact {artifact_id}: only {len(words)} content keyword(s) in {source}; add "
            "distinctive values and names of its content under its `keywords` in pack.yaml"
        )
    return warnings


def _write_yaml(path: Path, payload: Any) -> None:
    path.write_text(
        yaml.safe_dump(payload, sort_keys=False, allow_unicode=True, width=100), encoding="utf-8"
    )
