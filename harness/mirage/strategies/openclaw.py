"""The real OpenClaw as the agent under test (``--agent openclaw``): its trunk replayed through
its own gateway, then the probes through the same gateway.

Above: ``MirageRun`` (``harness.mirage.strategies.base``). Below: the pinned OpenClaw install,
``OpenClawHarness``, the OpenClaw trunk (``harness.mirage.openclaw``) and the probe adapter. One
memory server (a fixed loopback URL, as OpenClaw's MCP config needs) and one gateway serve both
the trunk and the probes; the answering model is the run's first ``--model``. The checkpoint
family is keyed by the trunk configuration plus the OpenClaw version, the user's OpenClaw
settings and the answering model (which writes the compaction summaries and memory flushes), so a
re-run reuses it and resumes the probes; when every probe is recorded, no gateway starts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from harness.kit.rundir import model_slug
from harness.mirage.config import RunConfig
from harness.mirage.openclaw.options import AGENT
from harness.mirage.strategies.base import Backbones, RunStages

if TYPE_CHECKING:
    from harness.kit.agents.openclaw.harness import OpenClawHarness
    from harness.kit.memory import MemoryEndpoint
    from harness.mirage.trunk.checkpoints import Checkpoint

log = structlog.get_logger(__name__)


class OpenClawStrategy:
    attributed = True
    own_prompt = True

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self._gateway: tuple[OpenClawHarness, MemoryEndpoint] | None = None  # while probing

    def answerers(self) -> list[str]:
        return [self.config.models[0]]

    def result_dir(self, out: Path, answerer: str) -> Path:
        return out / f"openclaw-{model_slug(answerer)}"

    def trunk_window(self, models: Backbones) -> int:
        from harness.mirage.openclaw.run import openclaw_window

        model = self.config.models[0]
        backbone = models.backbone(model, self.config.probe_output_tokens(model))
        return openclaw_window(int(backbone.context_window))

    def models_to_check(self, run: RunStages) -> list[str]:
        return self.answerers()

    def family(self, run: RunStages) -> str | None:
        return None

    @asynccontextmanager
    async def checkpoints(self, run: RunStages, index: Any) -> AsyncIterator[dict[str, Checkpoint]]:
        """The family's checkpoints (its trunk built first when unfinished), with the memory
        server, the family's lock and, while probes remain, the gateway held open."""
        from harness.kit.agents.openclaw.config import load_user_config
        from harness.kit.agents.openclaw.gateway import free_port
        from harness.kit.agents.openclaw.install import require_install
        from harness.kit.memory import memory_endpoint
        from harness.mirage.openclaw.run import (
            answering_backbone,
            load_openclaw_family,
            openclaw_trunk,
        )
        from harness.mirage.trunk.checkpoints import discard_unfinished_family, family_lock

        config = self.config
        install = require_install()
        user = load_user_config(config.openclaw_config) if config.openclaw_config else None
        (answer_model,) = self.answerers()
        budget = config.probe_output_tokens(answer_model)
        answer = answering_backbone(run, answer_model, budget)
        trunk = openclaw_trunk(run, install, user)
        family_dir = run.out / "checkpoints" / trunk.family_id()
        model_dir = self.result_dir(run.out, answer_model)
        model_dir.mkdir(parents=True, exist_ok=True)
        url = config.memory_url or f"http://127.0.0.1:{free_port()}/mcp"
        states = [s.name for s in run.profile.states]
        async with AsyncExitStack() as stack:
            call_log = model_dir / "calls.jsonl"
            memory = stack.enter_context(
                memory_endpoint(run.workspace, index, call_log, url=url, token=config.memory_token)
            )
            stack.enter_context(family_lock(family_dir))
            checkpoints = load_openclaw_family(family_dir, states)
            if checkpoints is None:
                discard_unfinished_family(family_dir)
            elif run.probing.pending_probes(model_dir, checkpoints) == 0:
                log.info("openclaw.nothing_to_do", family=family_dir.name)
                yield checkpoints  # every probe is recorded: no gateway start
                return
            claw = self._harness(run, install, family_dir, answer, budget, url, user)
            await stack.enter_async_context(claw)
            if checkpoints is None:
                checkpoints = await self._trunk(run, claw, trunk, family_dir)
            self._gateway = (claw, memory)
            try:
                yield checkpoints
            finally:
                self._gateway = None

    def _harness(
        self,
        run: RunStages,
        install: Any,
        family_dir: Path,
        answer: Any,
        budget: int,
        url: str,
        user: dict[str, Any] | None,
    ) -> OpenClawHarness:
        from harness.kit.agents.openclaw.harness import OpenClawHarness
        from harness.mirage.trunk.states import PAPER_WINDOW

        return OpenClawHarness(
            install,
            family_dir / "openclaw",
            answer,
            window=run.profile.window,
            budget_window=PAPER_WINDOW,
            answer_max_tokens=budget,
            memory_url=url,
            user_config=user,
            user_config_path=self.config.openclaw_config,
        )

    async def _trunk(
        self, run: RunStages, claw: OpenClawHarness, trunk: Any, family_dir: Path
    ) -> dict[str, Checkpoint]:
        from harness.mirage.openclaw.trunk import OpenClawTrunk
        from memory_server.workspace import Workspace

        snapshot = Workspace.open(run.workspace).snapshot
        driver = OpenClawTrunk(claw, run.pack, trunk, run.profile, family_dir, snapshot)
        return await driver.run(run.progress.trunk(run.profile.window))

    async def probe(
        self, run: RunStages, answerer: str, checkpoints: dict[str, Checkpoint], index: Any
    ) -> Path:
        """Through the open gateway; nothing when ``checkpoints`` found every probe recorded."""
        from harness.kit.agents.openclaw.agent import OpenClawAgent, OpenClawAttributedAgent
        from harness.mirage.openclaw.run import unreadable_context
        from harness.mirage.probing.visibility import write_run_visibility

        model_dir = self.result_dir(run.out, answerer)
        if self._gateway is None:
            return model_dir
        claw, memory = self._gateway
        write_run_visibility(
            model_dir, checkpoints, run.workspace, run.pack, unreadable_context
        )  # not available: the context is in OpenClaw's store
        agent = OpenClawAttributedAgent(
            OpenClawAgent(claw, f"openclaw/{answerer}"), model_dir / "calls.jsonl"
        )
        await run.probing.probe_states(agent, model_dir, checkpoints, memory)
        return model_dir

    def provenance_roles(self) -> list[tuple[str, str]]:
        return [("answerer", model) for model in self.config.answerers]

    def agent_software(self) -> str | None:
        from harness.kit.agents.openclaw.install import DEFAULT_OPENCLAW_VERSION, find_install

        install = find_install(DEFAULT_OPENCLAW_VERSION)
        if install is None:
            return f"OpenClaw {DEFAULT_OPENCLAW_VERSION} (not installed)"
        return f"OpenClaw {install.version}"

    def priced_answerers(self) -> list[str]:
        """As an agent whose prompt is its own, named by ``--agent-model`` or ``openclaw``."""
        return [self.config.agent_model or self.config.agent or AGENT]
