"""What one run is, before it does anything: its options, strategy, pack, depth states (the window
from the strategy when ``--window`` is not given), summary formats and calibration arms, the record
state of every (state, format), the chosen questions, the scoring profile and the output folders.

Above: ``MirageRun`` and its stages (``family``, ``probing``, ``resume``), the dry run
(``harness.mirage.run.plan``), the provenance. Below: the pack, ``depth_profile``, the strategy
(``harness.mirage.strategies``), the run's backbones.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.mirage.config import RunConfig
from harness.mirage.references import is_reference
from harness.mirage.run.backbones import RunBackbones
from harness.mirage.run.errors import RunInputError, bad_files_reported
from harness.mirage.run.progress import RunProgress
from harness.mirage.scoring import Gold, ScoringProfile, get_profile
from harness.mirage.strategies import RunStrategy, strategy_for
from harness.mirage.trunk.checkpoints import checkpoint_dir_name
from runtime.backbones.base import Backbone

if TYPE_CHECKING:
    from memory_server.index import HybridIndex


def select_questions(questions: list[Any], limit: int | None) -> list[Any]:
    """All questions, or ``limit`` of them as whole answerable/unanswerable pairs picked
    round-robin across evidence objects (so a small run still covers every object)."""
    if limit is None or limit >= len(questions):
        return list(questions)
    by_pair: dict[str, list[Any]] = defaultdict(list)
    for question in questions:
        by_pair[question.pair_id].append(question)
    by_object: dict[str, list[str]] = defaultdict(list)
    for pair_id, members in by_pair.items():
        answerable = [q for q in members if str(q.gold_answerable) == "YES"]
        by_object[answerable[0].gold_source if answerable else "NONE"].append(pair_id)
    chosen: list[Any] = []
    queues = [list(pairs) for _, pairs in sorted(by_object.items())]
    while len(chosen) < limit and any(queues):
        for queue in queues:
            if queue and len(chosen) < limit:
                chosen.extend(by_pair[queue.pop(0)])
    return chosen


class RunLayout:
    """The run's definition and output layout; builds and writes nothing."""

    def __init__(
        self,
        config: RunConfig,
        progress: Any | None = None,
        backbones: dict[str, Any] | None = None,
    ) -> None:
        """``backbones`` maps model strings to ready backbones (tests, or callers that build
        their own); every other model string goes through ``make_backbone``."""
        from harness.mirage.packs import load_pack
        from harness.mirage.trunk.states import depth_profile

        self.config = config
        self.strategy: RunStrategy = strategy_for(config)
        self.models = RunBackbones(config.api_base, backbones, timeout_s=config.request_timeout_s)
        self.backbones = self.models.given
        self.out = config.out
        with bad_files_reported():
            self.pack = load_pack(config.pack)
        self.progress = RunProgress(progress)
        window = (
            config.window if config.window is not None else self.strategy.trunk_window(self.models)
        )
        self.profile = depth_profile(config.profile, window)
        self._check_format_axis()
        self.workspace = self.out / "workspace"

    def backbone(
        self, model: str, max_output_tokens: int, *, context_window: int | None = None
    ) -> Backbone:
        """``context_window``: a local model loaded with that many positions."""
        return self.models.backbone(model, max_output_tokens, context_window=context_window)

    @property
    def formats(self) -> list[str]:
        """The run's summary formats: ``--summary-format``'s, then the calibration arms (when on
        and the profile has a compaction state)."""
        arms = self.config.calibration_formats
        if arms and not any(s.kind == "compaction" for s in self.profile.states):
            arms = []
        return [*self.config.summary_formats, *arms]

    def probes_format(self, answerer: str, summary_format: str | None) -> bool:
        """Whether ``answerer`` is probed on the states of ``summary_format``: the calibration
        arms are the reference agents' only."""
        calibration = summary_format in self.config.calibration_formats
        return not calibration or is_reference(answerer)

    def _check_format_axis(self) -> None:
        if len(self.config.summary_formats) == 1:
            return
        compactions = [s for s in self.profile.states if s.kind == "compaction"]
        if not compactions:
            raise RunInputError(
                f"profile {self.profile.name!r} has no compaction state: several summary formats "
                "would give identical states; give one --summary-format"
            )
        later = [s.name for s in compactions if s.compactions > 1]
        if later:
            raise RunInputError(
                f"state(s) {', '.join(later)} come after a later compaction: summary formats "
                "branch only at the first one; run each format with its own --out"
            )

    def state_key(self, state: str, summary_format: str) -> str:
        """The record state of a compaction state under ``summary_format``: the state's own
        name for the primary format, ``<state>@<format>`` for the others."""
        if summary_format == self.config.primary_format:
            return state
        return checkpoint_dir_name(state, summary_format)

    def state_keys(self, answerer: str | None = None) -> list[tuple[str, str, str | None]]:
        """(record state, profile state, summary format — None before the first compaction)
        for every state of this run (of ``answerer``'s probes, when given), in probe order."""
        keys: list[tuple[str, str, str | None]] = []
        for spec in self.profile.states:
            if spec.kind != "compaction":
                keys.append((spec.name, spec.name, None))
                continue
            for fmt in self.formats:
                if answerer is None or self.probes_format(answerer, fmt):
                    keys.append((self.state_key(spec.name, fmt), spec.name, fmt))
        return keys

    def state_formats(self) -> dict[str, str]:
        """Each compaction state key of this run → its summary format."""
        return {key: fmt for key, _, fmt in self.state_keys() if fmt is not None}

    @property
    def shared_states(self) -> list[str]:
        """The states every summary format shares: those before the first compaction."""
        return [s.name for s in self.profile.states if s.kind != "compaction"]

    @property
    def compaction_states(self) -> list[str]:
        return [s.name for s in self.profile.states if s.kind == "compaction"]

    def questions(self) -> list[tuple[str, str, Gold]]:
        chosen = select_questions(list(self.pack.questions), self.config.limit)
        return [(q.id, q.question, self.pack.gold(q)) for q in chosen]

    @property
    def scoring(self) -> ScoringProfile:
        return get_profile(self.config.scoring)

    def resolver(self, version: str | None = None) -> Any:
        """SOURCE's canonicaliser in the run's workspace as it was at ``version`` (a checkpoint's
        workspace version: a note's line anchors name that version's lines)."""
        from memory_server.workspace import Workspace

        return self.scoring.source_resolver(Workspace.open(self.workspace), version)

    def answerers(self) -> dict[str, Path]:
        """Who this run probes, in order, each with its result folder (its strategy's)."""
        return self.strategy.answerers(self.out)

    def result_dirs(self) -> list[Path]:
        """The per-answerer result folders this run writes."""
        return list(self.answerers().values())

    def prepare_workspace(self) -> HybridIndex:
        """The pack's workspace W, materialised once, and its index, synced."""
        from harness.mirage.trunk.runner import PACK_VERSION_TAG
        from memory_server.index import HybridIndex
        from memory_server.workspace import Workspace

        done = self.progress.workspace()
        if not (self.workspace / "MANIFEST.yaml").exists():
            self.pack.materialize_workspace(self.workspace)
            materialised = Workspace.open(self.workspace)
            materialised.store.tag(PACK_VERSION_TAG, materialised.snapshot())
        index = HybridIndex(Workspace.open(self.workspace))
        index.sync()
        done()
        return index
