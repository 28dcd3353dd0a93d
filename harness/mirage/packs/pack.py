"""``Pack``: a loaded evidence pack and what the harness and memory server need from it.

Above: the trunk builder (planting + filler turns), the probe runner (``questions``) and the
memory server (the workspace written by ``materialize_workspace`` with its ``MANIFEST.yaml``).
Below: the pack files on disk (``schema``) and the seeded filler sampler (``filler``).
"""

from __future__ import annotations

import base64
import mimetypes
import shutil
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict

from harness.kit.packfiles import PackFormatError, load_model
from harness.kit.packsums import PackSumsError, check_sums
from harness.mirage.packs.filler import FillerTurn, library_texts, sample_filler
from harness.mirage.packs.resolve import load_data
from harness.mirage.packs.schema import (
    Artifact,
    FillerLibrary,
    PackFile,
    Question,
    QuestionBank,
    confined_path,
)
from harness.mirage.protocol.keywords import derive_keywords, token_set
from harness.mirage.scoring import Gold
from runtime.messages import ImagePart, TextPart, UserMessage

BUNDLED_DIR = Path(__file__).resolve().parent / "data"
PACK_FILE = "pack.yaml"
MANIFEST_FILE = "MANIFEST.yaml"


class PlantedAttachment(BaseModel):
    """A file attached to a planting turn; ``text_representation`` stands in for it with
    text-only models (a chart's table, a screenshot summary, a PDF's text)."""

    model_config = ConfigDict(frozen=True)

    artifact_id: str
    path: Path
    workspace_path: str
    media_type: str
    text_representation: str

    @property
    def is_image(self) -> bool:
        return self.media_type.startswith("image/")


class PlantedTurn(BaseModel):
    model_config = ConfigDict(frozen=True)

    text: str
    attachments: tuple[PlantedAttachment, ...] = ()
    workspace_writes: tuple[str, ...] = ()
    assistant: str | None = None

    def to_user_message(self) -> UserMessage:
        """Images become ``ImagePart``s carrying their bytes (a session holds the whole
        conversation, wherever the pack is installed) and their text stand-in; other files are
        inlined as text."""
        parts: list[TextPart | ImagePart] = [TextPart(text=self.text)]
        for item in self.attachments:
            if item.is_image:
                parts.append(
                    ImagePart(
                        data_b64=base64.b64encode(item.path.read_bytes()).decode("ascii"),
                        media_type=item.media_type,
                        artifact_id=item.artifact_id,
                        text_representation=item.text_representation,
                    )
                )
            else:
                parts.append(
                    TextPart(
                        text=f"[attached file {item.workspace_path}]\n{item.text_representation}"
                    )
                )
        return UserMessage(content=tuple(parts))


def media_type_of(path: str) -> str:
    if path.endswith(".eml"):
        return "message/rfc822"
    guessed, _ = mimetypes.guess_type(path)
    return guessed or "application/octet-stream"


def bundled_pack_names() -> list[str]:
    return sorted(p.name for p in BUNDLED_DIR.iterdir() if (p / PACK_FILE).is_file())


def resolve_pack_path(name_or_path: str | Path) -> Path:
    """A bundled pack name (``mirage-core``), a pack directory, or its ``pack.yaml``."""
    text = str(name_or_path)
    candidate = BUNDLED_DIR / text
    if "/" not in text and (candidate / PACK_FILE).is_file():
        return candidate
    path = Path(name_or_path)
    if path.is_dir():
        path = path / PACK_FILE
    if not path.is_file():
        known = ", ".join(bundled_pack_names()) or "none"
        raise PackFormatError(path, [f"no pack here (bundled packs: {known})"])
    return path.parent


