"""``mirage cue import``: the CUE-Mem release format into a CUE pack.

The release (read as facts; docs/cue.md, "Importing the release") has one JSON file per profile,
``history_with_qa_p{N}.json``: ``character_profile`` {name, description};
``multi_session_dialogues`` — sessions {session_id, date, dialogues: rounds {round, user or
user_voice_message_caption, assistant, input_image/image_caption/image_id,
input_voice_message/voice_caption/voice_id}}; and ``human-annotated QAs`` {qa_id, question
(options inlined as "A. …" lines), answer, point, qa_type, clue, session_id, p_id, category}.
Caption levels are separate copies of the history: give a folder whose subfolders are named by
level (``brief``/``medium``/``detailed``, ``asr``/``hint``/``split``) to merge them, or one file
or folder with ``--image-level``/``--audio-level``.

What is never read: the history is parsed through models that name only the fields above, so
the sessions' answer-stating ``explicit_preferences``, ``implicit_preferences`` and
``scene_description`` (and a QA's ``preference``, ``answer_note``, ``trap_reason``,
``adversarial_answer``, ``rationale``) never reach the pack.

Mapping: ``point`` pref_* → Long Pattern, entity_* → Entity Recall, rec_* → Personalized
Recommendation, refusal_* and adversarial_* → Answer Refusal (any other point is an error).
Setting: ``expression_type`` or ``qa_type`` explicit/implicit; for entity items ``qa_type``
Relationship/Pets is explicit and Items takes ``entity_explicitness`` (the release's rule); an
item whose setting is mixed or unknown is skipped with its reason (``skipped.yaml``).

Clues: a clue names a round, an image or a voice message by its id, or an image or voice message
by its file (``ClueIndex``: the id plus an extension of its kind, or the file name or a trailing
part of the path in ``input_image``/``input_voice_message``); the pack stores the id it resolves
to. A clue that fits files of two media is an error naming both, never a pick.

Errors name the file, the record (``qa_id``) and the field, and nothing is written: a missing
field, an unknown point, an answer letter that is not one of the options, a clue that names no
round, image or voice message, or more than one. ``--skip-invalid`` records such QAs in
``skipped.yaml`` instead.
"""

from __future__ import annotations

import json
import posixpath
import re
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any, NamedTuple

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from harness.cue.schema import (
    AUDIO_LEVELS,
    ID_PATTERN,
    IMAGE_LEVELS,
    LETTERS,
    AudioLevel,
    CuePackFile,
    ImageLevel,
    Media,
    ProfileHistory,
    Provenance,
    Question,
    QuestionBank,
    Round,
    Session,
    Setting,
    SkippedItem,
    Task,
    profile_file,
)
from harness.kit.packfiles import PackFormatError, format_validation_error, write_text

QA_KEY = "human-annotated QAs"
POINT_TASKS = (
    ("pref", Task.long_pattern),
    ("entity", Task.entity_recall),
    ("rec", Task.recommendation),
    ("refusal", Task.refusal),
    ("adversarial", Task.refusal),
)
ENTITY_EXPLICIT_TYPES = frozenset({"Relationship", "Pets"})
IMAGE_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".webp", ".gif", ".bmp", ".tif", ".tiff"})
AUDIO_EXTENSIONS = frozenset(
    {".wav", ".mp3", ".m4a", ".aac", ".flac", ".ogg", ".oga", ".opus", ".amr", ".silk"}
)
_OPTION_LINE = re.compile(r"^\s*([A-D])\s*[.．、:：)）]\s*(.*\S)\s*$")
_EXTRA_OPTION_LINE = re.compile(r"^\s*([E-H])\s*[.．、:：)）]\s*\S")


