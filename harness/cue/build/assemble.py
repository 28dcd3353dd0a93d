"""Lay a CUE pack source out as sessions, render its photos and write the pack files.

Above: ``build_cue_pack``. Below: the source YAML (``harness/cue/data/sources``), the scene
renderer, and the pack schema. Everything random is drawn from ``random.Random`` seeded by the
source's ``seed`` and the profile id, so a rebuild writes the same bytes.

Per profile: every mention of an explicit target and every occurrence of an implicit target is
one round, and the rounds of one target go to distinct sessions (the least-filled ones first,
ties broken by the seeded generator). Sessions are then topped up with neutral chatter (text, or
a voice message over a neutral ambient sound) and shuffled. A question's clues are the ids of
its target's rounds: the round for a typed mention, the voice message for a spoken one, the
photo for a photo.
"""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.cue.build.scenes import (
    Recording,
    Scene,
    audio_captions,
    image_captions,
    render_scene,
)
from harness.cue.schema import (
    AUDIO_LEVELS,
    IMAGE_LEVELS,
    LETTERS,
    REFUSAL_OPTION,
    CuePackFile,
    Evidence,
    Letter,
    Media,
    ProfileHistory,
    Question,
    QuestionBank,
    Round,
    Session,
    Setting,
    Task,
    profile_file,
)
from harness.kit.packfiles import load_model, write_text


