"""The real OpenClaw as the agent under test (``--agent openclaw``): its trunk replayed through
its own gateway, then the probes through the same gateway.

Above: ``MirageRun`` (``harness.mirage.strategies.base``). Below: the pinned OpenClaw install,
``OpenClawHarness``, the OpenClaw trunk and its pieces (``harness.mirage.openclaw``) and the
probe adapter. One memory server (a fixed loopback URL, as OpenClaw's MCP config needs) and one
gateway serve both the trunk and the probes; the answering model is the run's first ``--model``.
The checkpoint family is keyed by the trunk configuration plus the OpenClaw version, the user's
OpenClaw settings and the answering model (which writes the compaction summaries and memory
flushes), so a re-run reuses it and resumes the probes; when every probe is recorded, no gateway
starts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from harness.kit.rundir import model_slug
from harness.mirage.openclaw.options import AGENT
from harness.mirage.strategies.base import (
    AgentKind,
    Answering,
    Backbones,
    Probes,
    RunContext,
    RunStrategy,
)

if TYPE_CHECKING:
    from harness.kit.agents.openclaw.harness import OpenClawHarness
    from harness.kit.agents.openclaw.install import OpenClawInstall
    from harness.kit.memory import MemoryEndpoint
    from harness.mirage.trunk.checkpoints import Checkpoint, TrunkConfig
    from runtime.backbones.base import Backbone

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class _Setup:
    """What one OpenClaw run holds before its gateway starts."""

    install: OpenClawInstall
    user: dict[str, Any] | None
    answerer: str
    budget: int
    answer: Backbone
    trunk: TrunkConfig
    family_dir: Path
    folder: Path
    url: str


class OpenClawStrategy(RunStrategy):
    @property
    def kind(self) -> AgentKind:
        config = self.config
        return AgentKind(
            attributed=True,
            own_prompt=True,
            builds_trunk=True,
            model_answerers=True,
            trunk_models=(),
            priced=(config.agent_model or config.agent or AGENT,),  # its prompt is its own
            roles=tuple(("answerer", model) for model in config.answerers),
        )

    def answerers(self, out: Path) -> dict[str, Path]:
        model = self.config.models[0]
        return {model: out / f"openclaw-{model_slug(model)}"}

    def trunk_window(self, backbones: Backbones) -> int:
        from harness.mirage.openclaw.run import openclaw_window

        model = self.config.models[0]
        backbone = backbones.backbone(model, self.config.probe_output_tokens(model))
        return openclaw_window(int(backbone.context_window))

    @asynccontextmanager
    async def probes(self, context: RunContext) -> AsyncIterator[Probes]:
        """The family's checkpoints (its trunk built first when unfinished), with the memory
        server, the family's lock and, while probes remain, the gateway held open."""
        from harness.kit.memory import memory_endpoint
        from harness.mirage.openclaw.run import load_openclaw_family
        from harness.mirage.probing.retry import pending_keys
        from harness.mirage.trunk.checkpoints import discard_unfinished_family, family_lock

        config, setup = self.config, self._setup(context)
        states = [s.name for s in context.profile.states]
        async with AsyncExitStack() as stack:
            call_log = setup.folder / "calls.jsonl"
            memory = stack.enter_context(
                memory_endpoint(
                    context.workspace,
                    context.index,
                    call_log,
                    url=setup.url,
                    token=config.memory_token,
                )
            )
            stack.enter_context(family_lock(setup.family_dir))
            checkpoints = load_openclaw_family(setup.family_dir, states)
            planned = context.planned[setup.answerer]
            if checkpoints is None:
                discard_unfinished_family(setup.family_dir)
            elif not pending_keys(setup.folder, planned, config.retry_errors):
                log.info("openclaw.nothing_to_do", family=setup.family_dir.name)
                yield Probes(checkpoints, _nothing)  # every probe is recorded: no gateway start
                return
            claw = self._harness(context, setup)
            await stack.enter_async_context(claw)
            if checkpoints is None:
                checkpoints = await self._trunk(context, claw, setup)
            yield Probes(checkpoints, partial(_answering, claw, memory))

    def _setup(self, context: RunContext) -> _Setup:
        """The install, the user's settings, the answering backbone, the trunk configuration
        and the folders, checked before anything starts."""
        from harness.kit.agents.openclaw.config import load_user_config
        from harness.kit.agents.openclaw.gateway import free_port
        from harness.kit.agents.openclaw.install import require_install
        from harness.mirage.openclaw.run import answering_backbone, openclaw_trunk

        config = self.config
        install = require_install()
        user = load_user_config(config.openclaw_config) if config.openclaw_config else None
        ((answerer, folder),) = self.answerers(context.out).items()
        budget = config.probe_output_tokens(answerer)
        answer = answering_backbone(
            answerer,
            context.profile.window,
            lambda window: context.backbones.backbone(answerer, budget, context_window=window),
        )
        trunk = openclaw_trunk(context.trunk, install, user, answerer, budget)
        family_dir = context.out / "checkpoints" / trunk.family_id()
        folder.mkdir(parents=True, exist_ok=True)
        url = config.memory_url or f"http://127.0.0.1:{free_port()}/mcp"
        return _Setup(install, user, answerer, budget, answer, trunk, family_dir, folder, url)

    def _harness(self, context: RunContext, setup: _Setup) -> OpenClawHarness:
        from harness.kit.agents.openclaw.harness import OpenClawHarness
        from harness.mirage.trunk.states import PAPER_WINDOW

        return OpenClawHarness(
            setup.install,
            setup.family_dir / "openclaw",
            setup.answer,
            window=context.profile.window,
            budget_window=PAPER_WINDOW,
            answer_max_tokens=setup.budget,
            memory_url=setup.url,
            user_config=setup.user,
            user_config_path=self.config.openclaw_config,
        )

    async def _trunk(
        self, context: RunContext, claw: OpenClawHarness, setup: _Setup
    ) -> dict[str, Checkpoint]:
        from harness.mirage.openclaw.trunk import OpenClawTrunk
        from memory_server.workspace import Workspace

        snapshot = Workspace.open(context.workspace).snapshot
        driver = OpenClawTrunk(
            claw, context.pack, setup.trunk, context.profile, setup.family_dir, snapshot
        )
        return await driver.run(context.trunk_bar())

    def agent_software(self) -> str | None:
        from harness.kit.agents.openclaw.install import DEFAULT_OPENCLAW_VERSION, find_install

        install = find_install(DEFAULT_OPENCLAW_VERSION)
        if install is None:
            return f"OpenClaw {DEFAULT_OPENCLAW_VERSION} (not installed)"
        return f"OpenClaw {install.version}"


def _nothing(answerer: str, folder: Path) -> Answering | None:
    """Every probe is recorded: no agent answers."""
    return None


def _answering(
    claw: OpenClawHarness, memory: MemoryEndpoint, answerer: str, folder: Path
) -> Answering:
    """``answerer`` through the open gateway; its context lives in OpenClaw's store."""
    from harness.kit.agents.openclaw.agent import OpenClawAgent, OpenClawAttributedAgent
    from harness.mirage.openclaw.run import unreadable_context

    agent = OpenClawAttributedAgent(
        OpenClawAgent(claw, f"openclaw/{answerer}"), folder / "calls.jsonl"
    )
    return Answering(agent, memory=memory, own_context=unreadable_context)
