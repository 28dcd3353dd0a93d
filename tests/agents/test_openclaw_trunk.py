"""The OpenClaw trunk driver against a fake OpenClaw (replay, capture points, checkpoints)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.kit.agents.openclaw.errors import OpenClawError
from harness.kit.agents.openclaw.state import (
    MEMORY_COPY,
    TRUNK_SESSION,
    SessionNode,
    read_openclaw_checkpoint,
)
from harness.mirage.openclaw.run import load_openclaw_family, openclaw_window
from harness.mirage.openclaw.trunk import OpenClawTrunk
from harness.mirage.packs import load_pack
from harness.mirage.trunk.checkpoints import TrunkConfig
from harness.mirage.trunk.runner import SCRIPTED_ACKNOWLEDGEMENT, TrunkError
from harness.mirage.trunk.states import scaled_profile
from runtime.backbones.base import Backbone


class FakeOpenClaw:
    """Each turn adds its text (a token per word) and the scripted reply to the session; the
    model endpoint "observes" that EIT; past ``compact_at`` OpenClaw compacts to ``keep`` and
    its memory flush writes a note."""

    def __init__(self, workspace: Path, base: int, compact_at: int, keep: int = 500) -> None:
        self.paths = type("Paths", (), {"workspace": workspace})()
        self.install = type("Install", (), {"version": "2026.9.6"})()
        self.endpoint = type("Endpoint", (), {})()
        self.endpoint.trunk = type("Trunk", (), {"reply": "", "last_eit": None})()
        self.chat = self
        self.eit, self.compact_at, self.keep = base, compact_at, keep
        self.compactions = 0
        self.replies: list[str] = []
        self.forks: list[tuple[str, str]] = []

    async def turn(self, session: str, text: str, *, model: str | None = None) -> Any:
        assert session == TRUNK_SESSION and model is None
        reply = self.endpoint.trunk.reply
        self.replies.append(reply)
        self.endpoint.trunk.last_eit = self.eit + len(text.split())
        self.eit = self.endpoint.trunk.last_eit + len(reply.split())
        if self.eit >= self.compact_at:
            (self.paths.workspace / "memory").mkdir(parents=True, exist_ok=True)
            (self.paths.workspace / "memory" / "flush.md").write_text("noted before compaction")
            self.compactions += 1
            self.eit = self.keep

    async def settle(self, session: str) -> None:
        return None

    def node(self, session: str) -> SessionNode:
        return SessionNode(compaction_count=self.compactions, status="done")

    async def fork(self, parent: str, child: str) -> None:
        self.forks.append((parent, child))


def trunk_config(window: int) -> TrunkConfig:
    profile = scaled_profile(window)
    return TrunkConfig(
        pack="mirage-core",
        pack_digest="d",
        seed=0,
        trunk_model="openclaw-2026.9.6+config-x",
        profile="scaled",
        window=window,
        states=tuple((s.name, s.kind, s.eit, s.compactions) for s in profile.states),
        summary_format="openclaw",
        summarizer_model="answer",
        memory_flush=True,
        max_output_tokens=64,
    )


def driver_for(claw: FakeOpenClaw, window: int, family: Path) -> OpenClawTrunk:
    pack, profile = load_pack("mirage-core"), scaled_profile(window)
    return OpenClawTrunk(claw, pack, trunk_config(window), profile, family, lambda: None)  # type: ignore[arg-type]


async def test_the_trunk_is_replayed_and_every_state_captured(tmp_path: Path) -> None:
    window = 16_384
    pack, profile = load_pack("mirage-core"), scaled_profile(window)
    claw = FakeOpenClaw(tmp_path / "ws", base=4_000, compact_at=12_288)
    family = tmp_path / trunk_config(window).family_id()  # a family folder is named so
    driver = OpenClawTrunk(claw, pack, trunk_config(window), profile, family, lambda: "v1")  # type: ignore[arg-type]
    checkpoints = await driver.run()

    planted = [p.assistant or SCRIPTED_ACKNOWLEDGEMENT for p in pack.planting_turns()]
    assert claw.replies[: len(planted)] == planted
    assert set(claw.replies[len(planted) :]) == {SCRIPTED_ACKNOWLEDGEMENT}
    d50k, d80k = profile.state("S1-d50k").eit, profile.state("S1-d80k").eit
    manifests = {name: cp.manifest for name, cp in checkpoints.items()}
    assert manifests["S1-d0"].trunk_position == len(planted)
    assert d50k is not None and d80k is not None
    assert manifests["S1-d50k"].eit >= d50k and manifests["S1-d50k"].compaction_count == 0
    assert manifests["S1-d80k"].eit >= d80k and manifests["S1-d80k"].compaction_count == 0
    assert manifests["S2"].compaction_count == 1
    assert [child for _, child in claw.forks] == [
        "ckpt-s1-d0",
        "ckpt-s1-d50k",
        "ckpt-s1-d80k",
        "ckpt-s2",
    ]
    assert (checkpoints["S2"].directory / MEMORY_COPY / "memory" / "flush.md").is_file()
    assert not (checkpoints["S1-d0"].directory / MEMORY_COPY / "memory" / "flush.md").exists()

    loaded = load_openclaw_family(family, list(checkpoints))
    assert loaded is not None and loaded["S2"].manifest == manifests["S2"]
    assert read_openclaw_checkpoint(loaded["S2"].snapshot_path).session == "ckpt-s2"


async def test_an_edited_checkpoint_is_refused(tmp_path: Path) -> None:
    claw = FakeOpenClaw(tmp_path / "ws", base=4_000, compact_at=12_288)
    window = 16_384
    family = tmp_path / trunk_config(window).family_id()
    driver = OpenClawTrunk(
        claw,
        load_pack("mirage-core"),
        trunk_config(window),
        scaled_profile(window),
        family,
        lambda: None,  # type: ignore[arg-type]
    )
    checkpoints = await driver.run()
    path = checkpoints["S2"].snapshot_path
    path.write_text(path.read_text().replace("ckpt-s2", "ckpt-s1-d0"))
    with pytest.raises(OpenClawError, match="differs from its manifest's hash"):
        load_openclaw_family(family, list(checkpoints))
    assert load_openclaw_family(tmp_path / "unfinished", ["S2"]) is None


async def test_a_compaction_before_the_depths_stops_the_trunk_at_once(tmp_path: Path) -> None:
    window = 8_192  # OpenClaw's own prompt alone is ~5k tokens: it compacts before d50k
    claw = FakeOpenClaw(tmp_path / "ws", base=5_500, compact_at=6_144)
    driver = OpenClawTrunk(
        claw,
        load_pack("mirage-core"),
        trunk_config(window),
        scaled_profile(window),
        tmp_path / "f",
        lambda: None,  # type: ignore[arg-type]
    )
    with pytest.raises(TrunkError, match="use a larger --window"):
        await driver.run()
    assert len(claw.replies) == len(load_pack("mirage-core").planting_turns())


def test_openclaw_gets_at_least_a_16k_window() -> None:
    assert openclaw_window(8_192) == 16_384
    assert openclaw_window(128_000) == 128_000


def test_the_answering_model_gets_openclaws_window(tmp_path: Path) -> None:
    from harness.mirage.config import RunConfig
    from harness.mirage.openclaw.run import answering_backbone
    from harness.mirage.run import MirageRun
    from runtime.backbones import FunctionBackbone

    def answering(run: MirageRun, model: str) -> Backbone:
        return answering_backbone(
            model,
            run.profile.window,
            lambda window: run.models.backbone(model, 64, context_window=window),
        )

    local = MirageRun(RunConfig(agent="openclaw", out=tmp_path / "a"))
    assert local.profile.window == 16_384  # SmolLM2's own 8k is too small for OpenClaw
    assert answering(local, "local/smollm2-135m").context_window == 16_384

    small = FunctionBackbone(lambda messages: "x", model="hosted/small", context_window=4_096)
    config = RunConfig(agent="openclaw", models=["hosted/small"], out=tmp_path / "b")
    hosted = MirageRun(config, backbones={"hosted/small": small})
    with pytest.raises(OpenClawError, match="has a 4096-token window"):
        answering(hosted, "hosted/small")
