"""The trunk replayed through the real OpenClaw gateway, and its checkpoints.

Above: the OpenClaw run strategy (``harness.mirage.strategies.openclaw``). Below: the trunk
driver (``harness.mirage.trunk.driver``: the walk over the pack's turns and when each state is
reached, as for the built-in trunk) and ``OpenClawHarness``. The pack's planting turns and the
sampled filler turns go to OpenClaw's session ``trunk`` one by one; the model endpoint answers
each with its scripted reply, while OpenClaw's own memory flush and compaction summaries go to the
real answering model. After each turn ``OpenClawTrunk`` waits for that maintenance to finish, then
reads the EIT the endpoint observed for the turn and OpenClaw's compaction count. A state is
captured the moment it is reached: a fork of ``trunk`` into ``ckpt-<state>`` (never given a
turn), a copy of OpenClaw's memory files, and a manifest. The family is finished
(``family.json``) only after every state; an interrupted trunk is rebuilt from scratch by the
next run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import structlog

from harness.kit.agents.openclaw.errors import OpenClawError
from harness.kit.agents.openclaw.gateway import TurnError
from harness.kit.agents.openclaw.harness import OpenClawHarness
from harness.kit.agents.openclaw.state import (
    MEMORY_COPY,
    TRUNK_SESSION,
    OpenClawCheckpoint,
    copy_memory,
)
from harness.mirage.packs import Pack
from harness.mirage.trunk.checkpoints import (
    MANIFEST,
    Checkpoint,
    CheckpointManifest,
    TrunkConfig,
    mark_family_complete,
)
from harness.mirage.trunk.driver import TrunkDriver, TrunkTurn
from harness.mirage.trunk.runner import SCRIPTED_ACKNOWLEDGEMENT
from harness.mirage.trunk.states import DepthProfile, StateSpec
from memory_server.store import atomic_write_bytes

log = structlog.get_logger(__name__)

CHECKPOINT_FILE = "openclaw-checkpoint.json"


def checkpoint_session(state: str) -> str:
    return f"ckpt-{state.lower()}"


class OpenClawTrunk:
    """OpenClaw's trunk session under the trunk driver (``harness.mirage.trunk.driver``): each turn
    through the gateway, and a checkpoint the moment the driver finds a state reached."""

    label = "the OpenClaw trunk"

    def __init__(
        self,
        claw: OpenClawHarness,
        pack: Pack,
        trunk: TrunkConfig,
        profile: DepthProfile,
        family_dir: Path,
        workspace_version: Callable[[], str | None],
    ) -> None:
        self.claw, self.pack, self.trunk, self.profile = claw, pack, trunk, profile
        self.family_dir = family_dir
        self.workspace_version = workspace_version
        self.driver = TrunkDriver(self, pack, profile, trunk.seed)
        self.position = 0
        self.eit = 0
        self.compactions = 0

    @property
    def checkpoints(self) -> dict[str, Checkpoint]:
        return self.driver.captured

    async def turn(self, turn: TrunkTurn) -> None:
        self.claw.endpoint.trunk.reply = turn.scripted or SCRIPTED_ACKNOWLEDGEMENT
        try:
            await self.claw.chat.turn(TRUNK_SESSION, turn.text)
        except TurnError as exc:  # no checkpoint without the trunk: stop with one clear line
            raise OpenClawError(
                f"OpenClaw failed trunk turn {self.position + 1} ({exc}); see "
                f"{self.claw.paths.file_log}; re-run the same command (the trunk is rebuilt, "
                "recorded probes are kept)"
            ) from exc
        await self.claw.settle(TRUNK_SESSION)
        self.position += 1
        self.eit = self.claw.endpoint.trunk.last_eit or self.eit
        node = self.claw.node(TRUNK_SESSION)
        self.compactions = node.compaction_count if node is not None else 0
        log.info(
            "openclaw.trunk_turn",
            position=self.position,
            eit=self.eit,
            compactions=self.compactions,
        )

    async def capture(self, spec: StateSpec) -> Checkpoint:
        directory = self.family_dir / spec.name
        session = checkpoint_session(spec.name)
        await self.claw.fork(TRUNK_SESSION, session)
        memory = copy_memory(self.claw.paths.workspace, directory / MEMORY_COPY)
        state = OpenClawCheckpoint(
            session=session,
            memory_sha256=memory,
            eit=self.eit,
            compaction_count=self.compactions,
            openclaw_version=self.claw.install.version,
        )
        payload = state.model_dump_json(indent=2).encode()
        atomic_write_bytes(directory / CHECKPOINT_FILE, payload)
        manifest = CheckpointManifest(
            state=spec.name,
            eit=self.eit,
            compaction_count=self.compactions,
            trunk_position=self.position,
            trunk_turns_total=self.position,
            snapshot=CHECKPOINT_FILE,
            snapshot_sha256=hashlib.sha256(payload).hexdigest(),
            workspace_version=self.workspace_version(),
            trunk=self.trunk,
        )
        atomic_write_bytes(directory / MANIFEST, manifest.model_dump_json(indent=2).encode())
        log.info(
            "openclaw.checkpoint",
            state=spec.name,
            eit=self.eit,
            compactions=self.compactions,
            position=self.position,
        )
        return Checkpoint(directory=directory, manifest=manifest)

    async def run(self, on_turn: Callable[[int, int], None] | None = None) -> dict[str, Checkpoint]:
        checkpoints = await self.driver.run(on_turn)
        states = {n: c.manifest.eit for n, c in checkpoints.items()}
        mark_family_complete(self.family_dir, self.trunk, turns=self.position, states=states)
        return checkpoints