class _Release(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


def _as_list(value: Any) -> Any:
    if value is None or value == "":
        return []
    return value if isinstance(value, list) else [value]


class ReleaseRound(_Release):
    round: str = Field(min_length=1)
    user: str | None = None
    user_voice_message_caption: str | None = None
    assistant: str | None = None
    input_image: list[str] = Field(default_factory=list)
    image_caption: list[str] = Field(default_factory=list)
    image_id: list[str] = Field(default_factory=list)
    input_voice_message: list[str] = Field(default_factory=list)
    voice_caption: list[str] = Field(default_factory=list)
    voice_id: list[str] = Field(default_factory=list)

    @field_validator(
        "input_image",
        "image_caption",
        "image_id",
        "input_voice_message",
        "voice_caption",
        "voice_id",
        mode="before",
    )
    @classmethod
    def _listed(cls, value: Any) -> Any:
        return _as_list(value)


class ReleaseSession(_Release):
    session_id: str = Field(min_length=1)
    date: str = Field(min_length=1)
    dialogues: list[ReleaseRound] = Field(min_length=1)


class ReleaseCharacter(_Release):
    name: str = Field(min_length=1)
    description: str = ""


class ReleaseHistory(_Release):
    character_profile: ReleaseCharacter
    multi_session_dialogues: list[ReleaseSession] = Field(min_length=1)


class ImportResult(BaseModel):
    path: Path
    profiles: int
    questions: int
    skipped: int


class LevelledFile(BaseModel):
    path: Path
    image_level: ImageLevel
    audio_level: AudioLevel


def release_files(
    source: Path, image_level: ImageLevel, audio_level: AudioLevel
) -> list[LevelledFile]:
    """The release files under ``source`` with the caption levels they carry."""
    if source.is_file():
        return [LevelledFile(path=source, image_level=image_level, audio_level=audio_level)]
    if not source.is_dir():
        raise PackFormatError(source, ["no such file or folder"])
    found = [
        LevelledFile(path=p, image_level=image_level, audio_level=audio_level)
        for p in sorted(source.glob("*.json"))
    ]
    for sub in sorted(p for p in source.iterdir() if p.is_dir()):
        if sub.name in IMAGE_LEVELS:
            levels = LevelledFile(path=sub, image_level=sub.name, audio_level=audio_level)
        elif sub.name in AUDIO_LEVELS:
            levels = LevelledFile(path=sub, image_level=image_level, audio_level=sub.name)
        else:
            continue
        found += [levels.model_copy(update={"path": p}) for p in sorted(sub.glob("*.json"))]
    if not found:
        raise PackFormatError(source, ["no release .json files here (history_with_qa_p*.json)"])
    return found


def profile_id_of(path: Path) -> str:
    match = re.search(r"(p\d+)$", path.stem)
    return (
        match.group(1) if match else re.sub(r"[^A-Za-z0-9._-]", "-", path.stem).strip("-.") or "p"
    )


def _read_json(path: Path) -> dict[str, Any]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PackFormatError(path, [f"not readable JSON: {exc}"]) from exc
    if not isinstance(raw, dict):
        raise PackFormatError(
            path, [f"expected a JSON object at the top level, got {type(raw).__name__}"]
        )
    return raw


def _media(
    ids: list[str], captions: list[str], files: list[str], level: str, kind: str, where: str
) -> list[Media]:
    if len(ids) != max(len(captions), len(files)) or (captions and len(captions) != len(ids)):
        raise ValueError(
            f"{where}: {kind}_id has {len(ids)} entries but its captions {len(captions)} and "
            f"files {len(files)}; each {kind} needs an id and a caption"
        )
    return [
        Media(
            id=media_id,
            source_file=files[i] if i < len(files) else None,
            captions={level: captions[i]},
        )
        for i, media_id in enumerate(ids)
    ]


def convert_round(item: ReleaseRound, levels: LevelledFile, where: str) -> Round:
    try:
        return _round(item, levels, where)
    except ValidationError as exc:
        raise ValueError(f"{where}: " + "; ".join(format_validation_error(exc))) from exc


def _round(item: ReleaseRound, levels: LevelledFile, where: str) -> Round:
    voice_caption = item.user_voice_message_caption
    return Round(
        round=item.round,
        user=item.user or None,
        user_voice={levels.audio_level: voice_caption} if voice_caption else None,
        assistant=item.assistant or None,
        images=tuple(
            _media(
                item.image_id,
                item.image_caption,
                item.input_image,
                levels.image_level,
                "image",
                where,
            )
        ),
        voices=tuple(
            _media(
                item.voice_id,
                item.voice_caption,
                item.input_voice_message,
                levels.audio_level,
                "voice",
                where,
            )
        ),
    )


def read_history(raw: dict[str, Any], levels: LevelledFile, profile_id: str) -> ProfileHistory:
    try:
        release = ReleaseHistory.model_validate(raw)
        sessions = []
        for s_index, session in enumerate(release.multi_session_dialogues):
            rounds = tuple(
                convert_round(
                    item, levels, f"multi_session_dialogues.{s_index}.dialogues.{r_index}"
                )
                for r_index, item in enumerate(session.dialogues)
            )
            sessions.append(
                Session(session_id=session.session_id, date=session.date, rounds=rounds)
            )
        return ProfileHistory(
            id=profile_id,
            name=release.character_profile.name,
            description=release.character_profile.description,
            sessions=tuple(sessions),
        )
    except ValidationError as exc:
        raise PackFormatError(levels.path, format_validation_error(exc, raw)) from exc
    except ValueError as exc:
        raise PackFormatError(levels.path, [str(exc)]) from exc


def merge_histories(first: ProfileHistory, other: ProfileHistory, path: Path) -> ProfileHistory:
    """Add ``other``'s caption levels to ``first``; the two copies must have the same rounds
    and media ids. Where both carry a level, the first copy's caption is kept."""
    mine = [(s, r) for s in first.sessions for r in s.rounds]
    theirs = [r for s in other.sessions for r in s.rounds]
    if [r.round for _, r in mine] != [r.round for r in theirs]:
        raise PackFormatError(
            path, ["its rounds differ from the other caption level's copy of this profile"]
        )
    merged: dict[str, Round] = {}
    for (_, round_), extra in zip(mine, theirs, strict=True):
        if [m.id for m in round_.images] != [m.id for m in extra.images] or [
            m.id for m in round_.voices
        ] != [m.id for m in extra.voices]:
            raise PackFormatError(path, [f"round {round_.round}: media ids differ between copies"])
        merged[round_.round] = round_.model_copy(
            update={
                "images": _merge_media(round_.images, extra.images),
                "voices": _merge_media(round_.voices, extra.voices),
                "user_voice": {**(extra.user_voice or {}), **(round_.user_voice or {})} or None,
            }
        )
    sessions = tuple(
        s.model_copy(update={"rounds": tuple(merged[r.round] for r in s.rounds)})
        for s in first.sessions
    )
    return first.model_copy(update={"sessions": sessions})


def _merge_media(mine: tuple[Media, ...], theirs: tuple[Media, ...]) -> tuple[Media, ...]:
    return tuple(
        a.model_copy(update={"captions": {**b.captions, **a.captions}})
        for a, b in zip(mine, theirs, strict=True)
    )


def task_of(point: str) -> Task | None:
    lowered = point.strip().lower()
    for prefix, task in POINT_TASKS:
        if lowered == prefix or lowered.startswith(prefix + "_"):
            return task
    return None


def setting_of(qa: dict[str, Any], task: Task) -> tuple[Setting | None, str]:
    """The setting, or None with the reason it cannot be placed."""
    qa_type = str(qa.get("qa_type") or "")
    if task is Task.entity_recall and qa_type in ENTITY_EXPLICIT_TYPES | {"Items"}:
        value = (
            "explicit"
            if qa_type in ENTITY_EXPLICIT_TYPES
            else str(qa.get("entity_explicitness") or "")
        )
    else:
        value = str(qa.get("expression_type") or qa_type).lower()
    if value in ("explicit", "implicit"):
        return Setting(value), ""
    return None, f"setting is {value or 'missing'!r} (neither explicit nor implicit)"


def split_options(text: str) -> tuple[str, dict[str, str]]:
    """The stem and the "A. …" option lines of a release question (lines after the options,
    such as the release's closing instruction, are dropped)."""
    stem, options = [], {}
    for line in text.splitlines():
        match = _OPTION_LINE.match(line)
        if match and match.group(1) not in options:
            options[match.group(1)] = match.group(2)
        elif not options:
            stem.append(line)
    return "\n".join(stem).strip(), options


class QAProblem(ValueError):
    """One QA record that cannot be converted."""


class _ClueTarget(NamedTuple):
    kind: str
    id: str
    round: str
    file: str | None

    def describe(self) -> str:
        if self.kind == "round":
            return f"round {self.round}"
        return f"{self.kind} {self.id} of round {self.round}" + (
            f" ({self.file})" if self.file else ""
        )


def _file_name_key(path: str) -> tuple[str, ...]:
    """A file path as comparable parts: ``\\`` read as ``/``, ``./`` and ``dir/..`` collapsed, the
    extension lower-cased (the rest is compared as written)."""
    parts = posixpath.normpath(path.replace("\\", "/")).split("/")
    stem, extension = posixpath.splitext(parts[-1])
    return (*parts[:-1], stem + extension.lower())


class ClueIndex:
    """What the clues of one history may name, each form pointing at its round or medium:

    - a round, image or voice id, exactly as written;
    - an image or voice id plus a file extension of its kind (``D00-001.png``, ``D00-V01.wav``;
      the extension in any case: ``IMAGE_EXTENSIONS``, ``AUDIO_EXTENSIONS``);
    - the medium's ``input_image``/``input_voice_message`` path as written, or any trailing part
      of it that starts at a ``/`` — down to the file name (extension in any case).
    """

    def __init__(self, history: ProfileHistory) -> None:
        self._names: dict[tuple[str, ...], set[_ClueTarget]] = defaultdict(set)
        for round_ in (r for s in history.sessions for r in s.rounds):
            self._add((round_.round,), _ClueTarget("round", round_.round, round_.round, None))
            for kind, media, extensions in (
                ("image", round_.images, IMAGE_EXTENSIONS),
                ("voice", round_.voices, AUDIO_EXTENSIONS),
            ):
                for medium in media:
                    self._add_medium(
                        _ClueTarget(kind, medium.id, round_.round, medium.source_file), extensions
                    )

    def _add(self, key: tuple[str, ...], target: _ClueTarget) -> None:
        self._names[key].add(target)

    def _add_medium(self, target: _ClueTarget, extensions: frozenset[str]) -> None:
        self._add((target.id,), target)
        for extension in extensions:
            self._add((target.id + extension,), target)
        path = _file_name_key(target.file) if target.file else ()
        for start in range(len(path)):
            self._add(path[start:], target)

    def resolve(self, clue: str) -> str | None:
        """The id ``clue`` names, None when it names nothing; QAProblem when it fits several."""
        found = self._names.get((clue,), set()) | self._names.get(_file_name_key(clue), set())
        if len(found) > 1:
            named = " and ".join(sorted(t.describe() for t in found))
            raise QAProblem(
                f"clue: {clue!r} fits more than one file of the history: {named}; "
                "give its id or a longer part of its path"
            )
        return next(iter(found)).id if found else None


def _field(qa: dict[str, Any], name: str) -> Any:
    value = qa.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise QAProblem(f"{name}: missing")
    return value


def convert_qa(
    qa: dict[str, Any], profile_id: str, evidence: ClueIndex, file: str
) -> Question | str:
    """A pack question, or the reason to skip a QA that is valid but has no setting."""
    qa_id = str(_field(qa, "qa_id"))
    point = str(_field(qa, "point"))
    task = task_of(point)
    if task is None:
        raise QAProblem(
            f"point: unknown point {point!r} (expected pref_*, entity_*, rec_*, "
            "refusal_* or adversarial_*)"
        )
    text = str(_field(qa, "question"))
    stem, options = split_options(text)
    extra = [m.group(1) for m in map(_EXTRA_OPTION_LINE.match, text.splitlines()) if m]
    if extra:
        raise QAProblem(f"question: needs exactly four options A–D, found also {extra}")
    captions = qa.get("option_captions") or qa.get("options")
    if len(options) < 4 and isinstance(captions, dict):
        options = {k: str(v) for k, v in captions.items() if k in LETTERS and v}
    if sorted(options) != list(LETTERS) or not stem:
        raise QAProblem(f"question: needs a stem and the four options A–D, found {sorted(options)}")
    answer = str(_field(qa, "answer")).strip().upper()[:1]
    if answer not in options:
        raise QAProblem(f"answer: {qa.get('answer')!r} is not one of the options A–D")
    clues = resolve_clues(_field(qa, "clue"), evidence)
    setting, reason = setting_of(qa, task)
    if setting is None:
        return reason
    return Question(
        id=_question_id(profile_id, qa_id),
        profile=profile_id,
        task=task,
        setting=setting,
        question=stem,
        options=options,  # type: ignore[arg-type]
        answer=answer,  # type: ignore[arg-type]
        clues=clues,
        source=Provenance(
            file=file,
            qa_id=qa_id,
            point=point,
            qa_type=qa.get("qa_type"),
            category=qa.get("category"),
        ),
    )


def resolve_clues(value: Any, evidence: ClueIndex) -> tuple[str, ...]:
    """The ids a QA's ``clue`` names, in order, each once."""
    clues = [str(c) for c in (value if isinstance(value, list) else [value])]
    resolved = {clue: evidence.resolve(clue) for clue in clues}
    unknown = [clue for clue, found in resolved.items() if found is None]
    if unknown:
        raise QAProblem(
            f"clue: {unknown} name no round, image or voice message of the history (give an id, "
            "an image/voice id with its file extension, or its input_image/input_voice_message "
            "path; docs/cue.md)"
        )
    return tuple(dict.fromkeys(found for found in resolved.values() if found is not None))


def _question_id(profile_id: str, qa_id: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9:._-]", "-", qa_id).strip("-") or "qa"
    candidate = f"{profile_id}-{cleaned}"
    return candidate if re.match(ID_PATTERN, candidate) else f"{profile_id}-q-{cleaned}"


class _Collected(BaseModel):
    questions: list[Question] = Field(default_factory=list)
    skipped: list[SkippedItem] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)


