"""``mirage cue run``: every condition (system × caption levels) over every question of a CUE
pack, answered by one model (or by an agent), recorded, then reported.

Above: the CLI. Below: the pack, textualization, the memory systems, the answer parser and the
keyed results log. Layout of ``--out`` (docs/cue.md):

    index/                     chroma collections of naive RAG, the shared embedding cache
    workspaces/<label>/        memory-server workspaces (one per profile and caption levels)
    checkpoints/<label>/       empty-session checkpoints handed to an agent under test
    <model>/run.json           the resolved run configuration and the pack's digest
    <model>/study.toml         the resolved run as a study file (mirage cue run --study)
    <model>/results.jsonl      one CueRecord per (condition, question), append-only
    <model>/summary.json, report.md, figures/

Order is condition, then profile, then question, so a local model keeps a full-context prefix in
its KV cache across one profile's questions. A killed run resumes: keys already in the log are
skipped. A different pack (digest) in the same folder is refused rather than mixed.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from harness.cue.answer import parse_choice
from harness.cue.config import AgentSpec, Condition, CueRunConfig
from harness.cue.pack import CuePack, load_cue_pack
from harness.cue.records import RESULTS_FILE, CueKey, CueRecord
from harness.cue.responder import ProfileRun, Responder, Response
from harness.cue.schema import Question
from harness.cue.systems import CueSystem, SystemContext
from harness.cue.textualize import textualize
from harness.kit.results import ResultsLog
from harness.kit.rundir import model_slug, pack_digest
from runtime.backbones.base import LOCAL_PREFIX

if TYPE_CHECKING:
    from harness.cue.report import CueReportFiles

log = structlog.get_logger(__name__)

RUN_FILE = "run.json"
STUDY_TOML = "study.toml"


class RunFolderError(ValueError):
    """The output folder holds a run this one must not be mixed with."""


def question_tag(condition: str, question_id: str) -> str:
    """A memory-server tag (``[A-Za-z0-9._:@-]``, ≤ 128) naming one answered question."""
    return re.sub(r"[^A-Za-z0-9._:@-]", ".", f"{condition}.{question_id}")[:128]


def record_for(
    condition: str, question: Question, pack: CuePack, response: Response, model: str
) -> CueRecord:
    parsed = parse_choice(response.text, question.options)
    failed = response.error is not None
    return CueRecord(
        condition=condition,
        question_id=question.id,
        profile=question.profile,
        task=question.task,
        setting=question.setting,
        answer=question.answer,
        model=model,
        raw_output=response.text,
        choice=None if failed else parsed.letter,
        parse_rule="none" if failed else parsed.rule,
        correct=None if failed else parsed.letter == question.answer,
        retrieved=list(response.ranked),
        in_context=list(response.in_context),
        clue_rounds=list(pack.clue_rounds(question)),
        memory_tokens=response.memory_tokens,
        usage=response.usage,
        latency_s=response.latency_s,
        error=response.error,
    )


class CueRun:
    def __init__(
        self, config: CueRunConfig, progress: Any | None = None, backbone: Any | None = None
    ) -> None:
        """``backbone`` replaces the one ``make_backbone(config.model)`` would build (tests)."""
        self.config = config
        self.pack = load_cue_pack(config.pack)
        self.progress = progress
        self._backbone = backbone
        self.digest = pack_digest(self.pack.root)

    @property
    def answerer_name(self) -> str:
        """The model, or the agent when every condition runs one (names the result folder)."""
        specs = [self.config.system(c.system) for c in self.config.parsed_conditions]
        agents = [s for s in specs if isinstance(s, AgentSpec)]
        if agents and len(agents) == len(specs):
            return agents[0].agent_model or agents[0].agent
        return self.config.model

    @property
    def model_dir(self) -> Path:
        return self.config.out / model_slug(self.answerer_name)

    def backbone(self) -> Any:
        if self._backbone is None:
            from runtime.backbones import make_backbone

            options: dict[str, Any] = {"max_output_tokens": self.config.output_tokens}
            if self.config.api_base and not self.config.model.startswith(LOCAL_PREFIX):
                options["api_base"] = self.config.api_base
            self._backbone = make_backbone(self.config.model, **options)
        return self._backbone

    def _claim_folder(self) -> None:
        """Write run.json (options, pack digest, provenance: the first run's on a resume),
        refusing a folder that holds results of another pack or model."""
        from harness.cue.provenance import cue_provenance

        self.model_dir.mkdir(parents=True, exist_ok=True)
        path = self.model_dir / RUN_FILE
        if path.is_file():
            previous = json.loads(path.read_text(encoding="utf-8"))
            if previous.get("pack_digest") != self.digest:
                raise RunFolderError(
                    f"{self.model_dir} holds results for pack {previous.get('pack')!r} with "
                    f"another content digest; use another --out (results of different pack "
                    "versions are never mixed)"
                )
        payload = {
            "config": json.loads(self.config.model_dump_json()),
            "pack": self.pack.name,
            "pack_digest": self.digest,
            "provenance": cue_provenance(self.config, self.pack, self.digest, path).model_dump(
                mode="json"
            ),
        }
        path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        self._write_study()

    def _write_study(self) -> None:
        """``study.toml``: the resolved study, which ``mirage cue run --study`` reruns."""
        from harness.cue.config import study_data
        from harness.kit.studyfile import toml_text

        head = (
            'The resolved study of this CUE run (docs/cue.md, "Run configuration").\n'
            "Rerun or resume it: mirage cue run --study study.toml (flags override it)."
        )
        study = toml_text(study_data(self.config), head)
        (self.model_dir / STUDY_TOML).write_text(study, encoding="utf-8")

    def _profile_run(
        self, condition: Condition, profile_id: str, questions: list[Question]
    ) -> ProfileRun:
        history = self.pack.histories[profile_id]
        units = textualize(history, condition.image_level, condition.audio_level)
        label = re.sub(
            r"[^A-Za-z0-9._-]", "-", f"{profile_id}@{condition.image_level}-{condition.audio_level}"
        )
        return ProfileRun(
            profile_id=profile_id,
            name=history.name,
            label=label,
            units=tuple(units),
            questions=tuple(questions),
        )

    async def run_condition(self, condition: Condition, results: ResultsLog[CueRecord]) -> None:
        spec = self.config.system(condition.system)
        is_agent = isinstance(spec, AgentSpec)
        context = SystemContext(
            work_dir=self.config.out,
            backbone=None if is_agent else self.backbone(),
            output_tokens=self.config.output_tokens,
        )
        system = CueSystem(condition.system, spec, context)
        model = spec.agent if isinstance(spec, AgentSpec) else self.config.model
        advance = self._progress(condition.label, results)
        for profile_id in self.pack.spec.profiles:
            questions = [q for q in self.pack.questions if q.profile == profile_id]
            pending = [q for q in questions if CueKey(condition.label, q.id, 0) not in results]
            if not pending:
                continue
            # every question of the profile, so a resumed run cuts full context the same way
            profile = self._profile_run(condition, profile_id, questions)
            async with system.profile(profile) as responder:
                await self._answer_all(responder, condition.label, pending, results, model, advance)

    async def _answer_all(
        self,
        responder: Responder,
        condition: str,
        pending: list[Question],
        results: ResultsLog[CueRecord],
        model: str,
        advance: Callable[[], None],
    ) -> None:
        queue: asyncio.Queue[Question] = asyncio.Queue()
        for question in pending:
            queue.put_nowait(question)

        async def worker() -> None:
            while not queue.empty():
                question = queue.get_nowait()
                response = await responder.respond(question, question_tag(condition, question.id))
                results.append(record_for(condition, question, self.pack, response, model))
                advance()

        await asyncio.gather(*(worker() for _ in range(self.config.concurrency)))

    def _progress(self, label: str, results: ResultsLog[CueRecord]) -> Callable[[], None]:
        progress = self.progress
        if progress is None:
            return lambda: None
        done = sum(1 for r in results.records if r.condition == label)
        task = progress.add_task(label, total=len(self.pack.questions), completed=done)
        return lambda: progress.advance(task)

    async def execute(self) -> CueReportFiles:
        """Every condition, then the report (written to ``model_dir``)."""
        from harness.cue.report import write_cue_report

        self._claim_folder()
        with ResultsLog(self.model_dir / RESULTS_FILE, CueRecord) as results:
            for condition in self.config.parsed_conditions:
                log.info("cue.condition", condition=condition.label)
                await self.run_condition(condition, results)
        return write_cue_report(self.model_dir)
