"""``mirage run --agent openclaw``: the MIRAGE protocol with the real OpenClaw in the loop.

Above: ``harness.mirage.run.MirageRun``, through ``MirageStages`` (workspace, questions, probe
loop, scoring, reports — the same as for the built-in runtime). Below: the pinned OpenClaw
install, ``OpenClawHarness``, the trunk driver and the probe adapter. One memory server (a fixed
loopback URL, as OpenClaw's MCP config needs) and one gateway serve both the trunk and the
probes; the answering model is the run's first ``--model``. The checkpoint family is keyed by the
trunk configuration plus the OpenClaw version, the user's OpenClaw settings and the answering
model (which writes the compaction summaries and memory flushes), so a re-run reuses it and
resumes the probes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from harness.kit.agents.openclaw.agent import OpenClawAgent, OpenClawAttributedAgent
from harness.kit.agents.openclaw.config import config_digest, load_user_config
from harness.kit.agents.openclaw.errors import OpenClawError
from harness.kit.agents.openclaw.gateway import free_port
from harness.kit.agents.openclaw.harness import OpenClawHarness
from harness.kit.agents.openclaw.install import OpenClawInstall, require_install
from harness.kit.agents.openclaw.state import read_openclaw_checkpoint
from harness.mirage.checkpoints import (
    FAMILY_FILE,
    MANIFEST,
    Checkpoint,
    CheckpointManifest,
    TrunkConfig,
    discard_unfinished_family,
    family_lock,
)
from harness.mirage.openclaw.trunk import OpenClawTrunk
from harness.mirage.states import PAPER_WINDOW
from runtime.backbones.base import LOCAL_PREFIX

if TYPE_CHECKING:
    from harness.kit.agents.base import AgentUnderTest
    from harness.kit.memory import MemoryEndpoint
    from harness.mirage.config import RunConfig
    from harness.mirage.packs import Pack
    from harness.mirage.states import DepthProfile

log = structlog.get_logger(__name__)


class MirageStages(Protocol):
    """What the OpenClaw run uses of the run around it (``harness.mirage.run.MirageRun``): its
    options, folders, pack and states, backbones, trunk configuration, progress and probe loop."""

    config: RunConfig
    out: Path
    workspace: Path
    pack: Pack
    profile: DepthProfile

    def backbone(self, model: str, max_output_tokens: int, **extra: Any) -> Any: ...

    def trunk_config(self) -> TrunkConfig: ...

    def result_dirs(self) -> list[Path]: ...

    def pending_probes(self, model_dir: Path, checkpoints: dict[str, Checkpoint]) -> int: ...

    def trunk_progress(self) -> Callable[[int, int], None] | None: ...

    async def probe_states(
        self,
        agent: AgentUnderTest,
        model_dir: Path,
        checkpoints: dict[str, Checkpoint],
        memory: MemoryEndpoint,
    ) -> None: ...


MIN_WINDOW = 16_384
"""OpenClaw's own prompt (system prompt and tool schemas) is ~5k tokens and it compacts at
W − W/4; below this window the depth states would come after its first compaction."""


def openclaw_window(model_window: int) -> int:
    """The window OpenClaw is configured with: the answering model's, at least ``MIN_WINDOW``
    (a local model is then loaded with that many positions; see docs/openclaw.md)."""
    return max(model_window, MIN_WINDOW)


def answering_backbone(run: MirageStages, model: str, budget: int) -> Any:
    """The answering model with room for OpenClaw's window; a hosted model with less is an
    error, a local one is loaded with the larger context."""
    window = run.profile.window
    backbone = run.backbone(model, budget)
    if backbone.context_window >= window:
        return backbone
    if model.startswith(LOCAL_PREFIX):
        return run.backbone(model, budget, context_window=window)
    raise OpenClawError(
        f"the answering model {model} has a {backbone.context_window}-token window; OpenClaw "
        f"needs {window} (its own prompt is ~5k tokens): choose another --model"
    )


def openclaw_trunk(
    run: MirageStages, install: OpenClawInstall, user: dict[str, Any] | None
) -> TrunkConfig:
    answer = run.config.models[0]
    return run.trunk_config().model_copy(
        update={
            "trunk_model": f"openclaw-{install.version}+config-{config_digest(user)}",
            "summary_format": "openclaw",
            "summarizer_model": answer,
            "memory_flush": True,
            "max_output_tokens": run.config.probe_output_tokens(answer),
        }
    )


def load_openclaw_family(family_dir: Path, states: list[str]) -> dict[str, Checkpoint] | None:
    """The finished family's checkpoints, each file checked against its manifest's hash."""
    if not (family_dir / FAMILY_FILE).exists():
        return None
    checkpoints = {}
    for state in states:
        directory = family_dir / state
        try:
            manifest = CheckpointManifest.model_validate_json((directory / MANIFEST).read_bytes())
            data = (directory / manifest.snapshot).read_bytes()
        except (OSError, ValueError) as exc:
            raise OpenClawError(
                f"{directory / MANIFEST}: unreadable checkpoint ({type(exc).__name__}); delete "
                f"{family_dir} to rebuild the OpenClaw trunk (records in results.jsonl are kept)"
            ) from exc
        if hashlib.sha256(data).hexdigest() != manifest.snapshot_sha256:
            raise OpenClawError(
                f"{directory / manifest.snapshot}: differs from its manifest's hash; delete "
                f"{family_dir} to rebuild the OpenClaw trunk"
            )
        read_openclaw_checkpoint(directory / manifest.snapshot)
        checkpoints[state] = Checkpoint(directory=directory, manifest=manifest)
    return checkpoints


async def run_openclaw(run: MirageStages, index: Any) -> Path:
    """Trunk (or the reused family) and every probe of OpenClaw; returns the result folder."""
    from harness.kit.memory import memory_endpoint
    from harness.mirage.visibility import write_run_visibility
    from memory_server.workspace import Workspace

    config = run.config
    install = require_install()
    user = load_user_config(config.openclaw_config) if config.openclaw_config else None
    answer_model = config.models[0]
    budget = config.probe_output_tokens(answer_model)
    answer = answering_backbone(run, answer_model, budget)
    trunk = openclaw_trunk(run, install, user)
    family_dir = run.out / "checkpoints" / trunk.family_id()
    (model_dir,) = run.result_dirs()
    model_dir.mkdir(parents=True, exist_ok=True)
    call_log = model_dir / "calls.jsonl"
    url = config.memory_url or f"http://127.0.0.1:{free_port()}/mcp"
    states = [s.name for s in run.profile.states]
    with (
        memory_endpoint(
            run.workspace, index, call_log, url=url, token=config.memory_token
        ) as memory,
        family_lock(family_dir),
    ):
        checkpoints = load_openclaw_family(family_dir, states)
        if checkpoints is None:
            discard_unfinished_family(family_dir)
        elif run.pending_probes(model_dir, checkpoints) == 0:
            log.info("openclaw.nothing_to_do", family=family_dir.name)
            return model_dir  # every probe is recorded: no gateway start
        claw = OpenClawHarness(
            install,
            family_dir / "openclaw",
            answer,
            window=run.profile.window,
            budget_window=PAPER_WINDOW,
            answer_max_tokens=budget,
            memory_url=url,
            user_config=user,
            user_config_path=config.openclaw_config,
        )
        async with claw:
            if checkpoints is None:
                snapshot = Workspace.open(run.workspace).snapshot
                driver = OpenClawTrunk(claw, run.pack, trunk, run.profile, family_dir, snapshot)
                checkpoints = await driver.run(run.trunk_progress())
            write_run_visibility(model_dir, checkpoints, run.workspace, run.pack)  # not available
            agent = OpenClawAttributedAgent(
                OpenClawAgent(claw, f"openclaw/{answer_model}"), call_log
            )
            await run.probe_states(agent, model_dir, checkpoints, memory)
    return model_dir