class _Source(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Photo(_Source):
    place: str
    foreground: str
    background: tuple[str, ...]


class Mention(_Source):
    """One explicit mention: typed text, speech, or a photo with the target in the foreground."""

    user: str | None = None
    speech: str | None = None
    photo: Photo | None = None
    assistant: str

    @model_validator(mode="after")
    def _one_channel(self) -> Mention:
        if (self.speech is not None) + (self.photo is not None) + (
            self.user is not None and self.photo is None
        ) != 1:
            raise ValueError("a mention is typed (user), spoken (speech) or a photo (with user)")
        return self


class TargetSource(_Source):
    id: str
    setting: Setting
    terms: tuple[str, ...] = Field(min_length=1)
    mentions: tuple[Mention, ...] = ()
    object: str | None = Field(default=None, description="implicit: a peripheral photo object")
    sound: str | None = Field(default=None, description="implicit: an ambient sound")

    @model_validator(mode="after")
    def _shape(self) -> TargetSource:
        if self.setting is Setting.explicit and not self.mentions:
            raise ValueError("an explicit target needs mentions")
        if self.setting is Setting.implicit and (self.object is None) == (self.sound is None):
            raise ValueError("an implicit target needs exactly one of object or sound")
        return self


class QuestionSource(_Source):
    task: Task
    setting: Setting
    target: str
    question: str
    correct: str | None = None
    distractors: tuple[str, str, str]
    absent: tuple[str, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _correct(self) -> QuestionSource:
        if (self.task is Task.refusal) != (self.correct is None):
            raise ValueError("a refusal question has no `correct` (it is the refusal option)")
        return self


class Chatter(_Source):
    user: str
    assistant: str


class VoiceChatter(_Source):
    speech: str
    assistant: str


class SceneSource(_Source):
    place: str
    foreground: str
    background: tuple[str, ...]
    user: str
    assistant: str


class ProfileSource(_Source):
    id: str
    name: str
    description: str
    targets: tuple[TargetSource, ...]
    questions: tuple[QuestionSource, ...]


class PackSource(_Source):
    name: str
    description: str
    seed: int
    sessions: int = Field(ge=3)
    rounds_per_session: int = Field(ge=1)
    first_date: dt.date
    session_gap_days: int = Field(ge=1)
    occurrences: int = Field(ge=3)
    clutter: tuple[str, ...]
    ambient: tuple[str, ...]
    chatter: tuple[Chatter, ...]
    voice_chatter: tuple[VoiceChatter, ...]
    scenes: tuple[SceneSource, ...]
    profiles: tuple[ProfileSource, ...]


Kind = Literal["text", "voice", "photo"]


class Planned(BaseModel):
    """A round before it has a place: what it shows, and the target it is evidence for."""

    kind: Kind
    assistant: str
    user: str | None = None
    recording: Recording | None = None
    scene: Scene | None = None
    target: str | None = None


class _Pools:
    """The neutral material one profile draws from, each item used at most once."""

    def __init__(self, source: PackSource, rng: random.Random) -> None:
        self.rng = rng
        self.scenes = rng.sample(list(source.scenes), len(source.scenes))
        self.voices = rng.sample(list(source.voice_chatter), len(source.voice_chatter))
        self.chatter = rng.sample(list(source.chatter), len(source.chatter))
        self.clutter = source.clutter
        self.ambient = source.ambient

    def photo(self, peripheral_object: str, target: str) -> Planned:
        scene = self.scenes.pop()
        peripheral = [peripheral_object, *self.rng.sample(list(self.clutter), 2)]
        self.rng.shuffle(peripheral)
        return Planned(
            kind="photo",
            user=scene.user,
            assistant=scene.assistant,
            scene=Scene(
                place=scene.place,
                foreground=scene.foreground,
                background=scene.background,
                peripheral=tuple(peripheral),
            ),
            target=target,
        )

    def voice(self, background: str | None, target: str | None) -> Planned:
        voice = self.voices.pop()
        recording = Recording(speech=voice.speech, background=background)
        return Planned(kind="voice", recording=recording, assistant=voice.assistant, target=target)

    def filler(self, index: int) -> Planned:
        if index % 3 == 2 and self.voices:
            return self.voice(self.rng.choice(list(self.ambient)), None)
        chat = self.chatter.pop()
        return Planned(kind="text", user=chat.user, assistant=chat.assistant)


def _mention(
    mention: Mention, target: str, clutter: tuple[str, ...], rng: random.Random
) -> Planned:
    if mention.speech is not None:
        recording = Recording(speech=mention.speech)
        return Planned(
            kind="voice", recording=recording, assistant=mention.assistant, target=target
        )
    if mention.photo is not None:
        scene = Scene(
            place=mention.photo.place,
            foreground=mention.photo.foreground,
            background=mention.photo.background,
            peripheral=tuple(rng.sample(list(clutter), 2)),
        )
        return Planned(
            kind="photo", user=mention.user, assistant=mention.assistant, scene=scene, target=target
        )
    return Planned(kind="text", user=mention.user, assistant=mention.assistant, target=target)


def plan_evidence(target: TargetSource, pools: _Pools, occurrences: int) -> list[Planned]:
    if target.setting is Setting.explicit:
        return [_mention(m, target.id, pools.clutter, pools.rng) for m in target.mentions]
    if target.object is not None:
        return [pools.photo(target.object, target.id) for _ in range(occurrences)]
    return [pools.voice(target.sound, target.id) for _ in range(occurrences)]


def assign_sessions(
    groups: list[list[Planned]], sessions: int, per_session: int, pools: _Pools
) -> list[list[Planned]]:
    """Each group's rounds in distinct sessions, least-filled first; then fill and shuffle."""
    layout: list[list[Planned]] = [[] for _ in range(sessions)]
    for group in groups:
        if len(group) > sessions:
            raise ValueError(f"a target needs {len(group)} sessions; the source has {sessions}")
        order = sorted(range(sessions), key=lambda s: (len(layout[s]), pools.rng.random()))
        for session, planned in zip(sorted(order[: len(group)]), group, strict=True):
            layout[session].append(planned)
    fillers = 0
    for rounds in layout:
        while len(rounds) < per_session:
            rounds.append(pools.filler(fillers))
            fillers += 1
        pools.rng.shuffle(rounds)
    return layout


class BuiltProfile(BaseModel):
    history: ProfileHistory
    clues: dict[str, list[str]]
    scenes: dict[str, Scene]


def _round(planned: Planned, session: int, index: int, counts: dict[str, int]) -> tuple[Round, str]:
    """The round and the evidence id a clue uses for it."""
    round_id = f"D{session:02d}:{index:02d}"
    if planned.kind == "photo":
        assert planned.scene is not None
        counts["image"] += 1
        media = Media(
            id=f"D{session:02d}-{counts['image']:03d}", captions=image_captions(planned.scene)
        )
        media = media.model_copy(update={"file": f"media/{{profile}}/{media.id}.png"})
        return Round(
            round=round_id, user=planned.user, assistant=planned.assistant, images=(media,)
        ), media.id
    if planned.kind == "voice":
        assert planned.recording is not None
        counts["voice"] += 1
        media = Media(
            id=f"D{session:02d}-V{counts['voice']:02d}", captions=audio_captions(planned.recording)
        )
        return Round(round=round_id, assistant=planned.assistant, voices=(media,)), media.id
    return Round(round=round_id, user=planned.user, assistant=planned.assistant), round_id


def build_profile(source: PackSource, profile: ProfileSource) -> BuiltProfile:
    rng = random.Random(f"{source.seed}:{profile.id}")
    pools = _Pools(source, rng)
    groups = [plan_evidence(t, pools, source.occurrences) for t in profile.targets]
    layout = assign_sessions(groups, source.sessions, source.rounds_per_session, pools)
    sessions: list[Session] = []
    clues: dict[str, list[str]] = {t.id: [] for t in profile.targets}
    scenes: dict[str, Scene] = {}
    for number, planned_rounds in enumerate(layout):
        counts = {"image": 0, "voice": 0}
        rounds = []
        for index, planned in enumerate(planned_rounds):
            round_, evidence_id = _round(planned, number, index, counts)
            round_ = _with_profile_paths(round_, profile.id)
            rounds.append(round_)
            if planned.target is not None:
                clues[planned.target].append(evidence_id)
            if planned.scene is not None:
                scenes[round_.images[0].id] = planned.scene
        date = source.first_date + dt.timedelta(days=number * source.session_gap_days)
        sessions.append(
            Session(session_id=f"D{number:02d}", date=date.isoformat(), rounds=tuple(rounds))
        )
    history = ProfileHistory(
        id=profile.id, name=profile.name, description=profile.description, sessions=tuple(sessions)
    )
    return BuiltProfile(history=history, clues=clues, scenes=scenes)


def _with_profile_paths(round_: Round, profile_id: str) -> Round:
    images = tuple(
        m.model_copy(update={"file": m.file.format(profile=profile_id) if m.file else None})
        for m in round_.images
    )
    return round_.model_copy(update={"images": images})


TASK_CODES = {
    Task.entity_recall: "ER",
    Task.long_pattern: "LP",
    Task.recommendation: "PR",
    Task.refusal: "AR",
}


def balanced_letters(count: int, rng: random.Random) -> list[Letter]:
    letters = [LETTERS[i % len(LETTERS)] for i in range(count)]
    rng.shuffle(letters)
    return letters


def build_questions(
    source: PackSource, profiles: list[ProfileSource], built: dict[str, BuiltProfile]
) -> list[Question]:
    rng = random.Random(f"{source.seed}:questions")
    sources = [(p.id, q) for p in profiles for q in p.questions]
    letters = balanced_letters(len(sources), rng)
    questions, numbers = [], dict[tuple[str, Task, Setting], int]()
    targets = {p.id: {t.id: t for t in p.targets} for p in profiles}
    for (profile_id, item), letter in zip(sources, letters, strict=True):
        key = (profile_id, item.task, item.setting)
        numbers[key] = numbers.get(key, 0) + 1
        distractors = list(item.distractors)
        rng.shuffle(distractors)
        correct = item.correct if item.correct is not None else REFUSAL_OPTION
        others = iter(distractors)
        options = {o: correct if o == letter else next(others) for o in LETTERS}
        target = targets[profile_id][item.target]
        questions.append(
            Question(
                id=f"{profile_id}-{TASK_CODES[item.task]}-{item.setting.value[0].upper()}{numbers[key]}",
                profile=profile_id,
                task=item.task,
                setting=item.setting,
                question=item.question,
                options=options,
                answer=letter,
                clues=tuple(built[profile_id].clues[item.target]),
                evidence=Evidence(answer_terms=target.terms, absent_terms=item.absent),
            )
        )
    return questions


def _dump(path: Path, payload: Any) -> None:
    write_text(path, yaml.safe_dump(payload, sort_keys=False, allow_unicode=True, width=100))


def build_from_source(source_path: Path, out_dir: Path) -> None:
    source = load_model(source_path, PackSource)
    built = {p.id: build_profile(source, p) for p in source.profiles}
    questions = build_questions(source, list(source.profiles), built)
    spec = CuePackFile(
        name=source.name,
        description=source.description,
        profiles=tuple(built),
        image_levels=IMAGE_LEVELS,
        audio_levels=AUDIO_LEVELS,
    )
    _dump(out_dir / "pack.yaml", spec.model_dump(mode="json"))
    for profile_id, profile in built.items():
        dumped = profile.history.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
        _dump(out_dir / profile_file(profile_id), dumped)
        for image_id, scene in profile.scenes.items():
            render_scene(
                scene,
                out_dir / "media" / profile_id / f"{image_id}.png",
                f"{profile_id}/{image_id}",
            )
    bank = QuestionBank(questions=tuple(questions))
    _dump(out_dir / "questions.yaml", bank.model_dump(mode="json", exclude_none=True))