class Pack:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.locked = _checked_sums(root)
        self.spec = load_model(root / PACK_FILE, PackFile, pack_root=root)
        self.questions: list[Question] = load_model(
            self.file(self.spec.questions), QuestionBank
        ).questions
        self.filler_library = load_model(self.file(self.spec.filler), FillerLibrary)

    @property
    def name(self) -> str:
        return self.spec.name

    @cached_property
    def artifacts(self) -> dict[str, Artifact]:
        return {artifact.id: artifact for artifact in self.spec.artifacts}

    def file(self, relative: str) -> Path:
        """A file the pack names, resolved and checked again to lie inside the pack folder."""
        return confined_path(self.root, relative)

    def artifact(self, artifact_id: str) -> Artifact:
        if artifact_id not in self.artifacts:
            raise KeyError(f"pack {self.name} has no artifact {artifact_id!r}")
        return self.artifacts[artifact_id]

    def keywords(self, artifact_id: str) -> list[str]:
        """The content keywords of an artifact; a ``PackFormatError`` naming it when it has
        none (its retrieval path could never be ``R_context``: never a silent ``R_none``)."""
        keywords = self.artifact(artifact_id).keywords
        if not keywords:
            raise PackFormatError(
                self.root / PACK_FILE,
                [
                    f"artifact {artifact_id}: no keywords; the retrieval path needs content "
                    "keywords (`mirage pack build`, or list a few distinctive values and names "
                    "of its text under `keywords`; `mirage pack validate` checks them)"
                ],
            )
        return keywords

    def gold(self, question: Question) -> Gold:
        """The gold of ``question``, with its artifact's content keywords."""
        return Gold.from_question(question, self.keywords(question.artifact))

    def data_for(self, artifact_id: str) -> Any:
        """The generating data of an artifact (its ``data`` JSON), or None if it has none."""
        artifact = self.artifact(artifact_id)
        return None if artifact.data is None else load_data(self.file(artifact.data))

    def content_text(self, artifact_id: str) -> str | None:
        """The artifact's content as text (its ``content_path``), or None when that file is not
        text (an image without a derived description)."""
        try:
            return self.file(self.artifact(artifact_id).content_path).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            return None

    def text_representation(self, artifact_id: str) -> str:
        """The text that stands in for the artifact with text-only models."""
        text = self.content_text(artifact_id)
        if text is None:
            artifact = self.artifact(artifact_id)
            return (
                f"[{artifact.modality.value} {artifact.content_path}: {artifact.title}; "
                "no text representation]"
            )
        return text

    @cached_property
    def _boilerplate_tokens(self) -> dict[str, str]:
        where: dict[str, str] = {}
        for index, turn in enumerate(self.spec.planting):
            _add_tokens(where, f"{turn.user}\n{turn.assistant or ''}", f"planting turn {index}")
        for place, text in library_texts(self.filler_library):
            _add_tokens(where, text, place)
        for artifact in self.spec.artifacts:
            names = "\n".join([artifact.title, *artifact.aliases, *artifact.files])
            _add_tokens(where, names, f"the title, aliases or file names of {artifact.id}")
        return where

    @cached_property
    def _content_tokens(self) -> dict[str, set[str]]:
        return {
            artifact_id: token_set(self.content_text(artifact_id) or "")
            for artifact_id in self.artifacts
        }

    def keyword_exclusions(self, artifact_id: str) -> dict[str, str]:
        """Case-folded tokens found outside the artifact's own content, each with where: the
        planting turns, the filler library, any artifact's title, aliases and file names, the
        other artifacts' texts. A keyword among them would match without the content."""
        where = dict(self._boilerplate_tokens)
        for other, found in self._content_tokens.items():
            if other != artifact_id:
                for token in found:
                    where.setdefault(token, f"the text of artifact {other}")
        return where

    def derived_keywords(self) -> dict[str, list[str]]:
        """Every artifact's content keywords by the pack rule (``derive_keywords`` over its
        ``content_text``, excluding ``keyword_exclusions``); none for an artifact without
        text."""
        return {
            artifact_id: derive_keywords(
                artifact_id,
                self.content_text(artifact_id) or "",
                self.keyword_exclusions(artifact_id),
            )
            for artifact_id in self.artifacts
        }

    def materialize_workspace(self, dest_dir: Path | str) -> Path:
        """Copy every original and derived file into ``dest_dir`` and write ``MANIFEST.yaml``;
        returns the manifest path. Sources and targets are confined to the pack and to
        ``dest_dir`` at the moment of copying (defence in depth behind the schema)."""
        dest = Path(dest_dir)
        dest.mkdir(parents=True, exist_ok=True)
        for artifact in self.spec.artifacts:
            for relative in artifact.files:
                target = confined_path(dest, relative)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(self.file(relative), target)
        manifest = {"artifacts": [_manifest_entry(a) for a in self.spec.artifacts]}
        path = confined_path(dest, MANIFEST_FILE)
        path.write_text(
            yaml.safe_dump(manifest, sort_keys=False, allow_unicode=True, width=100),
            encoding="utf-8",
        )
        return path

    def planting_turns(self) -> list[PlantedTurn]:
        return [
            PlantedTurn(
                text=turn.user,
                attachments=tuple(self._attachment(a.artifact, a.file) for a in turn.attachments),
                workspace_writes=tuple(turn.workspace_writes),
                assistant=turn.assistant,
            )
            for turn in self.spec.planting
        ]

    def _attachment(self, artifact_id: str, relative: str) -> PlantedAttachment:
        return PlantedAttachment(
            artifact_id=artifact_id,
            path=self.file(relative).resolve(),
            workspace_path=relative,
            media_type=media_type_of(relative),
            text_representation=self.text_representation(artifact_id),
        )

    def filler_turns(
        self, seed: int, n_turns: int | None = None, until_tokens: int | None = None
    ) -> list[FillerTurn]:
        return sample_filler(self.filler_library, seed, n_turns=n_turns, until_tokens=until_tokens)

    def question(self, question_id: str) -> Question:
        for question in self.questions:
            if question.id == question_id:
                return question
        raise KeyError(f"pack {self.name} has no question {question_id!r}")


def _add_tokens(where: dict[str, str], text: str, place: str) -> None:
    for token in token_set(text):
        where.setdefault(token, place)


def with_keywords(spec: PackFile, keywords: Mapping[str, list[str]]) -> PackFile:
    """``spec`` with the artifacts named in ``keywords`` given those keywords."""
    artifacts = [
        artifact.model_copy(update={"keywords": keywords.get(artifact.id, artifact.keywords)})
        for artifact in spec.artifacts
    ]
    return spec.model_copy(update={"artifacts": artifacts})


def _manifest_entry(artifact: Artifact) -> dict[str, Any]:
    return {
        "id": artifact.id,
        "title": artifact.title,
        "modality": artifact.modality.value,
        "files": artifact.files,
        "aliases": artifact.aliases,
    }


def _checked_sums(root: Path) -> bool:
    """Every file against the pack's ``SHA256SUMS`` (False: the pack has none); a mismatch is
    a ``PackFormatError`` naming the file."""
    try:
        return check_sums(root)
    except PackSumsError as exc:
        raise PackFormatError(exc.file, [exc.problem]) from exc


def load_pack(name_or_path: str | Path) -> Pack:
    """Load a bundled pack by name (``mirage-core``, ``mirage-ext``) or a pack from disk."""
    return Pack(resolve_pack_path(name_or_path))