def convert_qas(
    raw: dict[str, Any], history: ProfileHistory, path: Path, skip_invalid: bool
) -> _Collected:
    qas = raw.get(QA_KEY)
    if not isinstance(qas, list):
        raise PackFormatError(path, [f"{QA_KEY!r}: missing or not a list"])
    evidence = ClueIndex(history)
    collected = _Collected()
    for index, qa in enumerate(qas):
        record = f"{QA_KEY}.{index}" + (
            f" (qa_id {qa.get('qa_id')})" if isinstance(qa, dict) else ""
        )
        try:
            if not isinstance(qa, dict):
                raise QAProblem("not a JSON object")
            converted = convert_qa(qa, history.id, evidence, path.name)
        except (QAProblem, ValidationError) as exc:
            message = (
                str(exc) if isinstance(exc, QAProblem) else "; ".join(format_validation_error(exc))
            )
            if skip_invalid:
                collected.skipped.append(SkippedItem(file=path.name, record=record, reason=message))
            else:
                collected.problems.append(f"{record}.{message}")
            continue
        if isinstance(converted, str):
            collected.skipped.append(SkippedItem(file=path.name, record=record, reason=converted))
        else:
            collected.questions.append(converted)
    return collected


def _dump(path: Path, payload: Any) -> None:
    write_text(path, yaml.safe_dump(payload, sort_keys=False, allow_unicode=True, width=100))


