"""``CuePack``: a loaded CUE pack — its histories, its questions and how they fit together.

Above: the runner, validation, the importer (which writes packs and reloads them) and the CLI.
Below: ``pack.yaml``, ``profiles/<id>.yaml`` and ``questions.yaml`` (``harness.cue.schema``).
Loading checks everything the files must agree on: every question's profile exists, every clue id
names a round, image or voice of that profile, and every image and voice message has a caption at
each level ``pack.yaml`` declares. A failure raises ``PackFormatError`` naming file and field.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

from harness.cue.schema import (
    CuePackFile,
    ProfileHistory,
    Question,
    QuestionBank,
    profile_file,
)
from harness.kit.packfiles import PackFormatError, load_model

BUNDLED_DIR = Path(__file__).resolve().parent / "data" / "packs"
DEFAULT_PACK = "cue-en"
PACK_FILE = "pack.yaml"


def bundled_packs() -> list[str]:
    return sorted(p.name for p in BUNDLED_DIR.iterdir() if (p / PACK_FILE).is_file())


def resolve_pack_path(name_or_path: str | Path) -> Path:
    """A bundled pack name, a pack folder or its ``pack.yaml``."""
    path = Path(name_or_path)
    if path.name == PACK_FILE and path.is_file():
        return path.parent
    if (path / PACK_FILE).is_file():
        return path
    bundled = BUNDLED_DIR / str(name_or_path)
    if (bundled / PACK_FILE).is_file():
        return bundled
    raise PackFormatError(
        str(name_or_path),
        [
            f"no CUE pack here (no {PACK_FILE}); bundled packs: {', '.join(bundled_packs())}, "
            "or give a pack folder (mirage cue import / mirage cue build write one)"
        ],
    )


class CuePack:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.spec = load_model(root / PACK_FILE, CuePackFile)
        self.histories = {pid: self._load_history(pid) for pid in self.spec.profiles}
        bank = load_model(root / self.spec.questions, QuestionBank)
        self.questions: tuple[Question, ...] = bank.questions
        self._check_levels()
        self._check_questions()

    @property
    def name(self) -> str:
        return self.spec.name

    def _load_history(self, profile_id: str) -> ProfileHistory:
        path = self.root / profile_file(profile_id)
        history = load_model(path, ProfileHistory)
        if history.id != profile_id:
            raise PackFormatError(path, [f"id: {history.id!r} but pack.yaml lists {profile_id!r}"])
        return history

    def _check_levels(self) -> None:
        for pid, history in self.histories.items():
            problems = []
            for session in history.sessions:
                for round_ in session.rounds:
                    for image in round_.images:
                        problems += _missing(image.id, image.captions, self.spec.image_levels)
                    for voice in round_.voices:
                        problems += _missing(voice.id, voice.captions, self.spec.audio_levels)
                    if round_.user_voice is not None:
                        problems += _missing(
                            round_.round, round_.user_voice, self.spec.audio_levels
                        )
            if problems:
                raise PackFormatError(self.root / profile_file(pid), problems)

    def _check_questions(self) -> None:
        problems = []
        for index, question in enumerate(self.questions):
            where = f"questions.{index} (id {question.id})"
            if question.profile not in self.histories:
                problems.append(f"{where}.profile: unknown profile {question.profile!r}")
                continue
            known = self.evidence_rounds(question.profile)
            unknown = [clue for clue in question.clues if clue not in known]
            if unknown:
                problems.append(
                    f"{where}.clues: {unknown} name no round, image or voice message of "
                    f"profile {question.profile}"
                )
        if problems:
            raise PackFormatError(self.root / self.spec.questions, problems)

    def evidence_rounds(self, profile_id: str) -> dict[str, str]:
        """Every evidence id of a profile (round, image, voice) -> the id of its round."""
        return self._evidence_index[profile_id]

    @cached_property
    def _evidence_index(self) -> dict[str, dict[str, str]]:
        index: dict[str, dict[str, str]] = {}
        for pid, history in self.histories.items():
            index[pid] = {
                evidence_id: round_.round
                for session in history.sessions
                for round_ in session.rounds
                for evidence_id in round_.evidence_ids
            }
        return index

    def clue_rounds(self, question: Question) -> tuple[str, ...]:
        """The distinct rounds a question's clues point into, in clue order."""
        index = self.evidence_rounds(question.profile)
        return tuple(dict.fromkeys(index[clue] for clue in question.clues))


def _missing(item_id: str, captions: dict[str, str], levels: tuple[str, ...]) -> list[str]:
    absent = [str(level) for level in levels if not (captions.get(level) or "").strip()]
    if not absent:
        return []
    return [f"{item_id}: no caption at level(s) {absent} declared in pack.yaml"]


def load_cue_pack(name_or_path: str | Path) -> CuePack:
    """Load a bundled CUE pack by name (``cue-en``) or a pack folder."""
    return CuePack(resolve_pack_path(name_or_path))
