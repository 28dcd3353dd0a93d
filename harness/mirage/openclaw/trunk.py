"""The trunk replayed through the real OpenClaw gateway, and its checkpoints.

Above: ``harness.mirage.openclaw.run``. Below: ``OpenClawHarness``. The pack's planting turns and
the sampled filler turns go to OpenClaw's session ``trunk`` one by one; the model endpoint answers
each with its scripted reply, while OpenClaw's own memory flush and compaction summaries go to the
real answering model. After each turn the driver waits for that maintenance to finish, then reads
the EIT the endpoint observed for the turn and OpenClaw's compaction count. A state is captured the
moment it is reached, as the built-in trunk does (``harness.mirage.trunk``): a fork of ``trunk``
into ``ckpt-<state>`` (never given a turn), a copy of OpenClaw's memory files, and a manifest. The
family is finished (``family.json``) only after every state; an interrupted trunk is rebuilt from
scratch by the next run.
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
from harness.mirage.checkpoints import (
    MANIFEST,
    Checkpoint,
    CheckpointManifest,
    TrunkConfig,
    mark_family_complete,
)
from harness.mirage.packs import Pack
from harness.mirage.packs.pack import PlantedTurn
from harness.mirage.states import DepthProfile, StateSpec
from harness.mirage.trunk import MAX_FILLER_TURNS, SCRIPTED_ACKNOWLEDGEMENT, TrunkError
from memory_server.store import atomic_write_bytes
from runtime.messages import ImagePart

log = structlog.get_logger(__name__)

CHECKPOINT_FILE = "openclaw-checkpoint.json"


def checkpoint_session(state: str) -> str:
    return f"ckpt-{state.lower()}"


def planted_text(turn: PlantedTurn) -> str:
    """A planting turn as the one text message OpenClaw's chat endpoint takes: images by their
    text stand-in, other attachments inlined (as ``to_user_message`` renders them)."""
    parts = turn.to_user_message().content
    return "\n\n".join(
        p.text_representation or "" if isinstance(p, ImagePart) else p.text for p in parts
    ).strip()


class OpenClawTrunk:
    """Drives the trunk session and writes a checkpoint the moment each state is reached."""

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
        self.checkpoints: dict[str, Checkpoint] = {}
        self.position = 0
        self.eit = 0
        self.compactions = 0

    async def _turn(self, text: str, scripted: str | None) -> None:
        self.claw.endpoint.trunk.reply = scripted or SCRIPTED_ACKNOWLEDGEMENT
        try:
            await self.claw.chat.turn(TRUNK_SESSION, text)
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

    def _reached(self, spec: StateSpec) -> bool:
        if spec.kind == "depth":
            return self.compactions == 0 and self.eit >= (spec.eit or 0)
        if spec.kind == "compaction":
            return self.compactions >= spec.compactions
        return True

    async def _capture_due(self, kinds: set[str]) -> None:
        for spec in self.profile.states:
            if spec.name not in self.checkpoints and spec.kind in kinds and self._reached(spec):
                self.checkpoints[spec.name] = await self._capture(spec)

    async def _capture(self, spec: StateSpec) -> Checkpoint:
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

    def _check_depths_reachable(self) -> None:
        """Depth states are taken before the first compaction; once OpenClaw has compacted, a
        depth not yet reached never will be (its fixed prompt may fill a small window)."""
        if self.compactions == 0:
            return
        missed = [
            s.name
            for s in self.profile.states
            if s.kind == "depth" and s.name not in self.checkpoints
        ]
        if missed:
            raise TrunkError(
                f"OpenClaw compacted at EIT {self.eit} (turn {self.position}) before the trunk "
                f"reached state(s) {', '.join(missed)} on a {self.profile.window}-token window "
                "(its own prompt is ~5k tokens); use a larger --window"
            )

    async def run(self, on_turn: Callable[[int, int], None] | None = None) -> dict[str, Checkpoint]:
        for planted in self.pack.planting_turns():
            await self._turn(planted_text(planted), planted.assistant)
            if on_turn:
                on_turn(self.position, self.eit)
        await self._capture_due({"plant_end"})
        self._check_depths_reachable()
        for filler in self.pack.filler_turns(self.trunk.seed, n_turns=MAX_FILLER_TURNS):
            if len(self.checkpoints) == len(self.profile.states):
                break
            await self._turn(filler.text, None)
            await self._capture_due({"depth", "compaction"})
            self._check_depths_reachable()
            if on_turn:
                on_turn(self.position, self.eit)
        missing = [s.name for s in self.profile.states if s.name not in self.checkpoints]
        if missing:
            raise TrunkError(
                f"the OpenClaw trunk ended after {self.position} turns at EIT {self.eit} with "
                f"{self.compactions} compaction(s) without reaching state(s) {', '.join(missing)}"
            )
        checkpoints = {spec.name: self.checkpoints[spec.name] for spec in self.profile.states}
        summary = {
            "turns": self.position,
            "states": {n: c.manifest.eit for n, c in checkpoints.items()},
        }
        mark_family_complete(self.family_dir, self.trunk, summary)
        return checkpoints