def import_release(
    source: Path,
    out: Path,
    name: str = "imported",
    *,
    image_level: str = "detailed",
    audio_level: str = "split",
    skip_invalid: bool = False,
) -> ImportResult:
    """Read every release file under ``source``, merge caption levels per profile, convert the
    QAs and write the pack to ``out`` (only when nothing failed)."""
    try:
        levels = LevelledFile(path=source, image_level=image_level, audio_level=audio_level)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise PackFormatError(source, [f"caption level: {exc}"]) from exc
    histories: dict[str, ProfileHistory] = {}
    collected: dict[str, _Collected] = {}
    image_levels, audio_levels = set(), set()
    for item in release_files(source, levels.image_level, levels.audio_level):
        raw = _read_json(item.path)
        pid = profile_id_of(item.path)
        history = read_history(raw, item, pid)
        image_levels.add(item.image_level)
        audio_levels.add(item.audio_level)
        if pid in histories:
            histories[pid] = merge_histories(histories[pid], history, item.path)
            continue
        histories[pid] = history
        collected[pid] = convert_qas(raw, history, item.path, skip_invalid)
        if collected[pid].problems:
            raise PackFormatError(item.path, collected[pid].problems)
    spec = CuePackFile(
        name=name,
        description=f"Imported from the CUE-Mem release format ({source.name}).",
        language="und",
        profiles=tuple(histories),
        image_levels=tuple(level for level in IMAGE_LEVELS if level in image_levels),
        audio_levels=tuple(level for level in AUDIO_LEVELS if level in audio_levels),
    )
    questions = [q for c in collected.values() for q in c.questions]
    skipped = [s for c in collected.values() for s in c.skipped]
    try:
        bank = QuestionBank(questions=tuple(questions))
    except ValidationError as exc:
        raise PackFormatError(source, format_validation_error(exc)) from exc
    _write_pack(out, spec, histories, bank, skipped)
    return ImportResult(
        path=out, profiles=len(histories), questions=len(questions), skipped=len(skipped)
    )


def _write_pack(
    out: Path,
    spec: CuePackFile,
    histories: dict[str, ProfileHistory],
    bank: QuestionBank,
    skipped: list[SkippedItem],
) -> None:
    if out.exists():
        if any(out.iterdir()) and not (out / "pack.yaml").is_file():
            raise PackFormatError(out, ["exists and is not a CUE pack; give an empty or new --out"])
        shutil.rmtree(out)
    _dump(out / "pack.yaml", spec.model_dump(mode="json"))
    for pid, history in histories.items():
        dumped = history.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
        _dump(out / profile_file(pid), dumped)
    _dump(out / spec.questions, bank.model_dump(mode="json", exclude_none=True))
    _dump(out / "skipped.yaml", {"skipped": [s.model_dump(mode="json") for s in skipped]})
